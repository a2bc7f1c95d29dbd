"""Connections bounded by the preview probe's one deadline (:mod:`repeat_failure.turns.probe`):
every blocking socket call is given only the time left until the deadline (monotonic
seconds), so a server that trickles bytes cannot stretch a probe; a host name is resolved on a
helper thread that is abandoned when the deadline passes. A call that runs out of time raises
:class:`TimeoutError`; other failures are the :class:`OSError` of :mod:`socket` or :mod:`ssl`.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import threading
import time
from typing import Any

from repeat_failure.turns.probe_urls import DEFAULT_PORTS, Origin


def remaining(deadline: float) -> float:
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
            self.settimeout(remaining(self.deadline))  # type: ignore[attr-defined]

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


def tls_context(verify: bool) -> ssl.SSLContext:
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


def resolve(host: str, port: int, deadline: float) -> list[tuple[Any, ...]]:
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
    helper.join(remaining(deadline))
    if helper.is_alive():
        raise TimeoutError("name resolution did not finish before the deadline")
    if "error" in box:
        raise box["error"]
    return box["addrs"]


class Connection(http.client.HTTPConnection):
    """One http.client connection whose socket is connected to pre-resolved addresses and
    bounded by the probe's deadline; TLS when ``tls`` is a context."""

    def __init__(self, origin: Origin, addrs: list[tuple[Any, ...]], deadline: float,
                 tls: ssl.SSLContext | None) -> None:
        super().__init__(origin.host, origin.port)
        self.default_port = DEFAULT_PORTS[origin.scheme]  # Host: without a default port
        self._addrs = addrs
        self._deadline = deadline
        self._tls = tls

    def connect(self) -> None:
        error: OSError | None = None
        for family, socktype, proto, _name, address in self._addrs:
            sock = _DeadlineSocket(family, socktype, proto)
            try:
                sock.settimeout(remaining(self._deadline))
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
                    sock.settimeout(remaining(self._deadline))
                    tls_sock = self._tls.wrap_socket(sock, server_hostname=self.host)
                except BaseException:
                    sock.close()
                    raise
                tls_sock.deadline = self._deadline  # type: ignore[attr-defined]
                self.sock = tls_sock
            else:
                self.sock = sock
            return
        raise error if error is not None else OSError("no address to connect to")
