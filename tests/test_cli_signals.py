"""The long-running commands install their SIGTERM and SIGINT handlers before their server
answers: a SIGTERM sent as soon as `/healthz` says ok stops them cleanly (exit 0) rather than
killing them (a loaded CI machine sent one in that gap: `run` died of signal 15)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from repeat_failure import cli
from repeat_failure.sidecar.exporter import Server


class _Started(Exception):
    """Raised by the patched server start: the test has seen what it needs."""


@pytest.fixture
def restore_signals():
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def test_run_handles_sigterm_before_its_server_answers(tmp_path: Path, monkeypatch,
                                                       restore_signals) -> None:
    seen: list = []

    def start(self):
        seen.append(signal.getsignal(signal.SIGTERM))
        raise _Started

    monkeypatch.setattr(Server, "start", start)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    config = tmp_path / "config.yaml"
    config.write_text("repeat_failure:\n  enabled: true\n")
    with pytest.raises(_Started):
        cli.main(["run", "--config", str(config), "--shared-dir", str(tmp_path / "shared"),
                  "--agent", "a1", "--backend", "bash", "--listen", "127.0.0.1:0"])
    assert len(seen) == 1
    assert seen[0] not in (signal.SIG_DFL, signal.SIG_IGN, None)


def test_demo_stopped_by_sigterm_removes_its_directory(tmp_path: Path) -> None:
    """`repeat-failure demo` ended by SIGTERM, as by Ctrl-C, removes its temporary directory and
    says it stopped (exit 130); a new user's trial found /tmp/repeat-failure-demo-* left."""
    import os
    import subprocess
    import sys
    import time

    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "repeat_failure", "demo", "--listen",
                             "127.0.0.1:0"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not list(tmp_path.glob("repeat-failure-demo-*")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(list(tmp_path.glob("repeat-failure-demo-*"))) == 1
    time.sleep(1)
    proc.terminate()
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert err.endswith("demo stopped\n")
    assert list(tmp_path.glob("repeat-failure-demo-*")) == []
