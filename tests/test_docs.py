"""Examples the docs give, run for real: docs/metrics.md "Failures that are not errors" (issue 17,
item 15): a poll with `grep -q` raises a note as the spec says, and the page's exclusion list
silences exactly what it says it does; the README's metrics table is docs/metrics.md's; the
replay example of docs/operations.md ("Replay before enabling") on the committed harness
captures prints the table the page shows."""

from __future__ import annotations

import re
from pathlib import Path

from repeat_failure.cli import main
from test_app import T0, append, make

REPO = Path(__file__).resolve().parent.parent
METRICS_DOC = REPO / "docs" / "metrics.md"


def _section(title: str) -> str:
    return METRICS_DOC.read_text().split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def _documented_config() -> str:
    (block,) = re.findall(r"```yaml\n(.*?)```", _section("Failures that are not errors"), re.S)
    return block


def _messages(tmp_path: Path, config: str, commands: dict[str, int]) -> list[str]:
    """The note messages after each command in ``commands`` failed 5 times (with that exit)."""
    sc = make(tmp_path)
    (tmp_path / "config.yaml").write_text(config.replace("  enabled: true\n",
                                                         "  enabled: true\n  collect_grace_s: 1\n"))
    sc.reload_config(force=True)
    ts = T0 - 50
    for command, status in commands.items():
        for _ in range(5):
            ts += 1
            append(sc.shared_dir, "a1", command, status, ts)
    sc.run_once()
    return sorted(note.message for note in sc.rows()[0].notes)


POLLS = {'grep -q "ready" build.log': 1, "pgrep node": 1, 'grep -q "ready" other.log': 1,
         "gh pr checks 123": 8, "grep -q x /nonexistent": 2}


def test_grep_no_match_raises_a_note_by_default(tmp_path: Path) -> None:
    """Without an exclusion, five `grep -q` polls that find nothing (exit 1) raise the note the
    page quotes: same command, same result."""
    quoted = re.search(r"gets `(Repeating failure: [^`]+)`", _section(
        "Failures that are not errors")).group(1)
    assert _messages(tmp_path, "repeat_failure:\n  enabled: true\n",
                     {'grep -q "ready" build.log': 1}) == [quoted]


def test_the_documented_exclusions_silence_what_they_say(tmp_path: Path) -> None:
    """With the page's list: the excluded poll, every pgrep and the default `gh pr checks` raise
    nothing; another grep poll and grep's real error (exit 2) still do."""
    assert _messages(tmp_path, _documented_config(), POLLS) == [
        'Repeating failure: grep -q "ready" other.log failed 5 times in 1 min (exit 1)',
        "Repeating failure: grep -q x /nonexistent failed 5 times in 1 min (exit 2)",
    ]


def _metric_rows(text: str, header: str) -> list[tuple[str, str, str]]:
    """(metric, type, labels) of each row of the Markdown table under ``header``."""
    lines = text.splitlines()
    rows = []
    for line in lines[lines.index(header) + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows.append((cells[0], cells[1], cells[2]))
    return rows


def test_readme_metrics_table_is_the_series_table() -> None:
    """Every series docs/metrics.md lists is in the README's table, in the same order, with the
    same type and labels (the README once lacked the note's `output` label, issue 19)."""
    readme = _metric_rows((REPO / "README.md").read_text(), "| metric | type | labels |")
    series = _metric_rows(METRICS_DOC.read_text(), "| metric | type | labels | meaning |")
    assert readme == series


def test_replay_example_on_the_harness_captures(capsys) -> None:
    """docs/operations.md's replay table is what `repeat-failure replay harness/evidence/`
    prints on the committed captures (exit 0): a directory that is not a home is searched home
    by home (issue 26), each CLI's home and each kept older release's; the same as naming
    those homes one by one."""
    section = (REPO / "docs" / "operations.md").read_text().split(
        "## Replay before enabling\n", 1)[1].split("\n## ", 1)[0]
    assert "(That is `repeat-failure replay harness/evidence/`:" in section
    (table,) = re.findall(r"```\n *(threshold .*?)\n *```", section, re.S)
    table = [" ".join(line.split()) for line in table.splitlines()]
    evidence = REPO / "harness" / "evidence"
    assert main(["replay", str(evidence)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [" ".join(line.split()) for line in out[-2:]] == table
    homes = [str(p) for p in sorted(evidence.iterdir()) if p.is_dir() and p.name != "versions"]
    homes += [str(p) for p in sorted((evidence / "versions").glob("*/*/*")) if p.is_dir()]
    assert main(["replay", *homes]) == 0
    assert [" ".join(line.split()) for line in capsys.readouterr().out.splitlines()[-2:]] == table


def test_status_fields_are_the_documented_ones(tmp_path: Path) -> None:
    """docs/metrics.md "The agent's row" names the fields of a /status row and of its notes:
    the same names, in the same order, as a real row with a raised note has."""
    text = _section("The agent's row")
    row_doc, note_doc = (re.findall(r'"(\w+)"', braces)
                         for braces in re.findall(r'`(\{"(?:agent|command)".*?\})`', text))
    sc = make(tmp_path)
    (tmp_path / "config.yaml").write_text("repeat_failure:\n  enabled: true\n")
    sc.reload_config(force=True)
    for i in range(5):
        append(sc.shared_dir, "a1", "make", 2, T0 - 50 + i)
    sc.run_once()
    row = sc.rows()[0].to_json()
    assert list(row) == row_doc
    assert list(row["notes"][0]) == note_doc
