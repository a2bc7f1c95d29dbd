"""The C12 timer's rules (repeat_failure.sessions.activity), event by event. The real-session tests of C-AC10
are in tests/test_safeguard.py; these pin each rule on its own."""

from __future__ import annotations

import json

from repeat_failure.sessions.activity import MATCH_SLACK_S, Activity
from repeat_failure.backends import (SHELL_END, SHELL_START, TEXT, TOOL, TURN_END, TURN_START,
                              SessionEvent)

T0 = 1_800_000_000.0
LIMIT = 900.0


def ev(kind: str, ts: float, call_id: str = "", **kw) -> SessionEvent:
    return SessionEvent(kind, ts, call_id=call_id, **kw)


def shell(a: Activity, call_id: str, start: float, end: float | None = None) -> None:
    a.on_event(ev(SHELL_START, start, call_id, command="make"))
    if end is not None:
        a.on_event(ev(SHELL_END, end, call_id, command="make", exit=2, failed=True))


def test_unmatched_finished_call_starts_the_timer_at_its_finish() -> None:
    a = Activity()
    a.on_event(ev(TURN_START, T0))
    shell(a, "c1", T0 + 1, T0 + 3)
    assert a.receiving_data(T0 + 3 + LIMIT - 0.001, LIMIT)
    assert not a.receiving_data(T0 + 3 + LIMIT, LIMIT)
    assert a.next_change(LIMIT) == T0 + 3 + LIMIT


def test_record_arriving_clears() -> None:
    a = Activity()
    a.on_event(ev(TURN_START, T0))
    shell(a, "c1", T0 + 1, T0 + 3)
    a.on_record(T0 + 2000)
    assert a.receiving_data(T0 + 5000, LIMIT) and a.next_change(LIMIT) is None


def test_record_before_the_log_line_matches_the_call() -> None:
    """The hook writes its record when the shell exits, usually before the CLI logs the
    result: a record no older than the call's start (minus the slack) matches it."""
    a = Activity()
    a.on_event(ev(TURN_START, T0))
    a.on_event(ev(SHELL_START, T0 + 10, "c1"))
    a.on_record(T0 + 10 - MATCH_SLACK_S)
    a.on_event(ev(SHELL_END, T0 + 12, "c1", exit=0, failed=False))
    assert a.receiving_data(T0 + 10_000, LIMIT)


def test_record_older_than_the_call_does_not_match_it() -> None:
    a = Activity()
    a.on_event(ev(TURN_START, T0))
    a.on_record(T0 + 1)
    shell(a, "c1", T0 + 10, T0 + 12)
    assert not a.receiving_data(T0 + 12 + LIMIT, LIMIT)


def test_running_call_does_not_start_the_timer() -> None:
    a = Activity()
    a.on_event(ev(TURN_START, T0))
    shell(a, "c1", T0 + 1)
    assert a.receiving_data(T0 + 20 * 60, LIMIT) and a.next_change(LIMIT) is None


def test_reads_and_edits_are_not_shell_activity() -> None:
    a = Activity()
    a.on_event(ev(TURN_START, T0))
    for i in range(30):
        a.on_event(ev(TOOL, T0 + i * 30, f"r{i}", tool="Read"))
        a.on_event(ev(TEXT, T0 + i * 30 + 1))
    assert a.receiving_data(T0 + 3600, LIMIT)


def test_no_turn_in_progress_means_receiving() -> None:
    """An idle agent sends no records and that is fine; the timer survives into the next turn
    and shows once that turn has shell activity."""
    a = Activity()
    a.on_event(ev(TURN_START, T0))
    shell(a, "c1", T0 + 1, T0 + 3)
    a.on_event(ev(TURN_END, T0 + 4))
    assert a.receiving_data(T0 + 2 * LIMIT, LIMIT)
    a.on_event(ev(TURN_START, T0 + 2 * LIMIT))
    assert a.receiving_data(T0 + 2 * LIMIT + 1, LIMIT)  # no shell activity in this turn yet
    shell(a, "c2", T0 + 2 * LIMIT + 5)  # a long build, still running: not missing data
    assert a.receiving_data(T0 + 3 * LIMIT, LIMIT)
    a.on_event(ev(SHELL_END, T0 + 3 * LIMIT, "c2", exit=0, failed=False))
    assert not a.receiving_data(T0 + 3 * LIMIT + 1, LIMIT)  # finished, still no record


def test_turn_start_forgets_calls_left_running() -> None:
    a = Activity()
    a.on_event(ev(TURN_START, T0))
    shell(a, "c1", T0 + 1)
    a.on_event(ev(TURN_START, T0 + 100))
    assert a.running == {}


def test_calls_without_ids_pair_oldest_first() -> None:
    a = Activity()
    a.on_event(ev(TURN_START, T0))
    a.on_event(ev(SHELL_START, T0 + 1))
    a.on_event(ev(SHELL_START, T0 + 2))
    a.on_event(ev(SHELL_END, T0 + 3, exit=1, failed=True))
    assert list(a.running.values()) == [T0 + 2]
    assert a.unmatched_since == T0 + 3


def test_round_trip_and_malformed_state() -> None:
    a = Activity()
    a.on_event(ev(TURN_START, T0))
    shell(a, "c1", T0 + 1, T0 + 3)
    shell(a, "c2", T0 + 4)
    b = Activity()
    b.load_dict(json.loads(json.dumps(a.to_dict())))
    assert b.to_dict() == a.to_dict() == {
        "turns": {"": [True, True]}, "running": {"c2": T0 + 4},
        "unmatched_since": T0 + 3, "last_record_ts": None, "last_shell_ts": T0 + 4,
        "not_before": 0.0, "last_end_ts": T0 + 3, "unrecognized_ts": None}
    c = Activity()
    c.load_dict({"turns": {"s": [True, "yes"]}, "unmatched_since": float("nan"),
                 "running": {"x": "1"}, "last_shell_ts": True, "not_before": float("inf")})
    assert c.to_dict() == Activity().to_dict()


def test_calls_that_ended_before_the_hook_existed_do_not_start_the_timer() -> None:
    """A call that finished before the sidecar started (or before the check was turned on)
    could not be recorded: it never starts the timer."""
    a = Activity(not_before=T0 + 10)
    a.on_event(ev(TURN_START, T0))
    shell(a, "c1", T0 + 1, T0 + 3)
    assert a.unmatched_since is None and a.receiving_data(T0 + 10 * LIMIT, LIMIT)
    shell(a, "c2", T0 + 11, T0 + 12)
    assert a.unmatched_since == T0 + 12


def test_turns_are_per_session() -> None:
    """Two sessions: a short chat ending in session A does not hide session B's turn, whose
    finished call has no record."""
    a = Activity()
    a.on_event(SessionEvent(TURN_START, T0, source="B"))
    a.on_event(SessionEvent(SHELL_START, T0 + 1, call_id="B:c1", source="B"))
    a.on_event(SessionEvent(SHELL_END, T0 + 2, call_id="B:c1", exit=2, failed=True, source="B"))
    a.on_event(SessionEvent(TURN_START, T0 + 3, source="A"))
    a.on_event(SessionEvent(TURN_END, T0 + 4, source="A"))
    assert not a.receiving_data(T0 + 2 + LIMIT, LIMIT)
    a.on_event(SessionEvent(TURN_END, T0 + 5, source="B"))
    assert a.receiving_data(T0 + 2 + LIMIT, LIMIT)
