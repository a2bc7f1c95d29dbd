"""End to end: `repeat-failure run` as a process, real `bash -c` under the rendered hook,
/metrics scraped over HTTP on loopback, checked by promtool."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from repeat_failure.sidecar import hook
from waiting import free_port, wait_until


def get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
        return resp.read().decode()


@pytest.fixture
def sidecar(tmp_path: Path):
    """A running `python -m repeat_failure run` with the check on, and its port."""
    config = tmp_path / "config.yaml"
    config.write_text("repeat_failure:\n  enabled: true\n  collect_interval_s: 1\n"
                      "  collect_grace_s: 0.5\n")
    shared = tmp_path / "shared"
    port = free_port()
    env = {**os.environ, "REPEAT_FAILURE_AGENT": "a1", "REPEAT_FAILURE_BACKEND": "bash"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "repeat_failure", "run", "--config", str(config), "--shared-dir",
         str(shared), "--listen", f"127.0.0.1:{port}"],
        env=env, stderr=subprocess.PIPE, text=True)

    def up() -> bool:
        try:
            return get(port, "/healthz") == "ok\n"
        except OSError:
            return False

    wait_until(up)
    yield shared, port, config, proc
    proc.terminate()
    proc.wait(timeout=10)


def run_agent_command(shared: Path, command: str) -> int:
    env = {"PATH": os.environ["PATH"], "HOME": str(shared.parent),
           **hook.launch_env(shared, "a1", {})}
    return subprocess.run(["bash", "-c", command], env=env, capture_output=True).returncode


def test_five_real_failures_reach_metrics(sidecar) -> None:
    """`bash -c 'ls /nonexistent'` ×5 → note 5 and the row message on /metrics and /status."""
    shared, port, _, _ = sidecar
    assert [run_agent_command(shared, "ls /nonexistent") for _ in range(5)] == [2] * 5
    note = ('hive_repeat_failure_note{agent="a1",backend="bash",command="ls /nonexistent",'
            'exit="2",output="unknown"} 5.0')
    text = wait_until(lambda: t if note in (t := get(port, "/metrics")) else None)
    message = "Repeating failure: ls /nonexistent failed 5 times in 1 min (exit 2)"
    assert ('hive_repeat_failure_row_info{agent="a1",backend="bash",command="ls /nonexistent",'
            'exit="2",state="on",state_text=""} 1.0') in text.splitlines()
    assert ('hive_repeat_failure_records_total{agent="a1",backend="bash",outcome="failure",'
            'route="bash_env"} 5.0') in text.splitlines()
    body = get(port, "/status")
    assert body.endswith("}\n") and body.count("\n") == 1  # the shell prompt starts a new line
    (row,) = json.loads(body)["rows"]
    assert (row["state"], row["message"], row["notes"][0]["count"]) == ("on", message, 5)
    wait_until(lambda: list((shared / "records").iterdir()) == [])  # after the 0.5 s grace


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian prometheus) missing")
def test_promtool_accepts_the_scrape(sidecar, tmp_path: Path) -> None:
    """`promtool check metrics` reports nothing on a scrape with every family present."""
    shared, port, _, _ = sidecar
    for _ in range(5):
        run_agent_command(shared, "false")
    wait_until(lambda: "hive_repeat_failure_note{" in get(port, "/metrics"))
    scrape = get(port, "/metrics")
    done = subprocess.run(["promtool", "check", "metrics"], input=scrape, capture_output=True,
                          text=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_config_turned_off_while_running(sidecar) -> None:
    """C14: editing the config to off removes the hook file and the check-state series without a
    restart."""
    shared, port, config, _ = sidecar
    assert hook.hook_path(shared, "a1").is_file()
    config.write_text("repeat_failure:\n  enabled: false\n")
    wait_until(lambda: not hook.hook_path(shared, "a1").exists())
    wait_until(lambda: "hive_repeat_failure_check_state{" not in get(port, "/metrics"))
    assert json.loads(get(port, "/status")) == {"rows": []}


def test_unknown_path_is_404(sidecar) -> None:
    """Unknown paths answer 404 naming the valid ones."""
    _, port, _, _ = sidecar
    with pytest.raises(urllib.error.HTTPError) as err:
        get(port, "/nope")
    assert err.value.code == 404


def test_sigterm_exits_cleanly(sidecar) -> None:
    """SIGTERM stops the sidecar with exit 0 and leaves the hook file in place."""
    shared, _, _, proc = sidecar
    proc.terminate()
    assert proc.wait(timeout=10) == 0
    assert hook.hook_path(shared, "a1").is_file()


def test_bad_config_exits_2(tmp_path: Path) -> None:
    """`run` with an invalid config exits 2 with the reason naming the key."""
    config = tmp_path / "c.yaml"
    config.write_text("repeat_failure:\n  window_s: -1\n")
    done = subprocess.run(
        [sys.executable, "-m", "repeat_failure", "run", "--config", str(config), "--shared-dir",
         str(tmp_path / "s"), "--agent", "a1", "--backend", "bash", "--listen", "127.0.0.1:0"],
        capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert done.stderr == (f"repeat-failure: {config}: repeat_failure.window_s: must be greater "
                           "than 0\n")


def test_hook_env_prints_exports(tmp_path: Path) -> None:
    """`hook env` prints BASH_ENV, SHELL and SHLVL; nothing when the check is off."""
    on = tmp_path / "on.yaml"
    on.write_text("repeat_failure:\n  enabled: true\n")
    env = {k: v for k, v in os.environ.items() if k != "SHLVL"}
    cmd = [sys.executable, "-m", "repeat_failure", "hook", "env", "--shared-dir", "/srv/rf",
           "--agent", "a1", "--config"]
    done = subprocess.run(cmd + [str(on)], capture_output=True, text=True, env=env)
    assert done.stdout == ("export BASH_ENV=/srv/rf/hook/a1.sh\nexport SHELL=/bin/bash\n"
                           "export SHLVL=1\n")
    off = tmp_path / "off.yaml"
    off.write_text("repeat_failure:\n  enabled: false\n")
    done = subprocess.run(cmd + [str(off)], capture_output=True, text=True, env=env)
    assert (done.returncode, done.stdout) == (0, "")


def test_scrapes_answered_while_a_large_file_is_collected(sidecar) -> None:
    """/metrics keeps answering while the sidecar works through a large record file (it takes
    the file in slices and lets scrapes in between)."""
    import orjson

    shared, port, _, _ = sidecar
    now = time.time()
    line = orjson.dumps({"v": 1, "ts": now - 30, "agent": "a1", "backend": "bash",
                         "route": "bash_env", "exit": 1, "cmd": "make " + "x" * 100}) + b"\n"
    hook.records_path(shared, "a1").write_bytes(line * 60_000)
    for _ in range(3):
        assert "hive_repeat_failure" in get(port, "/metrics")  # urlopen's timeout is 5 s
    wait_until(lambda: 'outcome="failure",route="bash_env"} 60000.0' in get(port, "/metrics"),
               timeout=60)
