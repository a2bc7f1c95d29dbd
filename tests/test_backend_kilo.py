"""Kilo Code CLI's shells (spec C7, C8, C-AC1), on the harness's real records.

Kilo Code CLI 7.7.7 (an opencode fork) runs its ``bash`` tool as ``$SHELL -c <cmd>`` with the
agent's command as is: no wrapper and no helper shells of its own, so every record is an agent
command, byte for byte, and ``kilo`` needs no wrapper stripper.
"""

from __future__ import annotations

import json
from pathlib import Path

from sidecar.backends import wrapper_stripper
from sidecar.normalize import normalize

REPO = Path(__file__).resolve().parent.parent
EVIDENCE = json.loads((REPO / "harness" / "evidence" / "kilo.json").read_text())
RECORDS = [r for run in EVIDENCE["runs"] for r in run["records"]]
EXITS = {"ls /nonexistent": 2, "false": 1, "echo harness-ok": 0}


def test_evidence_is_a_real_kilo_run() -> None:
    """The evidence comes from the pinned CLI, whose own --version output it keeps."""
    assert (EVIDENCE["package"], EVIDENCE["version"]) == ("@kilocode/cli", "7.7.7")
    assert EVIDENCE["version_output"] == "7.7.7"


def test_every_command_is_recorded_once_per_request() -> None:
    """C-AC1: each run's command appears as a record whose normalized form is the bare command,
    once per time the stub asked for it, with the command's real exit status."""
    for run in EVIDENCE["runs"]:
        got = [(normalize(r["raw"], "kilo"), r["exit"]) for r in run["records"]]
        assert got == [(run["command"], EXITS[run["command"]])] * run["repeat"], run["command"]


def test_failing_and_succeeding_runs() -> None:
    """`ls /nonexistent` exit 2 and `false` exit 1 once each; `echo harness-ok` exit 0."""
    first, second, third = EVIDENCE["runs"][:3]
    assert [(normalize(r["raw"], "kilo"), r["exit"]) for r in first["records"]] == \
        [("ls /nonexistent", 2)]
    assert [(normalize(r["raw"], "kilo"), r["exit"]) for r in second["records"]] == \
        [("false", 1)]
    assert [(normalize(r["raw"], "kilo"), r["exit"]) for r in third["records"]] == \
        [("echo harness-ok", 0)]


def test_repeat_raised_the_note() -> None:
    """The five repeats of `ls /nonexistent` raised the note in the real sidecar pipeline."""
    assert EVIDENCE["runs"][-1]["note"] == \
        "Repeating failure: ls /nonexistent failed 5 times in 1 min (exit 2)"


def test_no_wrapper_and_no_helper_shells() -> None:
    """The raw text is the bare command (nothing to strip, no helper shell recorded)."""
    assert wrapper_stripper("kilo") is None
    commands = {run["command"] for run in EVIDENCE["runs"]}
    assert {r["raw"] for r in RECORDS} <= commands
    assert all(normalize(r["raw"], "kilo") == r["raw"] for r in RECORDS)
    assert not any(r["cut"] for r in RECORDS)


def test_session_store_exported() -> None:
    """The session store is SQLite; the harness keeps every row as JSON lines, and the bash tool
    parts carry the command and its exit status."""
    assert EVIDENCE["session_files"] == [".local/share/kilo/kilo.db"]
    export = REPO / "harness" / "evidence" / "kilo" / ".local/share/kilo/kilo.db.jsonl"
    rows = [json.loads(line) for line in export.read_text().splitlines()]
    parts = [json.loads(r["row"]["data"]) for r in rows if r["table"] == "part"]
    bash = [(p["state"]["input"]["command"], p["state"]["metadata"]["exit"]) for p in parts
            if p.get("tool") == "bash" and p.get("state", {}).get("status") == "completed"]
    assert bash == [("ls /nonexistent", 2)] * 5
