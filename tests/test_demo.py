"""`repeat-failure demo`: the README's first command shows a note appear and clear."""

from __future__ import annotations

import subprocess
import sys


def test_demo_shows_note_appear_and_clear() -> None:
    """The demo (short window) raises both notes, clears one by success and one by expiry."""
    done = subprocess.run([sys.executable, "-m", "repeat_failure", "demo", "--window", "3"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "message=Repeating failure: ls /nonexistent failed 5 times in 1 min (exit 2)" in out
    assert ("message=Repeating failure: test -e build.ok failed 5 times in 1 min (exit 1) "
            "(+1 other)") in out  # one other: DESIGN.md "Metrics"
    assert ('(the note\'s M in "failed N times in M min" is the minutes from the first to the '
            'last of those N failures, rounded up and at least 1: these came within a second, so '
            'they read "1 min"; the window, 3 s here, decides which failures count)') in out
    assert ('hive_repeat_failure_note{agent="demo-agent",backend="bash",'
            'command="ls /nonexistent",exit="2",output="unknown"} 6.0') in out
    assert "gh pr checks" not in "".join(ln for ln in out.splitlines() if ln.startswith("  hive_"))
    assert out.rstrip().endswith("demo done: both notes appeared and cleared.")
    assert "message=(no note)" in out.split("3 s without a new failure", 1)[1]
    assert '"event": "note_raised"' in done.stderr
