"""The fix-loop ledger, wired: config → GitHub client, ledger, notifier → sweeper, on a cadence,
with ``/metrics``, ``/healthz`` and ``/readyz`` on one port.

``GET /healthz`` answers 200 while the sweep thread is alive; ``GET /readyz`` answers 200 once a
pass has finished and while the last one listed at least one repository (a bad token or an
unreachable API makes the pod unready). Credentials (:mod:`repeat_failure.fixloop.auth`): a GitHub App
(``github_app``: installation tokens minted and refreshed from the App's private key), or the
token read from ``token_file`` (a mounted Secret) or, when that file does not exist, from the
``GITHUB_TOKEN`` environment variable, read again before a sweep when the file changed and
after a 401; never logged.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

from prometheus_client import (
    CONTENT_TYPE_LATEST, CollectorRegistry, Histogram, ProcessCollector, generate_latest,
)

from repeat_failure import serving
from repeat_failure.config import ConfigError, parse_listen, read_regular_file
from repeat_failure.fixloop.auth import AppTokens, FileToken, token_source
from repeat_failure.fixloop.config import DEFAULT_TOKEN_FILE, FixloopConfig
from repeat_failure.fixloop.github import GitHub
from repeat_failure.fixloop.ledger import open_ledger
from repeat_failure.fixloop.metrics import PREFIX, FixloopCollector
from repeat_failure.fixloop.notify import Notifier
from repeat_failure.fixloop.sweep import Sweeper

log = logging.getLogger("repeat_failure")

#: Connections the HTTP endpoint serves at once (one thread each; more are closed at accept and
#: counted in a log line at most once a minute): Prometheus and the kubelet's probes use one
#: each, so 64 is generous (docs/fixloop.md).
MAX_CONNECTIONS = 64
#: One client address's share of MAX_CONNECTIONS (as the exporter's: one client's idle
#: connections cannot refuse the probes).
MAX_CLIENT_CONNECTIONS = 16
#: Bytes of request line and headers together; more is answered 431.
MAX_HEAD_BYTES = 32 << 10
#: Listen backlog: socketserver's default, as before the shared layer.
BACKLOG = 5
#: Seconds a connection may wait before its request's first byte, and then take from that byte
#: to the end of its answer: as the sidecar's exporter (issue 28: without them, clients
#: trickling bytes held every connection and /healthz went unanswered).
IDLE_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 10.0

#: The Kubernetes Event reason of an escalation (with ``events: true``).
EVENT_REASON = "FixLoopEscalated"


def read_token(config: FixloopConfig, environ: dict[str, str] | None = None) -> str | None:
    """The GitHub token: the content of ``config.token_file`` (stripped) when the file exists,
    else ``GITHUB_TOKEN``, else ``None`` (anonymous: public repositories only, 60 requests an
    hour, and every label or comment refused; logged as a warning naming both places). Raises
    :class:`ConfigError` when the file exists but cannot be read or is empty, or when a
    ``token_file`` other than the default was configured and does not exist (a mount mistake)."""
    environ = os.environ if environ is None else environ  # type: ignore[assignment]
    path = Path(config.token_file)
    if not path.exists() and config.token_file != DEFAULT_TOKEN_FILE:
        raise ConfigError(f"fixloop.token_file: {path} does not exist (mount the token Secret "
                          "there, or leave token_file out and set GITHUB_TOKEN)")
    if path.exists():
        try:  # non-blocking, regular files only: a FIFO there must not hang the sweeps
            token = read_regular_file(path, "the GitHub token").decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path}: cannot read the GitHub token: "
                              f"{exc.__class__.__name__}") from None
        if not token:
            raise ConfigError(f"{path}: the GitHub token file is empty")
        return token
    token = environ.get("GITHUB_TOKEN") or None  # type: ignore[assignment, union-attr]
    if token is None:
        log.warning("no GitHub token: neither the token file nor GITHUB_TOKEN is there; requests "
                    "go out anonymous (public repositories only, and labels and comments fail)",
                    extra={"event": "fixloop_no_token", "token_file": str(path)})
    return token


class FixloopApp:
    """One fix-loop process: ``run_forever(stop)`` sweeps every ``config.interval_s`` until
    ``stop`` is set; :meth:`serve` starts the HTTP endpoint. ``github``, ``notifier`` and
    ``clock`` are injectable (tests); ``events`` publishes escalation Events when given."""

    def __init__(self, config: FixloopConfig, github: GitHub | None = None,
                 notifier: Notifier | None = None, clock=time.time, events=None) -> None:
        self.config = config
        try:
            self.ledger = open_ledger(config.ledger)
        except OSError as exc:
            raise ConfigError(f"fixloop.ledger: cannot open {config.ledger}: "
                              f"{exc.strerror or exc}") from None
        self._token_stamp = self._stamp()
        if github is None:
            source = token_source(config, read_token)
            github = GitHub(config.api_url, source, timeout_s=config.request_timeout_s)
            if isinstance(source, AppTokens):
                source.bind(github)
        self.github = github
        self.events = events
        self.sweeper = Sweeper(config, self.github, self.ledger, notifier or Notifier(config),
                               clock=clock, on_escalation=self._event)
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)  # process_* on every server (issue 29)
        self.registry.register(FixloopCollector(self.sweeper))
        self.duration = Histogram(PREFIX + "sweep_duration_seconds", "Time per sweep.",
                                  registry=self.registry,
                                  buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300))
        self.ready = threading.Event()
        self.last_outcome: str | None = None
        self._thread: threading.Thread | None = None
        self._httpd: serving.Server | None = None

    def _event(self, repo: str, number: int, message: str) -> None:
        if self.events is not None:
            self.events.publish(f"{repo}#{number}", "github", message, time.time(),
                                reason=EVENT_REASON)

    def _stamp(self) -> tuple | None:
        try:
            st = os.stat(self.config.token_file)
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def refresh_token(self) -> bool:
        """Read the token file again when it changed (a rotated Secret: Kubernetes updates a
        mounted Secret in place, and GitHub App installation tokens expire after an hour);
        True when a new token is in use. A file that cannot be read now keeps the old token.
        A GitHub App refreshes its own tokens: always False."""
        if self.config.github_app is not None:
            return False
        stamp = self._stamp()
        if stamp is None or stamp == self._token_stamp:
            return False
        try:
            token = read_token(self.config)
        except ConfigError as exc:
            log.warning("GitHub token file changed but cannot be used; keeping the previous "
                        "token", extra={"event": "fixloop_token_unreadable", "error": str(exc)})
            return False
        self._token_stamp = stamp
        source = self.github.token_source
        if isinstance(source, FileToken):
            source.set(token)
        else:
            self.github.set_token(token)
        log.info("GitHub token file changed: using the new token",
                 extra={"event": "fixloop_token_rotated"})
        return True

    def run_once(self) -> str:
        """One sweep (after picking up a rotated token); its outcome."""
        self.refresh_token()
        started = time.perf_counter()
        outcome = self.sweeper.run_once()  # /metrics reads copies meanwhile: never blocked
        self.duration.observe(time.perf_counter() - started)
        self.last_outcome = outcome
        self.ready.set()
        log.info("fix-loop sweep done", extra={
            "event": "fixloop_sweep", "outcome": outcome,
            "seconds": round(time.perf_counter() - started, 3)})
        return outcome

    def run_forever(self, stop: threading.Event) -> None:
        """Sweep now and then every ``interval_s`` until ``stop``; a pass that fails
        unexpectedly is logged and the loop goes on."""
        self._thread = threading.current_thread()
        while not stop.is_set():
            try:
                self.run_once()
            except Exception:  # a bug must not stop the loop
                log.exception("fix-loop sweep failed")
            stop.wait(self.config.interval_s)
        self.ledger.close()

    def alive(self) -> bool:
        """True while the sweep loop runs (or before it started)."""
        return self._thread is None or self._thread.is_alive()

    def serve(self, listen: str) -> int:
        """Serve ``/metrics``, ``/healthz``, ``/readyz`` on ``HOST:PORT`` from a daemon thread;
        returns the port bound. Raises ``ValueError`` for a malformed ``listen``, ``OSError``
        when the port is taken."""
        address = parse_listen(listen, "0.0.0.0:9467")
        app = self

        class Handler(serving.Handler):
            server_version = "repeat-failure-fixloop"
            timeout = 10

            def do_GET(self) -> None:  # noqa: N802
                path = self.path.split("?", 1)[0]
                status = 200
                if path == "/metrics":
                    body, ctype = generate_latest(app.registry), CONTENT_TYPE_LATEST
                elif path == "/healthz":
                    ok = app.alive()
                    status, body = (200, b"ok\n") if ok else (503, b"sweep loop stopped\n")
                    ctype = "text/plain; charset=utf-8"
                elif path == "/readyz":
                    if not app.ready.is_set():
                        status, body = 503, b"no sweep finished yet\n"
                    elif app.last_outcome == "failed":
                        status, body = 503, b"the last sweep listed no repository\n"
                    else:
                        status, body = 200, b"ok\n"
                    ctype = "text/plain; charset=utf-8"
                else:
                    self.send_error(404, "not found: try /metrics, /healthz or /readyz")
                    return
                self.send_body(status, body, ctype)

        try:
            self._httpd = serving.Server(address, Handler, name="fixloop-http",
                                         max_connections=MAX_CONNECTIONS,
                                         max_client_connections=MAX_CLIENT_CONNECTIONS,
                                         max_head_bytes=MAX_HEAD_BYTES, backlog=BACKLOG,
                                         idle_timeout_s=IDLE_TIMEOUT_S,
                                         request_timeout_s=REQUEST_TIMEOUT_S)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot listen on {listen}: {exc.strerror}") from None
        self._httpd.start()
        return self._httpd.port

    def stop_serving(self) -> None:
        """Stop the HTTP endpoint."""
        if self._httpd is not None:
            self._httpd.stop()
