"""Agent CLIs beyond Hive's list (issue 15, item 7; spec C4, C5, C-AC1, C-AC2), checked on the
harness's real runs of their pinned npm releases: Qwen Code, Cline CLI and Continue CLI, whose
shell tools run the command with a plain ``bash -c``, and Factory Droid, whose supervisor's nested
shell the hook records (``tests/test_backend_droid.py``), all covered; and the stub's handling of
the shell tools only these CLIs offer (Cline's ``run_commands``, Droid's ``Execute``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.backends import BACKENDS
from harness.stub import pick_tool
from repeat_failure.backends import wrapper_stripper
from repeat_failure.backends.coverage import COVERAGE
from repeat_failure.rules.normalize import normalize

EVIDENCE_DIR = Path(__file__).resolve().parent.parent / "harness" / "evidence"
COVERED = ("qwen", "cline", "continue")
EXITS = {"ls /nonexistent": 2, "false": 1, "echo harness-ok": 0}
NOTE = "Repeating failure: ls /nonexistent failed 5 times in 1 min (exit 2)"
#: What Qwen Code 0.24.4 prints when its always-on loop guard ends the turn (the fifth identical
#: tool call in a row; TOOL_CALL_LOOP_THRESHOLD = 5 in its bundle).
QWEN_LOOP = ("Loop detection halted the run (consecutive_identical_tool_calls: the model repeated "
             "the same tool call with identical arguments).")
#: Covered CLIs whose loop guard refuses the fifth identical tool call in a row.
LOOP_GUARDED = {"qwen", "cline"}


def evidence(backend: str) -> dict:
    return json.loads((EVIDENCE_DIR / f"{backend}.json").read_text())


@pytest.mark.parametrize("backend", COVERED + ("droid",))
def test_evidence_is_a_real_run_of_the_pinned_cli(backend: str) -> None:
    """The evidence comes from the pinned npm release the harness module names, whose own
    --version output it keeps; the row is beyond Hive's list."""
    ev, module, row = evidence(backend), BACKENDS[backend], COVERAGE[backend]
    assert (ev["backend"], ev["package"], ev["version"]) == (backend, module.package,
                                                             module.version)
    assert ev["version_output"].splitlines()[0] == module.version
    assert row.hive is False
    assert row.covered is True
    assert row.version == module.version


@pytest.mark.parametrize("backend", COVERED)
def test_every_command_recorded_once_per_request_unwrapped(backend: str) -> None:
    """C-AC1: each run's command is recorded as is (the pins add no wrapper, so no stripper is
    registered, except Qwen Code's for its releases before 0.12.0, which leaves these plain
    commands unchanged), once per time the stub asked for it, with the command's real exit
    status; nothing else is recorded. Qwen Code's and Cline's five-times runs hold four: their
    loop guards refused the fifth identical call."""
    assert (wrapper_stripper(backend) is None) is (backend != "qwen")
    for run in evidence(backend)["runs"]:
        got = [(r["raw"], normalize(r["raw"], backend), r["exit"]) for r in run["records"]]
        times = 4 if run["repeat"] == 5 and backend in LOOP_GUARDED else run["repeat"]
        assert got == [(run["command"], run["command"], EXITS[run["command"]])] * times, (
            run["command"])


@pytest.mark.parametrize("backend", sorted(set(COVERED) - LOOP_GUARDED))
def test_five_failures_raise_the_note(backend: str) -> None:
    """C-AC2: the five-times run went through the real sidecar pipeline and raised the note."""
    repeated = evidence(backend)["runs"][-1]
    assert (repeated["command"], repeated["repeat"], repeated["note"]) == (
        "ls /nonexistent", 5, NOTE)


def test_qwen_loop_guard_stops_the_fifth_identical_call() -> None:
    """Qwen Code asks the model five times and runs four of the five identical calls: its guard
    ends the turn (CLI exit 1, its message in the output), and four failures raise no note
    (C-AC2: 4 times does not)."""
    repeated = evidence("qwen")["runs"][-1]
    assert repeated["stub_requests"] == ["POST /v1/chat/completions"] * 5
    assert repeated["cli_exit"] == 1
    assert QWEN_LOOP in repeated["cli_output_tail"]
    assert repeated["note"] == ""


def test_cline_loop_guard_aborts_the_fifth_identical_call() -> None:
    """Cline's loop tracker (hard threshold 5 consecutive identical calls) aborts the fifth call
    before it runs: its session log holds four results with exit code 2, then the aborted one;
    the session ends "cancelled", the CLI exits 0, and four failures raise no note (C-AC2)."""
    repeated = evidence("cline")["runs"][-1]
    assert (repeated["cli_exit"], repeated["note"]) == (0, "")
    session = next(EVIDENCE_DIR.joinpath("cline").glob(".cline/data/sessions/*/*.messages.json"))
    results = [item for m in json.loads(session.read_text())["messages"]
               for block in m["content"] if isinstance(block, dict)
               and block.get("type") == "tool_result" for item in block["content"]]
    assert [(r["query"], r["result"].splitlines()[0] if r["result"] else r["error"])
            for r in results] == [("ls /nonexistent", "[Command exited with code 2]")] * 4 + [
        ("ls /nonexistent", "Command failed: Command was aborted")]
    meta = json.loads(session.with_name(session.name.replace(".messages", "")).read_text())
    assert (meta["status"], meta["exit_code"]) == ("cancelled", 0)


def test_crush_row_quotes_the_install_error() -> None:
    """C5: Crush is not covered, and its row quotes why its npm install fails here."""
    row = COVERAGE["crush"]
    assert (row.covered, row.hive, row.route) == (False, False, "")
    assert "getaddrinfo ENOTFOUND github.com" in row.reason
    assert "crush" not in BACKENDS


def test_stub_gives_clines_run_commands_a_one_item_list() -> None:
    """Cline's run_commands takes a list of whole commands: the step's command is its only item
    (not an argv list as for a ``command`` array)."""
    tools = [{"name": "read_files", "schema": {"type": "object", "properties": {
                 "paths": {"type": "array", "items": {"type": "string"}}}}},
             {"name": "run_commands", "schema": {"type": "object", "properties": {
                 "commands": {"type": "array", "items": {"type": "string"}}}}}]
    choice = pick_tool(tools, "shell")
    assert (choice.name, choice.arg) == ("run_commands", "commands")
    assert choice.arguments("ls /nonexistent") == {"commands": ["ls /nonexistent"]}


def test_stub_finds_droids_execute() -> None:
    """Droid's shell tool is Execute (``command``), among LS, Read and Create."""
    prop = {"type": "string"}
    tools = [{"name": n, "schema": {"type": "object", "properties": {a: prop}}}
             for n, a in (("LS", "directory_path"), ("Read", "file_path"), ("Execute", "command"))]
    choice = pick_tool(tools, "shell")
    assert choice.name == "Execute"
    assert choice.arguments("false") == {"command": "false"}
