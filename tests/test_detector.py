"""Detector rules (spec C6, C-AC2, C-AC3, C-AC8): exact counts, an injected clock, no sleeping."""

from __future__ import annotations

import pytest

from sidecar.detector import FAILED, Detector, NoteCleared, NoteRaised, StateError

T0 = 1_800_000_000.0
MIN = 60.0


def feed(det: Detector, command: str, times: list[float], exit_status: int | None = 2,
         failed: bool = True) -> list:
    events = []
    for t in times:
        events += det.record(command, exit_status, failed, t, now=t)
    return events


def test_five_failures_in_ten_minutes_raise_the_note() -> None:
    """C-AC2: 5 failures within 10 minutes raise exactly one note with count 5."""
    det = Detector(5, 600)
    events = feed(det, "ls /nonexistent", [T0 + i * 2 * MIN for i in range(5)])
    assert [type(e) for e in events] == [NoteRaised]
    note = events[0].note
    assert (note.command, note.exit, note.count, note.minutes) == ("ls /nonexistent", 2, 5, 8)
    assert note.message == "Repeating failure: ls /nonexistent failed 5 times in 8 min (exit 2)"


def test_four_failures_do_not_raise() -> None:
    """C-AC2: 4 failures within 10 minutes raise nothing."""
    det = Detector(5, 600)
    assert feed(det, "ls /nonexistent", [T0 + i for i in range(4)]) == []
    assert det.notes(T0 + 4) == []


def test_five_failures_over_eleven_minutes_do_not_raise() -> None:
    """C-AC2: 5 failures spread over 11 minutes raise nothing."""
    det = Detector(5, 600)
    times = [T0 + i * 11 * MIN / 4 for i in range(5)]
    assert feed(det, "ls /nonexistent", times) == []
    assert det.notes(times[-1]) == []


def test_different_arguments_give_two_notes() -> None:
    """C-AC3: gh pr view 123 / 456 alternating, 5 each → two notes, never one merged."""
    det = Detector(5, 600)
    events = []
    for i in range(10):
        cmd = "gh pr view 123" if i % 2 == 0 else "gh pr view 456"
        events += det.record(cmd, 1, True, T0 + i * 10, now=T0 + i * 10)
    raised = [e.note.command for e in events if isinstance(e, NoteRaised)]
    assert raised == ["gh pr view 123", "gh pr view 456"]
    notes = det.notes(T0 + 100)
    assert [(n.command, n.count) for n in notes] == [("gh pr view 456", 5), ("gh pr view 123", 5)]


def test_success_clears_and_new_failures_raise_again() -> None:
    """C-AC8: a success clears the note; 5 new failures raise it again."""
    det = Detector(5, 600)
    feed(det, "make test", [T0 + i for i in range(5)])
    events = det.record("make test", 0, False, T0 + 10, now=T0 + 10)
    assert events == [NoteCleared("make test", "success")]
    assert det.notes(T0 + 10) == []
    # The earlier failures are forgotten: 4 more do not raise.
    assert feed(det, "make test", [T0 + 20 + i for i in range(4)]) == []
    events = feed(det, "make test", [T0 + 30])
    assert [type(e) for e in events] == [NoteRaised]
    assert events[0].note.count == 5


def test_note_gone_a_window_after_the_last_failure() -> None:
    """C-AC8: last failure at t and no success → the note is gone at t + 10 min, not before."""
    det = Detector(5, 600)
    times = [T0 + i * MIN for i in range(5)]
    feed(det, "npm test", times)
    t = times[-1]
    assert det.expire(t + 600 - 0.001) == []
    assert [n.command for n in det.notes(t + 600 - 0.001)] == ["npm test"]
    assert det.expire(t + 600) == [NoteCleared("npm test", "expired")]
    assert det.notes(t + 600) == []
    assert det.next_change() is None


def test_raised_note_count_drops_below_threshold_before_clearing() -> None:
    """DESIGN: a raised note stays until its last failure leaves the window; its count is the
    failures of that key now in the window."""
    det = Detector(5, 600)
    feed(det, "ls x", [T0, T0 + 100, T0 + 200, T0 + 300, T0 + 400])
    det.expire(T0 + 750)
    notes = det.notes(T0 + 750)
    assert [(n.count, n.first_ts, n.last_ts) for n in notes] == [(3, T0 + 200, T0 + 400)]


def test_two_exits_show_the_newest() -> None:
    """DESIGN: if two exits qualify, the note shows the one whose last failure is newest."""
    det = Detector(3, 600)
    feed(det, "curl x", [T0, T0 + 1, T0 + 2], exit_status=7)
    feed(det, "curl x", [T0 + 3, T0 + 4, T0 + 5], exit_status=6)
    feed(det, "curl x", [T0 + 6], exit_status=28)
    (note,) = det.notes(T0 + 7)
    assert (note.exit, note.count) == (6, 3)


def test_failed_without_exit_number() -> None:
    """C11: a route without exit numbers shows "(failed)"."""
    det = Detector(2, 600)
    events = feed(det, "run", [T0, T0 + 1], exit_status=None)
    assert events[0].note.exit == FAILED
    assert events[0].note.message == "Repeating failure: run failed 2 times in 1 min (failed)"


def test_same_command_different_exit_counts_separately() -> None:
    """C6: "the same result": 3 failures with exit 1 and 2 with exit 2 are not 5 of one."""
    det = Detector(5, 600)
    feed(det, "x", [T0, T0 + 1, T0 + 2], exit_status=1)
    assert feed(det, "x", [T0 + 3, T0 + 4], exit_status=2) == []


def test_empty_command_and_old_failures_never_count() -> None:
    """C6: an empty command never counts; a failure already outside the window changes nothing."""
    det = Detector(1, 600)
    assert det.record("", 1, True, T0, now=T0) == []
    assert det.record("late", 1, True, T0 - 600, now=T0) == []
    assert det.notes(T0) == []


def test_out_of_order_records_still_qualify() -> None:
    """Counting uses each record's own ts, whatever order the records arrive in."""
    det = Detector(3, 600)
    now = T0 + 600
    assert det.record("x", 1, True, T0 + 500, now) == []
    assert det.record("x", 1, True, T0 + 100, now) == []  # 400 s before: same window
    events = det.record("x", 1, True, T0 + 300, now)
    assert [type(e) for e in events] == [NoteRaised]
    assert events[0].note.count == 3


def test_top_failures_are_ordered_and_bounded() -> None:
    """command_failures: most failures first, at most `limit` rows."""
    det = Detector(100, 600)
    feed(det, "a", [T0, T0 + 1, T0 + 2])
    feed(det, "b", [T0 + 3])
    feed(det, "c", [T0 + 4, T0 + 5])
    assert det.failures(T0 + 10, 2) == [("a", 2, 3), ("c", 2, 2)]


def test_state_round_trip_keeps_open_notes() -> None:
    """A restarted sidecar keeps its open notes: to_dict/load_dict round trip."""
    det = Detector(5, 600)
    feed(det, "ls /nonexistent", [T0 + i for i in range(5)])
    copy = Detector(5, 600)
    copy.load_dict(det.to_dict())
    assert copy.notes(T0 + 10) == det.notes(T0 + 10)
    assert copy.record("ls /nonexistent", 2, True, T0 + 11, T0 + 11) == []  # still raised


@pytest.mark.parametrize("data", [
    None, [], {"version": 2, "commands": []}, {"version": 1},
    {"version": 1, "commands": [{"command": "x"}]},
    {"version": 1, "commands": [{"command": "x", "raised": True, "qualified": [],
                                 "failures": {"999": [1.0]}}]},
    {"version": 1, "commands": [{"command": "x", "raised": True, "qualified": [],
                                 "failures": {"1": ["nan"]}}]},
])
def test_bad_state_is_refused_whole(data) -> None:
    """A torn or future state raises StateError and leaves the detector unchanged."""
    det = Detector(5, 600)
    feed(det, "keep", [T0])
    before = det.to_dict()
    with pytest.raises(StateError):
        det.load_dict(data)
    assert det.to_dict() == before


def test_memory_bound_evicts_least_recent(monkeypatch) -> None:
    """Past MAX_COMMANDS distinct commands, the one that failed least recently is dropped
    (a raised note with it, reported as evicted)."""
    import sidecar.detector as detector

    monkeypatch.setattr(detector, "MAX_COMMANDS", 3)
    det = Detector(1, 600)
    assert [type(e) for e in feed(det, "a", [T0])] == [NoteRaised]
    feed(det, "b", [T0 + 1])
    feed(det, "c", [T0 + 2])
    feed(det, "a", [T0 + 3])  # a is now the most recent
    events = feed(det, "d", [T0 + 4])
    assert events[0] == NoteCleared("b", "evicted")
    assert sorted(n.command for n in det.notes(T0 + 5)) == ["a", "c", "d"]
