"""The injected sidecar's startup probe, ``GET /startupz`` (issue 29 item 2): it passes only
once the agent's hook file is rendered and ``records/`` can be written, so a native sidecar's
startup probe holds the agent container until the first command can be recorded; and the
``process_*`` series of the sidecar and the fixloop (issue 29 item 3)."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from repeat_failure.config import AgentSpec
from repeat_failure.sidecar import hook
from repeat_failure.sidecar.app import Sidecar
from repeat_failure.sidecar.exporter import Server
from waiting import free_port, wait_until


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def sidecar(tmp_path: Path, enabled: bool) -> Sidecar:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"repeat_failure:\n  enabled: {str(enabled).lower()}\n")
    return Sidecar(tmp_path / "shared", [AgentSpec("a1", "bash"), AgentSpec("b2", "bash")], cfg)


def test_startupz_waits_for_the_hook_and_a_writable_records_dir(tmp_path: Path) -> None:
    """200 once both agents' hooks are rendered and records/ is writable; 503 naming what is
    missing otherwise."""
    sc = sidecar(tmp_path, enabled=True)
    server = Server(sc, "127.0.0.1:0").start()
    try:
        assert get(server.port, "/startupz") == (200, "ok\n")
        hook.hook_path(sc.shared_dir, "b2").unlink()
        assert get(server.port, "/startupz") == (503, "hook not rendered yet for agent b2\n")
        hook.render(sc.shared_dir, "b2", "bash", None)
        records = sc.shared_dir / hook.RECORDS_DIR
        mode = records.stat().st_mode
        os.rename(records, tmp_path / "aside")
        assert get(server.port, "/startupz") == (
            503, f"{records} is not a writable directory yet\n")
        os.rename(tmp_path / "aside", records)
        if os.geteuid() != 0:  # root may write whatever the mode says
            records.chmod(0o500)
            assert get(server.port, "/startupz")[0] == 503
            records.chmod(mode)
        assert get(server.port, "/startupz") == (200, "ok\n")
    finally:
        server.stop()


def test_startupz_passes_with_the_check_off(tmp_path: Path) -> None:
    """The check off renders no hook, and the agent must still start: 200."""
    sc = sidecar(tmp_path, enabled=False)
    assert not hook.hook_path(sc.shared_dir, "a1").exists()
    server = Server(sc, "127.0.0.1:0").start()
    try:
        assert get(server.port, "/startupz") == (200, "ok (check off)\n")
    finally:
        server.stop()


def test_the_sidecar_process_exports_process_series(tmp_path: Path) -> None:
    """`repeat-failure run` serves process_* (CPU, memory, descriptors) beside its own series,
    and /startupz answers 200 as soon as it serves at all (the hook is rendered before)."""
    config = tmp_path / "config.yaml"
    config.write_text("repeat_failure:\n  enabled: true\n")
    port = free_port()
    env = {**os.environ, "REPEAT_FAILURE_AGENT": "a1", "REPEAT_FAILURE_BACKEND": "bash"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "repeat_failure", "run", "--config", str(config), "--shared-dir",
         str(tmp_path / "shared"), "--listen", f"127.0.0.1:{port}"],
        env=env, stderr=subprocess.DEVNULL)
    try:
        def answer() -> tuple[int, str] | None:
            try:
                return get(port, "/startupz")
            except OSError:
                return None
        assert wait_until(answer) == (200, "ok\n")
        status, text = get(port, "/metrics")
        names = {line.split(" ")[0] for line in text.splitlines() if line[:1] != "#"}
        assert status == 200
        assert {"process_resident_memory_bytes", "process_cpu_seconds_total",
                "process_open_fds", "process_start_time_seconds"} <= names
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_fixloop_registry_has_process_series(tmp_path: Path) -> None:
    """The fix-loop service's /metrics registry carries process_* too."""
    from prometheus_client import generate_latest

    from fakegithub import FakeGitHub
    from test_fixloop_rules import start

    with FakeGitHub(token="test-token") as gh:
        _, fixloop = start(tmp_path, gh)
        text = generate_latest(fixloop.registry).decode()
        fixloop.ledger.close()
    names = {line.split(" ")[0] for line in text.splitlines() if line[:1] != "#"}
    assert {"process_resident_memory_bytes", "process_cpu_seconds_total"} <= names
