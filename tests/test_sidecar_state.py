"""The state files on their own (repeat_failure.sidecar.state): what a save writes, what a load
restores, and every file a load must ignore, on real files with no sidecar around them."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import orjson
import pytest

import repeat_failure.sidecar.state as state_mod
from repeat_failure.config import AgentSpec
from repeat_failure.sidecar import hook
from repeat_failure.sidecar.agent import AgentState
from repeat_failure.rules.detector import Detector, NoteCleared
from repeat_failure.sidecar.state import (MAX_STATE_BYTES, STATE_FILE_VERSION, StateFile,
                                          load_counters, load_turns, state_bytes)

T0 = 1_700_000_000.0


class Store:
    """A StateFile under tmp_path/state with its callbacks recorded."""

    def __init__(self, tmp_path: Path) -> None:
        self.dir = tmp_path / "state"
        self.dir.mkdir(mode=0o700)
        self.restored: list[dict] = []
        self.reported: list[list] = []
        self.file = StateFile(self.dir, self.restored.append,
                              lambda state, events: self.reported.append(list(events)))


def agent(name: str = "a1", backend: str = "bash") -> AgentState:
    return AgentState(AgentSpec(name, backend), Detector(3, 600))


def logged(stream) -> list[dict]:
    return [json.loads(x) for x in stream.getvalue().splitlines()]


def filled() -> AgentState:
    s = agent()
    for i in range(3):
        s.detector.record("make check", 2, True, T0 + i, T0 + i)
    s.records[("bash", "bash_env", "failure")] = 3
    s.rejected["torn"] = 1
    s.notes_raised = 1
    s.last_record_ts = T0 + 2
    s.checkpoint = {"a1.jsonl.7": 120}
    s.cut_key = bytes(range(16))
    s.delivered_calls.update({"c1": None, "c2": None})
    s.last_verdict, s.failed_in_a_row = "agent_error", 2
    s.dirty = True
    return s


def test_a_save_writes_every_part_and_a_load_restores_it(tmp_path):
    store = Store(tmp_path)
    saved = filled()
    store.file.save(saved)
    assert (saved.dirty, saved.saved_counts) == (
        False, ({("bash", "bash_env", "failure"): 3}, {"torn": 1}, 1))
    path = store.dir / "a1.json"
    assert store.file.path("a1") == path and (path.stat().st_mode & 0o777) == 0o600
    data = orjson.loads(path.read_bytes())
    assert list(data) == ["version", "agent", "last_record_ts", "collecting", "activity", "turns",
                          "sessions", "session_calls", "cut_key", "counters", "detector"]
    assert (data["version"], data["agent"], data["collecting"], data["session_calls"],
            data["cut_key"], data["sessions"]) == (
        STATE_FILE_VERSION, "a1", {"a1.jsonl.7": 120}, ["c1", "c2"],
        "000102030405060708090a0b0c0d0e0f", {})
    assert data["counters"] == {"records": [["bash", "bash_env", "failure", 3]],
                                "rejected": {"torn": 1}, "notes_raised": 1}
    assert (data["turns"]["last_verdict"], data["turns"]["failed_in_a_row"]) == ("agent_error", 2)

    again = agent()
    store.file.load(again)
    assert store.restored == [{"a1.jsonl.7": 120}]
    assert (again.records, again.rejected, again.notes_raised) == (
        Counter({("bash", "bash_env", "failure"): 3}), Counter({"torn": 1}), 1)
    assert again.saved_counts == saved.saved_counts
    assert (again.last_record_ts, again.cut_key, list(again.delivered_calls)) == (
        T0 + 2, bytes(range(16)), ["c1", "c2"])
    assert (again.last_verdict, again.failed_in_a_row) == ("agent_error", 2)
    assert [(n.command, n.count) for n in again.detector.notes(T0 + 3)] == [("make check", 3)]
    assert store.reported == []


def test_the_bytes_are_the_dict_then_the_detector_last(tmp_path):
    s = agent()
    s.detector.record("ls", 1, True, T0, T0)
    out = state_bytes(s, {"version": 1, "agent": "a1"})
    assert isinstance(out, bytearray)
    assert orjson.loads(out) == {"version": 1, "agent": "a1", "detector": s.detector.to_dict()}


def test_no_file_restores_nothing_and_logs_nothing(tmp_path, log_stream):
    store = Store(tmp_path)
    s = agent()
    store.file.load(s)
    assert (store.restored, s.records, s.last_record_ts, log_stream.getvalue()) == (
        [], Counter(), None, "")


@pytest.mark.parametrize("content, error", [
    (b"not json", "JSONDecodeError"),
    (b"", "JSONDecodeError"),
])
def test_a_file_that_is_not_json_is_ignored(tmp_path, log_stream, content, error):
    store = Store(tmp_path)
    (store.dir / "a1.json").write_bytes(content)
    s = agent()
    store.file.load(s)
    (line,) = logged(log_stream)
    assert (line["msg"], line["agent"], line["error"]) == (
        "state file ignored: unreadable, not a regular file, too big or not JSON", "a1", error)
    assert store.restored == []


@pytest.mark.parametrize("data, why", [
    ([], "not a version 1 state file"),
    ({"version": 2}, "not a version 1 state file"),
    ({}, "not a version 1 state file"),
])
def test_a_file_of_another_version_is_ignored(tmp_path, log_stream, data, why):
    store = Store(tmp_path)
    (store.dir / "a1.json").write_bytes(orjson.dumps(data))
    store.file.load(agent())
    (line,) = logged(log_stream)
    assert (line["msg"], line["error"]) == ("state file ignored", why)


def test_a_symlink_or_fifo_at_the_path_is_ignored_without_following_or_blocking(
        tmp_path, log_stream):
    store = Store(tmp_path)
    real = tmp_path / "elsewhere.json"
    store.file.save(filled())
    os.rename(store.dir / "a1.json", real)
    (store.dir / "a1.json").symlink_to(real)
    s = agent()
    store.file.load(s)
    assert (s.records, store.restored) == (Counter(), [])
    os.unlink(store.dir / "a1.json")
    os.mkfifo(store.dir / "a1.json")
    store.file.load(s)  # would block for ever on a FIFO opened without O_NONBLOCK
    assert [x["error"] for x in logged(log_stream)] == ["OSError", "OSError"]


def test_a_file_over_the_bound_is_never_parsed(tmp_path, log_stream, monkeypatch):
    store = Store(tmp_path)
    parsed: list[int] = []
    loads = orjson.loads
    monkeypatch.setattr(state_mod.orjson, "loads", lambda b: parsed.append(len(b)) or loads(b))
    raw = orjson.dumps({"version": 1, "detector": {"version": 1, "commands": []}})
    (store.dir / "a1.json").write_bytes(raw + b" " * (MAX_STATE_BYTES - len(raw)))
    store.file.load(agent())
    assert parsed == [MAX_STATE_BYTES] and log_stream.getvalue() == ""
    (store.dir / "a1.json").write_bytes(raw + b" " * (MAX_STATE_BYTES + 1 - len(raw)))
    store.file.load(agent())
    assert parsed == [MAX_STATE_BYTES]
    assert [x["error"] for x in logged(log_stream)] == ["OSError"]


def test_a_loaded_command_is_scrubbed_again(tmp_path):
    """A state written by an older, leakier scrubber never brings its secret back."""
    store = Store(tmp_path)
    token = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"
    s = agent()
    s.detector.record(f"curl -H 'Authorization: token {token}' x", 1, True, T0, T0)
    store.file.save(s)
    again = agent()
    store.file.load(again)
    (command,) = [c for c, _, _ in again.detector.failures(T0, 10)]
    assert token not in command and "[REDACTED]" in command


def test_counters_of_another_shape_backend_route_outcome_or_reason_are_left_out():
    s = agent()
    load_counters(s, {"records": [
        ["bash", "bash_env", "failure", 4],
        ["bash", "bash_session_log", "success", 2],
        ["claude", "bash_env", "failure", 9],  # another backend
        ["bash", "other", "failure", 9],  # an unknown route
        ["bash", "bash_env", "other", 9],  # an unknown outcome
        ["bash", "bash_env", "success", -1],
        ["bash", "bash_env", "success", True],
        ["bash", "bash_env", "success"],
        "bash",
    ], "rejected": {"torn": 2, "other": 5, "malformed": 1.5}, "notes_raised": True})
    assert s.records == {("bash", "bash_env", "failure"): 4,
                         ("bash", "bash_session_log", "success"): 2}
    assert (s.rejected, s.notes_raised) == (Counter({"torn": 2}), 0)
    assert s.saved_counts == ({("bash", "bash_env", "failure"): 4,
                               ("bash", "bash_session_log", "success"): 2}, {"torn": 2}, 0)
    load_counters(s, "not a dict")
    assert s.notes_raised == 0


def test_turns_keep_what_is_not_a_verdict_or_count_as_it_was():
    s = agent()
    s.last_verdict, s.failed_in_a_row = "ok", 1
    load_turns(s, {"last_verdict": "great", "failed_in_a_row": True})
    assert (s.last_verdict, s.failed_in_a_row) == ("ok", 1)
    load_turns(s, {"last_verdict": "agent_error", "failed_in_a_row": 3})
    assert (s.last_verdict, s.failed_in_a_row) == ("agent_error", 3)


def test_a_directory_at_the_path_is_moved_aside_and_the_save_goes_through(tmp_path, log_stream):
    store = Store(tmp_path)
    (store.dir / "a1.json").mkdir()
    s = filled()
    store.file.save(s)
    assert not s.dirty and (store.dir / "a1.json").is_file()
    (aside,) = [p.name for p in store.dir.iterdir() if p.name != "a1.json"]
    assert aside.startswith(".a1.json.foreign.") and aside[len(".a1.json.foreign."):].isdigit()
    (line,) = logged(log_stream)
    assert (line["msg"], line["moved_to"]) == (
        "a directory stood at the state file's path; moved aside", aside)


def test_a_failed_write_keeps_the_state_dirty_and_the_exported_counts(tmp_path, log_stream,
                                                                      monkeypatch):
    store = Store(tmp_path)
    s = filled()

    def full_disk(path, payload, mode):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(hook, "write_atomic", full_disk)
    store.file.save(s)
    assert (s.dirty, s.saved_counts) == (True, ({}, {}, 0))
    assert s.saved_at > 0 and not (store.dir / "a1.json").exists()
    (line,) = logged(log_stream)
    assert line["level"] == "error" and line["error"] == "[Errno 28] No space left on device"


def test_a_state_over_the_bound_forgets_its_oldest_commands_and_reports_them(
        tmp_path, log_stream, monkeypatch):
    store = Store(tmp_path)
    s = agent()
    for i in range(40):
        for k in range(3):  # each command raises a note
            s.detector.record(f"make target-{i:02d}", 2, True, T0 + i + k / 10, T0 + i + k / 10)
    full = len(state_bytes(s, {"version": 1}))
    monkeypatch.setattr(state_mod, "MAX_STATE_BYTES", full - 1000)
    store.file.save(s)
    size = (store.dir / "a1.json").stat().st_size
    assert size <= full - 1000
    (events,) = store.reported
    assert events and all(isinstance(e, NoteCleared) and e.reason == "evicted" for e in events)
    assert [e.command for e in events] == [f"make target-{i:02d}" for i in range(len(events))]
    kept = {c for c, _, _ in s.detector.failures(T0 + 50, 100)}
    assert kept == {f"make target-{i:02d}" for i in range(len(events), 40)}
    assert logged(log_stream)[0]["msg"] == ("state over its size bound: the least recently "
                                            "failed commands are forgotten")


def test_remove_deletes_the_file_and_minds_no_absent_one(tmp_path):
    store = Store(tmp_path)
    store.file.save(filled())
    store.file.remove("a1")
    store.file.remove("a1")
    assert list(store.dir.iterdir()) == []


def test_a_list_where_a_route_name_belongs_is_left_out_not_raised():
    """Issue 28 item 11: ``TypeError: unhashable type: 'list'`` crash-looped the sidecar."""
    s = agent()
    load_counters(s, {"records": [["bash", ["bash_env"], "failure", 4],
                                  ["bash", "bash_env", {"failure": 1}, 4],
                                  [["bash"], "bash_env", "failure", 4],
                                  ["bash", "bash_env", "failure", 2]],
                      "rejected": {"torn": [1]}, "notes_raised": [1]})
    assert (s.records, s.rejected, s.notes_raised) == (
        Counter({("bash", "bash_env", "failure"): 2}), Counter(), 0)


_JUNK = [None, True, -1, 2**70, 1.5, float("nan"), "", "x", [], [1], ["a", ["b"]], {},
         {"a": []}, {"commands": [[]]}]


def _paths(obj, prefix=()):
    """Every (path, value) of a JSON tree, the root first."""
    yield prefix, obj
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for k, v in items:
        yield from _paths(v, prefix + (k,))


def _replaced(tree, path, value):
    if not path:
        return value
    out = dict(tree) if isinstance(tree, dict) else list(tree)
    out[path[0]] = _replaced(tree[path[0]], path[1:], value)
    return out


def test_fuzzed_state_files_are_logged_and_ignored_never_raised(tmp_path, log_stream):
    """Issue 28 item 11: every part of a real state file, replaced in turn by values of
    every other shape (and its dict keys by lists' worth of junk), loads without raising; the
    agent it loads into can still be exported and saved."""
    from repeat_failure.config import Config

    store = Store(tmp_path)
    saved = filled()
    saved.activity.load_dict(None)
    store.file.save(saved)
    good = orjson.loads((store.dir / "a1.json").read_bytes())
    cases = 0
    for path, _ in list(_paths(good)):
        for junk in _JUNK:
            bad = _replaced(good, path, junk)
            (store.dir / "a1.json").write_bytes(json.dumps(bad).encode())
            s = agent()
            store.file.load(s, T0 + 10)  # never raises
            s.view(T0 + 10, Config(enabled=True), {})
            s.dirty = True
            store.file.save(s)
            assert not s.dirty, (path, junk)
            cases += 1
    assert cases > 400


def _json_values():
    from hypothesis import strategies as st

    scalars = (st.none() | st.booleans() | st.integers(-2**70, 2**70)
               | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20)
               | st.sampled_from(["bash", "bash_env", "failure", "success", "torn", "ok",
                                  "a1.jsonl.collecting.1", "0" * 32]))
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=5)
                        | st.dictionaries(st.text(max_size=8) | st.sampled_from(
                            ["records", "rejected", "notes_raised", "commands", "command",
                             "failures", "version", "open", "dev", "ino", "offset"]),
                            inner, max_size=5), max_leaves=25)


def test_hypothesis_fuzzed_parts_never_raise(tmp_path, log_stream):
    """Issue 28 item 11, generated: any JSON value in place of any part of a real state file
    (at any depth) loads without raising, and the agent can still be exported and saved."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from repeat_failure.config import Config

    store = Store(tmp_path)
    store.file.save(filled())
    good = orjson.loads((store.dir / "a1.json").read_bytes())

    @settings(max_examples=400, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.sampled_from([path for path, _ in _paths(good) if path]), _json_values())
    def load(path, value):
        (store.dir / "a1.json").write_bytes(json.dumps(_replaced(good, path, value)).encode())
        s = agent()
        store.file.load(s, T0 + 10)
        s.view(T0 + 10, Config(enabled=True), {})
        s.dirty = True
        store.file.save(s)
        assert not s.dirty

    load()
