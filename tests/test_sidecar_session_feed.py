"""The session feed on its own (repeat_failure.sidecar.session_feed): one poll result of an agent's
session log → its C12 timer, turn verdicts, preview probes and (C3) records; and the config
file's change detection (repeat_failure.sidecar.config_file)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from repeat_failure.backends import (ERROR, SHELL_END, SHELL_START, TEXT, TOOL, TURN_END,
                                     TURN_START, SessionEvent)
from repeat_failure.config import AgentSpec, Config
from repeat_failure.events import PREVIEW_REASON
from repeat_failure.sessions.activity import Activity
from repeat_failure.sessions.tail import PollResult
from repeat_failure.sidecar.agent import AgentState
from repeat_failure.sidecar.config_file import ConfigFile
from repeat_failure.rules.detector import Detector
from repeat_failure.rules.exclude import Exclusions
from repeat_failure.sidecar.records import RecordPipeline
from repeat_failure.sidecar.session_feed import SessionFeed, log_receiving
from repeat_failure.turns.probe import ProbeResult
from repeat_failure.turns.verdict import TurnTracker

T0 = 1_700_000_000.0
URL = "http://127.0.0.1:3000/"


class Prober:
    def __init__(self) -> None:
        self.requests: list[tuple] = []

    def request(self, agent, url, timeout_s):
        self.requests.append((agent, url, timeout_s))


def feed(config: Config | None = None):
    sent: list[tuple] = []
    prober = Prober()
    records = RecordPipeline(Exclusions([]), lambda: 0.0, lambda *a, **k: sent.append((a, k)))
    cfg = config or Config(enabled=True, preview_timeout_s=7.0)
    return SessionFeed(records, prober, lambda: cfg, lambda *a, **k: sent.append((a, k))), \
        prober, sent


def agent(route: bool, preview: str | None = URL) -> AgentState:
    s = AgentState(AgentSpec("a1", "claude", "/home/a", preview_url=preview), Detector(2, 600),
                   tail=SimpleNamespace(reader=SimpleNamespace(route_records=route)),
                   activity=Activity(not_before=T0 - 100))
    s.turns = TurnTracker(frozenset({"Edit"}))
    return s


def turn(*events: SessionEvent) -> list[SessionEvent]:
    return [SessionEvent(TURN_START, ts=T0, source="s1", turn_id="t1"), *events,
            SessionEvent(TURN_END, ts=T0 + 9, source="s1")]


def shell(call: str, ts: float, exit_: int, output: str | None = None) -> list[SessionEvent]:
    return [SessionEvent(SHELL_START, ts=ts - 0.5, source="s1", call_id=call, command="make"),
            SessionEvent(SHELL_END, ts=ts, source="s1", call_id=call, command="make",
                         exit=exit_, failed=exit_ != 0, output=output)]


def logged(stream) -> list[dict]:
    return [json.loads(x) for x in stream.getvalue().splitlines()]


def test_reader_errors_and_ignored_lines_are_counted():
    f, _, _ = feed()
    s = agent(route=False)
    f.feed(s, PollResult(errors={"not_json": 2}, ignored=3), T0)
    f.feed(s, PollResult(errors={"not_json": 1, "bad_exit": 1}), T0)
    assert (s.reader_errors, s.reader_ignored, s.dirty) == ({"not_json": 3, "bad_exit": 1}, 3,
                                                           True)
    quiet = agent(route=False)
    f.feed(quiet, PollResult(ignored=1), T0)
    assert quiet.dirty is False  # nothing to save: ignored lines are not kept


def test_a_route_delivers_each_call_once_as_a_record():
    f, _, sent = feed()
    s = agent(route=True)
    calls = shell("c1", T0 + 1, 2) + shell("c2", T0 + 2, 2)
    f.feed(s, PollResult(events=turn(*calls)), T0 + 10)
    f.feed(s, PollResult(events=shell("c2", T0 + 2, 2)), T0 + 10)  # the file read again
    assert s.records == {("claude", "claude_session_log", "failure"): 2}
    assert list(s.delivered_calls) == ["c1", "c2"]
    assert [a for a, _ in sent] == [("a1", "claude", "Repeating failure: make failed 2 times "
                                                     "in 1 min (exit 2)")]


def test_beside_the_hook_a_failed_calls_output_waits_for_its_record():
    """Not a route: no record from the log; a failure's output digest is kept for the hook's
    record of the same call (issue 19)."""
    from repeat_failure.rules.parse import Record
    from repeat_failure.rules.pipeline import failure_output

    f, _, _ = feed()
    s = agent(route=False)
    events = shell("c1", T0 + 1, 2, output="boom")
    f.feed(s, PollResult(events=events), T0 + 10)
    assert s.records == {} and list(s.delivered_calls) == ["c1"]  # its output given once
    f.records.record(s, Record(T0 + 1, "a1", "claude", "bash_env", 2, True, "make"), T0 + 10)
    assert s.records == {("claude", "bash_env", "failure"): 1}
    digest = failure_output(events[-1], True, s.cut_key, T0 + 10)
    reference = Detector(2, 600)
    reference.record("make", 2, True, T0 + 1, T0 + 10, digest)
    assert digest != 0 and s.detector.to_dict() == reference.to_dict()


def test_shell_calls_with_no_record_run_the_c12_timer():
    f, _, _ = feed()
    s = agent(route=False)
    f.feed(s, PollResult(events=[SessionEvent(TURN_START, ts=T0, source="s1"),
                                 *shell("c1", T0 + 1, 0)]), T0 + 2)
    assert (s.activity.unmatched_since, s.activity.last_shell_ts) == (T0 + 1, T0 + 1)
    assert s.safeguard_change(60) == T0 + 61


def test_a_turn_that_edited_files_is_counted_and_has_its_preview_probed(log_stream):
    f, prober, _ = feed()
    s = agent(route=False)
    events = turn(SessionEvent(TOOL, ts=T0 + 1, source="s1", tool="Edit"),
                  SessionEvent(TEXT, ts=T0 + 2, source="s1"))
    f.feed(s, PollResult(events=events), T0 + 10)
    assert (s.verdicts, s.last_verdict, s.failed_in_a_row) == ({"ok": 1}, "ok", 0)
    assert prober.requests == [("a1", URL, 7.0)]
    assert [x for x in logged(log_stream) if x.get("event") == "turn_failed"] == []


def test_a_failed_turn_is_logged_and_counted_in_a_row(log_stream):
    f, prober, _ = feed()
    s = agent(route=False, preview=None)
    for _ in range(2):
        f.feed(s, PollResult(events=turn(
            SessionEvent(TOOL, ts=T0 + 1, source="s1", tool="Edit"),
            SessionEvent(ERROR, ts=T0 + 2, source="s1", detail="API error 529: overloaded"))),
            T0 + 10)
    assert (s.verdicts, s.last_verdict, s.failed_in_a_row) == (
        {"agent_error": 2}, "agent_error", 2)
    assert prober.requests == []  # no preview URL
    failed = [x for x in logged(log_stream) if x.get("event") == "turn_failed"]
    assert [(x["verdict"], x["turn_id"], x["tools"], x["error"], x["failed_in_a_row"])
            for x in failed] == [
        ("agent_error", "t1", 1, "API error 529: overloaded", 1),
        ("agent_error", "t1", 1, "API error 529: overloaded", 2)]
    f.feed(s, PollResult(events=turn(SessionEvent(TEXT, ts=T0 + 2, source="s1"))), T0 + 10)
    assert (s.verdicts, s.failed_in_a_row) == ({"agent_error": 2, "ok": 1}, 0)


def test_the_probe_follows_turn_health_not_the_check():
    """Issue 31: the preview probe has its own switch (``turn_health``); the check's does not
    stop it."""
    edited = SimpleNamespace(verdict="ok", edits=1, turn_id="t", text=1, tools=1, error="")
    f, prober, _ = feed(Config(enabled=False, turn_health=False))
    s = agent(route=False)
    f.turn(s, edited)
    assert prober.requests == [] and s.verdicts == {"ok": 1}
    f, prober, _ = feed(Config(enabled=False))
    f.turn(s, edited)
    assert prober.requests == [("a1", "http://127.0.0.1:3000/", 5.0)]


def probe(outcome, reason=None, detail="", status=200):
    return ProbeResult(outcome=outcome, reason=reason, status=status, detail=detail,
                       assets_checked=0, elapsed_s=0.12345)


def test_probe_results_set_the_preview_state_and_a_preview_error_makes_an_event(log_stream):
    f, _, sent = feed()
    s = agent(route=False)
    f.probed(s, URL, probe("ok", status=200))
    assert (s.preview_probes, s.preview_state, s.preview_errors, logged(log_stream)) == (
        1, "ok", {}, [])
    f.probed(s, URL, probe("preview_error", "entry_empty", "entry answered 200 with an empty body"))
    f.probed(s, URL, probe("server_down", "unreachable", "connection refused", status=None))
    f.probed(s, URL, probe("ok"))
    assert (s.preview_probes, s.preview_state) == (4, "ok")
    assert s.preview_errors == {("preview_error", "entry_empty"): 1,
                                ("server_down", "unreachable"): 1}
    assert sent == [(("a1", "claude", f"Preview error (entry_empty) at {URL}: entry answered 200 "
                                      "with an empty body"), {"reason": PREVIEW_REASON})]
    assert [(x["msg"], x["event"], x["seconds"]) for x in logged(log_stream)] == [
        ("preview error", "preview_error", 0.123), ("preview server down", "server_down", 0.123),
        ("preview ok again", "preview_ok", 0.123)]


def test_a_secret_in_the_preview_url_is_scrubbed(log_stream):
    f, _, sent = feed()
    token = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"
    f.probed(agent(route=False), f"http://127.0.0.1:3000/?token={token}",
             probe("preview_error", "entry_status", "entry answered 500", status=500))
    assert token not in log_stream.getvalue() and token not in repr(sent)


def test_the_c12_state_is_logged_only_when_it_flips(log_stream):
    s = agent(route=False)
    log_receiving(s, True)
    assert logged(log_stream) == []
    s.activity.unmatched_since = T0 + 1
    log_receiving(s, False)
    log_receiving(s, False)
    log_receiving(s, True)
    assert [(x["level"], x["event"], x["since"]) for x in logged(log_stream)] == [
        ("warning", "not_receiving_data", T0 + 1), ("info", "receiving_data", T0 + 1)]
    assert s.receiving_logged is True


# -- the config file ---------------------------------------------------------------------------

def write(path: Path, text: str) -> Path:
    path.write_text(f"repeat_failure:\n{text}")
    return path


def test_a_config_file_is_read_again_only_when_it_changed(tmp_path, log_stream):
    path = write(tmp_path / "c.yaml", "  enabled: true\n  threshold: 4\n")
    cf = ConfigFile(path)
    assert cf.initial().threshold == 4
    assert (cf.changed(), cf.reread()) == (False, None)
    write(path, "  enabled: true\n  threshold: 6\n  window_s: 120\n")
    assert cf.changed() is True
    new = cf.reread()
    assert (new.threshold, new.window_s, cf.changed(), cf.reread()) == (6, 120.0, False, None)
    assert cf.reread(force=True).threshold == 6
    write(path, "  threshold: zero\n")
    assert cf.reread() is None and cf.changed() is False  # refused once, not at every wake
    (line,) = logged(log_stream)
    assert line["msg"] == "config change refused, keeping the previous config"
    assert "threshold" in line["error"]


def test_an_optional_config_file_gives_the_defaults_until_it_appears(tmp_path, log_stream):
    path = tmp_path / "c.yaml"
    cf = ConfigFile(path, optional=True)
    assert cf.initial() == Config() and Config().enabled is False
    assert [x["msg"] for x in logged(log_stream)] == [
        "config file not found: running with the built-in defaults (check off) until it appears"]
    assert (cf.changed(), cf.reread(force=True)) == (False, None)
    write(path, "  enabled: true\n")
    assert cf.changed() is True and cf.reread().enabled is True
    path.unlink()
    assert cf.changed() is True and cf.reread() is None  # gone after being read: refused
    assert logged(log_stream)[-1]["msg"] == "config change refused, keeping the previous config"


def test_no_config_path_is_the_defaults_for_ever(tmp_path):
    cf = ConfigFile(None)
    assert (cf.initial(), cf.stamp(), cf.changed(), cf.reread()) == (Config(), None, False, None)


def test_beside_the_hook_a_call_read_twice_gives_its_output_once():
    """The log read again (a rewritten or re-read file) delivers a failed call a second time:
    its output went to its hook record already, and must not go to the hook's record of the
    *next* run of the command within 5 s (an edit between the runs: another output). Before,
    the second delivery was kept unmatched and the next run took the first run's output, so
    test-fix-retest counted as one result and raised a `same` note (threshold 2)."""
    from repeat_failure.rules.parse import Record

    f, _, sent = feed()
    s = agent(route=False)
    f.records.record(s, Record(T0 + 1, "a1", "claude", "bash_env", 2, True, "make"), T0 + 1)
    first = shell("c1", T0 + 1.1, 2, output="test_a failed: 1 != 2")
    f.feed(s, PollResult(events=first), T0 + 1.2)
    f.feed(s, PollResult(events=first), T0 + 2)  # the same call read again
    f.records.record(s, Record(T0 + 4, "a1", "claude", "bash_env", 2, True, "make"), T0 + 4)
    f.feed(s, PollResult(events=shell("c2", T0 + 4.1, 2, output="test_a failed: 1 != 3")),
           T0 + 4.2)
    assert sent == [] and s.detector.notes(T0 + 5) == [] and s.detector.awaited_count == 0
    outs = list(s.detector._commands["make"].get(2).outs)
    assert len(set(outs)) == 2 and 0 not in outs
