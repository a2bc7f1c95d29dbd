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
  given only the time left (:class:`_DeadlineSocket`), so a server that trickles bytes (also
  in the status line or headers) cannot stretch the probe; name resolution runs on a helper
  thread that is abandoned (it ends with the resolver's own timeout) when the deadline passes.
* No retries. Redirects (301/302/303/307/308) are followed by this module, at most 5 and only
  within the entry's origin (scheme, host, port). Assets are fetched only when same-origin;
  cross-origin ones are counted as skipped and never requested, so the sidecar cannot be made a
  request proxy to the internet. ``data:``, ``blob:``, ``javascript:`` and other non-HTTP URLs
  are skipped. Duplicates (after resolution, fragment dropped) are fetched once; at most 64
  assets are fetched, in document order.
* The entry body is read to at most 2 MiB (what was read is parsed); an asset's body is never
  read: its connection is closed once its status line and headers arrived.
* ``detail`` is short human text passed through :func:`repeat_failure.sidecar.scrub.scrub`; it never holds a
  response body, only statuses, paths and origins.

HTTP is spoken by :mod:`http.client` (one connection per request, ``Connection: close``); https
verifies certificates and host names unless ``verify=False``.
"""

from __future__ import annotations

import http.client
import ipaddress
import math
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any, NamedTuple
from urllib.parse import SplitResult, quote, urljoin, urlsplit

from repeat_failure.sidecar.scrub import scrub

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
_DEFAULT_PORTS = {"http": 80, "https": 443}
#: Characters left as they are when a path or query is percent-encoded the way a browser's URL
#: parser does: printable ASCII except space, ``"``, ``<``, ``>``, `````, ``{``, ``}``; an
#: existing ``%XX`` stays (``%`` is safe), non-ASCII becomes UTF-8 ``%XX``.
_URL_SAFE = "!#$%&'()*+,-./:;=?@[\\]^_|~"
_ASCII_WS = " \t\n\r\f"


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


class _Origin(NamedTuple):
    scheme: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


def validate_preview_url(url: str) -> str:
    """Check a preview origin URL from the configuration and return it unchanged.

    Accepted: an absolute ``http://`` or ``https://`` URL with a host (name or IP literal), an
    optional port in 1..65535, path and query. Raises :class:`ValueError` with a message naming
    the problem (never echoing a credential or the fragment) when ``url`` is not a string or is
    empty, holds whitespace or control characters, cannot be parsed, has another scheme, has
    userinfo (``user:password@``; credentials must not be in the config), has no host or a bad
    port, or has a fragment (``#...``; a fragment is never sent to the server). Seed ARD-0038 §3
    (the probe surface is the preview origin).
    """
    if not isinstance(url, str):
        raise ValueError(f"preview URL must be a string, not {type(url).__name__}")
    if not url:
        raise ValueError("preview URL is empty")
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url):
        raise ValueError("preview URL contains whitespace or control characters")
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ValueError(f"preview URL cannot be parsed: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        scheme_text = parts.scheme if len(parts.scheme) <= 32 else parts.scheme[:29] + "..."
        shown = f"scheme {scheme_text!r}" if parts.scheme else "no scheme"
        raise ValueError(f"preview URL must be http:// or https:// ({shown})")
    if "@" in parts.netloc:
        raise ValueError("preview URL must not contain credentials (user:password@host); "
                         "credentials do not belong in the configuration")
    if not parts.hostname:
        raise ValueError("preview URL has no host")
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        raise ValueError("preview URL has a bad port (must be a number in 1..65535)")
    try:
        parts.hostname.encode("idna")
    except UnicodeError:
        raise ValueError("preview URL has an invalid host name") from None
    if "#" in url:
        raise ValueError("preview URL must not have a fragment (#...): it is never sent to "
                         "the server")
    return url


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


# --- sockets bounded by the probe's deadline ---------------------------------------------------

def _remaining(deadline: float) -> float:
    """Seconds left until ``deadline`` (monotonic); raises :class:`TimeoutError` when none."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("probe deadline reached")
    return left


class _DeadlineMixin:
    """Before every blocking call, the socket's timeout is set to the time left until the
    probe's deadline, so no sequence of calls (a trickling server) can outlast it."""

    deadline: float | None = None

    def _arm(self) -> None:
        if self.deadline is not None:
            self.settimeout(_remaining(self.deadline))  # type: ignore[attr-defined]

    def recv(self, *args: Any, **kwargs: Any) -> Any:
        self._arm()
        return super().recv(*args, **kwargs)  # type: ignore[misc]

    def recv_into(self, *args: Any, **kwargs: Any) -> Any:
        self._arm()
        return super().recv_into(*args, **kwargs)  # type: ignore[misc]

    def send(self, *args: Any, **kwargs: Any) -> Any:
        self._arm()
        return super().send(*args, **kwargs)  # type: ignore[misc]

    def sendall(self, *args: Any, **kwargs: Any) -> Any:
        self._arm()
        return super().sendall(*args, **kwargs)  # type: ignore[misc]


class _DeadlineSocket(_DeadlineMixin, socket.socket):
    """A TCP socket bounded by the probe's deadline."""


class _DeadlineSSLSocket(_DeadlineMixin, ssl.SSLSocket):
    """A TLS socket bounded by the probe's deadline (the handshake is bounded by the plain
    socket's timeout, set to the time left just before it; CPython applies it as a deadline)."""


_TLS_LOCK = threading.Lock()
_TLS_CONTEXTS: dict[bool, ssl.SSLContext] = {}


def _tls_context(verify: bool) -> ssl.SSLContext:
    """The shared client context (one per ``verify``; contexts are safe to share)."""
    with _TLS_LOCK:
        ctx = _TLS_CONTEXTS.get(verify)
        if ctx is None:
            ctx = ssl.create_default_context()
            if not verify:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            ctx.set_alpn_protocols(["http/1.1"])
            ctx.sslsocket_class = _DeadlineSSLSocket
            _TLS_CONTEXTS[verify] = ctx
        return ctx


def _resolve(host: str, port: int, deadline: float) -> list[tuple[Any, ...]]:
    """``getaddrinfo`` for a TCP connection, bounded by ``deadline``: an IP literal directly, a
    name on a daemon helper thread that is left to finish on its own when time runs out."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                  flags=socket.AI_NUMERICHOST)
    box: dict[str, Any] = {}

    def lookup() -> None:
        try:
            box["addrs"] = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            box["error"] = exc

    helper = threading.Thread(target=lookup, name="preview-probe-resolve", daemon=True)
    helper.start()
    helper.join(_remaining(deadline))
    if helper.is_alive():
        raise TimeoutError("name resolution did not finish before the deadline")
    if "error" in box:
        raise box["error"]
    return box["addrs"]


class _Connection(http.client.HTTPConnection):
    """One http.client connection whose socket is connected to pre-resolved addresses and
    bounded by the probe's deadline; TLS when ``tls`` is a context."""

    def __init__(self, origin: _Origin, addrs: list[tuple[Any, ...]], deadline: float,
                 tls: ssl.SSLContext | None) -> None:
        super().__init__(origin.host, origin.port)
        self.default_port = _DEFAULT_PORTS[origin.scheme]  # Host: without a default port
        self._addrs = addrs
        self._deadline = deadline
        self._tls = tls

    def connect(self) -> None:
        error: OSError | None = None
        for family, socktype, proto, _name, address in self._addrs:
            sock = _DeadlineSocket(family, socktype, proto)
            try:
                sock.settimeout(_remaining(self._deadline))
                sock.connect(address)
            except TimeoutError:
                sock.close()
                raise
            except OSError as exc:
                sock.close()
                error = exc
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.deadline = self._deadline
            if self._tls is not None:
                try:
                    sock.settimeout(_remaining(self._deadline))
                    tls_sock = self._tls.wrap_socket(sock, server_hostname=self.host)
                except BaseException:
                    sock.close()
                    raise
                tls_sock.deadline = self._deadline
                self.sock = tls_sock
            else:
                self.sock = sock
            return
        raise error if error is not None else OSError("no address to connect to")


# --- the entry document's assets ---------------------------------------------------------------

def _clean_ref(value: str | None) -> str:
    """An attribute value as a browser's URL parser takes it: leading/trailing ASCII whitespace
    stripped, tabs and newlines removed."""
    if value is None:
        return ""
    return value.strip(_ASCII_WS).replace("\t", "").replace("\n", "").replace("\r", "")


class _AssetParser(HTMLParser):
    """Collects the entry assets of one document in tree order, each resolved to an absolute
    URL string against the base URL in effect where it appears (the document URL until the
    first ``<base href>``, whose frozen URL then applies; a later base is ignored, as is a base
    whose URL is ``data:``/``javascript:`` or unparsable). Elements inside ``<template>`` and
    ``<noscript>`` (raw text for a browser with scripting) are inert and not collected."""

    _INERT = ("template", "noscript")

    def __init__(self, document_url: str) -> None:
        super().__init__(convert_charrefs=True)
        self._document_url = document_url
        self._base: str | None = None
        self._inert = 0
        self.refs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._INERT:
            self._inert += 1
            return
        if self._inert:
            return
        first: dict[str, str | None] = {}
        for name, value in attrs:  # a repeated attribute: the first one counts
            first.setdefault(name, value)
        if tag == "base" and "href" in first and self._base is None:
            self._base = self._freeze_base(_clean_ref(first["href"]))
        elif tag == "script" and "src" in first:
            self._add(first["src"])
        elif tag == "link" and "href" in first:
            rel = (first.get("rel") or "").lower().split()
            if "stylesheet" in rel or "modulepreload" in rel:
                self._add(first["href"])

    def handle_endtag(self, tag: str) -> None:
        if tag in self._INERT and self._inert:
            self._inert -= 1

    def parse_marked_section(self, i: int, report: int = 1) -> int:
        # html.parser raises AssertionError on "<![foo" ; the HTML standard reads it as a bogus
        # comment running to the next ">".
        try:
            return super().parse_marked_section(i, report)
        except AssertionError:
            end = self.rawdata.find(">", i + 3)
            return -1 if end < 0 else end + 1

    def _freeze_base(self, href: str) -> str:
        try:
            frozen = urljoin(self._document_url, _backslashes(href))
            scheme = urlsplit(frozen).scheme.lower()
        except ValueError:
            return self._document_url
        return self._document_url if scheme in ("data", "javascript") else frozen

    def _add(self, value: str | None) -> None:
        ref = _clean_ref(value)
        if not ref:  # an empty src/href is never fetched
            return
        try:
            self.refs.append(urljoin(self._base or self._document_url, _backslashes(ref)))
        except ValueError:
            self.refs.append(ref)  # unparsable: classified as not fetchable


def _backslashes(ref: str) -> str:
    """``\\`` before the query reads as ``/`` in http(s) URLs (WHATWG URL standard)."""
    head, sep, tail = ref.partition("?")
    return head.replace("\\", "/") + sep + tail


def _parse_assets(text: str, document_url: str) -> list[str]:
    """The entry assets' absolute URLs in document order (duplicates kept)."""
    parser = _AssetParser(document_url)
    try:
        parser.feed(text)
        parser.close()
    except AssertionError:  # a corner of html.parser we do not know of: keep what was found
        pass
    return parser.refs


# --- one probe ---------------------------------------------------------------------------------

def _origin_of(parts: SplitResult) -> _Origin | None:
    """(scheme, host, port) of an http(s) URL, default port filled in; ``None`` otherwise."""
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    return _Origin(scheme, parts.hostname, port or _DEFAULT_PORTS[scheme])


def _target(parts: SplitResult) -> str:
    """The request target (path and query, percent-encoded like a browser does)."""
    target = quote(parts.path or "/", safe=_URL_SAFE)
    if parts.query:
        target += "?" + quote(parts.query, safe=_URL_SAFE)
    return target


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
    conn: _Connection | None
    parts: SplitResult
    redirects: int
    stopped: str | None  # "off_origin:<origin>", "no_location", "too_many"


class _Run:
    """The state of one probe: the entry origin, its addresses, the deadline."""

    def __init__(self, parts: SplitResult, deadline: float, timeout_s: float,
                 verify: bool) -> None:
        self.parts = parts
        self.origin = _origin_of(parts)
        assert self.origin is not None  # validate_preview_url checked it
        self.deadline = deadline
        self.timeout_s = timeout_s
        self.tls = _tls_context(verify) if self.origin.scheme == "https" else None
        self.addrs: list[tuple[Any, ...]] | None = None

    def go(self) -> tuple[str, str | None, int | None, str, int]:
        """(outcome, reason, status, detail (not yet scrubbed), assets_checked)."""
        origin = self.origin
        assert origin is not None
        try:
            self.addrs = _resolve(origin.host, origin.port, self.deadline)
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
        refs = _parse_assets(_decode(body, got.response), got.parts.geturl())
        return self._check_assets(refs, len(body), cut)

    def _status_detail(self, got: _Fetched) -> str:
        where = ""
        if got.redirects:
            where = (f" at {_shown(_target(got.parts))} after "
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
            conn = _Connection(self.origin, self.addrs, self.deadline, self.tls)  # type: ignore
            try:
                conn.request("GET", _target(parts), headers={
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
            location = _clean_ref(response.getheader("Location"))
            conn.close()
            if not location:
                return _Fetched(status, None, None, parts, redirects, "no_location")
            if redirects == MAX_REDIRECTS:
                return _Fetched(status, None, None, parts, redirects, "too_many")
            try:
                following = urlsplit(urljoin(parts.geturl(), _backslashes(location)))
                origin = _origin_of(following)
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
            shown = _shown(_target(parts))
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
            origin = _origin_of(parts)  # None: data:, blob:, javascript:, any other scheme
            if origin is None:
                not_http += 1
            elif origin != self.origin:
                cross += 1
            else:
                parts = parts._replace(fragment="")
                key = _target(parts)
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
