"""GitHub Copilot CLI's shells (spec C7, C8, C-AC1), on the harness's real records.

Copilot CLI 1.0.102 runs its ``bash`` tool as ``/bin/bash --norc --noprofile -c <cmd>`` with the
agent's command as is: no wrapper, so ``copilot`` needs no wrapper stripper. It removes
``BASH_ENV`` from tool shells unless launched with ``--bash-env on``; its one helper shell (a
``bash -l -c`` that prints the login environment) never gets ``BASH_ENV``, so every record is an
agent command.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import runner
from harness.backends.copilot import BACKEND
from sidecar.backends import wrapper_stripper
from sidecar.normalize import normalize

EVIDENCE_DIR = Path(__file__).resolve().parent.parent / "harness" / "evidence"
EVIDENCE = json.loads((EVIDENCE_DIR / "copilot.json").read_text())
RECORDS = [r for run in EVIDENCE["runs"] for r in run["records"]]
EXITS = {"ls /nonexistent": 2, "false": 1, "echo harness-ok": 0}


def test_evidence_is_a_real_copilot_run() -> None:
    """The evidence comes from the pinned CLI, whose own --version output it keeps."""
    assert (EVIDENCE["package"], EVIDENCE["version"]) == ("@github/copilot", "1.0.102")
    assert EVIDENCE["version_output"].startswith("GitHub Copilot CLI 1.0.102.")


def test_failing_commands_normalize_to_the_bare_command() -> None:
    """C-AC1: `ls /nonexistent` is recorded with exit 2 and `false` with exit 1, each as the bare
    command; `echo harness-ok` with exit 0."""
    first, second, third = EVIDENCE["runs"][:3]
    assert [(normalize(r["raw"], "copilot"), r["exit"]) for r in first["records"]] == \
        [("ls /nonexistent", 2)]
    assert [(normalize(r["raw"], "copilot"), r["exit"]) for r in second["records"]] == \
        [("false", 1)]
    assert [(normalize(r["raw"], "copilot"), r["exit"]) for r in third["records"]] == \
        [("echo harness-ok", 0)]


def test_every_command_is_recorded_once_per_request() -> None:
    """Each run's command is recorded once per time the stub asked for it, with its real exit
    status, and nothing else is recorded (no helper shell)."""
    for run in EVIDENCE["runs"]:
        got = [(normalize(r["raw"], "copilot"), r["exit"]) for r in run["records"]]
        assert got == [(run["command"], EXITS[run["command"]])] * run["repeat"], run["command"]


def test_repeat_raised_the_note() -> None:
    """The five repeats of `ls /nonexistent` raised the note in the real sidecar pipeline."""
    assert EVIDENCE["runs"][-1]["note"] == \
        "Repeating failure: ls /nonexistent failed 5 times in 1 min (exit 2)"


def test_no_wrapper_to_strip() -> None:
    """The raw text is the bare command byte for byte, and no stripper is registered."""
    assert wrapper_stripper("copilot") is None
    assert {r["raw"] for r in RECORDS} <= set(EXITS)
    assert not any(r["cut"] for r in RECORDS)


def test_route_is_a_launch_flag_not_a_settings_file(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Copilot strips BASH_ENV unless launched with `--bash-env on`; the harness passes the flag
    and writes no Copilot settings file of its own."""
    monkeypatch.setattr(runner, "CACHE", tmp_path / "cache")
    argv = BACKEND.argv("copilot", "prompt")
    assert argv[argv.index("--bash-env") + 1] == "on"
    home = tmp_path / "home"
    home.mkdir()
    env = BACKEND.prepare(home, tmp_path, "http://127.0.0.1:1")
    assert not (home / ".copilot").exists()
    assert env["COPILOT_PROVIDER_BASE_URL"].startswith("http://127.0.0.1:")
    assert env["COPILOT_OFFLINE"] == "true"


def test_session_log_has_exit_codes() -> None:
    """The session log kept with the evidence carries each bash call's exit code
    (`tool.execution_complete` → `shellExecution.exitCode`), matching the records."""
    (rel,) = EVIDENCE["session_files"]
    events = [json.loads(line) for line in
              (EVIDENCE_DIR / "copilot" / rel).read_text().splitlines() if line.strip()]
    exits = [e["data"]["shellExecution"]["exitCode"] for e in events
             if e["type"] == "tool.execution_complete"]
    assert exits == [r["exit"] for r in EVIDENCE["runs"][-1]["records"]] == [2] * 5
