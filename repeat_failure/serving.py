"""The one HTTP serving layer of the three servers: the sidecar's exporter
(:mod:`repeat_failure.sidecar.exporter`), the injector webhook (:mod:`repeat_failure.kube.injector`)
and the fix-loop service (:mod:`repeat_failure.fixloop.app`).

Built on :mod:`http.server` / :mod:`socketserver` (threaded: one daemon thread per connection).
The standard library won against cheroot, uvicorn, tornado, aiohttp and waitress: each
TLS-capable one added 2.6-12.5 MiB RSS inside the real sidecar (whose peak is 39.8 of its
40 MiB), waitress has no TLS, and none has a connection cap with total handshake and request
deadlines, certificate reload or our JSON error bodies.

:class:`Server` holds the limits, each a constructor argument and an attribute of the same name
(tests read them): ``max_connections`` (more are closed at accept, before any TLS state or
thread exists), ``max_head_bytes`` (request line and headers together; more: 431),
``max_body_bytes`` (:meth:`Handler.content_length`: more is 413, unread; no length 411; every
request's framing is checked first, read or not: ``Handler._framing_ok``),
``handshake_timeout_s`` (accept to the end of the TLS handshake), ``request_timeout_s`` (first
byte of a request line to the end of its body), ``idle_timeout_s`` (waiting for the next
request of a kept-alive connection), ``max_client_connections`` (one client address's share of
``max_connections``; None: no share, the default). With a share set, a connection that finds
the cap (or its client's share) full first evicts a connection that holds a place without
using it: the oldest still in its TLS handshake or waiting for its next request (of the
client holding the most, for the cap); only when there is none is it refused. So connections
that never send a TLS hello, or idle keep-alives, cannot lock the cap. A deadline of ``None`` is not enforced (the handler's
per-operation socket ``timeout`` still is), and no other phase's deadline is left armed in its
place: the handshake's ends with the handshake, the idle one with a request's first byte (issue
28: a leftover one killed requests). ``tls`` (:class:`TLSFiles`) serves HTTPS with the
certificate re-read when its files change. Every error the layer answers goes through
:meth:`Handler.send_error`, whose body is JSON: ``{"error": "<message>", "status": <code>}``
(plus ``"detail"`` when http.server gives one), with a status line even for a request line
that cannot be parsed (HTTP/0.9 is not served: 400). ``HEAD`` is answered as ``GET`` would be,
without the body; :meth:`Server.stop` also closes the connections still open (kept alive).
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

log = logging.getLogger("repeat_failure")

JSON_TYPE = "application/json"
TEXT_TYPE = "text/plain; charset=utf-8"


def file_stamp(*paths: str | os.PathLike[str]) -> tuple | None:
    """(inode, mtime ns, size) of each path, following symlinks (a ConfigMap or Secret volume
    swaps a ``..data`` symlink); None when one is missing."""
    stamp = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            return None
        stamp.append((st.st_ino, st.st_mtime_ns, st.st_size))
    return tuple(stamp)


class TLSFiles:
    """The serving certificate and key, re-read when either file changes.

    :meth:`context` returns an :class:`ssl.SSLContext` (server side, TLS >= 1.2, ALPN
    ``http/1.1``) for the files' current contents, checking their (inode, mtime, size) at most
    once per ``check_interval_s`` seconds; a change builds a new context, so new connections get
    the rotated certificate (cert-manager renews into the same Secret; the kubelet swaps the
    mounted files). The constructor raises ``OSError``/``ssl.SSLError`` if the files cannot be
    loaded. A later pair that does not load (a key written before its certificate) is logged
    once and the previous context stays until a check finds a pair that loads.
    """

    def __init__(self, cert_file: str | os.PathLike[str], key_file: str | os.PathLike[str],
                 check_interval_s: float = 5.0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.cert_file, self.key_file = cert_file, key_file
        self.check_interval_s = check_interval_s
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._stamp = file_stamp(cert_file, key_file)
        self._context = self._load()
        self._checked = monotonic()
        self._refused: tuple | None = None

    def _load(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.set_alpn_protocols(["http/1.1"])
        context.load_cert_chain(self.cert_file, self.key_file)
        return context

    def context(self) -> ssl.SSLContext:
        """The context for a new connection (re-loaded first if the files changed)."""
        now = self._monotonic()
        if now - self._checked < self.check_interval_s:
            return self._context
        with self._lock:
            self._checked = now
            stamp = file_stamp(self.cert_file, self.key_file)
            if stamp is None or stamp == self._stamp:
                return self._context
            try:
                context = self._load()
            except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
                if stamp != self._refused:
                    self._refused = stamp
                    log.error("TLS certificate or key not loaded, serving the previous one",
                              extra={"event": "tls_reload_failed", "error": str(exc)})
                return self._context
            self._stamp, self._context = stamp, context
            log.info("TLS certificate reloaded", extra={"event": "tls_reloaded",
                                                        "cert": str(self.cert_file)})
            return context


class Tally:
    """Counts an event (:attr:`total`) and logs it as a warning at most once per
    ``interval_s`` seconds, with the count since the previous line (the first occurrence is
    logged at once); ``fields`` are added to every line. Thread-safe."""

    def __init__(self, message: str, event: str, interval_s: float = 60.0,
                 **fields: Any) -> None:
        self.message, self.event, self.interval_s, self.fields = message, event, interval_s, fields
        self._lock = threading.Lock()
        self._count = 0
        self._logged_at = -1e9
        self.total = 0

    def add(self, **fields: Any) -> None:
        """Count one occurrence; ``fields`` go on the log line if one is written now."""
        with self._lock:
            self._count += 1
            self.total += 1
            now = time.monotonic()
            if now - self._logged_at < self.interval_s:
                return
            count, self._count, self._logged_at = self._count, 0, now
        log.warning(self.message, extra={"event": self.event, "count": count, **self.fields,
                                         **fields})


class Deadlines:
    """The connections' deadlines, enforced by one thread: when a connection's deadline passes,
    its socket is shut down (both ways), so whatever its thread is blocked in (the TLS handshake,
    a read, a write) returns or fails at once. A per-``recv`` timeout would not do: a client
    trickling a byte at a time would reset it forever.

    :meth:`arm` sets or moves a socket's deadline (seconds from now), :meth:`disarm` drops it;
    the socket must be disarmed before it is closed (the shutdown happens under the same lock,
    so a closed socket's reused descriptor is never shut down). ``on_expired(phase)`` is called
    for each expiry, outside the lock; an exception it raises is ignored.
    """

    def __init__(self, on_expired: Callable[[str], None], name: str = "http") -> None:
        self._cond = threading.Condition()
        self._due: dict[socket.socket, tuple[float, str]] = {}
        self._stopped = False
        self._on_expired = on_expired
        self._thread = threading.Thread(target=self._run, name=f"{name}-deadlines",
                                        daemon=True)

    def start(self) -> None:
        """Start the deadline thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop the deadline thread (armed sockets are left as they are)."""
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def arm(self, sock: socket.socket, seconds: float, phase: str) -> None:
        """Shut ``sock`` down ``seconds`` from now unless re-armed or disarmed first."""
        with self._cond:
            self._due[sock] = (time.monotonic() + seconds, phase)
            self._cond.notify()

    def disarm(self, sock: socket.socket) -> None:
        """Drop ``sock``'s deadline (call before closing it)."""
        with self._cond:
            self._due.pop(sock, None)

    def _run(self) -> None:
        while True:
            expired: list[str] = []
            with self._cond:
                if self._stopped:
                    return
                now = time.monotonic()
                for sock, (due, phase) in list(self._due.items()):
                    if due <= now:
                        del self._due[sock]
                        try:  # the plain socket's shutdown: SSLSocket's drops its TLS state
                            socket.socket.shutdown(sock, socket.SHUT_RDWR)
                        except OSError:
                            pass
                        expired.append(phase)
                if not expired:
                    nxt = min((due for due, _ in self._due.values()), default=None)
                    self._cond.wait(None if nxt is None else nxt - now)
            for phase in expired:
                try:
                    self._on_expired(phase)
                except Exception:  # a logging failure must not stop the deadlines
                    pass


class HeadReader:
    """The connection's reader as http.server reads the request line and headers through it:
    raises :class:`http.client.LineTooLong` once they exceed ``limit`` bytes in all (http.server
    itself accepts 100 header lines of 64 KiB each, 6.5 MB per request)."""

    def __init__(self, stream: Any, limit: int) -> None:
        self._stream, self._limit, self._left, self.bare_cr = stream, limit, limit, False

    def readline(self, size: int | None = -1) -> bytes:
        """One line, at most ``size`` bytes (all of them: ``-1``/``None``), within the limit."""
        cap = self._left + 1 if size is None or size < 0 else min(size, self._left + 1)
        line = self._stream.readline(cap)
        self._left -= len(line)
        self.bare_cr = self.bare_cr or b"\r" in line.rstrip(b"\r\n")  # a CR not ending it
        if self._left < 0:
            exc = http.client.LineTooLong("request line and headers")
            exc.args = (f"request line and headers over {self._limit} bytes",)  # its str()
            raise exc
        return line


class Handler(BaseHTTPRequestHandler):
    """The base request handler of the three servers: the TLS handshake in the connection's own
    thread, the idle/request deadlines and the head limit of its :class:`Server`, JSON error
    bodies (:meth:`send_error`), one-write responses (:meth:`send_body`) and the body-length
    checks (:meth:`content_length`). Access lines are not logged (the servers log what
    matters). Subclasses set ``protocol_version``, ``server_version``, ``timeout`` (seconds per
    socket operation) and the ``do_*`` methods."""

    server: "Server"
    declared_length: int | None = None  # this request's Content-Length (_framing_ok)
    body_taken = False  # content_length() gave it to the handler to read

    def setup(self) -> None:
        """Set up the streams, then run the TLS handshake (under the handshake deadline armed
        at accept) when the server serves TLS."""
        super().setup()
        self._stream = self.rfile
        if self.server.tls is not None:
            self.request.do_handshake()
            # The handshake's deadline ends with it: left armed, it would kill the first request
            # when no idle or request deadline replaces it (issue 28).
            self.server.deadlines.disarm(self.request)
        self.server.mark(self.request, "idle")

    def handle_one_request(self) -> None:
        """Wait for a request under the idle deadline, then read and answer it under the
        request deadline and the head limit (over it: 431)."""
        srv = self.server
        if srv.idle_timeout_s is not None:
            srv.deadlines.arm(self.request, srv.idle_timeout_s, "idle")
        try:
            first = self._stream.peek(1)  # type: ignore[attr-defined]  # wait for the next request's first byte
        except OSError:
            first = b""
        if not first:
            self.close_connection = True
            return
        srv.mark(self.request, "busy")
        if srv.request_timeout_s is not None:
            srv.deadlines.arm(self.request, srv.request_timeout_s, "request")
        else:  # the idle deadline ends with the request's first byte (issue 28)
            srv.deadlines.disarm(self.request)
        self.rfile = self._head = HeadReader(self._stream, srv.max_head_bytes)  # type: ignore
        self.declared_length = None
        try:
            super().handle_one_request()
            if self.declared_length and not self.body_taken:
                self.close_connection = True  # its unread body is no next request
        except http.client.LineTooLong as exc:  # the request line itself (headers: 431
            self.requestline = self.request_version = self.command = ""  # by http.server)
            self.close_connection = True
            self.send_error(431, str(exc))
        finally:
            self.rfile = self._stream
            srv.mark(self.request, "idle")

    def parse_request(self) -> bool:
        """http.server's parse (through the head limit), then the plain stream again (``do_*``
        methods read bodies from ``self.rfile``). An HTTP/0.9 request line (no version): 400 at
        once, with a status line (no client of ours speaks it; it sends no headers to wait for)."""
        if len(self.raw_requestline.split()) == 2:  # type: ignore[attr-defined]
            self.command, self.request_version, self.requestline = "", "HTTP/0.9", ""
            self.send_error(400, "Bad request: HTTP/0.9 is not served (send HTTP/1.0 or 1.1)")
            return False
        try:
            if not super().parse_request():
                return False
        finally:
            self.rfile = self._stream
        return self._framing_ok()

    def _framing_ok(self) -> bool:
        """Every request's body framing (RFC 9112 section 6; a body left unread is no next
        request): answered, closing, 400 for a header line http.server takes for body or another
        field (no name and colon, blank before colon, folded, bare CR: RFC 9112 5.1, 5.2, 2.2),
        ``Transfer-Encoding`` with ``Content-Length``, in HTTP/1.0 or not ending in ``chunked``,
        ``Content-Length`` not 1-18 ASCII digits (``+5``, `` 5``) or differing; 411 chunked."""
        self.declared_length, self.body_taken, h = None, False, self.headers
        if h.defects or h.get_payload() or self._head.bare_cr or "\n" in "".join(h.values()):
            self.send_error(400, "bad header line: folded, bare CR, or no name and colon")
            return False
        codings = [c.strip(" \t").lower() for f in self.headers.get_all("Transfer-Encoding", [])
                   for c in f.split(",")]
        fields = self.headers.get_all("Content-Length", [])
        if codings:  # faulty framing (400), or a chunked body we do not decode (411)
            why = ("with Content-Length" if fields else
                   "in HTTP/1.0" if self.request_version == "HTTP/1.0" else
                   "not ending in chunked" if codings[-1] != "chunked" else "")
            self.send_error(400 if why else 411, f"bad framing: Transfer-Encoding {why}"
                            if why else "send the body with a Content-Length")
            return False
        values = {v.strip(" \t") for field in fields for v in field.split(",")}
        if not all(v.isascii() and v.isdigit() and len(v.lstrip("0")) <= 18 for v in values):
            self.send_error(400, "bad Content-Length")
            return False
        if len({int(v) for v in values}) > 1:
            self.send_error(400, "bad Content-Length: differing values")
            return False
        self.declared_length = int(values.pop()) if values else None
        return True

    def do_HEAD(self) -> None:  # noqa: N802 (http.server's naming)
        """Answer as ``GET`` would (status and headers, ``Content-Length`` included), without
        the body (RFC 9110 section 9.3.2); 501 with a length when the handler has no ``GET``."""
        get = getattr(self, "do_GET", None)
        if get is None:
            self.send_error(501, "Unsupported method ('HEAD')")
            return
        get()

    def send_error(self, code: int, message: str | None = None,
                   explain: str | None = None) -> None:
        """Answer ``code`` with ``Connection: close`` and the JSON body ``{"error": message,
        "status": code}`` (``"detail": explain`` when given; no body for 1xx, 204, 205, 304 or
        HEAD, which gets the headers with the length of the body it would have had).
        ``message`` defaults to the code's standard phrase and is also the status line's reason
        phrase, as in http.server. A request line that could not be parsed still gets a status
        line (http.server wrote none: the request was taken for HTTP/0.9)."""
        short = self.responses.get(code, ("???", "???"))[0]
        message = message or short
        if self.request_version == "HTTP/0.9":
            self.request_version = "HTTP/1.0"
        self.send_response(code, message)
        self.send_header("Connection", "close")
        payload: dict[str, Any] = {"error": message, "status": code}
        if explain:
            payload["detail"] = explain
        body = b""
        if code >= 200 and code not in (204, 205, 304):
            body = json.dumps(payload).encode() + b"\n"
            self.send_header("Content-Type", JSON_TYPE)
            self.send_header("Content-Length", str(len(body)))
        self._finish(body)

    def send_body(self, code: int, body: bytes, ctype: str, close: bool = False,
                  headers: Mapping[str, str] | None = None) -> None:
        """Answer ``code`` with ``body`` of type ``ctype`` (and ``headers``; ``close``: with
        ``Connection: close``), the head and body in one write (no delayed-ACK stall on a
        kept-alive connection)."""
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self._finish(body)

    def _finish(self, body: bytes) -> None:
        if self.command == "HEAD":
            body = b""  # its headers (Content-Length included) are GET's
        if self.request_version == "HTTP/0.9" or not hasattr(self, "_headers_buffer"):
            self.end_headers()
            if body:
                self.wfile.write(body)
            return
        self._headers_buffer.append(b"\r\n" + body)
        self.flush_headers()

    def content_length(self) -> int | None:
        """The request's ``Content-Length`` (its framing checked by :meth:`_framing_ok` before
        any ``do_*`` method), checked against the server's ``max_body_bytes``; None when the
        request was answered instead (connection closed): 411 without a length, 413 over the
        limit (the body unread). The caller reads the body (a body declared and not taken
        closes the connection after the answer)."""
        limit, length = self.server.max_body_bytes, self.declared_length
        if length is None:
            self.send_error(411, "Content-Length required")
            return None
        if limit is not None and length > limit:
            self.send_error(413, f"request body over {limit} bytes")
            return None
        self.body_taken = True
        return length

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        """No access lines (probes and scrapes would drown the real log lines)."""


class Server(ThreadingHTTPServer):
    """A threaded HTTP(S) server with the limits of this module's docstring, served from a
    daemon thread (:meth:`start`, :meth:`stop`: ``shutdown()`` then ``server_close()``).

    ``address`` is ``(host, port)`` (an IPv6 host when it holds ``:``; port 0 picks a free one,
    :attr:`port` tells which); ``backlog`` is the listen queue. ``quiet`` drops the one-a-minute
    warning for connections that fail (TLS handshake or client hang-up). Raises ``OSError`` if
    the address cannot be bound, ``ValueError`` for a limit below 1.
    """

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[Handler], *, name: str,
                 max_connections: int, max_head_bytes: int, max_body_bytes: int | None = None,
                 tls: TLSFiles | None = None, handshake_timeout_s: float | None = None,
                 request_timeout_s: float | None = None, idle_timeout_s: float | None = None,
                 backlog: int = 128, quiet: bool = False,
                 max_client_connections: int | None = None) -> None:
        for key, value in (("max_connections", max_connections),
                           ("max_head_bytes", max_head_bytes), ("backlog", backlog),
                           ("max_client_connections", max_client_connections or 1)):
            if value < 1:
                raise ValueError(f"{key} must be at least 1, got {value}")
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.request_queue_size = backlog
        self.name, self.tls, self.quiet = name, tls, quiet
        self.max_connections, self.max_head_bytes = max_connections, max_head_bytes
        self.max_body_bytes = max_body_bytes
        self.handshake_timeout_s = handshake_timeout_s
        self.request_timeout_s, self.idle_timeout_s = request_timeout_s, idle_timeout_s
        self._errors_logged_at = -1e9
        self._count_lock = threading.Lock()
        self.active = 0
        self.max_client_connections = max_client_connections
        #: socket -> [client address, "handshake"/"idle"/"busy", since (monotonic), evicted]
        self._conns: dict[Any, list] = {}
        self.evicted = Tally("connections evicted: a new one needed the place of one that was "
                             "handshaking or idle", "connections_evicted")
        self.refused = Tally("connections refused: too many at once", "connections_refused",
                             limit=max_connections)
        self.timed_out = Tally("connections closed past their deadline",
                               "connections_timed_out")
        self.deadlines = Deadlines(self._expired, name)
        self._thread = threading.Thread(target=self.serve_forever, name=name, daemon=True)
        super().__init__(address, handler)

    @property
    def port(self) -> int:
        """The TCP port actually bound."""
        return self.server_address[1]

    def start(self) -> "Server":
        """Serve in a daemon thread (and start the deadline thread when a deadline is set);
        returns self."""
        if (self.handshake_timeout_s, self.request_timeout_s, self.idle_timeout_s) != (
                None, None, None):
            self.deadlines.start()
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving (waits up to one poll interval, 0.5 s), close the listening socket,
        shut down every connection still open (a kept-alive one would go on being served:
        issue 28; each one's thread then ends on its failed read or write, waited for up to
        1 s) and stop the deadline thread."""
        if self._thread.is_alive():
            self.shutdown()
        self.server_close()
        with self._count_lock:  # shutdown_request drops a socket here before closing it
            for sock in self._conns:
                try:
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)
                except OSError:
                    pass
        deadline = time.monotonic() + 1.0
        while self.active and time.monotonic() < deadline:
            time.sleep(0.01)
        self.deadlines.stop()

    def _expired(self, phase: str) -> None:
        if phase != "idle":  # an idle keep-alive connection closing is routine
            self.timed_out.add(phase=phase)

    def get_request(self) -> tuple[socket.socket, Any]:
        """Accept a connection; with TLS, wrap it without the handshake (that runs in the
        connection's own thread, :meth:`Handler.setup`) with the context current now (a
        rotated certificate for new connections)."""
        sock, address = self.socket.accept()
        if self.tls is None:
            return sock, address
        try:
            return self.tls.context().wrap_socket(sock, server_side=True,
                                                  do_handshake_on_connect=False), address
        except Exception:
            sock.close()
            raise

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve the connection in a new thread, or close it at once when ``max_connections``
        are being served (or its client's ``max_client_connections``) and no handshaking or
        idle connection can be evicted for it (counted in :attr:`refused`)."""
        client = client_address[0] if isinstance(client_address, tuple) else client_address
        with self._count_lock:
            full = not self._make_room(client)
            if not full:
                self.active += 1
                self._conns[request] = [client, "handshake", time.monotonic(), False]
        if full:  # closed before its handshake: no thread, no TLS state
            self.refused.add()
            self.shutdown_request(request)
            return
        if self.tls is not None and self.handshake_timeout_s is not None:
            self.deadlines.arm(request, self.handshake_timeout_s, "handshake")
        super().process_request(request, client_address)  # no thread: the caller shuts it

    def _make_room(self, client: Any) -> bool:
        """Whether a connection from ``client`` may be served, evicting a handshaking or idle
        connection to make room when a share is set (under the count lock)."""
        share = self.max_client_connections
        if share is not None:
            mine = [s for s, c in self._conns.items() if c[0] == client and not c[3]]
            if len(mine) >= share and not self._evict(mine):
                return False
        if self.active < self.max_connections:
            return True
        if share is None:
            return False
        held: dict[Any, list] = {}
        for sock, conn in self._conns.items():
            if not conn[3]:
                held.setdefault(conn[0], []).append(sock)
        for _, socks in sorted(held.items(), key=lambda item: -len(item[1])):
            if self._evict(socks):
                return True
        return False

    def _evict(self, socks: list) -> bool:
        """Shut down the oldest of ``socks`` that is handshaking or idle (its place is free at
        once; its thread ends on the failed read); False when all are busy."""
        spare = [s for s in socks if self._conns[s][1] != "busy"]
        if not spare:
            return False
        victim = min(spare, key=lambda s: self._conns[s][2])
        self._conns[victim][3] = True
        self.active -= 1
        # Still in _conns, so not closed yet (shutdown_request drops it under this lock
        # first): its descriptor cannot have been reused. The plain socket's shutdown: an
        # SSLSocket's would drop its TLS state.
        try:
            socket.socket.shutdown(victim, socket.SHUT_RDWR)
        except OSError:
            pass
        self.evicted.add()
        return True

    def mark(self, request: Any, state: str) -> None:
        """Record that connection ``request`` is now ``"idle"`` (between requests) or
        ``"busy"`` (a request being read or answered): only handshaking and idle connections
        are evicted."""
        with self._count_lock:
            conn = self._conns.get(request)
            if conn is not None and conn[1] != state:
                conn[1], conn[2] = state, time.monotonic()

    def shutdown_request(self, request: Any) -> None:
        """Drop the connection's deadline and free its place (an evicted one's was freed when
        it was evicted; a refused one never had one), then close it."""
        self.deadlines.disarm(request)
        with self._count_lock:
            conn = self._conns.pop(request, None)
            if conn is not None and not conn[3]:
                self.active -= 1
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that fails the handshake or hangs up: one warning a minute at most (none
        when ``quiet``)."""
        if self.quiet:
            return
        now = time.monotonic()
        if now - self._errors_logged_at >= 60.0:
            self._errors_logged_at = now
            exc = sys.exc_info()[1]
            log.warning("connection failed (TLS handshake or client hang-up)",
                        extra={"event": "connection_failed", "error": repr(exc)[:200]})
