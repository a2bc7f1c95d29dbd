"""The sidecar injector: a Kubernetes mutating admission webhook for pod creations.

The contract is ``docs/kubernetes.md`` ("Opting a pod in", "What the injector adds", "Off means
off", "The injector's config", "TLS"). Three parts, this module re-exporting the names of all:

- :mod:`repeat_failure.kube.injector_patch`: :func:`decide` / :func:`admission_response`, pure
  functions from an ``AdmissionReview`` (``admission.k8s.io/v1``, as the API server sends it
  for a Pod ``CREATE``) and an :class:`InjectorConfig` to the ``AdmissionReview`` response:
  ``allowed: true`` always, and a JSONPatch (RFC 6902 operations, RFC 6901 JSON Pointers) only
  when something is added.
- :mod:`repeat_failure.kube.injector_config`: the shared names, :func:`load_injector_config`
  and :class:`ConfigSource`: the injector's YAML config, validated with a JSON Schema and
  re-read when the file changes (the last good config stays on a bad edit).
- :class:`InjectorServer` (here): ``POST /mutate`` and ``GET /healthz`` over HTTPS (TLS >= 1.2)
  on :mod:`repeat_failure.serving` (the HTTP layer the three servers share); the certificate
  and key are re-read when their files change (:class:`TLSFiles`, cert-manager rotation).

Nothing here talks to the Kubernetes API: the injector needs no RBAC.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from repeat_failure import serving
from repeat_failure.config import parse_listen
from repeat_failure.kube.injector_config import (  # AGENT_RE, CHAIN_PATH_RE: re-exported
    ADMISSION_API_VERSION, AGENT_RE, CHAIN_PATH_RE, ConfigSource, InjectorConfig, load_injector_config,
    parse_injector_config,
)
from repeat_failure.kube.injector_patch import (
    AdmissionError, Decision, admission_response, decide, pointer, review_response,
    sidecar_container,
)
from repeat_failure.kube.injector_metrics import (
    NOT_INJECTED_REASONS, BodyBudget, InjectorMetrics, MetricsServer, certificate_expiry,
    reason_label,
)
from repeat_failure.serving import TLSFiles

log = logging.getLogger("repeat_failure")

# -- the HTTPS server (repeat_failure.serving) --------------------------------------------------------------------------

#: Largest request body read (bytes); a larger ``Content-Length`` is answered 413 unread. A Pod
#: ``CREATE`` review carries the pod once (``request.object``; ``oldObject`` is null) plus a few
#: KiB of metadata (uid, kind, resource, userInfo, options), and etcd refuses an object over
#: 1.5 MiB (its default ``--max-request-bytes``), so 2 MiB holds any pod that can be created,
#: with room for JSON's escaping. Not the API server's 3 MiB: parsing costs up to ~25 bytes of
#: memory per body byte (``[{},{},...]``).
MAX_BODY_BYTES = 2 << 20
#: Bodies parsed at once (a body is read before it waits for a slot, so a client trickling
#: bytes never holds one). A review that finds no free slot within
#: :data:`BUSY_WAIT_S` seconds gets 503 with ``Retry-After: 1``. Measured
#: worst case with 2 (VmHWM of a real ``repeat-failure inject-webhook``, Python 3.11, x86-64):
#: 36 MB idle; 153 MB with 56 connections holding 30 KiB request heads while 8 clients at a
#: time post 2 MiB hostile bodies (``[{},{},...]`` and an AdmissionReview of ``{}``
#: containers), 10 rounds; 4 MiB bodies before this limit: 142 MB for one, 234-380 MB for 8.
#: With bodies read before a slot (issue 28; up to MAX_BUFFERED_BYTES of large ones held):
#: 159 and 162 MB in two runs against 147 and 153 MB before, 8 clients from 4 addresses x 10
#: rounds of 2 MiB ``[{},{},...]`` with 40 connections holding 30 KiB heads
#: (``python -m benchmarks --only injector``, ``memory_hostile_vmhwm_kib``). Hence the chart's ``injector.resources.limits.memory`` of 256Mi (it was 128Mi).
MAX_PARSING = 2
BUSY_WAIT_S = 1.0
#: Connections served at once (one thread each). A new one past the cap first evicts the oldest
#: connection still in its TLS handshake or idle between requests (of the client holding the
#: most); only when none is, it is closed at accept, counted in a log line at most once a
#: minute (issue 28: 64 connections that never sent a TLS hello locked the cap).
MAX_CONNECTIONS = 64
#: One client address's share of :data:`MAX_CONNECTIONS`: past it, its own oldest handshaking
#: or idle connection is evicted, else the new one refused. The API server's own connections
#: are few (each review takes milliseconds) and it is one client of many.
MAX_CLIENT_CONNECTIONS = 32
#: Bodies of this many bytes or fewer are read without drawing on the body budget (a Pod
#: review the API server sends is a few KiB; the connection cap bounds them to 4 MiB).
SMALL_BODY_BYTES = 64 << 10
#: Bytes of larger bodies held at once (read and waiting, or parsing) and one client's share:
#: a client sending 2 MiB bodies slowly holds at most 2 of them; a body that finds no room
#: within :data:`BUSY_WAIT_S` gets 503.
MAX_BUFFERED_BYTES = 8 << 20
MAX_CLIENT_BUFFERED_BYTES = 4 << 20
#: Seconds from accept to the end of the TLS handshake.
HANDSHAKE_TIMEOUT_S = 10.0
#: Seconds from the first byte of a request line to the end of its body; the response then has
#: as long again (waiting for a parse slot, deciding, writing).
REQUEST_TIMEOUT_S = 10.0
#: Seconds a connection may wait for its next request (keep-alive) before it is closed.
IDLE_TIMEOUT_S = 30.0
#: Bytes of request line and headers together; more is answered 431 (the API server sends well
#: under 1 KiB; http.server alone would accept 100 headers of 64 KiB).
MAX_HEAD_BYTES = 32 << 10

_TEXT = serving.TEXT_TYPE


def _handler(server: "InjectorServer") -> type[serving.Handler]:
    class Handler(serving.Handler):
        server_version = "repeat-failure-injector"
        protocol_version = "HTTP/1.1"  # the API server keeps connections alive
        # A backstop per socket operation; the deadlines (serving.Deadlines) are what bound a
        # connection's handshake, each request and each keep-alive wait.
        timeout = 60

        def _fail(self, code: int, message: str, close: bool = False,
                  headers: Mapping[str, str] | None = None) -> None:
            self.send_body(code, (message + "\n").encode(), _TEXT, close, headers)

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            if self.path.split("?", 1)[0] == "/healthz":
                self.send_body(200, b"ok\n", _TEXT)
            else:
                self._fail(404, "not found: POST /mutate, GET /healthz")

        def do_POST(self) -> None:  # noqa: N802
            if self.path.split("?", 1)[0] != "/mutate":  # the API server adds ?timeout=5s
                self._fail(404, "not found: POST /mutate, GET /healthz", close=True)
                return
            if self.headers.get_content_type() != "application/json":
                self._fail(415, "Content-Type must be application/json", close=True)
                return
            length = self.content_length()  # 411, 400, 413 (unread) as JSON errors
            if length is None:
                return
            # The body is read first, without a parse slot (a client trickling bytes holds
            # only its own connection, until the request deadline), into a buffer allocated by
            # a parse thread: glibc gives each new thread its own malloc arena, and freed
            # memory stays in it, so buffers and parses spread over ever new connection
            # threads measured 200 MB peak and growing where two threads hold 143. A body over
            # SMALL_BODY_BYTES draws on the shared budget of MAX_BUFFERED_BYTES, of which one
            # client may hold MAX_CLIENT_BUFFERED_BYTES.
            client = self.client_address[0]
            if not server.budget.reserve(client, length, server.busy_wait_s):
                self._busy("busy: too many large admission reviews being read; retry")
                return
            try:
                body = self._read_body(length)
                if body is None:  # the client hung up or its deadline passed: no one to answer
                    self.close_connection = True
                    return
                if not server.parsing.acquire(timeout=server.busy_wait_s):
                    self._busy("busy: too many admission reviews at once; retry")
                    return
                try:
                    self.server.deadlines.arm(self.request, server.request_timeout_s, "response")
                    answer = server.parser.submit(self._answer, body).result()
                finally:
                    server.parsing.release()
                del body
            finally:
                server.budget.release(client, length)
            self.send_body(*answer)

        def _busy(self, message: str) -> None:
            self.server.busy.add()  # type: ignore[attr-defined]
            server.metrics.review("error", "busy")
            self._fail(503, message, close=True, headers={"Retry-After": "1"})

        def _read_body(self, length: int) -> bytearray | None:
            """The body, read under the request deadline into a buffer a parse thread
            allocated; None when the client hung up first."""
            body = server.parser.submit(bytearray, length).result()
            view, got = memoryview(body), 0
            try:
                while got < length:
                    n = self._stream.readinto(view[got:got + (1 << 16)])
                    if not n:
                        return None
                    got += n
            except OSError:
                return None
            finally:
                view.release()
            return body

        def _answer(self, body: bytearray) -> tuple[int, bytes, str]:
            started = time.monotonic()
            try:
                review = json.loads(body)
            except RecursionError:
                server.metrics.review("error", "bad_request", time.monotonic() - started)
                return 400, b"request body is not JSON: nested too deeply\n", _TEXT
            except (ValueError, UnicodeDecodeError) as exc:
                server.metrics.review("error", "bad_request", time.monotonic() - started)
                return 400, f"request body is not JSON: {exc}\n".encode(), _TEXT
            try:
                answer = server.review(review, started)
            except AdmissionError as exc:
                server.metrics.review("error", "bad_request", time.monotonic() - started)
                return 400, f"not an AdmissionReview: {exc}\n".encode(), _TEXT
            except Exception:  # review() allows the pod on a decision bug; this is a last resort
                log.exception("injector error answering a review", extra={
                    "event": "injector_error"})
                server.metrics.review("error", "injector_error", time.monotonic() - started)
                return 500, b"injector error\n", _TEXT
            return 200, json.dumps(answer, separators=(",", ":")).encode(), "application/json"

    return Handler


def _text(value: Any, limit: int = 253) -> str | None:
    """A request field for a log line: a string cut to ``limit`` characters, else None."""
    return value[:limit] if isinstance(value, str) else None


class InjectorServer:
    """``POST /mutate`` and ``GET /healthz`` over HTTPS, served from a daemon thread.

    ``listen`` is ``HOST:PORT`` (``[::]:8443`` for IPv6; port 0 picks a free port, :attr:`port`
    tells which). ``config`` supplies the config per request (:class:`ConfigSource`), ``tls``
    the certificate (:class:`TLSFiles`). ``POST /mutate`` (query string ignored: the API server
    adds ``?timeout=5s``) with ``Content-Type: application/json`` answers 200 and the
    AdmissionReview response (:func:`admission_response`); 400 for a body that is not JSON
    (nested too deeply included) or not an AdmissionReview, 411 without a Content-Length, 413
    over ``max_body`` bytes (not read), 415 for another Content-Type, 431 for a request line and
    headers over ``max_head_bytes``, 503 with ``Retry-After: 1`` when a read body finds no
    parse slot (``max_parsing`` bodies being parsed) within ``busy_wait_s`` seconds, or a body
    over ``small_body`` bytes no room in the body budget (``max_buffered`` bytes in all,
    ``max_client_buffered`` per client address).

    Limits (the module constants are the defaults): at most ``max_connections`` connections at
    once and ``max_client_connections`` per client address (past either, the oldest connection
    still in its TLS handshake or idle is evicted; with none, the new one is closed at accept,
    logged at most once a minute); a connection is closed when its TLS handshake takes over
    ``handshake_timeout_s`` seconds, a request over ``request_timeout_s`` from the first byte of
    its request line to the end of its body (and as long again to answer), or when it waits over
    ``idle_timeout_s`` for its next request.

    ``metrics_listen`` (``HOST:PORT``; None: not served) serves :attr:`metrics`
    (:class:`InjectorMetrics`: reviews by outcome and reason, their latency, annotated pods not
    injected and why, the certificate's expiry, ``process_*``) as ``GET /metrics`` over plain
    HTTP; :attr:`metrics_port` tells the port. One JSON log line per injected pod (namespace,
    pod name or generateName, agent, backend; never env values). Raises ``ValueError`` for a
    malformed ``listen``, ``OSError`` if a port cannot be bound.
    """

    def __init__(self, listen: str, config: ConfigSource, tls: TLSFiles,
                 max_body: int = MAX_BODY_BYTES, *, max_parsing: int = MAX_PARSING,
                 busy_wait_s: float = BUSY_WAIT_S, max_connections: int = MAX_CONNECTIONS,
                 max_client_connections: int = MAX_CLIENT_CONNECTIONS,
                 handshake_timeout_s: float = HANDSHAKE_TIMEOUT_S,
                 request_timeout_s: float = REQUEST_TIMEOUT_S,
                 idle_timeout_s: float = IDLE_TIMEOUT_S,
                 max_head_bytes: int = MAX_HEAD_BYTES,
                 small_body: int = SMALL_BODY_BYTES, max_buffered: int = MAX_BUFFERED_BYTES,
                 max_client_buffered: int = MAX_CLIENT_BUFFERED_BYTES,
                 metrics_listen: str | None = None) -> None:
        host, port = parse_listen(listen, "0.0.0.0:8443")
        self.config = config
        self.max_body = max_body
        self.parsing = threading.BoundedSemaphore(max_parsing)
        self.parser = concurrent.futures.ThreadPoolExecutor(max_parsing,
                                                            thread_name_prefix="injector-parse")
        self.budget = BodyBudget(max_buffered, max_client_buffered, small_body)
        self.busy_wait_s = busy_wait_s
        self.request_timeout_s = request_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.max_head_bytes = max_head_bytes
        self.metrics = InjectorMetrics(cert_expiry=lambda: certificate_expiry(tls.cert_file))
        self._metrics_server = (MetricsServer(metrics_listen, self.metrics)
                                if metrics_listen is not None else None)
        try:
            self._httpd = serving.Server(
                (host, port), _handler(self), name="injector", tls=tls,
                max_connections=max_connections, max_head_bytes=max_head_bytes,
                max_body_bytes=max_body, handshake_timeout_s=handshake_timeout_s,
                request_timeout_s=request_timeout_s, idle_timeout_s=idle_timeout_s,
                max_client_connections=max_client_connections)
            self._httpd.busy = serving.Tally(  # type: ignore[attr-defined]
                "admission reviews answered 503: all parse slots or the body budget busy",
                "reviews_busy")
        except OSError as exc:
            if self._metrics_server is not None:
                self._metrics_server.stop()
            raise OSError(exc.errno, f"cannot listen on {listen}: {exc.strerror}") from None

    @property
    def port(self) -> int:
        """The TCP port actually bound."""
        return self._httpd.server_address[1]

    @property
    def metrics_port(self) -> int | None:
        """The metrics server's TCP port (None without ``metrics_listen``)."""
        return None if self._metrics_server is None else self._metrics_server.port

    @property
    def connections(self) -> int:
        """The connections being served now (at most ``max_connections``)."""
        return self._httpd.active

    def review(self, review: Any, started: float | None = None) -> dict:
        """Answer one parsed AdmissionReview with the current config, log the decision and count
        it in :attr:`metrics` (latency from ``started``, a ``time.monotonic()`` reading).
        Raises :class:`AdmissionError` for a body that is not one. A bug in the decision never
        blocks a pod: it is logged and the pod allowed unchanged with a warning."""
        started = time.monotonic() if started is None else started
        config = self.config.current()
        try:
            answer, decision = review_response(review, config)
        except AdmissionError:
            raise
        except Exception:
            log.exception("injector error; pod allowed without injection",
                          extra={"event": "injector_error"})
            uid = review["request"]["uid"]  # review_response checked it before deciding
            self.metrics.review("unchanged", "decision_error", time.monotonic() - started)
            self.metrics.not_injected_pod("decision_error")
            return {"apiVersion": ADMISSION_API_VERSION, "kind": "AdmissionReview",
                    "response": {"uid": uid, "allowed": True, "warnings": [
                        "repeat-failure: injector error; pod not injected"]}}
        reason = reason_label(decision.outcome)
        self.metrics.review("injected" if reason == "injected" else "unchanged", reason,
                            time.monotonic() - started)
        if reason in NOT_INJECTED_REASONS:
            self.metrics.not_injected_pod(reason)
        request = review["request"]
        if decision.outcome == "injected" or decision.warnings:
            pod = request.get("object") if isinstance(request.get("object"), dict) else {}
            meta = pod.get("metadata") if isinstance(pod.get("metadata"), dict) else {}
            extra = {"event": "pod_injected" if decision.outcome == "injected"
                     else "pod_not_injected",
                     "namespace": _text(request.get("namespace")) or _text(meta.get("namespace")),  # type: ignore[union-attr]
                     "pod": _text(meta.get("name")) or _text(request.get("name")) or None,  # type: ignore[union-attr]
                     "generate_name": _text(meta.get("generateName")),  # type: ignore[union-attr]
                     "agent": _text(decision.agent), "backend": _text(decision.backend),
                     "uid": _text(request.get("uid")), "dry_run": bool(request.get("dryRun"))}
            if decision.outcome == "injected":
                extra.update(native_sidecar=config.native_sidecar,  # type: ignore[call-overload]
                             containers=[_text(name) for name in decision.hooked])
            if decision.warnings:
                extra["warnings"] = list(decision.warnings)  # type: ignore[assignment]
            (log.info if decision.outcome == "injected" else log.warning)(
                "pod injected" if decision.outcome == "injected" else "pod not injected",
                extra=extra)
        return answer

    def start(self) -> "InjectorServer":
        """Start serving (and the metrics server) in the background; returns self."""
        if self._metrics_server is not None:
            self._metrics_server.start()
        self._httpd.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the listening sockets."""
        self._httpd.stop()
        if self._metrics_server is not None:
            self._metrics_server.stop()
        self.parser.shutdown(wait=False)
