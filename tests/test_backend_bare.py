"""Backends whose shell tool runs the agent's command as is, with no wrapper and no helper shell
of its own (spec C7, C8, C-AC1), checked on the harness's real records: the ``bash``
pseudo-backend, pi, opencode, Kilo Code CLI and GitHub Copilot CLI. Backend-specific facts (session
stores, launch flags) are in each backend's own test module. Every check runs on each
verified release's records (``version_params`` of ``tests/sessionlogs.py``,
issue 15's version matrix)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.evidence import primary
from repeat_failure.backends import wrapper_stripper
from repeat_failure.backends.coverage import COVERAGE
from repeat_failure.rules.normalize import normalize

from sessionlogs import version_params

EVIDENCE_DIR = primary()
BARE = ("bash", "pi", "opencode", "kilo", "copilot")
EXITS = {"ls /nonexistent": 2, "false": 1, "echo harness-ok": 0}
#: ``(backend, evidence root)`` per bare backend and release the route is verified on (the pin
#: first), ids ``<backend>-<version>``; a release the coverage row names as read only (the route
#: does not see its commands: Copilot CLI 1.0.11, pi 0.27.9) is not a case of the route's tests.
CASES = [pytest.param(b, *param.values, id=param.id) for b in BARE for param in version_params(b)
         if param.id.removeprefix(f"{b}-") not in COVERAGE[b].read_only]


def evidence(backend: str, root: Path = EVIDENCE_DIR) -> dict:
    return json.loads((root / f"{backend}.json").read_text())


@pytest.mark.parametrize("backend", BARE)
def test_evidence_is_a_real_run_of_the_pinned_cli(backend: str) -> None:
    """The evidence comes from the pinned CLI, whose own --version output it keeps."""
    ev = evidence(backend)
    assert ev["backend"] == backend
    assert COVERAGE[backend].version in ev["version_output"]


@pytest.mark.parametrize("backend,root", CASES)
def test_every_command_is_recorded_once_per_request(backend: str, root: Path) -> None:
    """C-AC1: each run's command is recorded once per time the stub asked for it, with the
    command's real exit status; nothing else is recorded (no helper shells)."""
    for run in evidence(backend, root)["runs"]:
        got = [(normalize(r["raw"], backend), r["exit"]) for r in run["records"]]
        assert got == [(run["command"], EXITS[run["command"]])] * run["repeat"], run["command"]


@pytest.mark.parametrize("backend,root", CASES)
def test_repeat_raised_the_note(backend: str, root: Path) -> None:
    """The five repeats of `ls /nonexistent` raised the note in the real sidecar pipeline."""
    assert evidence(backend, root)["runs"][-1]["note"] == \
        "Repeating failure: ls /nonexistent failed 5 times in 1 min (exit 2)"


@pytest.mark.parametrize("backend,root", CASES)
def test_no_wrapper_to_strip(backend: str, root: Path) -> None:
    """The raw text is the bare command: no stripper is registered and none is needed."""
    assert wrapper_stripper(backend) is None
    records = [r for run in evidence(backend, root)["runs"] for r in run["records"]]
    assert all(r["raw"] == normalize(r["raw"], backend) and not r["cut"] for r in records)
