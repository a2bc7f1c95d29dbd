"""Kubernetes Events: one core/v1 Event on the poster's own pod, per raised note (issue 7) and
per broken preview (``PreviewError``) for the sidecar, and per escalation for the fixloop.

Contract (docs/kubernetes.md "Events"): with ``repeat_failure.events: true`` (and the check on),
each :class:`repeat_failure.rules.detector.NoteRaised` becomes ONE Event on the pod named by the Downward API
variables ``POD_NAME`` and ``POD_NAMESPACE`` (``POD_UID`` too, when set): type ``Warning``, reason
``RepeatingFailure``, message the note's scrubbed message, reporting component
``repeat-failure``. The detector raises a note once per raise, so a note that stays raised makes
no second Event.

Rate limits (:class:`RateLimit`), so that a note raised and cleared in a loop, or a flood of
distinct notes, cannot spam the API server: per agent, a note of the same command raised again
within ``SUPPRESS_S`` (10 minutes) of its last Event makes none; and all agents together spend
tokens of one bucket (``BURST`` at once, one more every ``REFILL_S`` seconds). An Event held
back either way is counted ``suppressed``.

Monitoring must never wait for the API server: :meth:`EventPublisher.publish` only puts the
Event on a bounded queue (a full queue drops it and counts ``dropped``); one daemon thread makes
the calls. The ``kubernetes`` client is imported on that thread, so a sidecar with Events off
never imports it and runs no thread. Every failure (no pod identity, no in-cluster config, an
API error, an unreachable or slow API server) is counted ``failed`` and logged once per reason
for the life of the process; notes, metrics and collection carry on unchanged.

Field rules come from the Kubernetes core/v1 Event type and the API server's validation of it
(``pkg/apis/core/validation/events.go``): an Event with ``eventTime`` set needs
``reportingComponent``, ``reportingInstance`` (at most 128 characters), ``action`` and ``reason``
(each at most 128) and a ``message`` of at most 1024 bytes; its namespace must equal the involved
object's.
"""

from __future__ import annotations

import logging
import os
import queue
import re
import secrets
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

from repeat_failure.rules.terminal import label_value

log = logging.getLogger("repeat_failure")

TYPE = "Warning"
REASON = "RepeatingFailure"
#: The reason of an Event for a preview probe's ``preview_error`` (:mod:`repeat_failure.turns.probe`).
PREVIEW_REASON = "PreviewError"
#: ``action`` is required by the API server once ``eventTime`` is set: what the reporter did.
ACTION = "Detected"
COMPONENT = "repeat-failure"
#: Annotation keys on each Event naming the agent whose note it is (a pod may run several).
AGENT_ANNOTATION = "repeat-failure.hive.dev/agent"
BACKEND_ANNOTATION = "repeat-failure.hive.dev/backend"

CREATED, FAILED, DROPPED, SUPPRESSED = "created", "failed", "dropped", "suppressed"
#: The ``outcome`` label values of ``hive_repeat_failure_events_total``.
OUTCOMES = (CREATED, FAILED, DROPPED, SUPPRESSED)

#: A note of the same command (per agent) raised again within this many seconds of its last
#: Event makes no new one (counted ``suppressed``).
SUPPRESS_S = 600.0
#: The token bucket shared by all agents: at most ``BURST`` Events at once, then one every
#: ``REFILL_S`` seconds; an Event finding no token is counted ``suppressed``.
BURST = 10
REFILL_S = 10.0
#: The variable tail of ``Note.message`` (count, minutes, exit): what is left names the command.
_MESSAGE_TAIL = re.compile(r" failed \d+ times in \d+ min \((?:exit \d+|failed)\)$")

#: Events waiting for the API; one more is dropped (and counted) rather than held.
QUEUE_SIZE = 100
#: (connect, read) seconds for one API call: a hung API server holds the thread, never the pipeline.
REQUEST_TIMEOUT_S = (5.0, 10.0)
#: Limits from the API server's Event validation (see the module docstring).
MAX_INSTANCE_CHARS = 128
MAX_MESSAGE_BYTES = 1024
MAX_NAME_CHARS = 253

#: Why an Event was not created → the log line's text (each logged once per process).
_HINTS = {
    "no_pod_identity": "Kubernetes Events unavailable: POD_NAME and POD_NAMESPACE are not set "
                       "(give the sidecar both from the Downward API, metadata.name and "
                       "metadata.namespace)",
    "client_unavailable": "Kubernetes Events unavailable: the kubernetes client package cannot "
                          "be imported",
    "no_cluster_config": "Kubernetes Events unavailable: no in-cluster configuration (the pod "
                         "needs its service-account token mounted)",
    "forbidden": "Kubernetes Event refused (403): the pod's service account may not create "
                 "Events; grant `create` on `events` in its namespace (the chart's Role does)",
    "unauthorized": "Kubernetes Event refused (401): the service-account token was not accepted",
    "not_found": "Kubernetes Event refused (404): the namespace or the API path was not found",
    "invalid": "Kubernetes Event rejected as invalid by the API server",
    "throttled": "Kubernetes Event refused (429): the API server is throttling requests",
    "server_error": "Kubernetes Event not created: the API server answered with an error (5xx)",
    "timeout": "Kubernetes Event not created: the API server did not answer in time",
    "unreachable": "Kubernetes Event not created: the API server cannot be reached",
    "tls": "Kubernetes Event not created: the TLS connection to the API server failed",
    "error": "Kubernetes Event not created: unexpected error",
}


@dataclass(frozen=True)
class PodRef:
    """The sidecar's own pod, the Events' involved object: ``name`` and ``namespace`` (both
    non-empty) and ``uid`` (``None`` when ``POD_UID`` is not set)."""

    name: str
    namespace: str
    uid: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> "PodRef | None":
        """The pod named by ``POD_NAME``/``POD_NAMESPACE`` (and ``POD_UID``) in ``environ``, or
        ``None`` when either of the first two is missing or empty."""
        name = environ.get("POD_NAME", "").strip()
        namespace = environ.get("POD_NAMESPACE", "").strip()
        if not name or not namespace:
            return None
        return cls(name, namespace, environ.get("POD_UID", "").strip() or None)


def note_key(message: str) -> str:
    """The command part of a note's message (``Repeating failure: <command label>``, the count,
    minutes and exit cut off): what the per-note rate limit keys on, so a note raised again
    with another count is the same note. A message of another shape is its own key."""
    return _MESSAGE_TAIL.sub("", message)


class RateLimit:
    """The Event rate limits: per (agent, note key) at most one Event per ``suppress_s``
    seconds, and a token bucket of ``burst`` tokens refilled at one per ``refill_s`` seconds
    for all agents together. Times come from ``clock`` (monotonic seconds; tests pass their
    own), so a wall-clock step neither silences Events nor grants a burst.

    Not thread-safe: the publisher calls it under its lock. It remembers only the notes sent
    within the last ``suppress_s`` seconds: with the bucket, at most ``burst + suppress_s /
    refill_s`` (70 by default), each key at most ``MAX_MESSAGE_BYTES`` characters.
    """

    def __init__(self, suppress_s: float = SUPPRESS_S, burst: int = BURST,
                 refill_s: float = REFILL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.suppress_s = suppress_s
        self.burst = burst
        self.refill_s = refill_s
        self._clock = clock
        self._tokens = float(burst)
        self._refilled_at = clock()
        self._sent: OrderedDict[tuple[str, str], float] = OrderedDict()  # oldest first

    def allow(self, agent: str, key: str) -> bool:
        """Whether an Event for note ``key`` of ``agent`` may be sent now; when True, a token is
        spent and the note remembered as sent now (give the token back with :meth:`undo` if
        it is not sent after all)."""
        now = self._clock()
        while self._sent and now - next(iter(self._sent.values())) >= self.suppress_s:
            self._sent.popitem(last=False)
        if (agent, key) in self._sent:
            return False
        self._tokens = min(float(self.burst),
                           self._tokens + max(0.0, now - self._refilled_at) / self.refill_s)
        self._refilled_at = now
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        self._sent[(agent, key)] = now
        return True

    def undo(self, agent: str, key: str) -> None:
        """Take back the last :meth:`allow` of ``key`` (its Event was not queued after all)."""
        if self._sent.pop((agent, key), None) is not None:
            self._tokens = min(float(self.burst), self._tokens + 1.0)


class EventStats:
    """Thread-safe Event counters per (agent, outcome) and the once-per-reason log memory.

    One instance lives as long as the sidecar, across Events being turned off and on, so the
    counter never goes backwards and a reason already logged is not logged again.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter = Counter()  # (agent, outcome) -> n
        self._logged: set[str] = set()

    def add(self, agent: str, outcome: str, n: int = 1) -> None:
        """Count ``n`` Events of ``agent`` with ``outcome`` (one of :data:`OUTCOMES`)."""
        with self._lock:
            self._counts[(agent, outcome)] += n

    def counts(self, agent: str, all_outcomes: bool = False) -> dict[str, int]:
        """``{outcome: n}`` for ``agent``: the outcomes counted so far, or every outcome (zero
        when none yet) with ``all_outcomes``."""
        with self._lock:
            found = {o: n for (a, o), n in self._counts.items() if a == agent}
        if all_outcomes:
            return {o: found.get(o, 0) for o in OUTCOMES}
        return found

    def log_once(self, reason: str, **extra: Any) -> bool:
        """Log the warning for ``reason`` (a key of the hint table) unless it was logged
        before; returns True when it logged. ``extra`` must hold no raw command text."""
        with self._lock:
            if reason in self._logged:
                return False
            self._logged.add(reason)
        log.warning(_HINTS.get(reason, "Kubernetes Event not created: unexpected answer from the "
                                       "API server"),
                    extra={"event": "k8s_event_failed", "reason": reason, **extra})
        return True


def _rfc3339(ts: float, micro: bool) -> str:
    """``ts`` (epoch seconds) as UTC RFC 3339: whole seconds (metav1.Time) or with six decimals
    (metav1.MicroTime, the ``eventTime`` field)."""
    moment = datetime.fromtimestamp(ts, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


def _cut_bytes(text: str, limit: int) -> str:
    """``text`` cut so its UTF-8 form is at most ``limit`` bytes (ending in ``…`` when cut)."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    return raw[: limit - 3].decode("utf-8", "ignore") + "…"


def event_name(pod: str, suffix: str | None = None) -> str:
    """A fresh Event name ``<pod>.<hex>``: the pod's name, a dot, 16 random hex digits (or
    ``suffix``), kept a valid DNS subdomain of at most 253 characters."""
    suffix = suffix or secrets.token_hex(8)
    head = pod[: MAX_NAME_CHARS - len(suffix) - 1].rstrip(".-")
    return f"{head}.{suffix}"


def event_body(pod: PodRef, message: str, now: float, agent: str = "", backend: str = "",
               name: str | None = None, reason: str = REASON) -> dict[str, Any]:
    """The core/v1 Event (a JSON-ready dict) for one raised note (``reason``
    :data:`REASON`), or one preview error (:data:`PREVIEW_REASON`).

    ``message`` is the note's already scrubbed message (``Note.message``; control and bidi
    characters are written as ``\\uXXXX``, :func:`repeat_failure.rules.terminal.label_value`, since
    ``kubectl describe`` prints it to a terminal); ``now`` the time the
    note was raised, in epoch seconds (``firstTimestamp``, ``lastTimestamp``, ``eventTime``);
    ``agent``/``backend`` go into annotations; ``name`` defaults to :func:`event_name`.
    """
    involved: dict[str, str] = {"apiVersion": "v1", "kind": "Pod", "name": pod.name,
                                "namespace": pod.namespace}
    if pod.uid:
        involved["uid"] = pod.uid
    annotations = {k: v for k, v in ((AGENT_ANNOTATION, agent), (BACKEND_ANNOTATION, backend))
                   if v}
    metadata: dict[str, Any] = {"name": name or event_name(pod.name), "namespace": pod.namespace}
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": metadata,
        "involvedObject": involved,
        "type": TYPE,
        "reason": reason,
        "action": ACTION,
        "message": _cut_bytes(label_value(message), MAX_MESSAGE_BYTES),
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": pod.name[:MAX_INSTANCE_CHARS],
        "firstTimestamp": _rfc3339(now, micro=False),
        "lastTimestamp": _rfc3339(now, micro=False),
        "eventTime": _rfc3339(now, micro=True),
        "count": 1,
    }


def incluster_configuration() -> Any:
    """A ``kubernetes.client.Configuration`` from the pod's service account
    (``kubernetes.config.load_incluster_config``). Raises ``kubernetes.config.ConfigException``
    outside a pod. Imports ``kubernetes``: call it only with Events on."""
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_incluster_config(client_configuration=configuration)
    return configuration


def failure_reason(exc: BaseException) -> tuple[str, int | None]:
    """Classify a failed API call: ``(reason, HTTP status or None)``. ``reason`` is a key of the
    log-hint table: ``forbidden``, ``unauthorized``, ``not_found``, ``invalid``, ``throttled``,
    ``server_error``, ``http_<status>``, ``tls``, ``timeout``, ``unreachable`` or ``error``."""
    status = getattr(exc, "status", None)
    if isinstance(status, int) and not isinstance(status, bool):
        if status == 0:  # the client's own wrapper for TLS failures
            return "tls", None
        named = {401: "unauthorized", 403: "forbidden", 404: "not_found", 400: "invalid",
                 422: "invalid", 429: "throttled"}
        if status in named:
            return named[status], status
        return ("server_error" if 500 <= status <= 599 else f"http_{status}"), status
    cause: BaseException = exc
    # urllib3 wraps the real failure in MaxRetryError.reason once its retries are spent.
    inner = getattr(cause, "reason", None)
    if isinstance(inner, BaseException):
        cause = inner
    names = {c.__name__ for c in type(cause).__mro__}
    # urllib3's NewConnectionError (refused, no route, no such host) derives from its
    # ConnectTimeoutError for historical reasons: test it first.
    if "NewConnectionError" in names or isinstance(cause, ConnectionError):
        return "unreachable", None
    if isinstance(cause, TimeoutError) or "TimeoutError" in names:
        return "timeout", None
    if isinstance(cause, OSError) or "HTTPError" in names:
        return "unreachable", None
    return "error", None


_STOP = object()


def _version() -> str:
    from repeat_failure import __version__
    return __version__


class EventPublisher:
    """Creates the Events of raised notes from a background daemon thread.

    ``stats`` receives the counts and remembers the logged reasons. ``configuration`` is a
    factory returning a ``kubernetes.client.Configuration`` (default
    :func:`incluster_configuration`; tests point one at a local server); it is called on the
    thread, and again for the next Event when it fails. ``environ`` supplies ``POD_NAME``,
    ``POD_NAMESPACE`` and ``POD_UID`` (default ``os.environ``, read at :meth:`start`).
    ``limit`` is the :class:`RateLimit` applied to every Event (default: the module's limits,
    on the monotonic clock).
    """

    def __init__(self, stats: EventStats, configuration: Callable[[], Any] | None = None,
                 environ: Mapping[str, str] | None = None, queue_size: int = QUEUE_SIZE,
                 limit: RateLimit | None = None) -> None:
        self.stats = stats
        self.limit = limit or RateLimit()
        self._limit_lock = threading.Lock()
        self._configuration = configuration or incluster_configuration
        self._environ = os.environ if environ is None else environ
        self._queue: queue.Queue = queue.Queue(maxsize=queue_size)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.pod: PodRef | None = None

    def start(self) -> "EventPublisher":
        """Read the pod's identity and start the thread; without ``POD_NAME``/``POD_NAMESPACE``
        log once and start nothing (every Event then counts ``failed``). Returns self."""
        self.pod = PodRef.from_env(self._environ)
        if self.pod is None:
            self.stats.log_once("no_pod_identity")
            return self
        self._thread = threading.Thread(target=self._run, name="k8s-events", daemon=True)
        self._thread.start()
        return self

    def publish(self, agent: str, backend: str, message: str, now: float,
                reason: str = REASON) -> None:
        """Queue one Event for a raised note of ``agent`` (or, with ``reason``
        :data:`PREVIEW_REASON`, a preview error); never blocks, never raises.

        ``message`` must be scrubbed (``Note.message``); ``now`` is the raise time in epoch
        seconds. An Event the rate limits hold back (the same note, by :func:`note_key`, sent
        within ``SUPPRESS_S``, or no token left) is counted ``suppressed``; a full queue drops
        it (``dropped``); no pod identity or a closed publisher counts it
        ``failed``/``dropped``."""
        if self.pod is None:
            self.stats.add(agent, FAILED)
            return
        if self._stop.is_set():
            self.stats.add(agent, DROPPED)
            return
        key = note_key(message)[:MAX_MESSAGE_BYTES]
        with self._limit_lock:
            if not self.limit.allow(agent, key):
                self.stats.add(agent, SUPPRESSED)
                return
            body = event_body(self.pod, message, now, agent, backend, reason=reason)
            try:
                self._queue.put_nowait((agent, body))
            except queue.Full:
                self.limit.undo(agent, key)
                self.stats.add(agent, DROPPED)

    def close(self, timeout: float | None = 0.0) -> None:
        """Stop the thread after its current call; Events still queued count ``dropped``.
        Waits up to ``timeout`` seconds for the thread (``None``: until it ends)."""
        self._stop.set()
        try:
            self._queue.put_nowait(_STOP)
        except queue.Full:
            pass  # the thread sees the stop flag after its current item
        if self._thread is not None and timeout != 0.0:
            self._thread.join(timeout)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` seconds (``None``: no limit) until no Event is queued or being
        sent; True when that happened in time."""
        done = self._queue.all_tasks_done
        with done:
            return done.wait_for(lambda: self._queue.unfinished_tasks == 0, timeout)

    def _run(self) -> None:
        api = None
        while True:
            item = self._queue.get()
            try:
                if item is _STOP or self._stop.is_set():
                    if item is not _STOP:
                        self.stats.add(item[0], DROPPED)
                    self._drain()
                    return
                agent, body = item
                if api is None:
                    api = self._client()
                    if api is None:
                        self.stats.add(agent, FAILED)
                        continue
                self.stats.add(agent, CREATED if self._create(api, body) else FAILED)
            except Exception as exc:  # a bug must never end the thread: count and go on
                self.stats.log_once("error", error=exc.__class__.__name__)
                if item is not _STOP:
                    self.stats.add(item[0], FAILED)
            finally:
                self._queue.task_done()

    def _drain(self) -> None:
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is not _STOP:
                self.stats.add(item[0], DROPPED)
            self._queue.task_done()

    def _client(self) -> "_Api | None":
        """The client parts for the API calls, or ``None`` (the reason logged once).

        One attempt per call (``retries`` 0 unless the configuration sets it): a retried POST
        could create the Event twice, and urllib3 would log every retry."""
        try:
            from kubernetes.client import rest
        except ImportError as exc:
            self.stats.log_once("client_unavailable", error=exc.__class__.__name__)
            return None
        try:
            configuration = self._configuration()
        except Exception as exc:  # ConfigException outside a pod, unreadable token, ...
            self.stats.log_once("no_cluster_config", error=exc.__class__.__name__)
            return None
        if getattr(configuration, "retries", None) is None:
            configuration.retries = 0
        return _Api(configuration, rest.RESTClientObject(configuration), rest.ApiException)

    def _create(self, api: "_Api", body: dict[str, Any]) -> bool:
        """POST one Event; True when the API server created it. A failure is logged once per
        reason, with the status and the error's class name only (no body, no command text).

        The body goes to the client's REST layer as the JSON of exactly this dict: the typed
        ``create_namespaced_event`` of newer clients re-parses it into a model and writes
        ``eventTime`` back without its microseconds when they are zero, which the API server's
        MicroTime parser (RFC 3339 with six decimals) refuses."""
        pod = self.pod
        assert pod is not None
        url = (f"{api.configuration.host.rstrip('/')}/api/v1/namespaces/"
               f"{quote(pod.namespace, safe='')}/events")
        try:
            headers = {"Content-Type": "application/json", "Accept": "application/json",
                       "User-Agent": f"{COMPONENT}/{_version()}"}
            # The service-account token, re-read by the in-cluster loader as it rotates.
            for setting in api.configuration.auth_settings().values():
                if setting.get("in") == "header" and setting.get("value"):
                    headers[setting["key"]] = setting["value"]
            response = api.rest.request("POST", url, headers=headers, body=body,
                                        _request_timeout=REQUEST_TIMEOUT_S)
            read = getattr(response, "read", None)
            if callable(read):  # newer clients leave the reply unread: free the connection
                read()
            if not 200 <= response.status <= 299:
                raise api.error(status=response.status, reason=response.reason)
        except Exception as exc:
            reason, status = failure_reason(exc)
            self.stats.log_once(reason, status=status, error=exc.__class__.__name__,
                                pod=pod.name, namespace=pod.namespace)
            return False
        return True


@dataclass(frozen=True)
class _Api:
    configuration: Any  # kubernetes.client.Configuration: host, TLS, the token
    rest: Any  # kubernetes.client.rest.RESTClientObject built from it
    error: type  # kubernetes.client.rest.ApiException
