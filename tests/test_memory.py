"""Issue 6, memory: the sidecar's RSS after 1,000,000 records over 10,000 distinct failing
commands stays <= 40 MiB (measured by ``python -m benchmarks``; these tests pin what gets it
there without changing behaviour): a compact per-command detector state, the state file
serialized one command at a time, jsonschema imported only for a config that needs it, and
glibc's mmap threshold fixed."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tracemalloc
from array import array
from pathlib import Path

import jsonschema
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import repeat_failure.sidecar.agent as agent_mod
import repeat_failure.sidecar.state as state_mod
from repeat_failure.sidecar.app import Sidecar
from repeat_failure.sidecar.state import MAX_STATE_BYTES
from repeat_failure.config import _SCHEMA, AgentSpec, ConfigError, _surely_valid, parse_config
from repeat_failure.rules.detector import (MAX_COMMAND_BYTES, MAX_COMMANDS, Detector, NoteCleared,
                              NoteRaised)
from repeat_failure.rules.scrub import scrub
from repeat_failure.malloc import MMAP_THRESHOLD_BYTES

T0 = 1_800_000_000.0
REPO = Path(__file__).resolve().parent.parent


# -- the detector's state --------------------------------------------------------------------


def test_ten_thousand_commands_cost_under_300_bytes_each() -> None:
    """10,000 distinct commands with one failure each (the benchmark's steady state): the
    detector holds under 300 bytes per command besides the command text (it held 714: a
    dataclass, a dict, an empty set, a list and a float object per command)."""
    commands = [f"gh pr view {c} --json title,body --repo example/repo-{c % 7}"
                for c in range(MAX_COMMANDS)]
    tracemalloc.start()
    try:
        det = Detector(5, 600)
        for i, command in enumerate(commands):
            assert det.record(command, 2, True, T0 + i * 0.001, T0 + i * 0.001) == []
        per_command = tracemalloc.get_traced_memory()[0] / len(commands)
    finally:
        tracemalloc.stop()
    assert len(det.failures(T0 + 10, MAX_COMMANDS)) == MAX_COMMANDS
    assert per_command < 300, per_command


def test_failure_times_are_packed_doubles_and_no_empty_sets() -> None:
    """Failure times are kept as 8-byte doubles in order (not one float object each), a command
    without a qualifying key keeps no set, and a second exit of the same command is counted
    separately, in the order the keys first failed."""
    det = Detector(2, 600)
    det.record("make", 2, True, T0 + 5, T0 + 5)
    det.record("make", 2, True, T0 + 1, T0 + 5)  # out of order: sorted in
    det.record("make", 7, True, T0 + 3, T0 + 5)
    state = det._commands["make"]
    assert not hasattr(state, "__dict__")
    assert state.items() == [(2, array("d", [T0 + 1, T0 + 5])), (7, array("d", [T0 + 3]))]
    assert state.qualified == {(2, 0)}
    det.record("ls", 1, True, T0 + 6, T0 + 6)
    assert det._commands["ls"].qualified is None
    assert det.failures(T0 + 6, 10) == [("make", 2, 2), ("ls", 1, 1), ("make", 7, 1)]


def test_forgetting_the_first_key_keeps_the_order_of_the_others() -> None:
    """A success forgets the failures before it: when the first exit's go, the others keep
    their order (the saved state lists them as the former dict did)."""
    det = Detector(3, 600)
    for exit_status, ts in ((1, T0), (2, T0 + 2), (3, T0 + 3), (2, T0 + 5)):
        det.record("x", exit_status, True, ts, T0 + 5)
    det.record("x", 0, False, T0 + 1, T0 + 5)
    assert det.to_dict()["commands"] == [{
        "command": "x", "raised": False, "qualified": [],
        "failures": {"2": [T0 + 2, T0 + 5], "3": [T0 + 3]}}]
    det.record("x", 1, True, T0 + 6, T0 + 6)
    assert list(det.to_dict()["commands"][0]["failures"]) == ["2", "3", "1"]


def test_iter_json_is_exactly_the_dumped_dict() -> None:
    """The state is serialized a command at a time, in pieces of about ``chunk_bytes``; joined,
    they are byte for byte ``orjson.dumps(to_dict())``."""
    det = Detector(2, 600)
    for i in range(300):
        det.record(f"cmd {i % 40}", None if i % 5 == 0 else i % 3, True, T0 + i, T0 + i)
    det.record("cmd 3", 0, False, T0 + 250.5, T0 + 300)
    whole = orjson.dumps(det.to_dict())
    for chunk_bytes in (1, 200, 1 << 16):
        pieces = list(det.iter_json(chunk_bytes))
        assert b"".join(pieces) == whole
    assert len(list(det.iter_json(200))) > 5
    assert b"".join(Detector(5, 600).iter_json()) == b'{"version":1,"commands":[]}'
    again = Detector(2, 600)
    again.load_dict(json.loads(b"".join(det.iter_json())))
    assert again.to_dict() == det.to_dict()


def test_saved_state_file_holds_the_detector(tmp_path: Path) -> None:
    """The state file written from the pieces is the same JSON as before: the detector's
    to_dict under "detector", next to the other keys; a new sidecar restores the open note."""
    config = tmp_path / "config.yaml"
    config.write_text("repeat_failure:\n  enabled: true\n  threshold: 2\n")
    clock = [T0]
    sc = Sidecar(tmp_path / "shared", [AgentSpec("a1", "bash")], config, clock=lambda: clock[0])
    det = sc.agents["a1"].detector
    events = det.record("make test", 2, True, T0 - 2, T0) + det.record("make test", 2, True,
                                                                        T0 - 1, T0)
    assert [type(e) for e in events] == [NoteRaised]
    sc._save_state(sc.agents["a1"])
    data = json.loads((tmp_path / "shared" / "state" / "a1.json").read_bytes())
    assert data["detector"] == det.to_dict()
    assert set(data) == {"version", "agent", "last_record_ts", "collecting", "detector",
                         "activity", "sessions", "session_calls", "turns", "counters",
                         "cut_key"}
    assert len(bytes.fromhex(data["cut_key"])) == 16
    assert data["turns"] == {"open": {}, "last_verdict": None, "failed_in_a_row": 0}
    assert data["counters"] == {"records": [], "rejected": {}, "notes_raised": 0}
    again = Sidecar(tmp_path / "shared", [AgentSpec("a1", "bash")], config,
                    clock=lambda: clock[0])
    assert [n.message for n in again.rows()[0].notes] == [
        "Repeating failure: make test failed 2 times in 1 min (exit 2)"]
    assert again.agents["a1"].detector.record("make test", 0, False, T0 + 1, T0 + 1) == [
        NoteCleared("make test", "success")]


# -- long commands (security review: memory grew with command length) -------------------------

_FLAGS = " ".join(f"--flag-{word}-{k}=value{k % 97}"
                  for k, word in enumerate(["build", "test", "lint", "deploy", "check"] * 120))


def long_command(i: int, size: int = 3900) -> str:
    """A distinct, secret-free command of exactly ``size`` ASCII characters (the review's
    commands were about 3.9 KB, just under the 4096-byte record limit)."""
    head = f"make target-{i} "
    return head + _FLAGS[: size - len(head)]


def test_long_commands_hold_at_most_max_command_bytes() -> None:
    """10,000 distinct failing commands of 3.9 KB (the review's 39 MB): the detector keeps the
    newest 1,075 (4 MiB // 3,900 bytes), at most MAX_COMMAND_BYTES of text, and its saved
    state stays about that size."""
    assert MAX_COMMAND_BYTES == 4 << 20
    assert len(long_command(MAX_COMMANDS)) == 3900
    tracemalloc.start()
    try:
        det = Detector(5, 600)
        for i in range(MAX_COMMANDS):
            assert det.record(long_command(i), 2, True, T0 + i * 0.001, T0 + 10) == []
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(det._commands) == MAX_COMMAND_BYTES // 3900 == 1075
    assert det.command_bytes == 1075 * 3900 == 4_192_500
    assert list(det._commands) == [long_command(i) for i in range(MAX_COMMANDS - 1075,
                                                                 MAX_COMMANDS)]
    assert held < MAX_COMMAND_BYTES + (1 << 20), held
    saved = b"".join(det.iter_json())
    assert MAX_COMMAND_BYTES < len(saved) < MAX_COMMAND_BYTES + 150_000


def _log(stream: io.StringIO, msg: str) -> list[dict]:
    return [line for line in map(json.loads, stream.getvalue().splitlines())
            if line["msg"] == msg]


def _state_file(commands: list[str], now: float) -> bytes:
    """A state file as a sidecar without the byte bound wrote it: each command raised, failed
    twice, the newest last."""
    return orjson.dumps({
        "version": 1, "agent": "a1", "last_record_ts": now, "collecting": {}, "activity": None,
        "sessions": {}, "session_calls": [],
        "detector": {"version": 1, "commands": [
            {"command": c, "raised": True, "qualified": ["2"],
             "failures": {"2": [now - 60 + i * 0.001, now - 30 + i * 0.001]}}
            for i, c in enumerate(commands)]}})


def _sidecar(tmp_path: Path, now: float) -> Sidecar:
    config = tmp_path / "config.yaml"
    config.write_text("repeat_failure:\n  enabled: true\n  threshold: 2\n")
    return Sidecar(tmp_path / "shared", [AgentSpec("a1", "bash")], config, clock=lambda: now)


def test_restart_restores_only_the_newest_commands_that_fit(tmp_path: Path, log_stream) -> None:
    """A state file from before the byte bound (1,500 commands of 3.9 KB, 5.9 MB) restores the
    newest 1,075 commands and their notes; the 425 older ones are left out, logged once with
    their number (no command text)."""
    commands = [long_command(i) for i in range(1500)]
    assert all(scrub(c) == c for c in commands)
    (tmp_path / "shared" / "state").mkdir(parents=True)
    (tmp_path / "shared" / "state" / "a1.json").write_bytes(_state_file(commands, T0))
    sc = _sidecar(tmp_path, T0)
    det = sc.agents["a1"].detector
    assert list(det._commands) == commands[425:]
    assert det.command_bytes == 1075 * 3900
    assert len(sc.rows()[0].notes) == 1075
    lines = _log(log_stream, "state file: commands over the detector's memory bound not "
                             "restored")
    assert [(line["agent"], line["commands"]) for line in lines] == [("a1", 425)]
    assert "make target" not in log_stream.getvalue()


def test_state_file_over_max_state_bytes_is_ignored_unparsed(tmp_path: Path, log_stream,
                                                             monkeypatch) -> None:
    """A state file of exactly MAX_STATE_BYTES (8 MiB: a valid state padded with spaces) is
    restored; one byte more and it is ignored without being parsed (orjson never sees it),
    logged "state file ignored" like an unreadable one, and the agent starts empty."""
    assert MAX_STATE_BYTES == 8 << 20
    parsed: list[int] = []
    loads = orjson.loads

    def spy(data):
        parsed.append(len(data))
        return loads(data)

    monkeypatch.setattr(state_mod.orjson, "loads", spy)
    state = tmp_path / "shared" / "state" / "a1.json"
    state.parent.mkdir(parents=True)
    raw = _state_file(["make test"], T0)
    state.write_bytes(raw + b" " * (MAX_STATE_BYTES - len(raw)))
    assert [n.command for n in _sidecar(tmp_path, T0).rows()[0].notes] == ["make test"]
    assert MAX_STATE_BYTES in parsed
    parsed.clear()
    state.write_bytes(raw + b" " * (MAX_STATE_BYTES + 1 - len(raw)))
    assert _sidecar(tmp_path, T0).rows()[0].notes == ()
    assert not any(n > MAX_STATE_BYTES for n in parsed)
    lines = _log(log_stream, "state file ignored: unreadable, not a regular file, too big or "
                             "not JSON")
    assert [(line["agent"], line["error"]) for line in lines] == [("a1", "OSError")]


# -- the config's validation -----------------------------------------------------------------


def test_a_valid_config_does_not_import_jsonschema(tmp_path: Path) -> None:
    """jsonschema (about 6 MiB resident) is imported only for a config the fast check is not
    sure of; a valid one, and an invalid one, give the same result as before."""
    config = tmp_path / "config.yaml"
    config.write_text("repeat_failure:\n  enabled: true\n  threshold: 3\n  window_s: 120\n"
                      "  exclude: [make wait]\n  agents:\n    - {name: a1, backend: claude,"
                      " home: /h, session_env: {CODEX_HOME: .c}}\n")
    code = ("import sys\nfrom repeat_failure.config import load_config\n"
            f"c = load_config({str(config)!r})\n"
            "assert (c.enabled, c.threshold, c.window_s, c.exclude) == "
            "(True, 3, 120.0, ('make wait',)), c\n"
            "print('jsonschema' in sys.modules)\n"
            "from repeat_failure.config import parse_config, ConfigError\n"
            "try:\n    parse_config({'repeat_failure': {'threshold': 0}}, 'x.yaml')\n"
            "except ConfigError as e:\n    print(e)\n"
            "print('jsonschema' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=tmp_path).stdout.splitlines()
    assert out == ["False", "x.yaml: repeat_failure.threshold: 0 is less than the minimum of 1",
                   "True"]


def test_surely_valid_knows_only_what_it_checks() -> None:
    """An unknown keyword, or a value jsonschema would accept leniently, is "not sure" (False),
    never "valid"."""
    assert _surely_valid(_SCHEMA, {}) and _surely_valid(_SCHEMA, {"repeat_failure": {}})
    assert not _surely_valid({"format": "email"}, "x")
    assert not _surely_valid(_SCHEMA, {"repeat_failure": {"threshold": 5.0}})
    assert not _surely_valid(_SCHEMA, {"repeat_failure": {"window_s": float("nan")}})
    assert not _surely_valid(_SCHEMA, {"repeat_failure": {"enabled": 1}})
    with pytest.raises(ConfigError, match="whole number"):
        parse_config({"repeat_failure": {"threshold": 5.0}})


_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 20_000), st.floats(allow_nan=True),
    st.sampled_from(["", " ", "x", "a1", "claude", "/h", ".c", "A-b", "1"]),
    st.lists(st.sampled_from(["", " ", "make wait", "x"]), max_size=3),
)
_KEYS = st.sampled_from(["enabled", "threshold", "window_s", "no_data_after_s", "exclude",
                         "collect_interval_s", "collect_grace_s", "top_commands", "events",
                         "agents", "typo"])
_AGENT = st.dictionaries(st.sampled_from(["name", "backend", "home", "session_env", "x"]),
                         st.one_of(_VALUES, st.dictionaries(st.sampled_from(["A", "1B", "_c"]),
                                                            _VALUES, max_size=2)),
                         max_size=5)
_SECTION = st.dictionaries(_KEYS, st.one_of(_VALUES, st.lists(_AGENT, max_size=2)), max_size=6)
_DOCS = st.one_of(st.dictionaries(st.sampled_from(["repeat_failure", "other"]),
                                  st.one_of(_SECTION, _VALUES), max_size=2), _VALUES)


@settings(max_examples=600, deadline=None)
@given(_DOCS)
def test_surely_valid_is_never_wrong(doc) -> None:
    """Whatever the document, "surely valid" implies jsonschema finds no error: the fast path
    never lets through what validation used to refuse."""
    if _surely_valid(_SCHEMA, doc):
        assert list(jsonschema.Draft202012Validator(_SCHEMA).iter_errors(doc)) == []


# -- the allocator ---------------------------------------------------------------------------


@pytest.mark.skipif(not (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"),
                    reason="glibc only")
def test_tune_malloc_fixes_the_mmap_threshold() -> None:
    """On glibc, ``repeat-failure run`` fixes M_MMAP_THRESHOLD at 128 KiB (mallopt accepts it)."""
    assert MMAP_THRESHOLD_BYTES == 128 * 1024
    code = "from repeat_failure.malloc import tune_malloc; print(tune_malloc())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out == "True\n"


# -- issue 17: what the sidecar saves, it loads ------------------------------------------------


def test_a_thousand_commands_failing_a_thousand_times_survive_a_restart(tmp_path: Path,
                                                                        log_stream) -> None:
    """Issue 17: 1,000 commands failing 1,000 times each within a 3,600 s window wrote an 18 MB
    state file, which the next start ignored (over MAX_STATE_BYTES): every note lost, and all
    1,000 raised again. Now each key keeps its newest 50 failures (MAX_FAILURES over 1,000
    keys; threshold 5 needs 5), the file loads, all 1,000 notes come back with their counts and
    raising no note again."""
    from repeat_failure.rules.detector import MAX_FAILURES
    from repeat_failure.rules.parse import Record

    config = tmp_path / "config.yaml"
    config.write_text("repeat_failure:\n  enabled: true\n  window_s: 3600\n")
    now = T0 + 3600

    def make() -> Sidecar:
        return Sidecar(tmp_path / "shared", [AgentSpec("a1", "bash")], config,
                       clock=lambda: now)

    sc = make()
    state = sc.agents["a1"]
    det = state.detector
    raised = 0
    for i in range(1_000_000):
        t = T0 + 100 + i * 0.0035
        raised += len(det.record(f"make test-{i % 1000}", 2, True, t, now))
    assert raised == 1000
    assert det.failure_count == MAX_FAILURES == 50_000
    state.dirty = True
    sc._save_state(state)
    size = sc._state_path("a1").stat().st_size
    assert not state.dirty and size < 1_500_000, size
    again = make()
    notes = again.rows()[0].notes
    assert len(notes) == 1000 and {n.count for n in notes} == {50}
    ts = now - 1
    for k in range(1000):
        again._process_record(again.agents["a1"], Record(ts, "a1", "bash", "bash_env", 2, True,
                                                         f"make test-{k}"), now)
    assert again.agents["a1"].notes_raised == 0 and len(again.rows()[0].notes) == 1000
    assert "state file ignored" not in log_stream.getvalue()
    assert "note raised" not in log_stream.getvalue()


def _largest_state(tmp_path: Path) -> Sidecar:
    """A sidecar whose agent holds the largest state the bounds allow, each part at its bound
    with its longest entries: MAX_COMMANDS commands of MAX_COMMAND_BYTES of text in all,
    MAX_FAILURES failure times of 18 characters, one exit key of three digits each (the most
    JSON a failure time can take), every key qualified, each failure with a ten-digit output
    digest (issue 19); MAX_DELIVERED_CALLS delivered call ids
    and MAX_RUNNING running shell calls of the longest plain id; MAX_SESSIONS open turns and
    session activities; MAX_FILES session files."""
    from repeat_failure.sessions.activity import MAX_RUNNING, MAX_SESSIONS as ACTIVITY_SESSIONS
    from repeat_failure.sidecar.agent import MAX_DELIVERED_CALLS
    from repeat_failure.rules.detector import MAX_FAILURES
    from repeat_failure.sessions.tail import MAX_FILES, _File
    from repeat_failure.turns.verdict import MAX_ERROR_CHARS, MAX_SESSIONS, MAX_TURN_ID_CHARS, TurnCounts

    config = tmp_path / "config.yaml"
    config.write_text("repeat_failure:\n  enabled: true\n  threshold: 1\n  window_s: 604800\n")
    home = tmp_path / "home"
    home.mkdir()
    now = T0 + 10
    sc = Sidecar(tmp_path / "shared", [AgentSpec("a1", "claude", str(home))], config,
                 clock=lambda: now)
    state = sc.agents["a1"]
    det = state.detector
    size = MAX_COMMAND_BYTES // MAX_COMMANDS
    keys = MAX_FAILURES // MAX_COMMANDS
    for c in range(MAX_COMMANDS):
        command = f"make target-{c:05d} " + "x" * (size - 18)
        assert len(command) == size
        for k in range(keys):
            t = T0 + 0.1234567 + (c * keys + k) * 1e-7
            det.record(command, 100 + k, True, t, now, output=4_000_000_000 + c)
    assert det.failure_count == MAX_FAILURES and len(det._commands) == MAX_COMMANDS
    assert det.command_bytes == MAX_COMMANDS * size <= MAX_COMMAND_BYTES
    plain = "x" * 96
    for i in range(MAX_DELIVERED_CALLS):
        state.first_delivery(f"{i:016x}:{plain[:-8]}{i:08x}")
    for i in range(MAX_RUNNING):
        state.activity.running[f"{i:016x}:{plain[:-8]}{i:08x}"] = now
    for i in range(ACTIVITY_SESSIONS):
        state.activity.turns[f"{i:016x}"] = [True, True]
    for i in range(MAX_SESSIONS):
        state.turns.open[f"{i:016x}"] = TurnCounts(text=10**6, tools=10**6, edits=10**6,
                                                   errors=10**6, error="e" * MAX_ERROR_CHARS,
                                                   turn_id="t" * MAX_TURN_ID_CHARS)
    for i in range(MAX_FILES):
        state.tail._files[f"{i:016x}"] = _File(home / f"{i}.jsonl", 2**63, 2**63, 2**63,
                                               head="h" * 32, head_start=2**16, head_len=256)
    state.dirty = True
    return sc


def test_the_largest_state_the_bounds_allow_is_saved_and_loads_whole(tmp_path: Path,
                                                                     log_stream) -> None:
    """Issue 17: what the sidecar saves it must load. The largest state its bounds allow (each
    part at its bound, its entries at their longest) is saved whole under MAX_STATE_BYTES, with
    room to spare and without the last-resort eviction, and a restart loads all of it."""
    from repeat_failure.rules.detector import MAX_FAILURES

    sc = _largest_state(tmp_path)
    sc._save_state(sc.agents["a1"])
    size = sc._state_path("a1").stat().st_size
    assert not sc.agents["a1"].dirty
    assert 6_500_000 < size < MAX_STATE_BYTES - 1_000_000, size
    assert "state over its size bound" not in log_stream.getvalue()
    again = Sidecar(tmp_path / "shared", [AgentSpec("a1", "claude", str(tmp_path / "home"))],
                    tmp_path / "config.yaml", clock=lambda: T0 + 10)
    det = again.agents["a1"].detector
    assert (len(det._commands), det.failure_count) == (MAX_COMMANDS, MAX_FAILURES)
    assert len(again.agents["a1"].delivered_calls) == agent_mod.MAX_DELIVERED_CALLS
    assert "state file" not in log_stream.getvalue()


def test_a_state_over_the_load_limit_forgets_its_oldest_commands_to_fit(
        tmp_path: Path, log_stream, monkeypatch) -> None:
    """The last resort: were a state still over MAX_STATE_BYTES, the least recently failed
    commands are forgotten (their notes cleared as evicted) until the file fits, so it loads."""
    sc = _largest_state(tmp_path)
    monkeypatch.setattr(state_mod, "MAX_STATE_BYTES", 6_000_000)
    sc._save_state(sc.agents["a1"])
    size = sc._state_path("a1").stat().st_size
    assert 5_900_000 < size <= 6_000_000, size
    det = sc.agents["a1"].detector
    assert 0 < len(det._commands) < MAX_COMMANDS
    assert list(det._commands)[0] == f"make target-{MAX_COMMANDS - len(det._commands):05d} " \
        + "x" * (MAX_COMMAND_BYTES // MAX_COMMANDS - 18)
    (line,) = _log(log_stream, "state over its size bound: the least recently failed commands "
                               "are forgotten")
    assert line["limit"] == 6_000_000 and line["bytes"] > 6_500_000
    evicted = [x for x in _log(log_stream, "repeating failure note cleared")
               if x["reason"] == "evicted"]
    assert len(evicted) == MAX_COMMANDS - len(det._commands)
