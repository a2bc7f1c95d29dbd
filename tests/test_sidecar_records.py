"""The record pipeline on its own (repeat_failure.sidecar.records): one agent's lines → counters,
detector, notes and the note's Event, with no sidecar, no files and no clock but the ones given."""

from __future__ import annotations

import json
from types import SimpleNamespace

import orjson
import pytest

from repeat_failure.backends import SHELL_END, SessionEvent
from repeat_failure.config import AgentSpec
from repeat_failure.sidecar.agent import AgentState
from repeat_failure.rules.detector import Detector
from repeat_failure.rules.exclude import Exclusions
from repeat_failure.rules.parse import Record
from repeat_failure.sidecar.records import (REJECTED_LOG_LINES, REJECTED_LOG_WINDOW_S,
                                            RecordPipeline)

T0 = 1_700_000_000.0


class Mono:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def line(cmd: str, ts: float, exit_: int = 2, **extra) -> bytes:
    return orjson.dumps({"v": 1, "ts": ts, "agent": "a1", "backend": "bash",
                         "route": "bash_env", "exit": exit_, "cmd": cmd, **extra})


def pipeline(exclude=(), mono=None):
    sent: list[tuple] = []
    p = RecordPipeline(Exclusions(list(exclude)), mono or Mono(),
                       lambda *args, **kw: sent.append((args, kw)))
    return p, sent


def state(backend: str = "bash", tail=None, threshold: int = 3) -> AgentState:
    return AgentState(AgentSpec("a1", backend), Detector(threshold, 600), tail=tail)


def session_tail(route_records: bool):
    """What the pipeline reads of a session-log tail: whether its reader is a route."""
    return SimpleNamespace(reader=SimpleNamespace(route_records=route_records))


def logged(stream) -> list[dict]:
    return [json.loads(x) for x in stream.getvalue().splitlines()]


def test_lines_are_counted_by_outcome_and_rejection_reason(log_stream):
    p, sent = pipeline(exclude=["make wait"])
    s = state()
    for i in range(3):
        p.line(s, line("make check", T0 + i), T0 + 10)
    p.line(s, line("make wait", T0 + 4), T0 + 10)
    p.line(s, line("ls", T0 + 5, exit_=0), T0 + 10)
    p.line(s, b"{not json", T0 + 10)
    p.line(s, "torn", T0 + 10)  # a reason the collector gave instead of a line
    assert s.records == {("bash", "bash_env", "failure"): 3, ("bash", "bash_env", "excluded"): 1,
                         ("bash", "bash_env", "success"): 1}
    assert s.rejected == {"malformed": 1, "torn": 1}
    assert (s.last_record_ts, s.notes_raised, s.dirty) == (T0 + 5, 1, True)
    assert sent == [(("a1", "bash", "Repeating failure: make check failed 3 times in 1 min "
                      "(exit 2)"), {})]
    assert [(n.command, n.count) for n in s.detector.notes(T0 + 10)] == [("make check", 3)]
    raised = [x for x in logged(log_stream) if x.get("event") == "note_raised"]
    assert [(x["agent"], x["command"], x["exit"], x["count"]) for x in raised] == [
        ("a1", "make check", 2, 3)]


def test_an_excluded_or_empty_command_never_reaches_the_detector():
    p, sent = pipeline(exclude=["make wait"])
    s = state(threshold=1)
    p.line(s, line("make wait", T0), T0)
    p.line(s, line("   ", T0), T0)
    assert s.records == {("bash", "bash_env", "excluded"): 2}
    assert (s.detector.notes(T0), sent, s.notes_raised) == ([], [], 0)


def test_exclusions_can_be_replaced_between_lines():
    p, _ = pipeline()
    s = state(threshold=10)
    p.line(s, line("make wait", T0), T0)
    p.exclusions = Exclusions(["make wait"])
    p.line(s, line("make wait", T0 + 1), T0 + 1)
    assert s.records == {("bash", "bash_env", "failure"): 1, ("bash", "bash_env", "excluded"): 1}


def test_a_record_in_both_routes_counts_once_and_keeps_the_session_output():
    """Where the session log is a route (C3), the hook's record and the session log's record of
    one call count once: the second is a duplicate, and the session record's output digest goes
    to the failure counted first."""
    p, _ = pipeline()
    s = state(backend="claude", tail=session_tail(True), threshold=10)
    hooked = Record(T0, "a1", "claude", "bash_env", 1, True, "make check")
    logged_call = Record(T0 + 0.5, "a1", "claude", "claude_session_log", 1, True, "make check")
    p.record(s, hooked, T0 + 1)
    # Awaiting its output: saved with the awaited digest (0xFFFFFFFF), awaited again on load.
    assert s.detector.to_dict()["commands"][0]["outputs"] == "/////w=="
    p.record(s, logged_call, T0 + 1, output=0xABC)
    assert s.records == {("claude", "bash_env", "failure"): 1,
                         ("claude", "claude_session_log", "duplicate"): 1}
    assert s.detector.failures(T0 + 1, 10) == [("make check", 1, 1)]
    # The one failure's digest, 0xABC, packed as the state file keeps it (base64 of 0x00000abc).
    assert s.detector.to_dict()["commands"][0]["outputs"] == "AAAKvA=="


def test_without_a_session_route_both_records_count():
    p, _ = pipeline()
    s = state(backend="claude", tail=None, threshold=10)
    p.record(s, Record(T0, "a1", "claude", "bash_env", 1, True, "make check"), T0 + 1)
    p.record(s, Record(T0, "a1", "claude", "claude_session_log", 1, True, "make check"), T0 + 1)
    assert s.records == {("claude", "bash_env", "failure"): 1,
                         ("claude", "claude_session_log", "failure"): 1}
    assert s.detector.failures(T0 + 1, 10) == [("make check", 1, 2)]


def test_only_the_hooks_records_feed_the_c12_timer():
    p, _ = pipeline()
    s = state(backend="claude", threshold=10)
    p.record(s, Record(T0 + 7, "a1", "claude", "claude_session_log", 0, False, "ls"), T0 + 9)
    assert s.activity.to_dict() == state(backend="claude").activity.to_dict()
    p.record(s, Record(T0 + 8, "a1", "claude", "bash_env", 0, False, "ls"), T0 + 9)
    assert s.activity.to_dict() != state(backend="claude").activity.to_dict()


def test_a_session_record_too_far_ahead_is_refused_and_counted():
    s = state(backend="claude")
    event = SessionEvent(kind=SHELL_END, ts=T0 + 301, call_id="c1",
                         command="make check", exit=2, failed=True)
    assert RecordPipeline.session_record(s, event, T0) is None
    assert s.reader_errors == {"future_ts": 1}
    ok = RecordPipeline.session_record(s, SessionEvent(
        kind=SHELL_END, ts=T0 + 300, call_id="c1", command="make check", exit=2,
        failed=True), T0)
    assert (ok.route, ok.exit, ok.failed, ok.cmd, ok.ts) == (
        "claude_session_log", 2, True, "make check", T0 + 300)
    assert s.reader_errors == {"future_ts": 1}


def test_rejected_files_log_at_most_the_bound_then_say_how_many_were_not(log_stream):
    mono = Mono()
    p, _ = pipeline(mono=mono)
    s = state()
    for i in range(REJECTED_LOG_LINES + 2):
        p.rejected_file(s, f"f{i}.jsonl", "insecure", "mode 0666")
    lines = [x for x in logged(log_stream) if x.get("event") == "record_file_rejected"]
    assert [x["file"] for x in lines] == [f"records/f{i}.jsonl" for i in range(REJECTED_LOG_LINES)]
    assert s.rejected_unlogged == 2
    mono.t += REJECTED_LOG_WINDOW_S
    p.rejected_file(s, "late\udcff.jsonl", "insecure", "mode 0666")
    last = logged(log_stream)[-1]
    assert (last["file"], last["reason"], last["detail"], last["unlogged"]) == (
        "records/late\\udcff.jsonl", "insecure", "mode 0666", 2)
    assert s.rejected_unlogged == 0


def test_a_secret_in_a_rejected_file_name_is_scrubbed(log_stream):
    p, _ = pipeline()
    token = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"
    p.rejected_file(state(), f"{token}.jsonl", "insecure", "mode 0666")
    assert token not in log_stream.getvalue()
    assert "[REDACTED]" in logged(log_stream)[-1]["file"]


def test_report_counts_a_raised_note_once_and_logs_a_cleared_one(log_stream):
    p, sent = pipeline()
    s = state(threshold=2)
    p.line(s, line("make check", T0), T0)
    p.line(s, line("make check", T0 + 1), T0 + 1)
    p.line(s, line("make check", T0 + 2), T0 + 2)  # still raised: no second note, no Event
    assert (s.notes_raised, len(sent)) == (1, 1)
    s.dirty = False
    p.report(s, s.detector.expire(T0 + 2 + 600))
    assert (s.notes_raised, len(sent), s.dirty) == (1, 1, True)
    cleared = [x for x in logged(log_stream) if x.get("event") == "note_cleared"]
    assert [(x["command"], x["reason"]) for x in cleared] == [("make check", "expired")]


def test_nothing_happens_for_no_events():
    p, sent = pipeline()
    s = state()
    p.report(s, [])
    assert (s.dirty, s.notes_raised, sent) == (False, 0, [])


@pytest.mark.parametrize("bad", [
    b"", b"[]", line("x", T0, exit_=300), line("x", T0)[:-1], line("x", T0 + 301),
    line("x", T0, route="other")], ids=["empty", "not_an_object", "exit_300", "cut_json",
                                        "future_ts", "unknown_route"])
def test_a_line_that_is_not_a_record_is_counted_malformed_and_nothing_else(bad):
    p, sent = pipeline()
    s = state(threshold=1)
    p.line(s, bad, T0)
    assert (s.rejected, s.records, s.last_record_ts, sent) == ({"malformed": 1}, {}, None, [])
