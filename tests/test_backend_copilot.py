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

EVIDENCE_DIR = Path(__file__).resolve().parent.parent / "harness" / "evidence"
EVIDENCE = json.loads((EVIDENCE_DIR / "copilot.json").read_text())


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
