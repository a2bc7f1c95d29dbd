"""Turn verdicts (repeat_failure.turns.verdict; seed ard-0038 §1, §2): the classifier's rules and precedence,
the per-session turn tracker, and its state round trip. The verdicts of real captured turns are
in tests/test_verdict_captures.py."""

from __future__ import annotations

import orjson
import pytest

from repeat_failure.backends import (ERROR, SHELL_END, SHELL_START, TEXT, TOOL, TURN_END, TURN_START,
                              SessionEvent)
from repeat_failure.turns.verdict import (AGENT_ERROR, AGENT_NO_OUTPUT, EXIT_CODES, NONZERO_EXIT, OK,
                             VERDICTS, TurnCounts, TurnTracker, classify)


@pytest.mark.parametrize("text,tools,error,exit_status,expected", [
    (1, 0, False, None, OK),
    (0, 1, False, None, OK),
    (0, 1, False, 0, OK),
    (0, 0, False, None, AGENT_NO_OUTPUT),
    (0, 0, False, 0, AGENT_NO_OUTPUT),      # the CLI exited 0 having done nothing
    (3, 2, False, 1, NONZERO_EXIT),
    (0, 0, False, 143, NONZERO_EXIT),       # no output either: the exit explains more
    (2, 1, True, None, AGENT_ERROR),
    (0, 0, True, 0, AGENT_ERROR),           # an error the CLI still exited 0 on
    (0, 0, True, 1, AGENT_ERROR),           # the error says why: it comes first
])
def test_classify_follows_the_documented_precedence(text, tools, error, exit_status, expected):
    assert classify(text, tools, error, exit_status) == expected


def test_every_verdict_has_a_distinct_exit_code_and_ok_is_zero():
    assert EXIT_CODES == {OK: 0, AGENT_NO_OUTPUT: 3, AGENT_ERROR: 4, NONZERO_EXIT: 5}
    assert set(VERDICTS) == set(EXIT_CODES)


def ev(kind, ts=1.0, source="s1", **kw):
    return SessionEvent(kind, ts, source=source, **kw)


def test_a_turn_with_text_is_ok_and_one_with_nothing_is_no_output():
    t = TurnTracker()
    assert t.on_event(ev(TURN_START, 1.0, turn_id="p1")) == []
    assert t.on_event(ev(TEXT, 2.0)) == []
    [turn] = t.on_event(ev(TURN_END, 3.0))
    assert (turn.verdict, turn.turn_id, turn.text, turn.tools, turn.ts, turn.source) == \
        (OK, "p1", 1, 0, 3.0, "s1")
    t.on_event(ev(TURN_START, 4.0, turn_id="p2"))
    [turn] = t.on_event(ev(TURN_END, 5.0))
    assert (turn.verdict, turn.turn_id, turn.text, turn.tools) == (AGENT_NO_OUTPUT, "p2", 0, 0)


def test_tool_calls_alone_make_a_turn_ok_and_edits_are_counted_by_tool_name():
    t = TurnTracker(frozenset({"Write", "Edit"}))
    t.on_event(ev(TURN_START))
    t.on_event(ev(SHELL_START, call_id="c1", command="ls", tool="Bash"))
    t.on_event(ev(SHELL_END, call_id="c1", command="ls", tool="Bash", exit=0, failed=False))
    t.on_event(ev(TOOL, call_id="c2", tool="Write"))
    t.on_event(ev(TOOL, call_id="c3", tool="Read"))
    [turn] = t.on_event(ev(TURN_END))
    assert (turn.verdict, turn.text, turn.tools, turn.edits) == (OK, 0, 3, 1)


def test_an_error_event_makes_the_turn_agent_error_with_its_text_scrubbed():
    token = "ghp_" + "Z" * 36
    t = TurnTracker()
    t.on_event(ev(TURN_START))
    t.on_event(ev(TEXT))
    t.on_event(ev(ERROR, detail=f"API Error: 401 bad token {token} " + "x" * 1000))
    [turn] = t.on_event(ev(TURN_END))
    assert turn.verdict == AGENT_ERROR
    assert token not in turn.error and "[REDACTED]" in turn.error
    assert turn.error.startswith("API Error: 401 bad token ")
    assert len(turn.error) == 300 and turn.error.endswith("…")


def test_an_error_cut_inside_a_secret_keeps_no_part_of_it():
    head = "x" * 4080 + " key AKIA"
    t = TurnTracker()
    t.on_event(ev(TURN_START))
    t.on_event(ev(ERROR, detail=head + "IOSFODNN7EXAMPLE and more"))
    [turn] = t.on_event(ev(TURN_END))
    assert "AKIA" not in turn.error and "IOSF" not in turn.error


def test_turn_ids_are_scrubbed_and_bounded_in_memory_and_in_the_saved_state():
    token = "ghp_" + "A" * 36
    t = TurnTracker()
    t.on_event(ev(TURN_START, turn_id=f"tok-{token}" + "x" * 10_000))
    saved = orjson.dumps(t.to_dict()).decode()
    assert token not in saved and len(saved) < 400
    back = TurnTracker()
    back.load_dict({"open": {"s1": [0, 0, 0, 1, f"Bearer {token}", token, True]}})
    assert token not in orjson.dumps(back.to_dict()).decode()


def test_a_new_turn_start_finishes_the_open_turn_of_that_session_only():
    t = TurnTracker()
    t.on_event(ev(TURN_START, source="a"))
    t.on_event(ev(TURN_START, source="b"))
    t.on_event(ev(TEXT, source="b"))
    [turn] = t.on_event(ev(TURN_START, 9.0, source="a"))  # a's first turn had nothing
    assert (turn.source, turn.verdict, turn.ts) == ("a", AGENT_NO_OUTPUT, 9.0)
    [turn] = t.on_event(ev(TURN_END, source="b"))
    assert (turn.source, turn.verdict) == ("b", OK)
    assert list(t.open) == ["a"]


def test_a_turn_seen_only_in_part_is_not_called_empty():
    t = TurnTracker()
    assert t.on_event(ev(TURN_END)) == []          # an end alone: nothing to classify
    t.on_event(ev(SHELL_END, call_id="c", tool="Bash", exit=1, failed=True))
    assert t.on_event(ev(TURN_END)) == []          # a shell end is not a call's start
    t.on_event(ev(TEXT))
    assert t.on_event(ev(TURN_END)) == []          # a tail with text proves no "ok" either
    t.on_event(ev(ERROR, detail="boom"))
    [turn] = t.on_event(ev(TURN_END))
    assert (turn.verdict, turn.error) == (AGENT_ERROR, "boom")


def test_the_tracker_survives_a_round_trip_through_json_with_only_scrubbed_text():
    token = "sk-ant-api03-" + "Q" * 90
    t = TurnTracker()
    t.on_event(ev(TURN_START, source="a", turn_id="p1"))
    t.on_event(ev(TEXT, source="a"))
    t.on_event(ev(ERROR, source="a", detail=f"Authorization: Bearer {token}"))
    data = orjson.loads(orjson.dumps(t.to_dict()))
    assert token not in orjson.dumps(data).decode()
    back = TurnTracker()
    back.load_dict(data)
    [turn] = back.on_event(ev(TURN_END, source="a"))
    assert (turn.verdict, turn.turn_id, turn.text) == (AGENT_ERROR, "p1", 1)


@pytest.mark.parametrize("bad", [None, [], {"open": []}, {"open": {"a": [1, 2]}},
                                 {"open": {"a": [1, 0, 0, 0, "", "", "yes"]}},
                                 {"open": {"a": [-1, 0, 0, 0, "", "", True]}},
                                 {"open": {"a": [True, 0, 0, 0, "", "", True]}}])
def test_a_damaged_saved_tracker_is_ignored(bad):
    t = TurnTracker()
    t.load_dict(bad)
    assert t.open == {}


def test_sessions_are_bounded():
    t = TurnTracker()
    for i in range(200):
        t.on_event(ev(TURN_START, source=f"s{i}"))
    assert len(t.open) == 64 and "s199" in t.open and "s0" not in t.open


def test_counts_keep_the_first_error_and_count_each():
    c = TurnCounts()
    c.add(ev(ERROR, detail="first"))
    c.add(ev(ERROR, detail="second"))
    c.add(ev(ERROR))
    assert (c.errors, c.error, c.verdict()) == (3, "first", AGENT_ERROR)
    c2 = TurnCounts()
    c2.add(ev(ERROR))
    assert c2.error == "error"


def test_an_endless_line_is_read_in_bounded_pieces_and_skipped():
    import io

    from repeat_failure.turns.verdict import bounded_lines, read_transcript

    first = b'{"type": "thread.started"}\n'
    huge = b'{"type": "item.completed", "x": "' + b"A" * 5000 + b'"}\n'
    done = b'{"type": "turn.started"}\n{"type": "turn.completed"}\n'
    stream = io.BytesIO(first + huge + huge.rstrip(b"\n") + b"B" * 3000 + b"\n" + done)
    lines = list(bounded_lines(stream, limit=1000))
    assert [len(x) for x in lines] == [len(first), 1001, 1001, 25, 27]
    result = read_transcript(bounded_lines(io.BytesIO(first + huge + done), limit=1000))
    assert (result.verdict, result.unrecognised, result.complete) == (AGENT_NO_OUTPUT, 1, True)


def test_verdict_json_writes_no_control_or_bidi_character_raw(tmp_path, capsys):
    """Issue 28 item 19: ``ensure_ascii=False`` wrote U+202E and C1 controls raw; they are
    escaped now, and the parsed report holds exactly the text it held."""
    import json

    from repeat_failure.cli import main

    message = "refused \u202eevil\u202c \u0085next\u009b31m \u00e9t\u00e9 \U0001f600"
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in (
        {"type": "thread.started", "thread_id": "t1"}, {"type": "turn.started"},
        {"type": "error", "message": message}, {"type": "turn.failed",
                                                "error": {"message": message}})))
    assert main(["verdict", "--json", str(path)]) == EXIT_CODES[AGENT_ERROR]
    out = capsys.readouterr().out
    assert not any(c in out for c in "\u202e\u202c\u0085\u009b")
    assert "\\u202e" in out and "\\u0085" in out and "\u00e9t\u00e9 \U0001f600" in out
    assert message in json.loads(out)["error"]


def test_an_endless_stream_ends_with_a_clear_error(monkeypatch, capsys):
    """Issue 28 item 19: ``repeat-failure verdict /dev/zero`` read for ever (one endless line,
    dropped in pieces); what it reads is bounded now, and it exits 1 naming the bound."""
    import repeat_failure.turns.verdict as verdict_mod
    from repeat_failure.cli import main

    monkeypatch.setattr(verdict_mod, "MAX_TRANSCRIPT_BYTES", 64 << 20)
    assert main(["verdict", "/dev/zero"]) == 1
    assert capsys.readouterr().err == (
        "repeat-failure verdict: /dev/zero: the transcript is over 67,108,864 bytes "
        "(MAX_TRANSCRIPT_BYTES): not read further\n")
    assert main(["verdict", "--exit-status", "2", "/dev/zero"]) == EXIT_CODES[NONZERO_EXIT]


def test_bounded_lines_stops_at_the_byte_bound():
    import io

    from repeat_failure.turns.verdict import TranscriptError, bounded_lines

    lines = bounded_lines(io.BytesIO(b"a\n" * 10), limit=1000, total=7)
    assert [next(lines), next(lines), next(lines)] == [b"a\n"] * 3
    with pytest.raises(TranscriptError, match="over 7 bytes"):
        next(lines)
    assert list(bounded_lines(io.BytesIO(b"a\n" * 10), limit=1000, total=20)) == [b"a\n"] * 10
