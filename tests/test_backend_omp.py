"""Oh My Pi on the neutral route (spec C4, C5), on the harness's real run: nothing is recorded.

omp 18.2.3 runs its ``bash`` tool's commands in an embedded shell (brush-core, in-process), never
in a ``/bin/bash``, so ``BASH_ENV`` is never read and the route writes no record; omp is not
covered by it. Its own session log does carry each command and exit status, which is what a
backend route (a session-log reader) for omp would read. These tests pin both facts, so a
version that starts recording (or stops logging) shows up here.
"""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EVIDENCE = json.loads((REPO / "harness" / "evidence" / "omp.json").read_text())


def test_evidence_is_a_real_omp_run() -> None:
    """The evidence comes from the pinned CLI, whose own --version output it keeps."""
    assert (EVIDENCE["package"], EVIDENCE["version"]) == ("@oh-my-pi/pi-coding-agent", "18.2.3")
    assert EVIDENCE["version_output"] == "omp/18.2.3"


def test_the_cli_ran_the_turns_but_the_route_recorded_nothing() -> None:
    """Each run asked the stub for the tool call(s) and the final answer (one request per tool
    result plus one), finished normally, and the neutral route wrote no record."""
    for run in EVIDENCE["runs"]:
        assert run["cli_exit"] == 0
        assert run["stub_requests"] == ["POST /v1/chat/completions"] * (run["repeat"] + 1)
        assert run["records"] == []
    assert EVIDENCE["runs"][-1]["note"] == ""


def test_session_log_has_the_commands_and_exit_codes() -> None:
    """omp's session log (``~/.omp/agent/sessions/<cwd-slug>/*.jsonl``) of the 5-repeat run has
    each ``bash`` call with ``isError`` and ``details.exitCode``."""
    (session,) = EVIDENCE["session_files"]
    assert session.startswith(".omp/agent/sessions/") and session.endswith(".jsonl")
    entries = [json.loads(line) for line in (REPO / "harness" / "evidence" / "omp" / session)
               .read_text().splitlines()]
    calls = [e["data"]["args"]["command"] for e in entries
             if e.get("customType") == "tool_execution_start" and e["data"]["toolName"] == "bash"]
    results = [(m["isError"], m["details"]["exitCode"]) for e in entries
               if (m := e.get("message") or {}).get("role") == "toolResult"
               and m["toolName"] == "bash"]
    assert calls == ["ls /nonexistent"] * 5
    assert results == [(True, 2)] * 5
