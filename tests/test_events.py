"""Kubernetes Events (repeat_failure.events, docs/kubernetes.md "Events", issue 7), end to end.

A local HTTP server on 127.0.0.1 speaks the Kubernetes core/v1 Events API
(``POST /api/v1/namespaces/<ns>/events`` → 201 with the created Event) and checks each Event the
way the API server's validation does; the sidecar's real ``kubernetes`` client is pointed at it
through the injectable configuration factory. Records are real files read by the real pipeline.
"""

from __future__ import annotations

import io
import itertools
import json
import random
import re
import shutil
import socket
import string
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import orjson
import pytest
from prometheus_client import generate_latest

from repeat_failure import events as events_mod
from repeat_failure.sidecar import hook
from repeat_failure.sidecar.app import Sidecar
from repeat_failure.config import AgentSpec
from repeat_failure.events import (EventPublisher, EventStats, PodRef, RateLimit, event_body,
                            failure_reason, note_key)
from repeat_failure.sidecar.exporter import MetricsCollector

T0 = 1_800_000_000.0
REPO = Path(__file__).resolve().parent.parent
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
EVENTS_PATH = re.compile(r"^/api/v1/namespaces/([^/]+)/events$")


class Clock:
    """A settable wall clock (epoch seconds)."""

    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def api_server_errors(namespace: str, event: dict) -> list[str]:
    """What the Kubernetes API server would refuse in a core/v1 Event created in ``namespace``
    (its create validation for Events that set ``eventTime``, pkg/apis/core/validation/events.go,
    plus object-name rules); an empty list means it would be accepted."""
    errors = []
    meta = event.get("metadata", {})
    involved = event.get("involvedObject", {})
    name = meta.get("name", "")
    if not name or len(name) > 253 or not DNS_SUBDOMAIN.match(name):
        errors.append("metadata.name")
    if meta.get("namespace", namespace) != namespace:
        errors.append("metadata.namespace")
    if involved.get("namespace") != namespace:
        errors.append("involvedObject.namespace")
    if event.get("eventTime"):
        if not event.get("reportingComponent"):
            errors.append("reportingComponent")
        if not event.get("reportingInstance") or len(event["reportingInstance"]) > 128:
            errors.append("reportingInstance")
        if not event.get("action") or len(event["action"]) > 128:
            errors.append("action")
        if not event.get("reason") or len(event["reason"]) > 128:
            errors.append("reason")
        if len(event.get("message", "").encode()) > 1024:
            errors.append("message")
    if event.get("type") not in ("Normal", "Warning"):
        errors.append("type")
    return errors


class FakeApiServer:
    """A stdlib HTTP server on 127.0.0.1 that answers like the Kubernetes Events API.

    ``status`` is what every POST gets (201: the created Event, with the server's own metadata
    added; anything else: a ``Status`` object). ``delay`` seconds are slept before answering;
    ``gate`` (a threading.Event), when set, is waited for first. ``requests`` records
    ``(method, path, headers, raw body bytes)``; ``events`` the parsed bodies that were created.
    """

    def __init__(self) -> None:
        self.status = 201
        self.delay = 0.0
        self.gate: threading.Event | None = None
        self.requests: list[tuple[str, str, dict, bytes]] = []
        self.events: list[dict] = []
        self.invalid: list[list[str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                server.requests.append(("POST", self.path, dict(self.headers), body))
                if server.gate is not None:
                    server.gate.wait(10)
                if server.delay:
                    time.sleep(server.delay)
                match = EVENTS_PATH.match(self.path.split("?", 1)[0])
                code, reply = server.status, None
                if match is None:
                    code = 404
                elif code == 201:
                    event = json.loads(body)
                    problems = api_server_errors(match.group(1), event)
                    if problems:
                        server.invalid.append(problems)
                        code = 422
                    else:
                        server.events.append(event)
                        reply = {**event, "metadata": {
                            **event["metadata"], "uid": f"uid-{len(server.events)}",
                            "resourceVersion": str(len(server.events)),
                            "creationTimestamp": event["firstTimestamp"]}}
                if reply is None:
                    reply = {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                             "code": code, "message": "refused by the test server"}
                data = json.dumps(reply).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._httpd.handle_error = lambda request, address: None  # a timed-out client hung up
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def configuration(self):
        """A ``kubernetes.client.Configuration`` pointed at this server."""
        from kubernetes import client

        return client.Configuration(host=f"http://127.0.0.1:{self.port}")

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self.gate is not None:
            self.gate.set()
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture
def api() -> FakeApiServer:
    """A running fake Events API on a free loopback port."""
    server = FakeApiServer()
    yield server
    server.stop()


@pytest.fixture
def pod_env(monkeypatch: pytest.MonkeyPatch) -> PodRef:
    """The Downward API variables of a pod ``agent-pod-1`` in namespace ``agents``."""
    monkeypatch.setenv("POD_NAME", "agent-pod-1")
    monkeypatch.setenv("POD_NAMESPACE", "agents")
    monkeypatch.setenv("POD_UID", "0f1e2d3c-aaaa-bbbb-cccc-000000000001")
    return PodRef("agent-pod-1", "agents", "0f1e2d3c-aaaa-bbbb-cccc-000000000001")


@pytest.fixture
def sidecars():
    """Collects the sidecars a test makes and stops their Events threads afterwards."""
    made: list[Sidecar] = []
    yield made
    for sc in made:
        if sc.events is not None:
            sc.events.close(timeout=5)


def write_config(path: Path, events: bool | None, threshold: int = 3) -> Path:
    """A sidecar config with the check on; ``events`` None leaves the key out (the default)."""
    extra = "" if events is None else f"  events: {str(events).lower()}\n"
    path.write_text(f"repeat_failure:\n  enabled: true\n  threshold: {threshold}\n"
                    f"  collect_grace_s: 1\n{extra}")
    return path


def make(tmp_path: Path, sidecars: list, events: bool | None = True, configuration=None,
         clock: Clock | None = None) -> Sidecar:
    """A sidecar for agent ``a1`` (backend bash) whose Events go to ``configuration``."""
    sc = Sidecar(tmp_path / "shared", [AgentSpec("a1", "bash")],
                 write_config(tmp_path / "config.yaml", events), clock=clock or Clock(),
                 monotonic=itertools.count(0, 10).__next__, events_configuration=configuration)
    sc.registry.register(MetricsCollector(sc))
    sidecars.append(sc)
    return sc


def fail(sc: Sidecar, cmd: str, times: int, exit_status: int = 2, start: float = T0 - 50) -> None:
    """Append ``times`` failing records of ``cmd`` and run one collection pass."""
    with open(hook.records_path(sc.shared_dir, "a1"), "ab") as f:
        for i in range(times):
            f.write(orjson.dumps({"v": 1, "ts": start + i, "agent": "a1", "backend": "bash",
                                  "route": "bash_env", "exit": exit_status, "cmd": cmd}) + b"\n")
    sc.run_once()


def settle(sc: Sidecar) -> None:
    """Wait until the Events thread has sent everything queued."""
    assert sc.events is not None and sc.events.wait_idle(15)


def metrics(sc: Sidecar) -> str:
    """The sidecar's /metrics text."""
    return generate_latest(sc.registry).decode()


def events_total(sc: Sidecar) -> dict[str, float]:
    """``outcome → value`` of ``hive_repeat_failure_events_total`` for agent a1."""
    found = {}
    for line in metrics(sc).splitlines():
        m = re.match(r'hive_repeat_failure_events_total\{agent="a1",outcome="(\w+)"\} (\S+)', line)
        if m:
            found[m.group(1)] = float(m.group(2))
    return found


def log_lines(stream: io.StringIO, **match) -> list[dict]:
    """The JSON log lines whose fields include ``match``."""
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    return [line for line in lines if all(line.get(k) == v for k, v in match.items())]


def rfc3339(ts: float, micro: bool = False) -> str:
    """``ts`` as the API's UTC time text (metav1.Time, or MicroTime with ``micro``)."""
    fmt = "%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ"
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime(fmt)


def without_events_series(text: str) -> list[str]:
    """The metrics text minus the Events counter and the collection-time histogram (its values
    are timings, never equal between two runs)."""
    return [line for line in text.splitlines()
            if "hive_repeat_failure_events" not in line and "collect_duration" not in line]


# -- the Event itself -------------------------------------------------------------------------


def test_one_event_per_raised_note_with_exact_fields(tmp_path, api, pod_env, sidecars) -> None:
    """A raised note creates exactly one core/v1 Event on the sidecar's own pod with the fields
    of docs/kubernetes.md "Events"; further failures of the same raised note create none; a
    second note creates a second Event. The fake server checks each one the way the API
    server's Event validation does (eventTime set ⇒ reportingComponent, reportingInstance,
    action, reason required)."""
    clock = Clock()
    sc = make(tmp_path, sidecars, configuration=api.configuration, clock=clock)
    fail(sc, "ls /nonexistent", 3)
    settle(sc)
    assert len(api.requests) == 1 and api.invalid == []
    method, path, headers, raw = api.requests[0]
    assert (method, path) == ("POST", "/api/v1/namespaces/agents/events")
    assert headers["Content-Type"] == "application/json"
    body = json.loads(raw)
    name = body["metadata"]["name"]
    assert re.fullmatch(r"agent-pod-1\.[0-9a-f]{16}", name)
    message = sc.rows()[0].notes[0].message
    assert message == "Repeating failure: ls /nonexistent failed 3 times in 1 min (exit 2)"
    assert body == {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": "agents",
                     "annotations": {"repeat-failure.hive.dev/agent": "a1",
                                     "repeat-failure.hive.dev/backend": "bash"}},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": "agent-pod-1",
                           "namespace": "agents", "uid": pod_env.uid},
        "type": "Warning", "reason": "RepeatingFailure", "action": "Detected",
        "message": message,
        "source": {"component": "repeat-failure"},
        "reportingComponent": "repeat-failure", "reportingInstance": "agent-pod-1",
        "firstTimestamp": rfc3339(T0), "lastTimestamp": rfc3339(T0),
        "eventTime": rfc3339(T0, micro=True), "count": 1,
    }
    assert events_total(sc) == {"created": 1.0, "failed": 0.0, "dropped": 0.0,
                                "suppressed": 0.0}

    clock.t += 5
    fail(sc, "ls /nonexistent", 4, start=T0 - 40)  # the same note, still raised: no Event
    settle(sc)
    assert len(api.requests) == 1
    assert sc.rows()[0].notes[0].count == 7

    fail(sc, "npm test", 3, exit_status=1, start=T0 - 30)  # a second note: a second Event
    settle(sc)
    assert len(api.requests) == 2 and api.invalid == []
    second = json.loads(api.requests[1][3])
    assert second["message"] == "Repeating failure: npm test failed 3 times in 1 min (exit 1)"
    assert second["metadata"]["name"] != name
    assert second["firstTimestamp"] == rfc3339(T0 + 5)
    assert events_total(sc) == {"created": 2.0, "failed": 0.0, "dropped": 0.0,
                                "suppressed": 0.0}


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian prometheus) missing")
def test_promtool_accepts_the_events_counter(tmp_path, api, pod_env, sidecars) -> None:
    """``promtool check metrics`` reports nothing on a scrape carrying
    ``hive_repeat_failure_events_total`` (name, type, help)."""
    sc = make(tmp_path, sidecars, configuration=api.configuration)
    fail(sc, "ls /nonexistent", 3)
    settle(sc)
    scrape = metrics(sc)
    assert "# TYPE hive_repeat_failure_events_total counter" in scrape
    done = subprocess.run(["promtool", "check", "metrics"], input=scrape, capture_output=True,
                          text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def succeed(sc: Sidecar, cmd: str, ts: float) -> None:
    """Append one successful record of ``cmd`` and run one collection pass."""
    with open(hook.records_path(sc.shared_dir, "a1"), "ab") as f:
        f.write(orjson.dumps({"v": 1, "ts": ts, "agent": "a1", "backend": "bash",
                              "route": "bash_env", "exit": 0, "cmd": cmd}) + b"\n")
    sc.run_once()


def test_note_raised_again_after_clearing_creates_a_new_event(tmp_path, api, pod_env,
                                                               sidecars) -> None:
    """A note that clears (a success) and is raised again is a new raise; within SUPPRESS_S
    (600 s, on the publisher's monotonic clock) of its Event it makes none (``suppressed``),
    after that a new one."""
    sc = make(tmp_path, sidecars, configuration=api.configuration)
    ticks = Clock(0.0)
    sc.events.limit = RateLimit(clock=ticks)
    fail(sc, "make build", 3)
    succeed(sc, "make build", T0 - 10)
    assert sc.rows()[0].notes == ()
    ticks.t = 599.0
    fail(sc, "make build", 3, start=T0 - 5)
    settle(sc)
    assert len(api.requests) == 1
    assert events_total(sc) == {"created": 1.0, "failed": 0.0, "dropped": 0.0,
                                "suppressed": 1.0}
    succeed(sc, "make build", T0 - 1)
    ticks.t = 600.0
    fail(sc, "make build", 3, start=T0)
    settle(sc)
    assert [json.loads(r[3])["message"] for r in api.requests] == [
        "Repeating failure: make build failed 3 times in 1 min (exit 2)"] * 2
    assert events_total(sc) == {"created": 2.0, "failed": 0.0, "dropped": 0.0,
                                "suppressed": 1.0}


def test_note_flapping_in_a_loop_makes_one_event(tmp_path, api, pod_env, sidecars) -> None:
    """The security review's loop: 5 failures then 1 success of the same command, 30 times
    over (the note raised and cleared each time, with counts and minutes that vary): one
    Event, 29 counted ``suppressed``; the notes themselves are raised every time."""
    sc = make(tmp_path, sidecars, configuration=api.configuration)
    sc.events.limit = RateLimit(clock=Clock(0.0))
    start = T0 - 500
    for i in range(30):
        fail(sc, "npm test", 5 + i % 3, exit_status=1, start=start)
        start += 5 + i % 3
        succeed(sc, "npm test", start)
        start += 1
    settle(sc)
    assert len(api.requests) == 1
    assert sc.agents["a1"].notes_raised == 30
    assert events_total(sc) == {"created": 1.0, "failed": 0.0, "dropped": 0.0,
                                "suppressed": 29.0}


def test_token_never_reaches_the_api(tmp_path, api, pod_env, sidecars, log_stream) -> None:
    """A token-shaped command: the Event's message holds ``[REDACTED]``, and the token appears
    in no request (path, headers or body) and no log line."""
    token = "ghp_" + "".join(random.choices(string.ascii_letters + string.digits, k=36))
    sc = make(tmp_path, sidecars, configuration=api.configuration)
    fail(sc, f"git push https://x:{token}@github.com/o/r.git", 3, exit_status=128)
    settle(sc)
    assert len(api.requests) == 1
    body = json.loads(api.requests[0][3])
    assert "[REDACTED]" in body["message"]
    for method, path, headers, raw in api.requests:
        assert token not in raw.decode() and token not in path and token not in str(headers)
    assert token not in log_stream.getvalue()


# -- failures change nothing else -------------------------------------------------------------


def baseline(tmp_path: Path, sidecars: list, feed) -> Sidecar:
    """A sidecar with Events off fed by ``feed``: what the rows and metrics must be."""
    (tmp_path / "off").mkdir()
    sc = make(tmp_path / "off", sidecars, events=False)
    feed(sc)
    return sc


def feed_three_notes(sc: Sidecar) -> None:
    """Raise three notes (three commands failing 3 times each)."""
    for cmd in ("ls /nonexistent", "npm test", "cargo build"):
        fail(sc, cmd, 3)


@pytest.mark.parametrize("status, reason", [(403, "forbidden"), (404, "not_found"),
                                            (503, "server_error")])
def test_api_error_is_logged_once_and_changes_nothing_else(tmp_path, api, pod_env, sidecars,
                                                           log_stream, status, reason) -> None:
    """The API answering 403 (no RBAC permission), 404 or 5xx: one log line for the reason
    across several notes, each Event counted ``failed``, and the notes, rows and every other
    metric exactly as with Events off."""
    api.status = status
    sc = make(tmp_path, sidecars, configuration=api.configuration)
    feed_three_notes(sc)
    settle(sc)
    assert len(api.requests) == 3
    lines = log_lines(log_stream, event="k8s_event_failed")
    assert len(lines) == 1
    assert (lines[0]["reason"], lines[0]["status"], lines[0]["level"]) == (reason, status,
                                                                           "warning")
    assert events_total(sc) == {"created": 0.0, "failed": 3.0, "dropped": 0.0,
                                "suppressed": 0.0}
    off = baseline(tmp_path, sidecars, feed_three_notes)
    assert sc.rows() == off.rows()
    assert without_events_series(metrics(sc)) == without_events_series(metrics(off))
    assert len(log_lines(log_stream, event="note_raised")) == 6  # 3 here + 3 in the baseline


def test_api_server_down_is_logged_once(tmp_path, pod_env, sidecars, log_stream) -> None:
    """No API server (a closed port, connection refused): one log line (``unreachable``), every
    Event counted ``failed``, notes and metrics as with Events off."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nothing listens there

    def configuration():
        from kubernetes import client

        return client.Configuration(host=f"http://127.0.0.1:{port}")

    sc = make(tmp_path, sidecars, configuration=configuration)
    feed_three_notes(sc)
    settle(sc)
    lines = log_lines(log_stream, event="k8s_event_failed")
    assert [line["reason"] for line in lines] == ["unreachable"]
    assert events_total(sc) == {"created": 0.0, "failed": 3.0, "dropped": 0.0,
                                "suppressed": 0.0}
    off = baseline(tmp_path, sidecars, feed_three_notes)
    assert sc.rows() == off.rows()
    assert without_events_series(metrics(sc)) == without_events_series(metrics(off))


def test_api_timeout_is_logged_once(tmp_path, api, pod_env, sidecars, log_stream,
                                    monkeypatch) -> None:
    """An API server slower than the request timeout: ``timeout`` logged once, counted
    ``failed``; collection never waits for it."""
    monkeypatch.setattr(events_mod, "REQUEST_TIMEOUT_S", (1.0, 1.0))
    api.delay = 3.0
    sc = make(tmp_path, sidecars, configuration=api.configuration)
    started = time.monotonic()
    fail(sc, "ls /a", 3)
    fail(sc, "ls /b", 3)
    assert time.monotonic() - started < 1.0  # two passes, neither waited for the API
    settle(sc)
    assert [line["reason"] for line in log_lines(log_stream, event="k8s_event_failed")] == [
        "timeout"]
    assert events_total(sc) == {"created": 0.0, "failed": 2.0, "dropped": 0.0,
                                "suppressed": 0.0}


def test_no_in_cluster_config_is_logged_once(tmp_path, api, pod_env, sidecars,
                                             log_stream) -> None:
    """Outside a pod the default factory (``load_incluster_config``) fails: logged once
    (``no_cluster_config``), each Event counted ``failed``, nothing sent."""
    sc = make(tmp_path, sidecars, configuration=None)  # the real in-cluster loader
    feed_three_notes(sc)
    settle(sc)
    assert [line["reason"] for line in log_lines(log_stream, event="k8s_event_failed")] == [
        "no_cluster_config"]
    assert events_total(sc)["failed"] == 3.0
    assert api.requests == []


def test_pod_name_absent_logs_once_and_sends_nothing(tmp_path, api, pod_env, sidecars,
                                                     log_stream, monkeypatch) -> None:
    """Without ``POD_NAME`` Events are unavailable: one log line, no thread, no request; the
    notes are raised as usual and each Event is counted ``failed``."""
    monkeypatch.delenv("POD_NAME")
    sc = make(tmp_path, sidecars, configuration=api.configuration)
    feed_three_notes(sc)
    assert sc.events is not None and sc.events._thread is None
    assert [line["reason"] for line in log_lines(log_stream, event="k8s_event_failed")] == [
        "no_pod_identity"]
    assert len(sc.rows()[0].notes) == 3
    assert events_total(sc) == {"created": 0.0, "failed": 3.0, "dropped": 0.0,
                                "suppressed": 0.0}
    time.sleep(0.2)
    assert api.requests == []


# -- off, on, hot reload ----------------------------------------------------------------------


@pytest.mark.parametrize("events", [False, None])
def test_events_off_sends_nothing(tmp_path, api, pod_env, sidecars, events) -> None:
    """``events: false`` (or the key absent, the default): notes are raised, no request is
    made, no publisher exists and no Events series is exported."""
    sc = make(tmp_path, sidecars, events=events, configuration=api.configuration)
    feed_three_notes(sc)
    assert len(sc.rows()[0].notes) == 3
    assert sc.events is None
    time.sleep(0.2)
    assert api.requests == []
    assert "hive_repeat_failure_events_total{" not in metrics(sc)


def test_events_off_never_imports_kubernetes(tmp_path) -> None:
    """With Events off (the default), importing repeat_failure.sidecar.app and running the pipeline until a
    note is raised imports no ``kubernetes`` module and starts no thread (checked in a fresh
    interpreter, where nothing else imported it)."""
    script = f"""
import sys, threading, time, orjson
from repeat_failure.sidecar import hook
from repeat_failure.sidecar.app import Sidecar
from repeat_failure.config import AgentSpec
from pathlib import Path
tmp = Path({str(tmp_path)!r})
(tmp / "config.yaml").write_text("repeat_failure:\\n  enabled: true\\n  threshold: 3\\n")
sc = Sidecar(tmp / "shared", [AgentSpec("a1", "bash")], tmp / "config.yaml")
with open(hook.records_path(sc.shared_dir, "a1"), "ab") as f:
    for i in range(3):
        f.write(orjson.dumps({{"v": 1, "ts": time.time() - 10 + i, "agent": "a1", "backend": "bash",
                              "route": "bash_env", "exit": 1, "cmd": "false"}}) + b"\\n")
sc.run_once()
sc.expire()
print(len(sc.rows()[0].notes), sc.events is None, threading.active_count(),
      sorted(m for m in sys.modules if m == "kubernetes" or m.startswith("kubernetes.")))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True, cwd=tmp_path, env={"PATH": "/usr/bin:/bin",
                                                        "PYTHONPATH": str(REPO)})
    # one note raised, no publisher, one thread (the main one), no kubernetes module
    assert out.stdout.strip() == "1 True 1 []", out.stdout + out.stderr


def test_events_hot_reload_on_and_off(tmp_path, api, pod_env, sidecars) -> None:
    """Turning ``events`` on in the config file at run time starts Events without a restart;
    turning it off stops the thread and sends nothing more; counts survive the switch."""
    sc = make(tmp_path, sidecars, events=False, configuration=api.configuration)
    fail(sc, "ls /a", 3)
    assert sc.events is None
    write_config(tmp_path / "config.yaml", events=True)
    assert sc.reload_config(force=True)
    publisher = sc.events
    assert publisher is not None
    fail(sc, "ls /b", 3)
    settle(sc)
    assert [json.loads(r[3])["message"].split(" failed")[0] for r in api.requests] == [
        "Repeating failure: ls /b"]
    write_config(tmp_path / "config.yaml", events=False)
    assert sc.reload_config(force=True)
    assert sc.events is None
    publisher._thread.join(5)
    assert not publisher._thread.is_alive()
    fail(sc, "ls /c", 3)
    time.sleep(0.2)
    assert len(api.requests) == 1
    assert len(sc.rows()[0].notes) == 3
    # The counter keeps its value (a counter never goes backwards) while Events are off.
    assert events_total(sc) == {"created": 1.0}


def test_check_off_means_no_events_thread(tmp_path, api, pod_env, sidecars) -> None:
    """``events: true`` with the check off (C14) starts nothing."""
    cfg = tmp_path / "config.yaml"
    cfg.write_text("repeat_failure:\n  enabled: false\n  events: true\n")
    sc = Sidecar(tmp_path / "shared", [AgentSpec("a1", "bash")], cfg,
                 events_configuration=api.configuration)
    sidecars.append(sc)
    assert sc.events is None


# -- the queue and the publisher --------------------------------------------------------------


def test_full_queue_drops_and_never_blocks(api, pod_env) -> None:
    """A stuck API server holds only the Events thread: publish() returns at once, Events past
    the bounded queue are counted ``dropped``, and the rest are created once the server
    answers again."""
    api.gate = threading.Event()
    stats = EventStats()
    publisher = EventPublisher(stats, api.configuration, queue_size=5,
                               limit=RateLimit(burst=100)).start()
    try:
        started = time.monotonic()
        publisher.publish("a1", "bash", "Repeating failure: x failed 3 times in 1 min (exit 1)",
                          T0)
        deadline = time.monotonic() + 10
        while not api.requests and time.monotonic() < deadline:
            time.sleep(0.01)  # the first Event is now in flight, held by the server
        for i in range(20):
            publisher.publish("a1", "bash", f"Repeating failure: y{i} failed 3 times in 1 min "
                              "(exit 1)", T0)
        assert time.monotonic() - started < 5
        assert stats.counts("a1") == {"dropped": 15}
        api.gate.set()
        assert publisher.wait_idle(15)
        assert stats.counts("a1", all_outcomes=True) == {"created": 6, "failed": 0,
                                                         "dropped": 15, "suppressed": 0}
        # A dropped Event was not sent: its note is not held back, and its token came back.
        publisher.publish("a1", "bash", "Repeating failure: y19 failed 4 times in 1 min "
                          "(exit 1)", T0)
        assert publisher.wait_idle(15)
        assert stats.counts("a1")["created"] == 7
    finally:
        publisher.close(timeout=5)


def test_close_counts_queued_events_dropped(api, pod_env) -> None:
    """Events still queued when Events are turned off are counted ``dropped``, not sent."""
    api.gate = threading.Event()
    stats = EventStats()
    publisher = EventPublisher(stats, api.configuration, queue_size=10).start()
    publisher.publish("a1", "bash", "m", T0)
    deadline = time.monotonic() + 10
    while not api.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    for i in range(3):
        publisher.publish("a1", "bash", f"m{i}", T0)
    publisher.close(timeout=0.0)
    api.gate.set()
    publisher.close(timeout=10)
    assert not publisher._thread.is_alive()
    assert stats.counts("a1") == {"created": 1, "dropped": 3}
    assert len(api.requests) == 1


def test_event_body_respects_api_limits() -> None:
    """A pod name of 253 characters and a message over 1024 bytes still make an Event the API
    server accepts: name ≤ 253 and a DNS subdomain, reportingInstance ≤ 128, message ≤ 1024
    bytes (cut, ending in ``…``)."""
    pod = PodRef("p" * 240 + "-" + "q" * 12, "ns")
    body = event_body(pod, "é" * 800, T0, "a1", "bash")
    assert api_server_errors("ns", body) == []
    assert len(body["metadata"]["name"]) <= 253
    assert body["reportingInstance"] == pod.name[:128]
    assert len(body["message"].encode()) <= 1024 and body["message"].endswith("…")
    assert "uid" not in body["involvedObject"]


def test_failure_reasons() -> None:
    """API errors and transport failures map to the reasons logged once each."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import (MaxRetryError, NewConnectionError, ProtocolError,
                                    ReadTimeoutError)

    assert failure_reason(ApiException(status=403)) == ("forbidden", 403)
    assert failure_reason(ApiException(status=401)) == ("unauthorized", 401)
    assert failure_reason(ApiException(status=404)) == ("not_found", 404)
    assert failure_reason(ApiException(status=422)) == ("invalid", 422)
    assert failure_reason(ApiException(status=429)) == ("throttled", 429)
    assert failure_reason(ApiException(status=500)) == ("server_error", 500)
    assert failure_reason(ApiException(status=504)) == ("server_error", 504)
    assert failure_reason(ApiException(status=409)) == ("http_409", 409)
    assert failure_reason(ApiException(status=0, reason="SSLError")) == ("tls", None)
    refused = NewConnectionError(None, "refused")
    assert failure_reason(MaxRetryError(None, "/x", refused)) == ("unreachable", None)
    assert failure_reason(ReadTimeoutError(None, "/x", "slow")) == ("timeout", None)
    assert failure_reason(MaxRetryError(None, "/x", ReadTimeoutError(None, "/x", "t"))) == (
        "timeout", None)
    assert failure_reason(ProtocolError("reset")) == ("unreachable", None)
    assert failure_reason(ConnectionRefusedError()) == ("unreachable", None)
    assert failure_reason(ValueError("bug")) == ("error", None)


def test_pod_ref_from_env() -> None:
    """POD_NAME and POD_NAMESPACE are both needed; POD_UID is optional."""
    assert PodRef.from_env({"POD_NAME": "p", "POD_NAMESPACE": "n"}) == PodRef("p", "n", None)
    assert PodRef.from_env({"POD_NAME": "p", "POD_NAMESPACE": "n", "POD_UID": "u"}).uid == "u"
    assert PodRef.from_env({"POD_NAME": "p"}) is None
    assert PodRef.from_env({"POD_NAME": "", "POD_NAMESPACE": "n"}) is None


# -- rate limits --------------------------------------------------------------------------------


def test_rate_limit_same_note_once_per_ten_minutes() -> None:
    """Per (agent, note key): allowed, then held back until exactly SUPPRESS_S (600 s) later;
    another agent's note of the same command is its own."""
    clock = Clock(0.0)
    limit = RateLimit(clock=clock)
    assert limit.allow("a1", "k")
    clock.t = 599.999
    assert not limit.allow("a1", "k")
    assert limit.allow("a2", "k")
    clock.t = 600.0
    assert limit.allow("a1", "k")
    assert not limit.allow("a1", "k")


def test_rate_limit_token_bucket_exact() -> None:
    """All agents share one bucket: 10 Events at once, then one per 10 s (a partial token is
    no token); a held-back note is not remembered as sent, and ``undo`` gives the token back."""
    clock = Clock(0.0)
    limit = RateLimit(clock=clock)
    assert [limit.allow(f"a{i % 2}", f"n{i}") for i in range(12)] == [True] * 10 + [False] * 2
    clock.t = 9.9
    assert not limit.allow("a1", "n10")
    clock.t = 10.0
    assert limit.allow("a1", "n10") and not limit.allow("a1", "n11")
    clock.t = 35.0  # 2.5 tokens
    assert [limit.allow("a1", f"m{i}") for i in range(3)] == [True, True, False]
    limit.undo("a1", "m1")
    assert limit.allow("a1", "m1") and not limit.allow("a1", "m2")
    clock.t = 10_000.0  # refilled, but never past the burst
    assert sum(limit.allow("a3", f"x{i}") for i in range(20)) == 10
    assert len(limit._sent) == 10  # notes sent more than 600 s ago are forgotten


def test_note_key_ignores_count_minutes_and_exit() -> None:
    """The per-note limit keys on the command: count, minutes and exit vary between raises."""
    assert note_key("Repeating failure: ls /x failed 5 times in 8 min (exit 2)") == (
        note_key("Repeating failure: ls /x failed 12 times in 1 min (failed)")) == (
        "Repeating failure: ls /x")
    assert note_key("Repeating failure: ls /y failed 5 times in 8 min (exit 2)") != note_key(
        "Repeating failure: ls /x failed 5 times in 8 min (exit 2)")
    assert note_key("m") == "m"


def test_flood_of_distinct_notes_is_rate_limited(api, pod_env) -> None:
    """25 distinct notes at once: 10 Events (the burst), 15 ``suppressed``; 10 s later one more
    gets through, and the same 25 again within 600 s add only suppressed counts."""
    clock = Clock(0.0)
    stats = EventStats()
    publisher = EventPublisher(stats, api.configuration, limit=RateLimit(clock=clock)).start()
    try:
        notes = [f"Repeating failure: cmd {i} failed 3 times in 1 min (exit 1)" for i in range(25)]
        for note in notes:
            publisher.publish("a1", "bash", note, T0)
        assert publisher.wait_idle(15)
        assert stats.counts("a1", all_outcomes=True) == {"created": 10, "failed": 0,
                                                         "dropped": 0, "suppressed": 15}
        clock.t = 10.0
        for note in notes:
            publisher.publish("a1", "bash", note, T0 + 10)
        assert publisher.wait_idle(15)
        assert stats.counts("a1", all_outcomes=True) == {"created": 11, "failed": 0,
                                                         "dropped": 0, "suppressed": 39}
        assert [json.loads(r[3])["message"] for r in api.requests] == notes[:11]
    finally:
        publisher.close(timeout=5)
