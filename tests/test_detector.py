"""Detector rules (spec C6, C-AC2, C-AC3, C-AC8): exact counts, an injected clock, no sleeping."""

from __future__ import annotations

import base64

import pytest

from repeat_failure.rules.detector import (FAILED, MAX_AWAITED, Detector, NoteCleared,
                                            NoteRaised, StateError, text_bytes)

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
    import repeat_failure.rules.detector as detector

    monkeypatch.setattr(detector, "MAX_COMMANDS", 3)
    det = Detector(1, 600)
    assert [type(e) for e in feed(det, "a", [T0])] == [NoteRaised]
    feed(det, "b", [T0 + 1])
    feed(det, "c", [T0 + 2])
    feed(det, "a", [T0 + 3])  # a is now the most recent
    events = feed(det, "d", [T0 + 4])
    assert events[0] == NoteCleared("b", "evicted")
    assert sorted(n.command for n in det.notes(T0 + 5)) == ["a", "c", "d"]


def test_byte_bound_evicts_least_recent(monkeypatch) -> None:
    """Past MAX_COMMAND_BYTES of command text, the commands that failed least recently are
    forgotten until the new one fits (raised notes cleared as ``evicted``, oldest first), as
    the count bound does; a command longer than the whole bound is never tracked; forgetting a
    command by success or expiry gives its bytes back."""
    import repeat_failure.rules.detector as detector

    monkeypatch.setattr(detector, "MAX_COMMAND_BYTES", 10)
    det = Detector(1, 600)
    assert [type(e) for e in feed(det, "aaaa", [T0])] == [NoteRaised]
    feed(det, "bbb", [T0 + 1])
    feed(det, "cc", [T0 + 2])
    assert det.command_bytes == 9
    assert feed(det, "aaaa", [T0 + 3]) == []  # already tracked: no new bytes, now the newest
    events = feed(det, "dddd", [T0 + 4])  # 9 + 4 > 10: "bbb" goes, then 6 + 4 fits
    assert events[0] == NoteCleared("bbb", "evicted")
    assert [type(e) for e in events] == [NoteCleared, NoteRaised]
    assert det.command_bytes == 10
    assert list(det._commands) == ["cc", "aaaa", "dddd"]
    assert feed(det, "e" * 11, [T0 + 5]) == []  # over the whole bound: not tracked
    assert det.command_bytes == 10 and len(det._commands) == 3
    events = feed(det, "e" * 10, [T0 + 6])
    assert events[:3] == [NoteCleared("cc", "evicted"), NoteCleared("aaaa", "evicted"),
                          NoteCleared("dddd", "evicted")]
    assert det.command_bytes == 10 and list(det._commands) == ["e" * 10]
    assert det.record("e" * 10, 0, False, T0 + 7, T0 + 7) == [NoteCleared("e" * 10, "success")]
    assert det.command_bytes == 0
    feed(det, "ff", [T0 + 8])
    assert det.expire(T0 + 700) == [NoteCleared("ff", "expired")]
    assert det.command_bytes == 0 and not det._commands


def test_failure_bound_trims_keys_beyond_the_threshold_first(monkeypatch) -> None:
    """Issue 17: past MAX_FAILURES failure times in all, the key just fed drops its oldest
    failure when it holds more than the threshold needs (its note stays, its count stops
    growing); a key that needs all it has makes the least recently failed commands go
    instead; failure_count follows successes, expiry and eviction."""
    import repeat_failure.rules.detector as detector

    monkeypatch.setattr(detector, "MAX_FAILURES", 10)
    det = Detector(3, 600)
    feed(det, "a", [T0 + i for i in range(5)])
    feed(det, "b", [T0 + 5 + i for i in range(5)])
    assert det.failure_count == 10 and len(det.notes(T0 + 10)) == 2
    assert feed(det, "a", [T0 + 10]) == []  # 11 > 10: a held 6 > 3, its oldest goes
    assert det.failure_count == 10
    assert {(n.command, n.count, n.first_ts) for n in det.notes(T0 + 10)} == {
        ("a", 5, T0 + 1), ("b", 5, T0 + 5)}
    events = feed(det, "c", [T0 + 11])  # c needs its one failure: b (least recent) goes
    assert events == [NoteCleared("b", "evicted")]
    assert det.failure_count == 6 and list(det._commands) == ["a", "c"]
    assert det.record("a", 0, False, T0 + 12, T0 + 12) == [NoteCleared("a", "success")]
    assert det.failure_count == 1
    assert det.expire(T0 + 700) == [] and det.failure_count == 0 and not det._commands


def test_failure_bound_with_one_command_trims_its_fullest_key(monkeypatch) -> None:
    """One command alone over the bound: its fullest key loses its oldest failure, even when
    the key just fed needs all it has."""
    import repeat_failure.rules.detector as detector

    monkeypatch.setattr(detector, "MAX_FAILURES", 6)
    det = Detector(5, 600)
    feed(det, "d", [T0, T0 + 1, T0 + 2], exit_status=1)
    feed(det, "d", [T0 + 3, T0 + 4, T0 + 5], exit_status=2)
    feed(det, "d", [T0 + 6], exit_status=3)
    assert det.failure_count == 6
    assert [(key, list(times)) for key, times in det._commands["d"].items()] == [
        (1, [T0 + 1, T0 + 2]), (2, [T0 + 3, T0 + 4, T0 + 5]), (3, [T0 + 6])]


def test_failure_bound_drops_a_late_failure_older_than_all_kept(monkeypatch) -> None:
    """A failure that arrives late and is older than every failure its full key keeps is the
    one dropped; the key's note is not raised by it."""
    import repeat_failure.rules.detector as detector

    monkeypatch.setattr(detector, "MAX_FAILURES", 3)
    det = Detector(2, 600)
    feed(det, "x", [T0 + 10, T0 + 20, T0 + 30])
    assert det.record("x", 2, True, T0 + 5, T0 + 30) == []
    assert list(det._commands["x"].times) == [T0 + 10, T0 + 20, T0 + 30]


def test_load_keeps_the_newest_commands_within_the_failure_bound(monkeypatch) -> None:
    import repeat_failure.rules.detector as detector

    det = Detector(1, 600)
    for i, command in enumerate(["a", "b", "c"]):
        feed(det, command, [T0 + 3 * i, T0 + 3 * i + 1])
    monkeypatch.setattr(detector, "MAX_FAILURES", 5)
    copy = Detector(1, 600)
    assert copy.load_dict(det.to_dict()) == 1
    assert list(copy._commands) == ["b", "c"] and copy.failure_count == 4


def test_text_bytes_counts_the_larger_of_file_and_memory_size() -> None:
    """A command counts its JSON-escaped UTF-8 size (the state file) or its size in memory (1,
    2 or 4 bytes a character), whichever is larger."""
    assert [text_bytes(c) for c in ("abc", 'a"b', "a\x01", "é", "€", "😀", "é😀",
                                    "a" * 3 + "€")] == [3, 4, 7, 2, 3, 4, 8, 8]
    assert text_bytes("a\ud800") == 12  # a lone surrogate: 6 bytes a character


def test_load_keeps_the_newest_commands_that_fit(monkeypatch) -> None:
    """A saved state over the bounds loads only its most recently failed commands, newest
    first, while they fit: an older command is left out even if it alone would fit (eviction
    keeps the newest only), and load_dict says how many it left out."""
    import repeat_failure.rules.detector as detector

    det = Detector(1, 600)
    for i, command in enumerate(["aaaa", "bbbbb", "cc", "ddd"]):
        feed(det, command, [T0 + i])
    saved = det.to_dict()
    monkeypatch.setattr(detector, "MAX_COMMAND_BYTES", 9)
    copy = Detector(1, 600)
    assert copy.load_dict(saved) == 2  # "ddd" + "cc" = 5; "bbbbb" would be 10; "aaaa" goes too
    assert list(copy._commands) == ["cc", "ddd"] and copy.command_bytes == 5
    assert [n.command for n in copy.notes(T0 + 4)] == ["ddd", "cc"]
    events = feed(copy, "eeee", [T0 + 5])  # 5 + 4 fits: nothing evicted
    assert [type(e) for e in events] == [NoteRaised] and copy.command_bytes == 9
    assert feed(copy, "f", [T0 + 6])[0] == NoteCleared("cc", "evicted")
    monkeypatch.setattr(detector, "MAX_COMMAND_BYTES", 100)
    monkeypatch.setattr(detector, "MAX_COMMANDS", 2)
    again = Detector(1, 600)
    assert again.load_dict(saved) == 2
    assert list(again._commands) == ["cc", "ddd"] and again.command_bytes == 5


def test_load_refuses_a_bad_command_even_past_the_bound(monkeypatch) -> None:
    """A left-out command is still checked: a state with a bad one is refused whole."""
    import repeat_failure.rules.detector as detector

    monkeypatch.setattr(detector, "MAX_COMMAND_BYTES", 4)  # "new" fits, "old" does not
    det = Detector(1, 600)
    feed(det, "keep", [T0])
    saved = {"version": 1, "commands": [
        {"command": "old", "raised": True, "qualified": [], "failures": {"1": ["nan"]}},
        {"command": "new", "raised": False, "qualified": [], "failures": {"1": [T0]}}]}
    with pytest.raises(StateError):
        det.load_dict(saved)
    assert list(det._commands) == ["keep"]


def test_load_counts_a_command_listed_twice_once() -> None:
    """A command listed twice in a saved state is one command (the later entry wins), and its
    bytes count once."""
    det = Detector(5, 600)
    saved = {"version": 1, "commands": [
        {"command": "x", "raised": False, "qualified": [], "failures": {"1": [T0]}},
        {"command": "y", "raised": False, "qualified": [], "failures": {"1": [T0 + 1]}},
        {"command": "x", "raised": False, "qualified": [], "failures": {"2": [T0 + 2]}}]}
    assert det.load_dict(saved) == 0
    assert det.command_bytes == 2
    assert det.failures(T0 + 3, 10) == [("x", 2, 1), ("y", 1, 1)]


# -- output digests (issue 19) and "the same result" (issue 26) ---------------------------------


def _fed(outputs: list[int], threshold: int = 3, match_output: bool = True) -> Detector:
    det = Detector(threshold, 600, match_output=match_output)
    for i, digest in enumerate(outputs):
        det.record("make test", 2, True, 100.0 + i, 100.0 + i, output=digest)
    return det


@pytest.mark.parametrize("outputs, want", [
    ([7, 7, 7], "same"), ([7, 8, 7], "changing"), ([0, 0, 0], "unknown"),
    ([7, 0, 7], "unknown"), ([7, 0, 8], "changing"), ([9, 7, 7, 7], "changing")])
def test_exit_only_note_labels_its_output(outputs: list[int], want: str) -> None:
    """``match_output: false`` (the rule before issue 26): a result is the exit alone; the
    note's output says `same` (every failure's digest known and equal), `changing` (two known
    digests differ) or `unknown`. The message (C11) does not change."""
    (note,) = _fed(outputs, match_output=False).notes(110.0)
    assert note.output == want
    assert note.message == (f"Repeating failure: make test failed {len(outputs)} times in 1 min "
                            "(exit 2)")


def test_exit_only_note_output_counts_only_failures_still_in_the_window() -> None:
    """A differing failure that left the window no longer makes the output `changing`."""
    det = Detector(3, 600, match_output=False)
    det.record("make test", 2, True, 100.0, 100.0, output=9)
    for i in range(3):
        det.record("make test", 2, True, 500.0 + i, 500.0 + i, output=7)
    assert det.notes(650.0)[0].output == "changing"
    assert det.notes(701.0)[0].output == "same"


@pytest.mark.parametrize("outputs, want", [
    ([7, 7, 7], (3, "same")), ([7, 8, 7], None), ([0, 0, 0], (3, "unknown")),
    ([7, 0, 7], None), ([7, 0, 8], None), ([9, 7, 7, 7], (3, "same")),
    ([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], None), ([0, 7, 0, 7, 0], (3, "unknown"))])
def test_failures_count_per_result(outputs: list[int], want: tuple | None) -> None:
    """Issue 26 (C6 "the same result"): failures count per exit *and* output; failures whose
    output is unknown (0) are one result of their own. A test-fix-retest run, a new output
    each time, never adds up; three equal outputs among others do."""
    notes = _fed(outputs).notes(110.0)
    assert [(n.count, n.output) for n in notes] == ([want] if want else [])


def test_a_flaky_failure_with_two_outputs_still_adds_up_once_per_command() -> None:
    """Issue 26: a flaky test failing the same two ways keeps counting each way; one note per
    command (C6, C-AC3), showing the result whose last failure is newest."""
    det = Detector(5, 600)
    events = []
    for i, digest in enumerate([11, 22] * 5):
        events += det.record("pytest -x", 1, True, T0 + i, T0 + i, output=digest)
    assert [type(e) for e in events] == [NoteRaised]
    assert (events[0].note.count, events[0].note.output, events[0].note.first_ts) == (5, "same", T0)
    (note,) = det.notes(T0 + 10)
    assert (note.count, note.first_ts, note.last_ts) == (5, T0 + 1, T0 + 9)  # the 22s: newest
    assert det._commands["pytest -x"].qualified == {(1, 11), (1, 22)}


def test_test_fix_retest_raises_nothing_where_exit_only_would() -> None:
    """The spec's test of success: eight failures of one test command, the output different
    after every edit, raise no note; by exit alone they raise one (`changing`)."""
    for match_output, want in ((True, []), (False, [(8, "changing")])):
        det = Detector(5, 600, match_output=match_output)
        for i in range(8):
            det.record("pytest tests/test_x.py", 1, True, T0 + i * MIN, T0 + i * MIN,
                       output=100 + i)
        assert [(n.count, n.output) for n in det.notes(T0 + 8 * MIN)] == want


def test_an_awaited_failure_counts_once_its_output_comes() -> None:
    """Issue 26: a neutral-route failure of an agent whose session log gives outputs waits
    (`pending`) for that output: it counts for no result meanwhile, then with its output; the
    note appears once, for the right result, never for `unknown` first."""
    det = Detector(3, 600)
    events = []
    for i in range(3):
        events += det.record("make test", 2, True, T0 + i, T0 + i, pending=True)
    assert events == [] and det.notes(T0 + 3) == [] and det.awaited_count == 3
    assert det.next_change() == T0 + 15  # the first wait ends
    assert det.set_output("make test", 2, T0, 7, now=T0 + 3) == []
    assert det.set_output("make test", 2, T0 + 1, 7, now=T0 + 3) == []
    (raised,) = det.set_output("make test", 2, T0 + 2, 7, now=T0 + 3)
    assert isinstance(raised, NoteRaised)
    assert (raised.note.count, raised.note.output) == (3, "same")
    assert det.awaited_count == 0 and det.next_change() == T0 + 600
    assert det.expire(T0 + 20) == [] and len(det.notes(T0 + 20)) == 1


def test_awaited_failures_whose_output_never_comes_count_as_unknown() -> None:
    """After :data:`OUTPUT_WAIT_S` (15 s) an awaited failure counts with its output unknown;
    the note is raised by :meth:`expire` then, and an output arriving later changes nothing."""
    det = Detector(3, 600)
    for i in range(3):
        det.record("make test", 2, True, T0 + i, T0 + i, pending=True)
    assert det.expire(T0 + 14.9) == [] and det.awaited_count == 3
    assert det.expire(T0 + 15) == [] and det.awaited_count == 2  # one unknown, two waiting
    assert det.next_change() == T0 + 16
    (raised,) = det.expire(T0 + 17)
    assert (raised.note.count, raised.note.output, raised.note.last_ts) == (3, "unknown", T0 + 2)
    assert det.set_output("make test", 2, T0 + 2, 7, now=T0 + 18) == []  # too late: stays
    assert [(n.count, n.output) for n in det.notes(T0 + 18)] == [(3, "unknown")]


def test_set_output_finds_the_failure_by_exit_and_time() -> None:
    """The session log's digest attaches to the failure counted from the neutral route (its
    exit key and exact time); another time, exit or command attaches nothing (None). By exit
    alone the digest relabels the note (issue 19)."""
    det = _fed([0, 0, 0], match_output=False)
    assert det.set_output("make test", 2, 100.5, 7) is None
    assert det.set_output("make test", 1, 101.0, 7) is None
    assert det.set_output("make tests", 2, 101.0, 7) is None
    assert det.notes(110.0)[0].output == "unknown"
    assert [det.set_output("make test", 2, 100.0 + i, 7) for i in range(3)] == [[]] * 3
    assert det.notes(110.0)[0].output == "same"
    det.record("ls", None, True, 103.0, 103.0, pending=True)  # no wait by exit alone
    assert det.awaited_count == 0
    assert det.set_output("ls", None, 103.0, 5) == []  # no exit number: the "failed" key


def test_two_awaited_failures_at_one_time_each_take_an_output() -> None:
    """Two failures of one command at the same time both wait; each output goes to one."""
    det = Detector(2, 600)
    det.record("make", 2, True, T0, T0, pending=True)
    det.record("make", 2, True, T0, T0, pending=True)
    assert det.set_output("make", 2, T0, 7, now=T0 + 1) == []
    assert det.awaited_count == 1
    (raised,) = det.set_output("make", 2, T0, 7, now=T0 + 1)
    assert (raised.note.count, raised.note.output) == (2, "same") and det.awaited_count == 0


def test_awaited_failures_are_bounded() -> None:
    """At most :data:`MAX_AWAITED` failures wait; past it the oldest counts as unknown."""
    det = Detector(2, 600)
    events = []
    for i in range(MAX_AWAITED + 1):
        events += det.record(f"cmd {i % 2}", 2, True, T0 + i * 0.001, T0 + 1, pending=True)
    assert det.awaited_count == MAX_AWAITED and events == []
    events = det.record("cmd 0", 2, True, T0 + 2, T0 + 2, pending=True)
    # the next oldest ("cmd 1" at T0 + 0.001) stops waiting: one unknown failure, no note
    assert det.awaited_count == MAX_AWAITED and events == []
    (raised,) = det.record("cmd 0", 2, True, T0 + 3, T0 + 3)  # output unknown, counted now
    assert (raised.note.command, raised.note.count, raised.note.output) == ("cmd 0", 2, "unknown")


def test_reconfigure_switches_between_output_and_exit_matching() -> None:
    """`match_output` changed at a config reload: by exit alone, changing outputs qualify at
    once and awaited failures stop waiting; back to output matching, a note whose failures
    had changing outputs no longer stands (they are several results, none at the threshold)
    and clears, while one whose failures had the same output stays. Before, the changing one
    stayed as the result of its newest failure: "failed 1 times"."""
    det = _fed([1, 2, 3])
    det.record("make test", 2, True, 103.0, 103.0, pending=True)
    assert det.notes(104.0) == []
    (raised,) = det.reconfigure(3, 600, 104.0, match_output=False)
    assert (raised.note.count, raised.note.output) == (4, "changing") and det.awaited_count == 0
    assert det._commands["make test"].qualified == {(2, None)}
    assert det.reconfigure(3, 600, 105.0, match_output=True) == [
        NoteCleared("make test", "reconfigured")]
    assert det.notes(105.0) == [] and det._commands["make test"].qualified is None
    same = _fed([5, 5, 5], match_output=False)
    assert same.reconfigure(3, 600, 105.0, match_output=True) == []
    assert [(n.count, n.output) for n in same.notes(105.0)] == [(3, "same")]
    assert same.reconfigure(3, 600, 106.0, match_output=False) == []
    assert same.reconfigure(3, 600, 107.0, match_output=True) == []
    assert [(n.count, n.output) for n in same.notes(107.0)] == [(3, "same")]


def test_a_state_saved_by_exit_alone_loads_without_a_changing_note() -> None:
    """A state saved by the rule before issue 26 (a note `"2"` over five changing outputs,
    test-fix-retest) loads with output matching as no note: before, it showed "make test
    failed 1 times", output `same`. A note over one output each time stays."""
    for outputs, want in (([11, 12, 13, 14, 15], []), ([11] * 5, [(5, "same")])):
        old = Detector(5, 600, match_output=False)
        for i, digest in enumerate(outputs):
            old.record("make test", 2, True, T0 + i, T0 + i, output=digest)
        saved = old.to_dict()
        assert saved["commands"][0]["qualified"] == ["2"]
        new = Detector(5, 600)
        new.load_dict(saved, now=T0 + 10)
        assert [(n.count, n.output) for n in new.notes(T0 + 10)] == want


def test_digests_stay_with_their_failures() -> None:
    """Forgetting failures (a success, the window, the per-key bound) forgets their digests
    with them, and a late failure takes its place in time order with its digest."""
    def outputs(det: Detector) -> list[int]:
        return [d for t in det._commands["make test"].items() for d in t[1].outs]

    det = _fed([5, 6, 7])
    det.record("make test", 2, True, 99.5, 110.0, output=4)  # late: first in time order
    assert outputs(det) == [4, 5, 6, 7]
    det.record("make test", 1, True, 104.0, 110.0, output=1 << 31)
    # Saved in the order of `failures` (key by key), 4 bytes each, base64.
    assert det.to_dict()["commands"][0]["outputs"] == "AAAABAAAAAUAAAAGAAAAB4AAAAA="
    det.record("make test", 0, False, 100.7, 110.0)  # a success forgets up to it
    assert outputs(det) == [6, 7, 1 << 31]
    det.expire(101.5 + 600)
    assert outputs(det) == [7, 1 << 31]


def test_an_awaited_output_is_awaited_again_after_a_restart() -> None:
    """Saved, an awaited failure keeps the awaited digest (0xFFFFFFFF); loaded with ``now`` it
    awaits its output again for OUTPUT_WAIT_S from then, and counts with it when it comes;
    loaded without ``now``, or by exit alone, its output is unknown."""
    det = _fed([7])
    det.record("make test", 2, True, 101.0, 101.0, pending=True)
    saved = det.to_dict()
    assert saved["commands"][0]["outputs"] == "AAAAB/////8="
    again = Detector(2, 600)
    again.load_dict(saved, now=200.0)
    assert again.awaited() == [("make test", 2, 101.0)] and again.next_change() == 215.0
    (raised,) = again.set_output("make test", 2, 101.0, 7, 201.0)
    assert (raised.note.count, raised.note.output) == (2, "same") and again.awaited_count == 0
    # Two exits of one command awaited at one time: sorted without comparing 2 with "failed".
    both = Detector(2, 600)
    both.record("make", 2, True, 101.0, 101.0, pending=True)
    both.record("make", None, True, 101.0, 101.0, pending=True)
    both.load_dict(both.to_dict(), now=200.0)
    assert sorted(map(str, both.awaited())) == ["('make', 'failed', 101.0)", "('make', 2, 101.0)"]
    for loaded in (Detector(2, 600), Detector(2, 600, match_output=False)):
        loaded.load_dict(saved, now=None if loaded.match_output else 200.0)
        assert loaded.awaited_count == 0
        assert list(loaded._commands["make test"].get(2).outs) == [7, 0]


def test_a_hostile_state_cannot_hold_failures_awaited_for_ever() -> None:
    """A state file whose digests are all the awaited value, past MAX_AWAITED, with a
    qualified result naming it: MAX_AWAITED of them wait (then count as unknown), the others
    are unknown at once, and the result naming the awaited digest is left out."""
    n = MAX_AWAITED + 5
    saved = {"version": 1, "commands": [{
        "command": "ls", "raised": True, "qualified": ["2@ffffffff"],
        "failures": {"2": [100.0 + i * 0.01 for i in range(n)]},
        "outputs": base64.b64encode(b"\xff" * 4 * n).decode()}]}
    det = Detector(5, 600)
    det.load_dict(saved, now=150.0)
    assert det.awaited_count == MAX_AWAITED and det._commands["ls"].qualified is None
    assert list(det._commands["ls"].get(2).outs).count(0) == 5
    # The waits end: raised as the first of them counts (with the 5 unknown already: 6),
    # then all n failures of output unknown.
    (raised,) = det.expire(165.0)
    assert (raised.note.count, raised.note.output) == (6, "unknown") and det.awaited_count == 0
    assert [(n_.count, n_.output) for n_ in det.notes(165.0)] == [(n, "unknown")]


def test_state_keeps_digests_and_results() -> None:
    """The saved state keeps each failure's digest (`outputs`, only when some are known) and
    the qualified results (`"2@<digest>"`; `"2"` by exit alone); a state saved before issue
    19 (no `outputs`) or with a malformed list loads with the outputs unknown, and one saved
    before issue 26 (`"2"`) takes the result of that exit's newest failure."""
    det = _fed([7, 7, 8, 7])
    saved = det.to_dict()
    assert saved["commands"][0]["qualified"] == ["2@00000007"]
    again = Detector(3, 600)
    again.load_dict(saved)
    assert again.to_dict() == saved and again.notes(110.0)[0].output == "same"
    assert isinstance(saved["commands"][0]["outputs"], str)
    for outputs in (None, "AAAABw==", "not base64!", 7, {"2": [7, 7, 8, 7]}):
        item = dict(saved["commands"][0], qualified=["2"])
        item.pop("outputs")
        if outputs is not None:
            item["outputs"] = outputs
        old = Detector(3, 600)
        old.load_dict({"version": 1, "commands": [item]})
        assert [(n.count, n.output) for n in old.notes(110.0)] == [(4, "unknown")]
        assert "outputs" not in old.to_dict()["commands"][0]
    old = Detector(3, 600)
    old.load_dict({"version": 1, "commands": [dict(saved["commands"][0], qualified=["2"])]})
    assert old._commands["make test"].qualified == {(2, 7)}
    by_exit = Detector(3, 600, match_output=False)
    by_exit.load_dict(saved)
    assert by_exit._commands["make test"].qualified == {(2, None)}
    assert by_exit.notes(110.0)[0].output == "changing"
    for bad in (["2@7"], ["2@0000000g"], ["x@00000007"]):
        with pytest.raises(StateError):
            Detector(3, 600).load_dict({"version": 1, "commands": [
                dict(saved["commands"][0], qualified=bad)]})
    assert "outputs" not in _fed([0, 0, 0]).to_dict()["commands"][0]


def test_an_awaited_failure_stops_waiting_on_time_after_the_clock_stepped_back() -> None:
    """The wall clock steps back an hour (NTP) between two awaited failures: the second's wait
    ends first (15 s after it came) and ends then, though the first is still waiting;
    :meth:`Detector.next_change` never stays in the past after :meth:`Detector.expire` (the
    run loop would spin on it, a collection pass a millisecond, for the hour)."""
    det = Detector(1, 600)
    det.record("ls /a", 2, True, T0, T0, pending=True)  # waits until T0 + 15
    det.record("ls /b", 2, True, T0 - 3600, T0 - 3600, pending=True)  # until T0 - 3585
    now = T0 - 3600 + 20
    (raised,) = det.expire(now)
    assert (raised.note.command, raised.note.output) == ("ls /b", "unknown")
    assert det.awaited_count == 1 and det.next_change() == T0 - 3000 > now  # "ls /b" leaves


def _ac_feed(det: Detector, mode: str, command: str, ts: float, failed: bool = True,
             exit_status: int = 2) -> list:
    """One record in ``mode``: ``exit`` (match_output off, no output), ``known`` (the
    session route: the output, digest 7, comes with the record) or ``awaited`` (the hook's
    record awaits it and the session log's line gives it 0.2 s later)."""
    if not failed or mode == "exit":
        return det.record(command, exit_status, failed, ts, ts)
    if mode == "known":
        return det.record(command, exit_status, True, ts, ts, output=7)
    events = det.record(command, exit_status, True, ts, ts, pending=True)
    return events + (det.set_output(command, exit_status, ts, 7, ts + 0.2) or [])


@pytest.mark.parametrize("mode", ["exit", "known", "awaited"])
def test_c_ac2_c_ac3_c_ac8_hold_under_both_readings_of_the_same_result(mode: str) -> None:
    """C6's reading (issue 26) keeps C-AC2, C-AC3 and C-AC8: by exit alone, with outputs
    known at once, and with outputs that come after the hook's records."""
    det = Detector(5, 600, match_output=mode != "exit")
    feed_ = lambda cmd, ts, **kw: _ac_feed(det, mode, cmd, ts, **kw)  # noqa: E731
    # C-AC2: 4 do not raise, the 5th within 10 min does; 5 over 11 min do not.
    assert sum((feed_("ls /x", T0 + i * MIN) for i in range(4)), []) == []
    (raised,) = feed_("ls /x", T0 + 4 * MIN)
    assert (raised.note.count, raised.note.output) == (5, "unknown" if mode == "exit" else "same")
    assert sum((feed_("ls /y", T0 + i * 11 * MIN / 4) for i in range(5)), []) == []
    # C-AC3: alternating arguments, two notes.
    events = sum((feed_(f"gh pr view {123 if i % 2 == 0 else 456}", T0 + i)
                  for i in range(10)), [])
    assert [e.note.command for e in events] == ["gh pr view 123", "gh pr view 456"]
    # C-AC8: a success clears; 5 new failures raise again; gone a window after the last.
    assert feed_("ls /x", T0 + 5 * MIN, failed=False) == [NoteCleared("ls /x", "success")]
    assert sum((feed_("ls /x", T0 + 6 * MIN + i) for i in range(4)), []) == []
    (again,) = feed_("ls /x", T0 + 6 * MIN + 4)
    assert again.note.count == 5
    last = T0 + 6 * MIN + 4
    assert NoteCleared("ls /x", "expired") not in det.expire(last + 600 - 0.001)
    assert NoteCleared("ls /x", "expired") in det.expire(last + 600)
    assert det.awaited_count == 0


def test_a_note_raised_late_by_an_awaited_failure_counts_as_of_that_failure() -> None:
    """Four failures at the start of the window and a fifth 590 s later whose output comes
    14 s after it (or never: the wait ends 15 s after): the five spanned 590 s, so the note is
    raised (C-AC2), and it says 5 failures in 10 min, as it would have said had the output
    come at once. Before, it was raised as of when the wait ended, when the first four had
    left the window: "failed 1 times"."""
    for given in (True, False):
        det = Detector(5, 600)
        for i in range(4):
            det.record("make test", 2, True, T0 + i, T0 + i, output=7 if given else 0)
        det.record("make test", 2, True, T0 + 590, T0 + 590, pending=True)
        if given:
            (raised,) = det.set_output("make test", 2, T0 + 590, 7, T0 + 604)
        else:
            (raised,) = det.expire(T0 + 605)
        assert (raised.note.count, raised.note.minutes, raised.note.output) == (
            5, 10, "same" if given else "unknown")
        assert raised.note.message == "Repeating failure: make test failed 5 times in 10 min (exit 2)"
