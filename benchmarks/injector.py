"""The injector under hostile clients (issue 28 item 1): ``python -m benchmarks --only injector``.

On loopback, a real :class:`~repeat_failure.kube.injector.InjectorServer` with its default
limits, reviews sent as the API server sends them (one connection each, a 5 s timeout, a
not-annotated Pod review of about 3 KiB):

* ``baseline``: 20 reviews with no other client: how many are answered 200, median and worst
  latency (ms);
* ``slow_clients``: the same 20 while 3 clients (each from its own loopback address) trickle a
  review body one byte every 0.5 s (before issue 28 they held both parse slots: reviews got
  503, i.e. pods admitted without the sidecar);
* ``silent_handshakes``: the same 20 while 64 connections from 16 loopback addresses never
  send a TLS hello (before: they held the connection cap until their 10 s handshake deadline);
* ``large_bodies``: the same 20 while 4 clients post 2 MiB bodies slowly (half a MiB at once,
  every 0.2 s), plus ``busy_503`` of those large bodies.

* ``memory``: VmHWM of a real ``repeat-failure inject-webhook`` process (kB) idle, and after 8
  clients from 4 addresses posted 10 rounds of 2 MiB hostile bodies (``[{},{},...]``, about 25
  bytes of memory per byte parsed) while 40 connections held 30 KiB request heads (the chart's
  memory limit is 256Mi).

Each scenario reports ``<scenario>_ok`` (of 20), ``_p50_ms``, ``_max_ms`` and ``_failed``
(anything but 200); the figures to compare between runs are ``ok`` against ``baseline``'s.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REVIEWS = 20


def _pki(directory: Path) -> tuple[Path, Path, Path]:
    """A throwaway self-signed certificate for 127.0.0.1: (cert, key, ca) paths."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "injector-bench")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = directory / "tls.crt", directory / "tls.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file, cert_file


def _review() -> bytes:
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"generateName": "web-", "namespace": "agents",
                        "labels": {"app": "web", **{f"k{i}": "v" * 40 for i in range(30)}}},
           "spec": {"containers": [{"name": "web", "image": "nginx:1.27",
                                    "env": [{"name": f"E{i}", "value": "x" * 40}
                                            for i in range(20)]}]}}
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": {"uid": "u", "kind": {"group": "", "version": "v1",
                                                        "kind": "Pod"},
                                   "resource": {"group": "", "version": "v1",
                                                "resource": "pods"},
                                   "operation": "CREATE", "namespace": "agents",
                                   "object": pod}}).encode()


def _head(length: int) -> bytes:
    return (b"POST /mutate?timeout=5s HTTP/1.1\r\nHost: injector\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % length)


def _connect(port: int, ctx: ssl.SSLContext, source: str = "127.0.0.1",
             timeout: float = 5.0) -> ssl.SSLSocket:
    raw = socket.socket()
    raw.settimeout(timeout)
    raw.bind((source, 0))
    raw.connect(("127.0.0.1", port))
    return ctx.wrap_socket(raw, server_hostname="127.0.0.1")


def _reviews(port: int, ctx: ssl.SSLContext) -> dict:
    """REVIEWS reviews, one connection each, 5 s each, 0.1 s apart: what the API server sees."""
    body = _review()
    times, failed = [], 0
    for _ in range(REVIEWS):
        started = time.monotonic()
        try:
            with _connect(port, ctx) as tls:
                tls.sendall(_head(len(body)) + body)
                answer = tls.recv(65536)
            ok = answer.startswith(b"HTTP/1.1 200 ")
        except OSError:
            ok = False
        times.append((time.monotonic() - started) * 1000)
        failed += not ok
        time.sleep(0.1)
    return {"ok": REVIEWS - failed, "failed": failed,
            "p50_ms": round(statistics.median(times), 1), "max_ms": round(max(times), 1)}


def bench_injector() -> dict:
    """The four scenarios of this module's docstring; returns their figures."""
    from repeat_failure.kube.injector import ConfigSource, InjectorServer, TLSFiles

    results: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        cert, key, ca = _pki(directory)
        config = directory / "injector.yaml"
        config.write_text("enabled: true\n")
        server = InjectorServer("127.0.0.1:0", ConfigSource(config), TLSFiles(cert, key)).start()
        ctx = ssl.create_default_context(cafile=str(ca))
        stop = threading.Event()
        try:
            results["baseline"] = _reviews(server.port, ctx)

            def trickle(source: str) -> None:
                body = _review()
                try:
                    with _connect(server.port, ctx, source, timeout=30) as tls:
                        tls.sendall(_head(len(body)))
                        for byte in body:
                            if stop.wait(0.5):
                                return
                            tls.sendall(bytes([byte]))
                except OSError:
                    return

            def run_with(workers: list[threading.Thread]) -> dict:
                stop.clear()
                for w in workers:
                    w.start()
                time.sleep(0.5)
                figures = _reviews(server.port, ctx)
                stop.set()
                for w in workers:
                    w.join(15)
                return figures

            results["slow_clients"] = run_with([
                threading.Thread(target=trickle, args=(f"127.0.0.{10 + i}",)) for i in range(3)])

            silent = []
            for i in range(64):
                s = socket.socket()
                s.bind((f"127.0.1.{1 + i % 16}", 0))
                s.connect(("127.0.0.1", server.port))
                silent.append(s)
            time.sleep(0.3)
            results["silent_handshakes"] = _reviews(server.port, ctx)
            for s in silent:
                s.close()

            busy = [0]

            def large(source: str) -> None:
                big = b'{"pad": "' + b"x" * ((2 << 20) - 12) + b'"}'
                while not stop.is_set():
                    try:
                        with _connect(server.port, ctx, source, timeout=30) as tls:
                            tls.sendall(_head(len(big)))
                            for i in range(0, len(big), 512 << 10):
                                tls.sendall(big[i:i + (512 << 10)])
                                if stop.wait(0.2):
                                    return
                            if tls.recv(65536).startswith(b"HTTP/1.1 503 "):
                                busy[0] += 1
                    except OSError:
                        pass

            results["large_bodies"] = run_with([
                threading.Thread(target=large, args=(f"127.0.2.{1 + i}",)) for i in range(4)])
            results["large_bodies"]["busy_503"] = busy[0]
        finally:
            stop.set()
            server.stop()
        results["memory"] = _memory(directory, cert, key, ctx)
    return {f"{scenario}_{key}": value for scenario, figures in results.items()
            for key, value in figures.items()}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _memory(directory: Path, cert: Path, key: Path, ctx: ssl.SSLContext) -> dict:
    """The ``memory`` scenario of the module's docstring (its own process, stopped at the end)."""
    port = _free_port()
    config = directory / "memory.yaml"
    config.write_text("enabled: true\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "repeat_failure", "inject-webhook", "--config", str(config),
         "--tls-cert", str(cert), "--tls-key", str(key), "--listen", f"127.0.0.1:{port}",
         "--metrics-listen", ""], stderr=subprocess.DEVNULL)

    def hwm() -> int:
        with open(f"/proc/{proc.pid}/status") as f:
            return int(next(line for line in f if line.startswith("VmHWM")).split()[1])

    heads: list[ssl.SSLSocket] = []
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "inject-webhook did not start"
                time.sleep(0.1)
        idle = hwm()
        hostile = b"[" + b"{}," * ((2 << 20) // 3 - 2) + b"{}]"
        for i in range(40):
            try:
                tls = _connect(port, ctx, f"127.0.3.{1 + i % 20}", timeout=60)
                tls.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * (30 << 10))
                heads.append(tls)
            except OSError:
                pass

        def post(source: str) -> None:
            for _ in range(10):
                try:
                    with _connect(port, ctx, source, timeout=60) as tls:
                        tls.sendall(_head(len(hostile)) + hostile)
                        tls.recv(100)
                except OSError:
                    pass

        posters = [threading.Thread(target=post, args=(f"127.0.4.{1 + i % 4}",))
                   for i in range(8)]
        for t in posters:
            t.start()
        for t in posters:
            t.join(300)
        return {"idle_vmhwm_kib": idle, "hostile_vmhwm_kib": hwm()}
    finally:
        for tls in heads:
            tls.close()
        proc.terminate()
        proc.wait(10)
