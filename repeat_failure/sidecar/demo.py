"""``repeat-failure demo``: the whole path on one machine, with real bash and real files.

Starts the sidecar (check on) on a temporary shared directory, then plays an agent that runs
each command with ``bash -c`` under the rendered hook, exactly as a backend would:
``ls /nonexistent`` six times (a note appears), an excluded waiting loop (``gh pr checks``, no
note), a second repeating failure that a success then clears, and finally waits for the first
note's failures to leave the (short) window. Each time the dashboard row or the note metrics
change, it prints them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from repeat_failure.sidecar import hook
from repeat_failure.sidecar.app import Sidecar
from repeat_failure.config import AgentSpec
from repeat_failure.sidecar.exporter import Server

AGENT, BACKEND = "demo-agent", "bash"
_SHOWN = ("hive_repeat_failure_note{", "hive_repeat_failure_row_info{",
          "hive_repeat_failure_command_failures{")


def _scrape(port: int) -> list[str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return [line for line in text.splitlines() if line.startswith(_SHOWN)]


class _Screen:
    def __init__(self, sidecar: Sidecar, port: int) -> None:
        self.sidecar, self.port = sidecar, port
        self._last: tuple | None = None

    def show(self, step: str) -> None:
        rows = self.sidecar.rows()
        row = rows[0]
        metrics = _scrape(self.port)
        view = (row.state, row.message, tuple(metrics))
        if view == self._last:
            return
        self._last = view
        print(f"\n--- after {step}")
        print(f"row: agent={row.agent} backend={row.backend} state={row.state}"
              f" message={row.message or '(no note)'}")
        for line in metrics:
            print(f"  {line}")
        sys.stdout.flush()


def _wait_for(sidecar: Sidecar, records: int, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        view = sidecar.snapshot()[0]
        if sum(view.records.values()) >= records:
            return
        time.sleep(0.02)
    raise RuntimeError(f"the sidecar did not see {records} records within {timeout} s")


def run_demo(serve: bool = False, listen: str = "127.0.0.1:0", window_s: float = 15.0) -> int:
    """Run the demo; returns 0 when the note appeared and cleared as expected, 1 otherwise.

    ``window_s`` shortens the window so the expiry is seen in seconds; ``serve`` keeps the
    endpoint up afterwards until Ctrl-C.
    """
    with tempfile.TemporaryDirectory(prefix="repeat-failure-demo-") as tmp:
        shared = Path(tmp) / "shared"
        work = Path(tmp) / "work"
        work.mkdir()
        config = Path(tmp) / "config.yaml"
        config.write_text(
            "repeat_failure:\n  enabled: true\n  threshold: 5\n"
            f"  window_s: {window_s}\n  collect_interval_s: 1\n  collect_grace_s: 1\n")
        sidecar = Sidecar(shared, [AgentSpec(AGENT, BACKEND)], config)
        server = Server(sidecar, listen).start()
        stop = threading.Event()
        loop = threading.Thread(target=sidecar.run_forever, args=(stop,), daemon=True)
        loop.start()
        print(f"repeat-failure demo: shared dir {shared}, metrics on "
              f"http://127.0.0.1:{server.port}/metrics, window {window_s:g} s, threshold 5")
        env = {**os.environ, **hook.launch_env(shared, AGENT)}
        env.pop("REPEAT_FAILURE_MARK", None)
        screen = _Screen(sidecar, server.port)
        count = 0

        def agent_runs(command: str, times: int = 1) -> None:
            nonlocal count
            for _ in range(times):
                done = subprocess.run(["bash", "-c", command], cwd=work, env=env,
                                      stdin=subprocess.DEVNULL, capture_output=True)
                count += 1
                print(f"agent$ {command}    (exit {done.returncode})")
                _wait_for(sidecar, count)
                screen.show(command)

        try:
            screen.show("start")
            agent_runs("ls /nonexistent", 6)
            print(f"(the note's M in \"failed N times in M min\" is the minutes from the first to "
                  f"the last of those N failures, rounded up and at least 1: these came within a "
                  f"second, so they read \"1 min\"; the window, {window_s:g} s here, decides "
                  f"which failures count)")
            agent_runs("gh pr checks 123 --watch", 6)
            print("(gh pr checks is on the default exclusion list: it fails by design while "
                  "checks are pending, so it never counts towards a note)")
            agent_runs("test -e build.ok", 5)
            agent_runs("touch build.ok")
            agent_runs("test -e build.ok")
            print(f"\nwaiting for the last `ls /nonexistent` failure to leave the {window_s:g} s "
                  "window ...")
            deadline = time.monotonic() + window_s + 5
            while sidecar.rows()[0].notes and time.monotonic() < deadline:
                time.sleep(0.2)
            screen.show(f"{window_s:g} s without a new failure")
            ok = not sidecar.rows()[0].notes and sidecar.snapshot()[0].notes_raised == 2
            print("\ndemo " + ("done: both notes appeared and cleared." if ok
                               else "FAILED: a note did not behave as expected."))
            if serve:
                print(f"serving http://127.0.0.1:{server.port}/metrics until Ctrl-C")
                try:
                    while True:
                        time.sleep(3600)
                except KeyboardInterrupt:
                    pass
            return 0 if ok else 1
        finally:
            stop.set()
            loop.join(timeout=5)
            server.stop()
