"""The injector's own metrics and its body budget (split from :mod:`repeat_failure.kube.injector`).

:class:`InjectorMetrics` holds the ``hive_repeat_failure_injector_*`` series
(``docs/metrics.md``, "The injector's series") in a registry of its own, with the process
collector's ``process_*`` series; :class:`MetricsServer` serves them as ``GET /metrics`` over
plain HTTP on a port apart from the webhook's (the chart's NetworkPolicy lets only the API
server reach the webhook, and Prometheus only the metrics port). :class:`BodyBudget` bounds
the bytes of large request bodies held at once, and one client's share of them.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

from prometheus_client import (
    CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector,
    generate_latest,
)

from repeat_failure import serving
from repeat_failure.config import parse_listen

#: Admission review outcomes (label ``outcome``) and the reasons each can have (label
#: ``reason``): every pair is exported from 0.
REVIEW_REASONS: dict[str, tuple[str, ...]] = {
    "injected": ("injected",),
    "unchanged": ("not_a_pod_creation", "not_annotated", "already_injected", "check_off",
                  "invalid", "windows", "system_namespace", "decision_error"),
    "error": ("bad_request", "busy", "injector_error"),
}
#: Why a pod annotated for injection was allowed without the sidecar (label ``reason`` of
#: ``hive_repeat_failure_injector_pods_not_injected_total``), each exported from 0: the
#: decision outcomes of :class:`~repeat_failure.kube.injector_patch.Decision` other than
#: ``injected``, ``not annotated``, ``already injected`` and ``not a pod creation``, and
#: ``decision_error`` (a bug in the decision: the pod is allowed with a warning).
NOT_INJECTED_REASONS = ("check_off", "invalid", "windows", "system_namespace", "decision_error")
#: Buckets of the review latency histogram, in seconds (the API server's default webhook
#: timeout is 10 s, the chart's 5 s).
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


def reason_label(outcome: str) -> str:
    """A decision's outcome text as a label value: ``"not annotated"`` → ``"not_annotated"``."""
    return outcome.replace(" ", "_")


class InjectorMetrics:
    """The injector's series, in ``registry`` (a new one by default, with ``process_*``).

    ``cert_expiry`` returns the serving certificate's notAfter (seconds since the epoch) or
    None when it cannot be read; it is called at each scrape. Thread-safe (prometheus_client's
    metrics are)."""

    def __init__(self, registry: CollectorRegistry | None = None,
                 cert_expiry: Callable[[], float | None] | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        ProcessCollector(registry=self.registry)
        self.reviews = Counter(
            "hive_repeat_failure_injector_admission_reviews", "Admission reviews answered, "
            "by outcome (injected, unchanged, error) and reason.", ["outcome", "reason"],
            registry=self.registry)
        for outcome, reasons in REVIEW_REASONS.items():
            for reason in reasons:
                self.reviews.labels(outcome, reason)
        self.latency = Histogram(
            "hive_repeat_failure_injector_admission_duration_seconds", "Seconds from a parsed "
            "review body to its answer (decision and JSON).", buckets=LATENCY_BUCKETS,
            registry=self.registry)
        self.not_injected = Counter(
            "hive_repeat_failure_injector_pods_not_injected", "Pods annotated for injection "
            "that were allowed without the sidecar, by reason.", ["reason"],
            registry=self.registry)
        for reason in NOT_INJECTED_REASONS:
            self.not_injected.labels(reason)
        expiry = Gauge("hive_repeat_failure_injector_certificate_expiry_timestamp_seconds",
                       "When the serving certificate expires (its notAfter), seconds since "
                       "the epoch; NaN when it cannot be read.", registry=self.registry)
        self._cert_expiry = cert_expiry
        if cert_expiry is not None:
            expiry.set_function(lambda: cert_expiry() or float("nan"))

    def review(self, outcome: str, reason: str, seconds: float | None = None) -> None:
        """Count one answered review (and its latency, when given)."""
        self.reviews.labels(outcome, reason).inc()
        if seconds is not None:
            self.latency.observe(seconds)

    def not_injected_pod(self, reason: str) -> None:
        """Count one annotated pod allowed without the sidecar."""
        self.not_injected.labels(reason).inc()

    def scrape(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)


def certificate_expiry(cert_file: str | os.PathLike[str]) -> float | None:
    """The notAfter of the first certificate in the PEM file ``cert_file``, in seconds since the
    epoch; None when the file cannot be read or parsed."""
    from cryptography import x509

    try:
        with open(cert_file, "rb") as f:
            cert = x509.load_pem_x509_certificate(f.read())
    except (OSError, ValueError):
        return None
    return cert.not_valid_after_utc.timestamp()


class BodyBudget:
    """Bytes of request bodies over ``small`` held at once: at most ``total``, of which one
    client (its address) holds at most ``per_client``. Bodies of ``small`` bytes or fewer take
    nothing (the connection cap bounds them): a review the API server sends is a few KiB, so a
    client sending large bodies slowly never delays it."""

    def __init__(self, total: int, per_client: int, small: int) -> None:
        self.total, self.per_client, self.small = total, per_client, small
        self._cond = threading.Condition()
        self._used = 0
        self._clients: dict[str, int] = {}

    def reserve(self, client: str, size: int, wait_s: float) -> bool:
        """Take ``size`` bytes for ``client``, waiting up to ``wait_s`` seconds for room; False
        when there is none (or the body alone is over the client's share)."""
        if size <= self.small:
            return True
        if size > self.per_client:
            return False
        deadline = time.monotonic() + wait_s
        with self._cond:
            while (self._used + size > self.total
                   or self._clients.get(client, 0) + size > self.per_client):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            self._used += size
            self._clients[client] = self._clients.get(client, 0) + size
            return True

    def release(self, client: str, size: int) -> None:
        """Give back what :meth:`reserve` took."""
        if size <= self.small:
            return
        with self._cond:
            self._used -= size
            left = self._clients.get(client, 0) - size
            if left > 0:
                self._clients[client] = left
            else:
                self._clients.pop(client, None)
            self._cond.notify_all()

    @property
    def used(self) -> int:
        """Bytes held now."""
        return self._used


class MetricsServer:
    """``GET /metrics`` (and ``GET /healthz``) over plain HTTP/1.0 on ``listen``
    (``HOST:PORT``; port 0 picks one, :attr:`port` tells which): at most 8 connections, 10 s per
    request, heads up to 8 KiB. Raises ``ValueError`` for a malformed ``listen``, ``OSError``
    when the port cannot be bound."""

    def __init__(self, listen: str, metrics: InjectorMetrics) -> None:
        host, port = parse_listen(listen, "0.0.0.0:9468")

        class Handler(serving.Handler):
            server_version = "repeat-failure-injector"
            timeout = 10

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self.send_body(200, metrics.scrape(), CONTENT_TYPE_LATEST)
                elif path == "/healthz":
                    self.send_body(200, b"ok\n", serving.TEXT_TYPE)
                else:
                    self.send_error(404, "not found: try /metrics or /healthz")

        self._httpd = serving.Server((host, port), Handler, name="injector-metrics",
                                     max_connections=8, max_client_connections=2,
                                     max_head_bytes=8 << 10,
                                     request_timeout_s=10.0, idle_timeout_s=10.0)

    @property
    def port(self) -> int:
        """The TCP port actually bound."""
        return self._httpd.port

    def start(self) -> "MetricsServer":
        """Serve in the background; returns self."""
        self._httpd.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the port."""
        self._httpd.stop()
