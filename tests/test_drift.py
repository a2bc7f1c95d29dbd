"""``python -m harness drift`` (issue 15): the newest releases judged by the product's current
strippers and readers, and its exit status when a release breaks a route, a reader or a verdict.

No CLI is run and no registry is asked here (tests send no traffic beyond loopback): the
registry lookup and the harness run are given to :func:`harness.drift.main`, and the "newest
release's capture" is a real committed capture. Claude Code 2.1.332's real capture stands in for
a release that changed its wrapper and its session log's timing; the product before issue 15
(the 2.1.197-only wrapper pattern, ``last-prompt`` taken for the end of a turn) must fail on it.
"""

from __future__ import annotations

import io
import json
import re
import shlex
from pathlib import Path

import pytest

from harness import checks
from harness import drift
from harness import evidence as evidence_dirs
from harness.backends import BACKENDS
from harness.install import HarnessError
from repeat_failure import backends as backends_mod
from repeat_failure.backends import claude as claude_mod

#: The 2.1.197-only wrapper pattern the stripper had before issue 15.
OLD_WRAPPER = re.compile(
    r"\Asource \S+ 2>/dev/null \|\| true && shopt -u extglob 2>/dev/null \|\| true"
    r" && eval (?P<quoted>.*) < /dev/null && pwd -P >\| \S+\Z", re.S)


def old_strip(command: str) -> str:
    """The stripper as it was: the old pattern, the same helper shells."""
    match = OLD_WRAPPER.match(command)
    if match is None:
        return "" if any(h.match(command) for h in claude_mod._HELPERS) else command
    return " ".join(shlex.split(match["quoted"]))


def claude_root(version: str) -> Path:
    """The evidence directory of Claude Code ``version``'s real capture."""
    roots = dict(evidence_dirs.versions("claude"))
    assert version in roots, f"no capture of claude {version}: {sorted(roots)}"
    return roots[version]


def run_drift(tmp_path: Path, version: str = "2.1.332", fail_run: str | None = None
              ) -> tuple[int, str, dict]:
    """drift.main for claude whose newest release is ``version``, its 'capture' being the
    committed one (or the run failing with ``fail_run``); (exit, printed text, drift.json)."""
    def lookup(backend):
        return version

    def run(backend, release, progress):
        progress(f"{backend.name}: running {release}")
        if fail_run:
            raise HarnessError(fail_run)
        return claude_root(release)

    out, stream = tmp_path / "drift.json", io.StringIO()
    code = drift.main(["claude"], out=out, lookup=lookup, run=run, stream=stream)
    return code, stream.getvalue(), json.loads(out.read_text())


def test_drift_is_clean_on_the_newest_release_with_todays_product(tmp_path):
    code, text, data = run_drift(tmp_path)
    assert code == 0
    (row,) = data["rows"]
    assert {k: row[k] for k in ("backend", "pinned", "newest", "installs", "route", "readers",
                                "verdicts", "broken")} == {
        "backend": "claude", "pinned": BACKENDS["claude"].version, "newest": "2.1.332",
        "installs": True, "route": "ok", "readers": "ok", "verdicts": "ok", "broken": False}
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", data["date"])
    header, line = text.splitlines()[-3:-1]
    assert header.split() == ["backend", "pinned", "newest", "installs?", "route", "ok?",
                              "readers", "ok?", "verdicts", "ok?"]
    assert line.split() == ["claude", BACKENDS["claude"].version, "2.1.332", "yes", "ok", "ok",
                            "ok"]
    assert "[1/1" in text and "claude: running 2.1.332" in text


def test_drift_fails_when_the_stripper_is_the_old_one(tmp_path, monkeypatch):
    """A deliberately old stripper (before issue 15) on 2.1.332's real wrapper: the route is
    broken, the exit status 1, and the problem names what was recorded."""
    monkeypatch.setitem(backends_mod._STRIPPERS, "claude", old_strip)
    code, text, data = run_drift(tmp_path)
    (row,) = data["rows"]
    assert code == 1 and row["broken"] is True
    assert row["route"].startswith("FAIL: run 1 ('ls /nonexistent' x1): recorded [(\"source ")
    assert row["readers"] == "ok" and row["verdicts"] == "ok"
    assert "BROKEN" in text


def test_drift_fails_when_the_reader_takes_last_prompt_for_the_end(tmp_path, monkeypatch):
    """A deliberately old reader (``last-prompt`` always the end of a turn, as before issue
    15) on 2.1.332's real sessions: 2.1.332 writes ``last-prompt`` mid-turn, so a turn ends at
    a tool call and the verdicts are broken; the same reader holds on 2.1.197. Which scenario's
    turn it splits depends on when the CLI wrote ``last-prompt`` in that capture: in the
    committed one the ``ok`` turn (1 turn, ``agent_no_output``) and the ``error`` one (2 turns),
    pinned; fresh CI captures (2026-12-02) split only ``error``, or ``ok``, ``error`` and
    ``killed``, so for a fresh capture the test asks only that verdicts are found broken, each
    problem naming its scenario, turns and verdicts."""
    monkeypatch.setattr(claude_mod, "_last_prompt_at_exit", lambda state: True)
    code, _, data = run_drift(tmp_path)
    (row,) = data["rows"]
    problems = row["problems"]["verdicts"]
    assert code == 1 and problems and row["verdicts"] == "FAIL: " + problems[0]
    assert all(re.fullmatch(r"[a-z_-]+: \d+ turn\(s\), verdict \w+, expected \w+", p)
               for p in problems), problems
    if evidence_dirs.primary() == evidence_dirs.COMMITTED:
        assert problems == ["ok: 1 turn(s), verdict agent_no_output, expected ok",
                            "error: 2 turn(s), verdict agent_error, expected agent_error"]
    old = checks.check("claude", claude_root("2.1.197"))
    assert old["verdicts"] == [] and old["readers"] == []


def test_a_release_that_does_not_install_is_reported_not_a_failure(tmp_path):
    """omp 18.3.4's real registry answer (CLI-NOTES): the row says it did not install, with the
    registry's words; nothing is broken, so the exit status is 0."""
    message = ("npm install @oh-my-pi/pi-coding-agent@18.3.4 failed: npm error code ETARGET\n"
               "npm error notarget No matching version found for @oh-my-pi/omp-stats@18.3.4.")
    code, text, data = run_drift(tmp_path, fail_run=message)
    (row,) = data["rows"]
    assert code == 0 and row["installs"] is False and row["notes"] == message
    assert row["route"] == row["readers"] == row["verdicts"] == "-"
    assert "claude: npm install @oh-my-pi" in text


def test_a_failed_lookup_is_reported(tmp_path):
    def lookup(backend):
        raise HarnessError("npm view @anthropic-ai/claude-code version failed: E404")

    out = tmp_path / "drift.json"
    code = drift.main(["claude"], out=out, lookup=lookup, run=None, stream=io.StringIO())
    (row,) = json.loads(out.read_text())["rows"]
    assert code == 0 and row["newest"] is None and row["installs"] is None
    assert row["notes"] == "npm view @anthropic-ai/claude-code version failed: E404"


@pytest.mark.parametrize("version", ["2.1.332", "2.1.197"])
def test_every_verified_claude_release_passes_every_check(version):
    """The checks drift applies hold on both verified releases' real captures."""
    assert checks.check("claude", claude_root(version)) == {
        "route": [], "readers": [], "verdicts": [], "notes": []}


def test_a_registry_error_echoing_a_token_is_scrubbed_everywhere(tmp_path):
    """npm echoes a bad ``_authToken`` (from the user's .npmrc) in its error; drift prints the
    error and writes it to drift.json, a file meant to be committed, so only its scrubbed text
    may appear (secrets: only scrubbed text is ever stored or shown). The token is built here
    at runtime."""
    token = "npm" + "_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    message = (f"npm install @anthropic-ai/claude-code@2.1.332 failed: npm error code E401\n"
               f"npm error //registry.npmjs.org/:_authToken={token}")
    code, text, data = run_drift(tmp_path, fail_run=message)
    (row,) = data["rows"]
    assert token not in text and token not in (tmp_path / "drift.json").read_text()
    assert row["notes"] == ("npm install @anthropic-ai/claude-code@2.1.332 failed: npm error "
                            "code E401\nnpm error //registry.npmjs.org/:_authToken=[REDACTED]")
    assert code == 0 and row["installs"] is False


def test_a_run_that_times_out_is_a_row_not_a_lost_table(tmp_path):
    """A lookup or run that times out (``subprocess.TimeoutExpired``, which the harness's npm
    and pip calls raise) or cannot start the tool (``OSError``) is that row's note; the other
    rows and drift.json are still written."""
    import subprocess

    def lookup(backend):
        if backend.name == "claude":
            raise subprocess.TimeoutExpired(["npm", "view"], 120)
        return backend.version

    def run(backend, release, progress):
        raise FileNotFoundError(2, "No such file or directory", "node")

    out = tmp_path / "drift.json"
    code = drift.main(["claude", "pi"], out=out, lookup=lookup, run=run, stream=io.StringIO())
    rows = {r["backend"]: r for r in json.loads(out.read_text())["rows"]}
    assert code == 0 and sorted(rows) == ["claude", "pi"]
    assert rows["claude"]["newest"] is None
    assert rows["claude"]["notes"] == "Command '['npm', 'view']' timed out after 120 seconds"
    assert rows["pi"]["installs"] is False
    assert rows["pi"]["notes"] == "[Errno 2] No such file or directory: 'node'"


@pytest.mark.parametrize("text, error", [
    ("[]", "AttributeError"),
    ('{"backend": "claude", "version": "9", "runs": [5]}', "TypeError"),
    ('{"backend": "claude", "version": "9", "runs": [{"command": "ls /nonexistent", '
     '"repeat": "5", "records": []}]}', "TypeError"),
    ('{"backend": "claude", "version": "9", "runs": [], "verdict_scenarios": ["x"]}',
     "AttributeError"),
    ("{not json", "JSONDecodeError"),
])
def test_summary_of_broken_evidence_fails_every_aspect_and_never_raises(tmp_path, text, error):
    """A capture whose JSON has the wrong shape (a killed run, a hand edit) is a FAIL of every
    aspect in the drift table, never an exception that loses the other rows."""
    (tmp_path / "claude.json").write_text(text)
    found = checks.summary("claude", tmp_path)
    assert found["notes"] == ""
    assert {a: found[a].split(" (", 1)[0] for a in checks.ASPECTS} == {
        a: "FAIL: evidence unreadable" for a in checks.ASPECTS}
    assert found["route"].startswith(f"FAIL: evidence unreadable ({error}: ")
    row = drift.drift_row(BACKENDS["claude"], lambda s: None, lambda b: "9",
                          lambda b, v, p: tmp_path)
    assert row["broken"] is True and row["problems"] == {}


def test_a_partial_run_keeps_the_other_rows_and_a_system_backend_is_said(tmp_path):
    """``--backend NAME`` replaces that backend's row and keeps the others as an earlier run
    left them (with their own date); naming a backend that is not from a registry says so and
    writes nothing."""
    out = tmp_path / "drift.json"
    out.write_text(json.dumps({"date": "2026-11-01", "rows": [
        {"backend": "codex", "pinned": "0.1", "broken": False},
        {"backend": "claude", "pinned": "old", "broken": True}]}))

    def run(backend, release, progress):
        return claude_root(release)

    code = drift.main(["claude"], out=out, lookup=lambda b: "2.1.332", run=run,
                      stream=io.StringIO())
    data = json.loads(out.read_text())
    assert code == 0 and [r["backend"] for r in data["rows"]] == ["claude", "codex"]
    assert data["rows"][1] == {"backend": "codex", "pinned": "0.1", "broken": False,
                               "checked": "2026-11-01"}
    assert data["rows"][0]["checked"] == data["date"] and data["rows"][0]["broken"] is False
    before = out.read_text()
    stream = io.StringIO()
    assert drift.main(["bash"], out=out, stream=stream) == 0
    assert out.read_text() == before
    assert "bash: not installed from a registry (system)" in stream.getvalue()
