"""The dashboard row's message (repeat_failure.sidecar.checkstate.Row, docs/metrics.md
"The agent's row"): the newest note's
message, plus how many other notes are raised, in English ("(+1 other)", "(+2 others)")."""

from __future__ import annotations

import pytest

from repeat_failure.sidecar.checkstate import ON, Row
from repeat_failure.rules.detector import Detector


def _notes(commands: list[str]) -> tuple:
    """The notes a real detector raises for ``commands``, each failing 5 times, newest last."""
    detector = Detector(threshold=5, window_s=600)
    ts = 1_800_000_000.0
    for command in commands:
        for _ in range(5):
            ts += 1
            detector.record(command, 2, True, ts, ts)
    return tuple(detector.notes(ts))


@pytest.mark.parametrize("count,suffix", [(1, ""), (2, " (+1 other)"), (3, " (+2 others)"),
                                          (12, " (+11 others)")])
def test_row_message_counts_the_other_notes(count, suffix):
    """One note: its message alone; K more: " (+K others)", singular for K = 1."""
    notes = _notes([f"ls /nonexistent-{i}" for i in range(count)])
    assert len(notes) == count
    row = Row("a1", "bash", ON, notes)
    newest = f"ls /nonexistent-{count - 1}"
    assert row.message == f"Repeating failure: {newest} failed 5 times in 1 min (exit 2){suffix}"


def test_row_without_note_has_no_message():
    assert Row("a1", "bash", ON).message == ""
