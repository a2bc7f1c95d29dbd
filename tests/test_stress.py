"""Loss and crash under load (issue 6), sized for CI on 2 cores: 8 writer processes run real
`bash -c` commands through the rendered hook while the sidecar (`repeat-failure run`,
collecting every 10 ms) is killed with SIGKILL and restarted every 2 s. Afterwards every record
is counted exactly once (by the detector and by records_total), no collected file is left
behind, and the notes are those of a straight replay of the same records (each writer's command fails COMMANDS times: one note each, raised at
the last failure).

The benchmark-sized run (1,000,000 records) is not part of the test suite."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from multiprocessing import Process
from pathlib import Path

from repeat_failure.sidecar import hook
from repeat_failure.sidecar.app import Sidecar
from repeat_failure.config import AgentSpec

WRITERS = 8
COMMANDS = 400  # per writer
KILL_EVERY_S = 2.0


def writer(shared: str, index: int) -> None:
    """Run COMMANDS real failing commands through the hook, as an agent's shell tool would."""
    env = {"PATH": os.environ["PATH"], **hook.launch_env(shared, "a1", {})}
    for _ in range(COMMANDS):
        subprocess.run(["bash", "-c", f"ls /nonexistent/w{index}"], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def start_sidecar(config: Path, shared: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "repeat_failure", "run", "--config", str(config), "--shared-dir",
         str(shared), "--agent", "a1", "--backend", "bash", "--listen", "127.0.0.1:0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_sigkill_every_2_s_loses_nothing_and_counts_nothing_twice(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    config = tmp_path / "config.yaml"
    config.write_text(f"repeat_failure:\n  enabled: true\n  threshold: {COMMANDS}\n"
                      "  window_s: 86400\n  collect_interval_s: 0.01\n  collect_grace_s: 0.5\n")
    sidecar = start_sidecar(config, shared)
    deadline = time.monotonic() + 30
    while not hook.hook_path(shared, "a1").exists():
        assert time.monotonic() < deadline, "the sidecar did not render the hook"
        time.sleep(0.05)
    writers = [Process(target=writer, args=(str(shared), i)) for i in range(WRITERS)]
    for w in writers:
        w.start()
    kills = 0
    try:
        while any(w.is_alive() for w in writers):
            time.sleep(KILL_EVERY_S)
            sidecar.send_signal(signal.SIGKILL)
            sidecar.wait()
            kills += 1
            sidecar = start_sidecar(config, shared)
        for w in writers:
            w.join()
            assert w.exitcode == 0
        time.sleep(1.0)  # let the last instance collect before it is stopped
    finally:
        sidecar.send_signal(signal.SIGTERM)
        sidecar.wait(timeout=30)
    assert kills >= 2, "the run was too short to kill the sidecar mid-way"
    # A last sidecar resumes from the state file and drains whatever is left.
    final = Sidecar(shared, [AgentSpec("a1", "bash")], config)
    final.run_once()
    time.sleep(0.6)  # past the collect grace
    final.run_once()
    (view,) = final.snapshot()
    assert sorted(view.failures) == sorted(
        (f"ls /nonexistent/w{i}", 2, COMMANDS) for i in range(WRITERS))
    assert view.rejected == {}
    # Issue 17: records_total is saved with the checkpoint, so the kills count nothing twice
    # (it summed to far more than the records before), and the note is raised once each.
    assert view.records == {("bash", "bash_env", "failure"): WRITERS * COMMANDS}
    assert view.notes_raised == WRITERS
    assert sorted((n.command, n.exit, n.count) for n in final.rows()[0].notes) == sorted(
        (f"ls /nonexistent/w{i}", 2, COMMANDS) for i in range(WRITERS))
    assert sorted(p.name for p in (shared / "records").iterdir()) == []
