"""The preview probe in the sidecar (issue 8; seed ard-0038 §3, §4): after a turn that edited
files, the agent's preview URL is probed once, off the pipeline's thread, and the outcome is
exported, logged (scrubbed) and, with Events on, made a ``PreviewError`` Event.

The probe itself (outcomes against a real server) is tests/test_probe.py. Here the turns are
Claude Code's real ``ok`` verdict capture (harness/evidence/claude/verdict/ok): as captured
(a Bash call: no file edited) and with its tool call renamed ``Write`` (the turn edited a file),
against a real HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from harness.evidence import primary
from repeat_failure.sidecar.app import Sidecar
from repeat_failure.config import AgentSpec
from repeat_failure.events import PREVIEW_REASON
from repeat_failure.sidecar.exporter import MetricsCollector
from tests.waiting import free_port

REPO = Path(__file__).resolve().parent.parent
EVIDENCE_DIR = primary()
CAPTURE = EVIDENCE_DIR / "claude" / "verdict" / "ok"
PAGES = {
    "/good/": b'<!doctype html><script type="module" src="/good/app.js"></script><p>hi</p>',
    "/good/app.js": b"console.log(1)",
    "/blank/": b"",
}


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        path = self.path.split("?", 1)[0]
        self.server.seen.append(path)  # before answering: the probe may finish right after
        body = PAGES.get(path)
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Length", str(len(body or b"")))
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.seen = []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _session(edit: bool) -> tuple[str, bytes]:
    data = json.loads((EVIDENCE_DIR / "claude.json").read_text())
    [rel] = data["verdict_scenarios"]["ok"]["session_files"]
    text = (CAPTURE / rel).read_text()
    if edit:
        # the turn's one tool call (an assistant line's tool_use block) becomes a file edit
        lines = [json.loads(line) for line in text.splitlines()]
        calls = [block for line in lines if line.get("type") == "assistant"
                 for block in line["message"]["content"] if block.get("type") == "tool_use"]
        assert [c["name"] for c in calls] == ["Bash"]
        calls[0]["name"] = "Write"
        text = "".join(json.dumps(line) + "\n" for line in lines)
    return rel, text.encode()


def _sidecar(tmp_path: Path, preview_url: str | None, edit: bool = True,
             events: bool = False) -> Sidecar:
    rel, data = _session(edit)
    home = tmp_path / "home"
    (home / rel).parent.mkdir(parents=True)
    (home / rel).write_bytes(data)
    config = tmp_path / "config.yaml"
    config.write_text("repeat_failure:\n  enabled: true\n  collect_grace_s: 0.5\n"
                      "  preview_timeout_s: 2\n")
    return Sidecar(tmp_path / "shared", [AgentSpec("a1", "claude", str(home),
                                                   preview_url=preview_url)], config)


def _metrics(sidecar: Sidecar) -> list[str]:
    registry = CollectorRegistry()
    registry.register(MetricsCollector(sidecar))
    return [line for line in generate_latest(registry).decode().splitlines()
            if line.startswith("hive_agent_preview")]


def _run(sidecar: Sidecar) -> None:
    sidecar.run_once()
    assert sidecar.prober.wait_idle(10)


def test_a_blank_entry_after_an_edit_is_a_preview_error(tmp_path, server, log_stream):
    url = f"http://127.0.0.1:{server.server_port}/blank/"
    sidecar = _sidecar(tmp_path, url)
    _run(sidecar)
    assert server.seen == ["/blank/"]
    assert _metrics(sidecar) == [
        'hive_agent_preview_probes_total{agent="a1",backend="claude"} 1.0',
        'hive_agent_preview_errors_total{agent="a1",backend="claude",outcome="preview_error",'
        'reason="entry_status"} 0.0',
        'hive_agent_preview_errors_total{agent="a1",backend="claude",outcome="preview_error",'
        'reason="entry_empty"} 1.0',
        'hive_agent_preview_errors_total{agent="a1",backend="claude",outcome="preview_error",'
        'reason="asset_broken"} 0.0',
        'hive_agent_preview_errors_total{agent="a1",backend="claude",outcome="server_down",'
        'reason="unreachable"} 0.0',
        'hive_agent_preview_errors_total{agent="a1",backend="claude",outcome="server_down",'
        'reason="timeout"} 0.0',
        'hive_agent_preview_state{agent="a1",backend="claude",state="ok"} 0.0',
        'hive_agent_preview_state{agent="a1",backend="claude",state="preview_error"} 1.0',
        'hive_agent_preview_state{agent="a1",backend="claude",state="server_down"} 0.0',
    ]
    [line] = [json.loads(x) for x in log_stream.getvalue().splitlines()
              if json.loads(x).get("event") == "preview_error"]
    assert {k: line[k] for k in ("level", "msg", "agent", "backend", "url", "outcome", "reason",
                                 "status")} == {
        "level": "warning", "msg": "preview error", "agent": "a1", "backend": "claude",
        "url": url, "outcome": "preview_error", "reason": "entry_empty", "status": 200}


def test_a_good_preview_is_ok_and_counts_no_error(tmp_path, server):
    sidecar = _sidecar(tmp_path, f"http://127.0.0.1:{server.server_port}/good/")
    _run(sidecar)
    assert server.seen == ["/good/", "/good/app.js"]
    lines = _metrics(sidecar)
    assert 'hive_agent_preview_probes_total{agent="a1",backend="claude"} 1.0' in lines
    assert 'hive_agent_preview_state{agent="a1",backend="claude",state="ok"} 1.0' in lines
    assert [x for x in lines if "errors_total" in x and not x.endswith(" 0.0")] == []


def test_a_turn_that_edited_nothing_is_not_probed(tmp_path, server):
    sidecar = _sidecar(tmp_path, f"http://127.0.0.1:{server.server_port}/good/", edit=False)
    _run(sidecar)
    assert server.seen == []
    assert 'hive_agent_preview_probes_total{agent="a1",backend="claude"} 0.0' in _metrics(sidecar)
    assert not [x for x in _metrics(sidecar) if x.startswith("hive_agent_preview_state")]


def test_no_preview_url_means_no_probe_and_no_preview_series(tmp_path, server):
    sidecar = _sidecar(tmp_path, None)
    _run(sidecar)
    assert server.seen == [] and _metrics(sidecar) == []


def test_a_closed_port_is_server_down_and_the_url_is_logged_scrubbed(tmp_path, log_stream):
    token = "ghp_" + "K" * 36
    url = f"http://127.0.0.1:{free_port()}/?access_token={token}"
    sidecar = _sidecar(tmp_path, url)
    _run(sidecar)
    lines = _metrics(sidecar)
    assert ('hive_agent_preview_errors_total{agent="a1",backend="claude",outcome="server_down",'
            'reason="unreachable"} 1.0') in lines
    assert 'hive_agent_preview_state{agent="a1",backend="claude",state="server_down"} 1.0' in lines
    logged = log_stream.getvalue()
    assert token not in logged and '"event": "server_down"' in logged
    assert "[REDACTED]" in logged


def test_a_preview_error_makes_an_event_with_its_own_reason(tmp_path, server):
    sent = []

    class Publisher:
        def publish(self, agent, backend, message, now, reason="RepeatingFailure"):
            sent.append((agent, backend, message, reason))

        def close(self):
            pass

    url = f"http://127.0.0.1:{server.server_port}/blank/"
    sidecar = _sidecar(tmp_path, url)
    sidecar.events = Publisher()
    _run(sidecar)
    assert sent == [("a1", "claude", f"Preview error (entry_empty) at {url}: entry answered 200 "
                     "with an empty body", PREVIEW_REASON)]


def test_clearing_the_prober_drops_waiting_probes_and_one_waits_per_agent():
    from repeat_failure.turns.probe import PreviewProber

    started, release, ran, results = threading.Event(), threading.Event(), [], []

    def fake_probe(url, timeout_s):
        ran.append(url)
        started.set()
        release.wait(5)
        return url

    prober = PreviewProber(lambda agent, url, result: results.append((agent, result)),
                           probe_fn=fake_probe)
    prober.request("a1", "http://a1/", 1.0)
    assert started.wait(5)
    for n in range(50):  # a burst of turns: one probe waits per agent, the newest URL
        prober.request("a2", f"http://a2/{n}", 1.0)
        prober.request("a3", f"http://a3/{n}", 1.0)
    prober.clear()       # the check was turned off
    prober.request("a4", "http://a4/", 1.0)
    release.set()
    assert prober.wait_idle(5)
    assert ran == ["http://a1/", "http://a4/"]
    assert results == [("a1", "http://a1/"), ("a4", "http://a4/")]
    prober.close(timeout=5)
    prober.request("a5", "http://a5/", 1.0)  # after close: ignored, never raises
    assert ran == ["http://a1/", "http://a4/"]
