"""One agent's state on its own (repeat_failure.sidecar.agent): delivered call ids, which route
and safeguard apply, the C12 state and its next flip, forgetting on check off, and the view the
exporter reads."""

from __future__ import annotations

from types import SimpleNamespace

from repeat_failure.backends import SHELL_END, SHELL_START, TURN_START, SessionEvent
from repeat_failure.config import AgentSpec, Config
from repeat_failure.sessions.activity import Activity
from repeat_failure.sidecar.agent import MAX_DELIVERED_CALLS, AgentState
from repeat_failure.rules.detector import Detector
from repeat_failure.turns.verdict import TurnTracker

T0 = 1_700_000_000.0


def tail(route_records: bool):
    """What AgentState reads of a session-log tail: whether its reader is a route."""
    return SimpleNamespace(reader=SimpleNamespace(route_records=route_records))


def unmatched_shell_call(state: AgentState, at: float) -> None:
    """A turn whose shell call finished at ``at`` with no record: the C12 timer runs from it."""
    for event in (SessionEvent(TURN_START, ts=at - 2), SessionEvent(SHELL_START, ts=at - 1,
                                                                      call_id="c1"),
                  SessionEvent(SHELL_END, ts=at, call_id="c1", command="ls", exit=0,
                               failed=False)):
        state.activity.on_event(event)


def test_a_call_id_is_delivered_once_within_the_bound():
    s = AgentState(AgentSpec("a1", "claude"), Detector(3, 600))
    assert [s.first_delivery(c) for c in ("c1", "c1", "", "")] == [True, False, True, True]
    for i in range(MAX_DELIVERED_CALLS):
        assert s.first_delivery(f"n{i}")
    assert len(s.delivered_calls) == MAX_DELIVERED_CALLS == 4096
    assert "c1" not in s.delivered_calls  # the oldest id went first
    assert s.first_delivery("c1") and not s.first_delivery(f"n{MAX_DELIVERED_CALLS - 1}")


def test_which_route_and_safeguard_apply():
    # (backend, tail) -> (session_route, route_available, safeguard)
    cases = {
        ("bash", None): (False, True, False),  # no session-log reader: the hook alone
        ("claude", None): (False, True, False),  # a reader, no home: the safeguard is off
        ("claude", False): (False, True, True),  # the log is read beside the hook (C12)
        ("opencode", True): (True, True, False),  # the log is the route (C3)
    }
    for (backend, route), expected in cases.items():
        s = AgentState(AgentSpec("a1", backend), Detector(3, 600),
                       tail=None if route is None else tail(route))
        assert (s.session_route, s.route_available, s.safeguard) == expected, backend


def test_a_session_log_route_without_a_home_records_nothing():
    from repeat_failure.backends import session_reader
    route_backends = [b for b in ("opencode", "kilo", "pi", "omp")
                      if session_reader(b) is not None and session_reader(b).route_records]
    assert route_backends
    s = AgentState(AgentSpec("a1", route_backends[0]), Detector(3, 600))
    assert s.route_available is False


def test_the_c12_state_and_its_next_flip():
    s = AgentState(AgentSpec("a1", "claude"), Detector(3, 600), tail=tail(False),
                   activity=Activity(not_before=T0))
    assert (s.receiving(T0 + 999, 60), s.safeguard_change(60)) == (True, None)
    unmatched_shell_call(s, T0 + 12)
    assert s.safeguard_change(60) == T0 + 72
    assert (s.receiving(T0 + 71.9, 60), s.receiving(T0 + 72, 60)) == (True, False)
    s.activity.on_record(T0 + 80)
    assert (s.receiving(T0 + 200, 60), s.safeguard_change(60)) == (True, None)


def test_without_the_safeguard_the_agent_always_receives():
    s = AgentState(AgentSpec("a1", "opencode"), Detector(3, 600), tail=tail(True),
                   activity=Activity(not_before=T0))
    unmatched_shell_call(s, T0 + 12)
    assert (s.receiving(T0 + 10_000, 60), s.safeguard_change(60)) == (True, None)


def test_forget_drops_what_the_check_knew_and_keeps_the_counters():
    s = AgentState(AgentSpec("a1", "claude"), Detector(3, 600),
                   turns=TurnTracker(frozenset({"Edit"})))
    for i in range(3):
        s.detector.record("make", 2, True, T0 + i, T0 + i)
    s.records[("claude", "bash_env", "failure")] = 3
    s.last_verdict, s.failed_in_a_row, s.notes_raised = "agent_error", 4, 1
    s.forget(5, 120.0, T0 + 50)
    assert s.detector.notes(T0 + 50) == [] and s.detector.next_change() is None
    assert (s.detector.threshold, s.detector.window_s) == (5, 120.0)
    assert (s.activity.not_before, s.turns.edit_tools) == (T0 + 50, frozenset({"Edit"}))
    assert (s.last_verdict, s.failed_in_a_row) == (None, 0)
    assert (s.records, s.notes_raised) == ({("claude", "bash_env", "failure"): 3}, 1)


def test_the_view_shows_the_saved_counts_and_nothing_of_the_check_while_it_is_off():
    s = AgentState(AgentSpec("a1", "claude", preview_url="http://127.0.0.1:3000/"),
                   Detector(3, 600), tail=tail(False))
    for i in range(3):
        s.detector.record("make", 2, True, T0 + i, T0 + i)
    s.records[("claude", "bash_env", "failure")] = 3  # counted, not saved yet
    s.saved_counts = ({("claude", "bash_env", "failure"): 2}, {"torn": 1}, 1)
    s.verdicts["ok"] = 2
    s.preview_probes, s.preview_state = 1, "ok"
    on = s.view(T0 + 10, Config(enabled=True), {"created": 1})
    assert (on.agent, on.backend, on.records, on.rejected, on.notes_raised, on.events) == (
        "a1", "claude", {("claude", "bash_env", "failure"): 2}, {"torn": 1}, 1, {"created": 1})
    assert [n.message for n in on.row.notes] == [
        "Repeating failure: make failed 3 times in 1 min (exit 2)"]
    assert on.failures == (("make", 2, 3),)
    assert (on.verdicts, on.preview) == ({"ok": 2}, {"probes": 1, "errors": {}, "state": "ok"})
    off = s.view(T0 + 10, Config(enabled=False, turn_health=False), {})
    assert (off.row, off.failures, off.verdicts, off.last_verdict, off.preview) == (
        None, (), None, None, None)
    # Turn health is its own switch (issue 31): the check off still shows verdicts and preview.
    health = s.view(T0 + 10, Config(enabled=False), {})
    assert (health.row, health.failures, health.verdicts, health.preview) == (
        None, (), {"ok": 2}, {"probes": 1, "errors": {}, "state": "ok"})
    assert off.records == {("claude", "bash_env", "failure"): 2}
