"""Preview health probe: one bounded GET of an agent's web-app preview after a turn that edited
files (seed ``ard-0038-run-health-verdicts.txt`` §3; §4 limits it to the interactive web loop,
so the caller decides *when* to probe, this module only *how*).

It catches "dev server up, but entry page blank or its assets broken", the failure a build check
misses. :func:`probe` fetches the entry document (the configured URL itself), parses it with
:class:`html.parser.HTMLParser` and fetches every same-origin entry asset it references once:
``<script src>``, ``<link rel=stylesheet href>`` and ``<link rel=modulepreload href>``.

Outcomes (:class:`ProbeResult` ``outcome`` / ``reason``):

================  ================  ============================================================
outcome           reason            when
================  ================  ============================================================
``ok``            ``None``          entry answered 200 with a non-empty body and every checked
                                    asset answered 2xx
``preview_error`` ``entry_status``  entry answered, but not 200 (404, 500, a 3xx with no
                                    ``Location``, more than 5 redirects, a redirect to another
                                    origin); ``status`` is the last status seen
``preview_error`` ``entry_empty``   entry answered 200 with an empty or whitespace-only body
``preview_error`` ``asset_broken``  entry fine, but an asset answered non-2xx or could not be
                                    fetched; ``detail`` names the first broken asset (the probe
                                    stops there)
``server_down``   ``unreachable``   no HTTP answer: connection refused/reset, name not resolved,
                                    TLS handshake or certificate failure, not an HTTP response
``server_down``   ``timeout``       no complete entry response (status, headers and body up to
                                    2 MiB) before the deadline, or an asset still unanswered
                                    when it passed (a dev server still compiling is slow, not
                                    broken); ``detail`` says which
================  ================  ============================================================

Bounds and safety:

* ONE deadline, ``timeout_s`` after the call, covers everything: name resolution, connect, TLS,
  the entry's headers and body, each redirect and each asset. Every blocking socket call is
  given only the time left (:mod:`repeat_failure.turns.probe_sockets`), so a server that
  trickles bytes (also in the status line or headers) cannot stretch the probe; name resolution
  runs on a helper thread that is abandoned (it ends with the resolver's own timeout) when the
  deadline passes.
* No retries. Redirects (301/302/303/307/308) are followed by this module, at most 5 and only
  within the entry's origin (scheme, host, port). Assets are fetched only when same-origin;
  cross-origin ones are counted as skipped and never requested, so the sidecar cannot be made a
  request proxy to the internet. ``data:``, ``blob:``, ``javascript:`` and other non-HTTP URLs
  are skipped. Duplicates (after resolution, fragment dropped) are fetched once; at most 64
  assets are fetched, in document order.
* The entry body is read to at most 2 MiB (what was read is parsed); an asset's body is never
  read: its connection is closed once its status line and headers arrived.
* ``detail`` is short human text passed through :func:`repeat_failure.rules.scrub.scrub`; it never holds a
  response body, only statuses, paths and origins.

HTTP is spoken by :mod:`http.client` (one connection per request, ``Connection: close``); https
verifies certificates and host names unless ``verify=False``.

Here: the outcomes, :func:`probe` (one probe's requests and their classification) and
:class:`PreviewProber` (the thread that runs probes off the pipeline). Which URLs are checked,
fetched and how they resolve is :mod:`repeat_failure.turns.probe_urls`; the connections bounded
by the deadline are :mod:`repeat_failure.turns.probe_sockets`.
"""

from __future__ import annotations

import http.client
import math
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any, NamedTuple
from urllib.parse import SplitResult, urljoin, urlsplit

from repeat_failure.rules.scrub import scrub
from repeat_failure.turns.probe_sockets import Connection, resolve, tls_context
from repeat_failure.turns.probe_urls import (clean_ref, origin_of, parse_assets, request_target,
                                            resolve_backslashes, validate_preview_url)

#: ``ProbeResult.outcome`` values.
OK, PREVIEW_ERROR, SERVER_DOWN = "ok", "preview_error", "server_down"
OUTCOMES = (OK, PREVIEW_ERROR, SERVER_DOWN)
#: ``ProbeResult.reason`` values (``None`` when the outcome is ``ok``).
ENTRY_STATUS, ENTRY_EMPTY, ASSET_BROKEN = "entry_status", "entry_empty", "asset_broken"
UNREACHABLE, TIMEOUT = "unreachable", "timeout"
REASONS = (ENTRY_STATUS, ENTRY_EMPTY, ASSET_BROKEN, UNREACHABLE, TIMEOUT)
#: Every (outcome, reason) pair a :class:`ProbeResult` can carry.
OUTCOME_REASONS = ((OK, None), (PREVIEW_ERROR, ENTRY_STATUS), (PREVIEW_ERROR, ENTRY_EMPTY),
                   (PREVIEW_ERROR, ASSET_BROKEN), (SERVER_DOWN, UNREACHABLE),
                   (SERVER_DOWN, TIMEOUT))

DEFAULT_TIMEOUT_S = 5.0
#: Redirects followed (entry and each asset), all within the entry's origin.
MAX_REDIRECTS = 5
#: Distinct same-origin entry assets fetched at most (the first ones in document order).
MAX_ASSETS = 64
#: Bytes of the entry body read at most; the document is parsed as far as it was read.
MAX_ENTRY_BYTES = 2 * 1024 * 1024
#: Characters of a path shown in ``detail`` (after scrubbing); a longer one ends in "...".
MAX_DETAIL_PATH = 160

USER_AGENT = "repeat-failure-preview-probe/1"
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_READ_CHUNK = 64 * 1024


@dataclass(frozen=True)
class ProbeResult:
    """What one :func:`probe` found (seed ARD-0038 §3).

    ``outcome``: ``"ok"``, ``"preview_error"`` or ``"server_down"``; ``reason``: ``None`` for
    ``ok``, else one of ``entry_status``, ``entry_empty``, ``asset_broken`` (with
    ``preview_error``) or ``unreachable``, ``timeout`` (with ``server_down``); see the module
    docstring's table. ``status``: the entry's HTTP status (the last one seen when redirects
    were followed; for ``asset_broken`` and an entry body timeout, 200), ``None`` when no status
    line arrived. ``detail``: one line of human text, scrubbed, never a response body.
    ``assets_checked``: same-origin assets requested (the broken one included; 0 when the entry
    failed). ``elapsed_s``: monotonic seconds the probe took.
    """

    outcome: str
    reason: str | None
    status: int | None
    detail: str
    assets_checked: int
    elapsed_s: float


def probe(url: str, timeout_s: float = DEFAULT_TIMEOUT_S, *, verify: bool = True) -> ProbeResult:
    """GET the preview entry ``url`` and its same-origin entry assets; classify the result.

    ``url``: a preview origin URL (see :func:`validate_preview_url`). ``timeout_s``: seconds,
    the ONE deadline for the whole probe (entry, redirects and assets), enforced with a
    monotonic clock; the call returns within about ``timeout_s`` plus scheduling jitter
    (a few ms). ``verify``: for https, verify the certificate and host name (default ``True``).

    Returns a :class:`ProbeResult` (outcome table in the module docstring); network failures and
    server misbehaviour never raise. Raises :class:`ValueError` for an invalid ``url`` or a
    ``timeout_s`` that is not a finite number > 0. Synchronous and blocking (call it from a
    worker thread). Thread-safe: calls share nothing but a lock-guarded cache of two TLS client
    contexts, so concurrent calls are independent. A host name (not an IP literal) is resolved
    on a short-lived daemon thread, left behind if the resolver outlives the deadline. Seed
    ARD-0038 §3 (a)-(c); §4 is the caller's gate.
    """
    start = time.monotonic()
    validate_preview_url(url)
    if not isinstance(timeout_s, (int, float)) or not math.isfinite(timeout_s) or timeout_s <= 0:
        raise ValueError(f"timeout_s must be a finite number of seconds > 0, not {timeout_s!r}")
    run = _Run(urlsplit(url), start + float(timeout_s), float(timeout_s), verify)
    outcome, reason, status, detail, checked = run.go()
    return ProbeResult(outcome, reason, status, scrub(detail), checked,
                       time.monotonic() - start)


# --- one probe ---------------------------------------------------------------------------------

def _shown(target: str) -> str:
    """A path for ``detail``: scrubbed first (a cut token would no longer be recognised), then
    shortened to :data:`MAX_DETAIL_PATH` characters."""
    text = scrub(target)
    return text if len(text) <= MAX_DETAIL_PATH else text[:MAX_DETAIL_PATH - 3] + "..."


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _why(exc: BaseException) -> str:
    """A short, stable name for a connection failure (never a response body)."""
    if isinstance(exc, socket.gaierror):
        return "host name not resolved"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return "TLS certificate verification failed"
    if isinstance(exc, ssl.SSLError):
        return f"TLS failed ({exc.reason or type(exc).__name__})"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, http.client.RemoteDisconnected):
        return "connection closed without a response"
    if isinstance(exc, ConnectionResetError):
        return "connection reset"
    if isinstance(exc, http.client.HTTPException):
        return f"not a valid HTTP response ({type(exc).__name__})"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return type(exc).__name__


class _Fetched(NamedTuple):
    """The end of a redirect chain: the last status, the response (open only when it is not a
    redirect and was asked to stay open), the URL it came from, redirects followed and, when
    the chain stopped at a redirect, why."""

    status: int
    response: http.client.HTTPResponse | None
    conn: Connection | None
    parts: SplitResult
    redirects: int
    stopped: str | None  # "off_origin:<origin>", "no_location", "too_many"


class _Run:
    """The state of one probe: the entry origin, its addresses, the deadline."""

    def __init__(self, parts: SplitResult, deadline: float, timeout_s: float,
                 verify: bool) -> None:
        self.parts = parts
        self.origin = origin_of(parts)
        assert self.origin is not None  # validate_preview_url checked it
        self.deadline = deadline
        self.timeout_s = timeout_s
        self.tls = tls_context(verify) if self.origin.scheme == "https" else None
        self.addrs: list[tuple[Any, ...]] | None = None

    def go(self) -> tuple[str, str | None, int | None, str, int]:
        """(outcome, reason, status, detail (not yet scrubbed), assets_checked)."""
        origin = self.origin
        assert origin is not None
        try:
            self.addrs = resolve(origin.host, origin.port, self.deadline)
        except TimeoutError:
            return (SERVER_DOWN, TIMEOUT, None,
                    f"host {origin.host} not resolved within {self.timeout_s:g} s", 0)
        except (OSError, UnicodeError):
            return SERVER_DOWN, UNREACHABLE, None, f"cannot resolve host {origin.host}", 0
        try:
            got = self._fetch(self.parts, keep_open=True)
        except TimeoutError:
            return (SERVER_DOWN, TIMEOUT, None,
                    f"no response from {origin} within {self.timeout_s:g} s", 0)
        except (OSError, http.client.HTTPException) as exc:
            return SERVER_DOWN, UNREACHABLE, None, f"cannot get {origin}: {_why(exc)}", 0
        if got.stopped is not None or got.status != 200:
            return PREVIEW_ERROR, ENTRY_STATUS, got.status, self._status_detail(got), 0
        assert got.response is not None and got.conn is not None
        try:
            body, cut, timed_out = self._read_entry(got.response)
        finally:
            got.conn.close()
        if timed_out:
            return (SERVER_DOWN, TIMEOUT, 200,
                    f"entry body not complete within {self.timeout_s:g} s "
                    f"({_plural(len(body), 'byte')} read)", 0)
        if not body.strip():
            kind = "an empty body" if not body else f"a whitespace-only body ({len(body)} bytes)"
            return PREVIEW_ERROR, ENTRY_EMPTY, 200, f"entry answered 200 with {kind}", 0
        refs = parse_assets(_decode(body, got.response), got.parts.geturl())
        return self._check_assets(refs, len(body), cut)

    def _status_detail(self, got: _Fetched) -> str:
        where = ""
        if got.redirects:
            where = (f" at {_shown(request_target(got.parts))} after "
                     f"{_plural(got.redirects, 'redirect')}")
        if got.stopped is None:
            return f"entry answered {got.status}{where}"
        if got.stopped == "no_location":
            return f"entry answered {got.status} without a Location header{where}"
        if got.stopped == "too_many":
            return f"entry redirected more than {MAX_REDIRECTS} times ({got.status}{where})"
        other = got.stopped.partition(":")[2]
        return (f"entry redirected ({got.status}{where}) to another origin, {other}; "
                f"not followed")

    def _fetch(self, parts: SplitResult, keep_open: bool, accept: str = "text/html,*/*"
               ) -> _Fetched:
        """GET ``parts`` following same-origin redirects (at most :data:`MAX_REDIRECTS`)."""
        redirects = 0
        while True:
            conn = Connection(self.origin, self.addrs, self.deadline, self.tls)  # type: ignore
            try:
                conn.request("GET", request_target(parts), headers={
                    "User-Agent": USER_AGENT, "Accept": accept, "Connection": "close"})
                response = conn.getresponse()
            except BaseException:
                conn.close()
                raise
            status = response.status
            if status not in _REDIRECTS:
                if keep_open:
                    return _Fetched(status, response, conn, parts, redirects, None)
                conn.close()
                return _Fetched(status, None, None, parts, redirects, None)
            location = clean_ref(response.getheader("Location"))
            conn.close()
            if not location:
                return _Fetched(status, None, None, parts, redirects, "no_location")
            if redirects == MAX_REDIRECTS:
                return _Fetched(status, None, None, parts, redirects, "too_many")
            try:
                following = urlsplit(urljoin(parts.geturl(), resolve_backslashes(location)))
                origin = origin_of(following)
            except ValueError:
                following, origin = parts, None
            if origin != self.origin:
                shown = str(origin) if origin is not None else "a URL that is not http(s)"
                return _Fetched(status, None, None, parts, redirects, f"off_origin:{shown}")
            parts = following._replace(fragment="")
            redirects += 1

    def _read_entry(self, response: http.client.HTTPResponse) -> tuple[bytes, bool, bool]:
        """(body, cut, timed_out): the entry body read in chunks, at most
        :data:`MAX_ENTRY_BYTES` (``cut``: it stopped there), until EOF or the deadline
        (``timed_out``: the body so far). A connection lost mid-body ends the body, as it ends
        a browser's document."""
        chunks: list[bytes] = []
        total = 0
        timed_out = False
        while total < MAX_ENTRY_BYTES:
            try:
                data = response.read1(min(_READ_CHUNK, MAX_ENTRY_BYTES - total))
            except TimeoutError:
                timed_out = True
                break
            except (OSError, http.client.HTTPException):
                break
            if not data:
                break
            chunks.append(data)
            total += len(data)
        return b"".join(chunks), total >= MAX_ENTRY_BYTES, timed_out

    def _check_assets(self, refs: list[str], entry_bytes: int, cut: bool
                      ) -> tuple[str, str | None, int | None, str, int]:
        same, cross, not_http = self._classify(refs)
        total = len(same)
        todo = same[:MAX_ASSETS]
        checked = 0
        for parts in todo:
            checked += 1
            shown = _shown(request_target(parts))
            try:
                got = self._fetch(parts, keep_open=False, accept="*/*")
            except TimeoutError:
                # The probe's time ran out on a slow (often still compiling) dev server: not a
                # broken asset, so no Event and no alert for it.
                return (SERVER_DOWN, TIMEOUT, 200,
                        f"asset {shown}: no response within {self.timeout_s:g} s", checked)
            except (OSError, http.client.HTTPException) as exc:
                return (PREVIEW_ERROR, ASSET_BROKEN, 200,
                        f"asset {shown} could not be fetched: {_why(exc)}", checked)
            if got.stopped is not None and got.stopped.startswith("off_origin:"):
                checked -= 1  # not checked: it lives on another origin after all
                cross += 1
                continue
            if got.stopped == "no_location":
                return (PREVIEW_ERROR, ASSET_BROKEN, 200,
                        f"asset {shown} answered {got.status} without a Location header",
                        checked)
            if got.stopped == "too_many":
                return (PREVIEW_ERROR, ASSET_BROKEN, 200,
                        f"asset {shown} redirected more than {MAX_REDIRECTS} times", checked)
            if not 200 <= got.status < 300:
                return (PREVIEW_ERROR, ASSET_BROKEN, 200, f"asset {shown} answered {got.status}",
                        checked)
        notes = [f"entry 200 ({_plural(entry_bytes, 'byte')})",
                 f"{_plural(checked, 'asset')} 2xx"]
        if cross:
            notes.append(f"{cross} cross-origin skipped")
        if not_http:
            notes.append(f"{not_http} not http(s) skipped")
        if total > MAX_ASSETS:
            notes.append(f"checked the first {MAX_ASSETS} of {total} same-origin assets")
        if cut:
            notes.append(f"entry read to the {MAX_ENTRY_BYTES // (1024 * 1024)} MiB limit")
        return OK, None, 200, "; ".join(notes), checked

    def _classify(self, refs: list[str]) -> tuple[list[SplitResult], int, int]:
        """(distinct same-origin assets in order, cross-origin count, not-http(s) count)."""
        same: list[SplitResult] = []
        seen: set[str] = set()
        cross = not_http = 0
        for ref in refs:
            try:
                parts = urlsplit(ref)
            except ValueError:
                not_http += 1
                continue
            origin = origin_of(parts)  # None: data:, blob:, javascript:, any other scheme
            if origin is None:
                not_http += 1
            elif origin != self.origin:
                cross += 1
            else:
                parts = parts._replace(fragment="")
                key = request_target(parts)
                if key not in seen:
                    seen.add(key)
                    same.append(parts)
        return same, cross, not_http


def _decode(body: bytes, response: http.client.HTTPResponse) -> str:
    """The entry body as text: the Content-Type charset when Python knows it, else UTF-8;
    undecodable bytes replaced (only URLs are looked at)."""
    charset = response.headers.get_content_charset() or "utf-8"
    try:
        return body.decode(charset, errors="replace")
    except (LookupError, UnicodeError, ValueError):  # unknown, or a codec like idna that fails
        return body.decode("utf-8", errors="replace")


class PreviewProber:
    """Runs :func:`probe` off the pipeline's thread, so a slow preview never delays collection.

    :meth:`request` asks for one probe of an agent's preview and returns at once. One daemon
    thread (started on the first request) runs the probes one at a time; per agent at most one
    probe is waiting: a request while one is already waiting only refreshes its URL and
    timeout (turns that end in a burst get one probe, seed §4: "one probe per turn" at most,
    never a backlog). ``on_result(agent, url, result)`` is called on that thread after each
    probe; an exception it raises is logged by class name and the thread goes on. ``probe_fn``
    is :func:`probe` (injectable for tests)."""

    def __init__(self, on_result: Any, probe_fn: Any = None) -> None:
        self._on_result = on_result
        self._probe = probe_fn or probe
        self._waiting: dict[str, tuple[str, float]] = {}  # agent -> (url, timeout_s), in order
        self._busy = False
        self._stop = False
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def request(self, agent: str, url: str, timeout_s: float) -> None:
        """Queue a probe of ``url`` for ``agent`` (never blocks, never raises)."""
        with self._cond:
            if self._stop:
                return
            self._waiting.pop(agent, None)
            self._waiting[agent] = (url, timeout_s)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="preview-probe",
                                                daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def clear(self) -> None:
        """Drop every waiting probe (the check was turned off); a probe already running
        finishes, and its result is the caller's to ignore."""
        with self._cond:
            self._waiting.clear()
            self._cond.notify_all()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` seconds (``None``: no limit) until no probe waits or runs;
        True when that happened in time."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._waiting and not self._busy, timeout)

    def close(self, timeout: float | None = 0.0) -> None:
        """Stop after the probe in progress; waiting probes are dropped. Waits up to
        ``timeout`` seconds for the thread (0: not at all)."""
        with self._cond:
            self._stop = True
            self._waiting.clear()
            self._cond.notify_all()
        if self._thread is not None and timeout != 0.0:
            self._thread.join(timeout)

    def _run(self) -> None:
        import logging

        log = logging.getLogger("repeat_failure")
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._waiting or self._stop)
                if self._stop:
                    self._busy = False
                    self._cond.notify_all()
                    return
                agent = next(iter(self._waiting))
                url, timeout_s = self._waiting.pop(agent)
                self._busy = True
            try:
                self._on_result(agent, url, self._probe(url, timeout_s))
            except Exception as exc:  # noqa: BLE001 - a bug must not end the thread
                log.error("preview probe failed", extra={"agent": agent,
                                                         "error": exc.__class__.__name__})
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
