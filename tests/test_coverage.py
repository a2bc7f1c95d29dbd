"""Coverage table (spec C13, C-AC11): every backend listed; docs and code tables agree."""

from __future__ import annotations

from pathlib import Path

from sidecar.coverage import COVERAGE, TABLE_HEADER, table_rows

DOCS = Path(__file__).resolve().parent.parent / "docs" / "backend-support.md"

#: Hive's backends (DESIGN.md "Coverage table"): CLI backends, inference backends, and `bash`.
HIVE_BACKENDS = {
    "claude", "codex", "gemini", "copilot", "opencode", "pi", "omp", "kilo", "aider", "goose",
    "agy", "bob", "muse", "vllm", "llm-d", "litellm", "watsonx", "bash",
}


def docs_table() -> list[list[str]]:
    text = DOCS.read_text(encoding="utf-8")
    block = text.split("<!-- coverage-table:start -->", 1)[1].split("<!-- coverage-table:end -->", 1)[0]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in block.strip().splitlines()]
    assert rows[0] == TABLE_HEADER
    return rows[2:]


def test_every_backend_is_in_the_code_table() -> None:
    """C-AC11: removing any backend from the code table fails this test."""
    assert set(COVERAGE) == HIVE_BACKENDS


def test_docs_table_matches_code_table() -> None:
    """C-AC11: changing a row only in the docs (or only in code) fails this test."""
    assert docs_table() == table_rows()


def test_covered_rows_have_route_and_evidence() -> None:
    """C4: a covered row names its route, evidence and version; a row not covered has a reason
    and a follow-up issue (C5)."""
    for row in COVERAGE.values():
        if row.covered:
            assert row.route and row.evidence and row.version and row.shell_activity, row.backend
            assert (Path(__file__).resolve().parent.parent / row.evidence).exists(), row.backend
        else:
            assert row.reason and row.follow_up and not row.route, row.backend
