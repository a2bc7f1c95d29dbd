"""Issue 31, item 5: turn verdicts and the preview probe (seed ard-0038) have their own switch,
``repeat_failure.turn_health`` (on by default), independent of the repeat-failure check's
``enabled``, and the sidecar says at start-up what runs. Driven as an operator runs it:
``repeat-failure run --agent-home HOME --preview-url URL`` as a process, with the check off,
the agent's session log (Claude Code's real ``ok`` verdict capture, its tool call renamed
``Write``: a turn that edited a file) in the home, a real dev server on 127.0.0.1 serving a
blank entry, and ``/metrics`` scraped over HTTP. Before: with the check off nothing was probed,
no ``hive_agent_*`` series appeared, and nothing said why.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

from tests.test_preview import _session, server  # noqa: F401 - a pytest fixture
from tests.waiting import free_port, wait_until


def get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
        return resp.read().decode()


def agent_series(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("hive_agent_")
            and not line.startswith("hive_agent_preview_errors_total")]


def start(tmp_path: Path, config: str, preview_url: str) -> tuple[subprocess.Popen, int]:
    rel, data = _session(edit=True)
    home = tmp_path / "home"
    (home / rel).parent.mkdir(parents=True)
    (home / rel).write_bytes(data)
    (tmp_path / "config.yaml").write_text(config)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPEAT_FAILURE_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "repeat_failure", "run", "--config", str(tmp_path / "config.yaml"),
         "--shared-dir", str(tmp_path / "shared"), "--agent", "a1", "--backend", "claude",
         "--agent-home", str(home), "--preview-url", preview_url,
         "--listen", f"127.0.0.1:{port}"],
        env=env, stderr=subprocess.PIPE, text=True)

    def up() -> bool:
        try:
            return get(port, "/healthz") == "ok\n"
        except OSError:
            return False

    wait_until(up)
    return proc, port


def stop(proc: subprocess.Popen) -> list[dict]:
    """Stop the sidecar; its JSON log lines."""
    proc.terminate()
    _, err = proc.communicate(timeout=10)
    return [json.loads(line) for line in err.splitlines() if line.startswith("{")]


def test_with_the_check_off_turns_get_verdicts_and_the_preview_is_probed(tmp_path, server):  # noqa: F811
    url = f"http://127.0.0.1:{server.server_port}/blank/"
    proc, port = start(tmp_path, "repeat_failure:\n  enabled: false\n", url)
    try:
        probed = 'hive_agent_preview_probes_total{agent="a1",backend="claude"} 1.0'
        text = wait_until(lambda: t if probed in (t := get(port, "/metrics")) else None)
    finally:
        lines = stop(proc)
    assert server.seen == ["/blank/"]
    assert agent_series(text) == [
        'hive_agent_turns_total{agent="a1",backend="claude",verdict="ok"} 1.0',
        'hive_agent_turns_total{agent="a1",backend="claude",verdict="agent_error"} 0.0',
        'hive_agent_turns_total{agent="a1",backend="claude",verdict="nonzero_exit"} 0.0',
        'hive_agent_turns_total{agent="a1",backend="claude",verdict="agent_no_output"} 0.0',
        'hive_agent_turn_verdict{agent="a1",backend="claude",verdict="ok"} 1.0',
        'hive_agent_turn_verdict{agent="a1",backend="claude",verdict="agent_error"} 0.0',
        'hive_agent_turn_verdict{agent="a1",backend="claude",verdict="nonzero_exit"} 0.0',
        'hive_agent_turn_verdict{agent="a1",backend="claude",verdict="agent_no_output"} 0.0',
        'hive_agent_consecutive_failed_turns{agent="a1",backend="claude"} 0.0',
        probed,
        'hive_agent_preview_state{agent="a1",backend="claude",state="ok"} 0.0',
        'hive_agent_preview_state{agent="a1",backend="claude",state="preview_error"} 1.0',
        'hive_agent_preview_state{agent="a1",backend="claude",state="server_down"} 0.0',
    ]
    # The check stays off (C14): no hook rendered, no check state.
    assert list((tmp_path / "shared" / "hook").iterdir()) == []
    assert "hive_repeat_failure_check_state{" not in text
    [runs] = [line for line in lines if line.get("event") == "what_runs"]
    assert (runs["msg"], runs["check"], runs["turn_health"], runs["turn_verdicts"],
            runs["preview_probe"]) == (
        "repeat-failure check off (repeat_failure.enabled); turn verdicts on for a1; "
        "preview probe on for a1", False, True, ["a1"], ["a1"])


def test_turn_health_off_probes_nothing_and_says_why(tmp_path, server):  # noqa: F811
    url = f"http://127.0.0.1:{server.server_port}/blank/"
    proc, port = start(tmp_path, "repeat_failure:\n  enabled: true\n  turn_health: false\n", url)
    try:
        text = wait_until(lambda: t if "hive_repeat_failure_check_state{" in
                          (t := get(port, "/metrics")) else None)
    finally:
        lines = stop(proc)
    assert server.seen == [] and agent_series(text) == []
    assert [(line["msg"], line["turn_verdicts"]) for line in lines
            if line.get("event") == "what_runs"] == [
        ("repeat-failure check on (repeat_failure.enabled); turn verdicts and preview probe off "
         "(repeat_failure.turn_health)", [])]
    assert [(line["level"], line["agents"]) for line in lines
            if line.get("event") == "preview_probe_off"] == [("warning", ["a1"])]
