"""Coverage table (spec C4, C13, C-AC1, C-AC9, C-AC11): every backend listed; docs and code tables
agree; every covered row has valid real-run evidence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import checks
from harness.evidence import primary, versions
from repeat_failure.backends import session_reader
from repeat_failure.sidecar.checkstate import build_row
from repeat_failure.backends.coverage import COVERAGE, TABLE_HEADER, table_rows
from repeat_failure.rules.normalize import normalize

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs" / "backend-support.md"

#: Hive's backends (docs/backend-support.md "The table"): CLI backends, inference backends, and `bash`.
HIVE_BACKENDS = {
    "claude", "codex", "gemini", "copilot", "opencode", "pi", "omp", "kilo", "aider", "goose",
    "agy", "bob", "muse", "vllm", "llm-d", "litellm", "watsonx", "bash",
}
#: Agent CLIs beyond Hive's list (issue 15, item 7), kept apart from Hive's (``hive=False``).
BEYOND_HIVE_BACKENDS = {"qwen", "cline", "continue", "droid", "crush"}
#: Covered CLIs whose loop guard refuses the fifth identical tool call in a row (Qwen Code 0.24.4,
#: Cline 3.0.65; tests/test_backend_beyond.py checks how each shows it).
LOOP_GUARDED = set(checks.LOOP_GUARDED)


def docs_table(marker: str = "coverage-table") -> list[list[str]]:
    text = DOCS.read_text(encoding="utf-8")
    block = text.split(f"<!-- {marker}:start -->", 1)[1].split(f"<!-- {marker}:end -->", 1)[0]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in block.strip().splitlines()]
    assert rows[0] == TABLE_HEADER
    return rows[2:]


def test_every_backend_is_in_the_code_table() -> None:
    """C-AC11: removing any backend from the code table fails this test; Hive's backends and
    those beyond Hive's list stay apart."""
    assert {b for b, r in COVERAGE.items() if r.hive} == HIVE_BACKENDS
    assert {b for b, r in COVERAGE.items() if not r.hive} == BEYOND_HIVE_BACKENDS


def test_docs_table_matches_code_table() -> None:
    """C-AC11: changing a row only in the docs (or only in code) fails this test, in either
    table."""
    assert docs_table() == table_rows()
    assert docs_table("coverage-table-beyond") == table_rows(hive=False)
    assert {r[0] for r in table_rows()} == HIVE_BACKENDS


@pytest.mark.parametrize("backend", sorted(b for b, r in COVERAGE.items() if r.covered))
def test_covered_row_has_valid_evidence(backend: str) -> None:
    """C4/C-AC1: a covered row's evidence exists, parses, carries the CLI's --version output with
    the row's version, its route recorded the failing command with a failure result (the hook's
    records for `bash_env`, the session-log reader's for `<backend>_session_log`), and the
    sidecar pipeline raised the note on the repeated failure (for a CLI whose loop guard stops
    the fifth identical call, the four failures it ran and no note)."""
    row = COVERAGE[backend]
    assert row.route in ("bash_env", f"{backend}_session_log") and row.shell_activity
    evidence = json.loads((primary() / Path(row.evidence).name).read_text())
    assert row.version in evidence["version_output"]
    first = evidence["runs"][0]
    assert first["command"] == "ls /nonexistent"
    if row.route == "bash_env":
        failing = [r["exit"] for r in first["records"]
                   if normalize(r["raw"], evidence["backend"]) == "ls /nonexistent"]
    else:  # C3: the session log is the route; what its reader found in the real run
        failing = [r["exit"] for r in first["session_records"] if r["command"] == "ls /nonexistent"]
    assert failing == [2]
    repeated = evidence["runs"][-1]
    assert repeated["repeat"] == 5
    if backend in LOOP_GUARDED:
        # The CLI ends the turn before a fifth identical call: 4 failures, and (C-AC2) no note.
        assert [r["exit"] for r in repeated["records"]] == [2] * 4
        assert repeated["stub_requests"] == ["POST /v1/chat/completions"] * 5
        assert repeated["note"] == ""
    else:
        assert repeated["note"] == (
            "Repeating failure: ls /nonexistent failed 5 times in 1 min (exit 2)")


@pytest.mark.parametrize("backend", sorted(b for b, r in COVERAGE.items() if r.also_verified))
def test_also_verified_releases_are_real_runs(backend: str) -> None:
    """Issue 15 (a version matrix): each kept capture of a row's earlier verified releases
    (which :func:`test_versions_verified_are_the_captures_kept` matches to the row) is a real
    run whose ``--version`` output names its release and whose repeated failure raised the
    note (none where the release's own loop guard stopped the run at four calls,
    ``harness.checks.loop_guard``, or where its log never ends the fifth call,
    ``harness.checks.NO_NOTE``); the table cell names every release ("1.6.0; also verified 0.73.1")."""
    row = COVERAGE[backend]
    found = versions(Path(row.evidence).stem)
    assert len(found) == 1 + len(row.also_verified) + len(row.read_only) > 1
    for version, root in found[1:1 + len(row.also_verified)]:
        kept = json.loads((root / Path(row.evidence).name).read_text())
        assert kept["version"] == version and version in kept["version_output"]
        guarded = checks.loop_guard(Path(row.evidence).stem, version) or (
            (Path(row.evidence).stem, version) in checks.NO_NOTE)
        assert kept["runs"][-1]["note"] == ("" if guarded else
            "Repeating failure: ls /nonexistent failed 5 times in 1 min (exit 2)")
    (cell,) = [r[3] for r in table_rows(hive=row.hive) if r[0] == backend]
    read = (f"; session log also read on {', '.join(row.read_only)}: {row.read_only_note}"
            if row.read_only else "")
    pin = f"; {row.pin_note}" if row.pin_note else ""
    assert cell == (f"{row.evidence} ({row.version}; also verified "
                    f"{', '.join(row.also_verified)}{read}{pin})")


def test_read_only_releases_are_real_runs_the_route_did_not_record() -> None:
    """Issue 26 item 3: a release only the session-log reader is verified on (``read_only``:
    Copilot CLI 1.0.11, whose pseudo-terminal shell sessions BASH_ENV never sees; pi 0.27.9,
    whose bash tool is ``sh -c``) is a real run whose ``--version`` names it, whose hook records
    are empty, and whose session log the reader reads as the five failing calls (exit 2)."""
    assert {b: r.read_only for b, r in COVERAGE.items() if r.read_only} == {
        "copilot": ("1.0.11",), "pi": ("0.27.9",)}
    kept = [(backend, version, root) for backend, row in COVERAGE.items() if row.read_only
            for version, root in versions(backend)[1 + len(row.also_verified):]]
    assert [(backend, version) for backend, version, _ in kept] == [("copilot", "1.0.11"),
                                                                    ("pi", "0.27.9")]
    for backend, version, root in kept:
        evidence = json.loads((root / f"{backend}.json").read_text())
        assert evidence["version"] == version and version in evidence["version_output"]
        last = evidence["runs"][-1]
        assert last["records"] == [] and last["note"] == ""
        assert [(r["command"], r["exit"], r["failed"]) for r in last["session_records"]] == \
            [("ls /nonexistent", 2, True)] * 5


def test_pi_is_verified_on_its_new_package_and_the_old_one() -> None:
    """pi's row: the pin is 1.6.0 (``@earendil-works/pi-coding-agent``), and 0.73.1 (the last
    ``@mariozechner/pi-coding-agent``) and 0.31.1 (the oldest whose bash tool is bash) are
    verified too; 0.27.9's session log is read only (its bash tool is ``sh -c``)."""
    row = COVERAGE["pi"]
    assert (row.version, row.also_verified, row.read_only) == ("1.6.0", ("0.73.1", "0.31.1"),
                                                               ("0.27.9",))
    (cell,) = [r[3] for r in table_rows() if r[0] == "pi"]
    assert cell.startswith("harness/evidence/pi.json (1.6.0; also verified 0.73.1, 0.31.1; "
                           "session log also read on 0.27.9: 0.27.9 to 0.30.2 run the bash "
                           "tool as sh -c")


def test_rows_not_covered_say_why() -> None:
    """C5: a row not covered has a reason and a follow-up issue, and no route."""
    for row in COVERAGE.values():
        if not row.covered:
            assert row.reason and row.follow_up and not row.route, row.backend


@pytest.mark.parametrize("backend", sorted(b for b, r in COVERAGE.items() if not r.covered))
def test_not_covered_row_text(backend: str) -> None:
    """C-AC9: an agent on a backend not covered shows the not-available text on its row."""
    row = build_row("a1", backend, [])
    assert (row.state, row.state_text) == (
        "not_available", "repeat-failure check not available for this backend")


def test_shell_activity_signal_per_backend() -> None:
    """C12: every covered backend names its shell-activity signal (its session-log reader's) or
    says "safeguard unavailable" with the reason; which backends have a signal is pinned here."""
    with_signal = {b for b, r in COVERAGE.items()
                   if r.covered and not r.shell_activity.startswith("safeguard unavailable")}
    assert with_signal == {"claude", "codex", "gemini", "copilot", "opencode", "pi", "kilo",
                           "vllm", "llm-d", "litellm", "watsonx", "qwen", "cline", "continue", "droid"}
    for backend in with_signal:
        assert COVERAGE[backend].shell_activity == session_reader(backend).signal
    assert COVERAGE["bash"].shell_activity == (
        "safeguard unavailable (no session log with shell calls to read)")
    assert COVERAGE["omp"].shell_activity == (
        "safeguard unavailable (the session log is this backend's route, so it is no "
        f"independent signal); route: {session_reader('omp').signal}")
    assert session_reader("omp").signal.startswith("~/.omp/agent/sessions/*/*.jsonl: ")
    assert {b for b, r in COVERAGE.items() if r.covered and r.route != "bash_env"} == {"omp"}
    assert COVERAGE["omp"].route == "omp_session_log"


@pytest.mark.parametrize("backend", sorted(b for b, r in COVERAGE.items() if r.covered))
def test_versions_verified_are_the_captures_kept(backend: str) -> None:
    """Issue 15's version matrix: a covered row names the pinned release (its evidence's) and
    the earlier releases whose real captures are kept under harness/evidence/versions/ and
    tested, no more and no fewer."""
    row = COVERAGE[backend]
    source = Path(row.evidence).stem
    kept = [version for version, _ in versions(source)]
    if source == "bash":
        return
    assert kept == [row.version, *row.also_verified, *row.read_only]
