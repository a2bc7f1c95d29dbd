"""The run loop on its own (repeat_failure.sidecar.loop): what it runs on each wake, how long it
sleeps, what it does when inotify is missing or a pass fails, and the passes' health, driven by
a scripted watcher and clocks instead of a sidecar."""

from __future__ import annotations

import json
import threading
from types import SimpleNamespace

import pytest
from prometheus_client import CollectorRegistry

from repeat_failure.config import Config
from repeat_failure.sidecar.loop import (DEBOUNCE_S, MAX_SLEEP_S, SESSION_POLL_S,
                                         UNHEALTHY_AFTER_S, PassHealth, RunLoop, soonest_change)

T0 = 1_700_000_000.0


class Mono:
    def __init__(self, t: float = 500.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class Driven:
    """A sidecar as the loop sees it: every call is recorded in ``calls``."""

    def __init__(self, mono: Mono, tails: bool = False, interval: float = 5.0,
                 grace: float | None = None, detector_change: float | None = None) -> None:
        self.mono = mono
        self.calls: list = []
        self.config = Config(enabled=True, collect_interval_s=interval)
        self.grace = grace
        self.agents = {"a1": SimpleNamespace(
            tail=object() if tails else None,
            detector=SimpleNamespace(next_change=lambda: detector_change),
            safeguard_change=lambda no_data_after_s: None)}
        self.collector = SimpleNamespace(next_deadline=lambda: self.grace,
                                         due_agents=lambda: set())
        self.clock = lambda: T0
        self.session_polled_at = 0.0
        self.changed = False
        self.fail_pass = False
        self.passed_agents: list = []

    def run_once(self, stop=None, sessions=True, agents=None):
        self.calls.append(("run_once", sessions, stop is not None))
        self.passed_agents.append(agents)
        if self.fail_pass:
            raise RuntimeError("a bug")

    def poll_sessions(self, rescan=False, changed=None):
        self.calls.append("poll_sessions")
        self.session_polled_at = self.mono.t

    def session_dirs(self):
        self.calls.append("session_dirs")
        return []

    def config_changed(self):
        return self.changed

    def reload_config(self):
        self.calls.append("reload_config")
        self.changed = False
        return True

    def drain(self):
        self.calls.append("drain")


class Watcher:
    """Answers each wait with the next scripted (records, config, sessions) triple, moving the
    monotonic clock by the timeout asked for; sets ``stop`` when the script runs out."""

    def __init__(self, mono: Mono, stop: threading.Event, script: list) -> None:
        self.mono, self.stop, self.script = mono, stop, list(script)
        self.timeouts: list[float] = []
        self.closed = False
        self.watched: list = []

    def wait(self, timeout: float):
        self.timeouts.append(round(timeout, 6))
        if not self.script:
            self.stop.set()
            return False, False, False
        self.mono.t += timeout
        return self.script.pop(0)

    def watch_session_dirs(self, dirs):
        self.watched.append(list(dirs))

    def take_changed_agents(self):
        return {"a1"}

    def take_session_paths(self):
        return set()

    def close(self):
        self.closed = True


class Stop(threading.Event):
    """A stop event whose waits take no time (the debounce), recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout=None):
        self.waits.append(timeout)
        return self.is_set()


def run(driven: Driven, script: list, mono: Mono) -> Watcher:
    stop = Stop()
    watcher = Watcher(mono, stop, script)
    RunLoop(driven, lambda: watcher, monotonic=mono).run(stop)
    return watcher


def test_the_first_pass_runs_at_once_then_every_interval():
    mono = Mono()
    d = Driven(mono, interval=5.0)
    w = run(d, [(False, False, False)] * 3, mono)
    # 0: the first pass is due now; then the interval, slept in slices of at most MAX_SLEEP_S.
    assert w.timeouts[:2] == [0.0, MAX_SLEEP_S]
    assert d.calls.count(("run_once", False, True)) == 1  # one pass by t=502 (next at 505)
    assert d.calls[-1] == "drain" and w.closed
    assert "poll_sessions" not in d.calls  # no session log is read


def test_a_records_change_is_debounced_and_collected_at_once():
    mono = Mono()
    d = Driven(mono, interval=30.0)
    stop = Stop()
    w = Watcher(mono, stop, [(False, False, False), (True, False, False)])
    RunLoop(d, lambda: w, monotonic=mono).run(stop)
    assert d.calls.count(("run_once", False, True)) == 2  # the timed first one, the change
    assert stop.waits == [DEBOUNCE_S]


def test_a_config_change_reloads_before_the_pass():
    mono = Mono()
    d = Driven(mono, interval=30.0)
    w = run(d, [(False, True, False)], mono)
    assert d.calls[:3] == ["session_dirs", "reload_config", ("run_once", False, True)]
    d2 = Driven(mono, interval=30.0)
    d2.changed = True  # changed on disk, no inotify event (a timer wake sees it)
    run(d2, [(False, False, False)], mono)
    assert d2.calls[1] == "reload_config"
    assert w.closed


def test_session_logs_are_polled_every_session_poll_s_and_on_their_wake():
    mono = Mono()
    d = Driven(mono, tails=True, interval=30.0)
    w = run(d, [(False, False, False), (False, False, True)], mono)
    # First wake: the poll is long overdue (never polled); second: inotify said the logs changed.
    assert [c for c in d.calls if c == "poll_sessions"] == ["poll_sessions"] * 2
    assert w.watched == [[], [], []]  # at start and after each poll (new directories)
    # The next wake is the poll due SESSION_POLL_S after the last one, slept in slices.
    assert w.timeouts[-1] == MAX_SLEEP_S < SESSION_POLL_S


def test_the_sleep_ends_at_the_soonest_deadline():
    mono = Mono()
    d = Driven(mono, interval=30.0, grace=mono.t + 0.25, detector_change=T0 + 0.5)
    w = run(d, [(False, False, False), (False, False, False)], mono)
    # The first timed pass at once, then the held file's grace deadline (monotonic 500.25),
    # long before the next timed pass (530): each wake runs a pass.
    assert w.timeouts[:2] == [0.0, 0.25]
    assert d.calls.count(("run_once", False, True)) == 2
    d2 = Driven(mono, interval=30.0, detector_change=T0 + 0.5)
    mono2 = Mono(1000.0)
    d2.mono = mono2
    w2 = Watcher(mono2, Stop(), [(False, False, False)])
    RunLoop(d2, lambda: w2, monotonic=mono2).run(w2.stop)
    # A note expiring 0.5 s from now (epoch clock) wakes the loop at 1000.501 (monotonic).
    assert w2.timeouts == [0.0, 0.501]


def test_a_failing_pass_is_logged_and_the_loop_goes_on(log_stream):
    mono = Mono()
    d = Driven(mono, interval=1.0)
    d.fail_pass = True
    run(d, [(True, False, False), (True, False, False)], mono)
    assert d.calls.count(("run_once", False, True)) == 2
    msgs = [json.loads(x)["msg"] for x in log_stream.getvalue().splitlines()]
    assert msgs == ["collection pass failed", "collection pass failed"]
    assert d.calls[-1] == "drain"


def test_without_inotify_the_timer_alone_collects(log_stream):
    mono = Mono()
    d = Driven(mono, interval=5.0)
    stop = Stop()

    def no_inotify():
        raise OSError(24, "Too many open files")

    waits = []

    def timed_wait(timeout=None):
        waits.append(timeout)
        if len(waits) > 2:
            stop.set()
        mono.t += timeout or 0
        return stop.is_set()
    stop.wait = timed_wait
    RunLoop(d, no_inotify, monotonic=mono).run(stop)
    (line,) = [json.loads(x) for x in log_stream.getvalue().splitlines()]
    assert (line["msg"], line["error"]) == ("inotify unavailable; collecting on the timer only",
                                            "[Errno 24] Too many open files")
    assert waits[:2] == [0.0, MAX_SLEEP_S]
    assert d.calls == [("run_once", False, True), "drain"]


def test_a_stop_before_the_first_wake_still_drains():
    mono = Mono()
    d = Driven(mono)
    stop = Stop()
    stop.set()
    w = Watcher(mono, stop, [])
    RunLoop(d, lambda: w, monotonic=mono).run(stop)
    assert (d.calls, w.closed, w.timeouts) == (["session_dirs", "drain"], True, [])


def test_soonest_change_takes_the_earliest_and_skips_a_past_flip():
    def agent(note, flip):
        return SimpleNamespace(detector=SimpleNamespace(next_change=lambda: note),
                               safeguard_change=lambda no_data_after_s: flip(no_data_after_s))

    states = [agent(T0 + 50, lambda n: None), agent(None, lambda n: T0 + n)]
    assert soonest_change(states, T0, 30.0, True) == T0 + 30
    assert soonest_change(states, T0, 30.0, False) == T0 + 50  # check off: no C12 flip
    assert soonest_change(states, T0 + 30, 30.0, True) == T0 + 50  # a flip at now is past
    assert soonest_change([agent(None, lambda n: None)], T0, 30.0, True) is None
    assert soonest_change([], T0, 30.0, True) is None


def test_pass_health_counts_passes_and_fails_after_unhealthy_after_s():
    mono = Mono(0.0)
    registry = CollectorRegistry()
    h = PassHealth(registry, mono)
    assert (h.health(), dict(h.passes), h.last_ok_ts) == ((True, "ok"), {"ok": 0, "failed": 0},
                                                           None)
    h.failed()
    h.failed()
    mono.t = UNHEALTHY_AFTER_S - 0.1
    assert h.health() == (True, "ok")
    mono.t = UNHEALTHY_AFTER_S
    assert h.health() == (False, "unhealthy: no collection pass has completed for 120 s (2 "
                                 "failed; the log says why: \"collection pass failed\")")
    h.progressed()  # a slice of a long pass completed
    assert h.health() == (True, "ok")
    mono.t += UNHEALTHY_AFTER_S
    h.ended_ok(T0)
    assert (h.health(), dict(h.passes), h.last_ok_ts) == ((True, "ok"), {"ok": 1, "failed": 2},
                                                           T0)
    h.duration.observe(0.003)
    assert registry.get_sample_value("hive_repeat_failure_collect_duration_seconds_count") == 1
    assert registry.get_sample_value("hive_repeat_failure_collect_duration_seconds_bucket",
                                     {"le": "0.005"}) == 1
    assert registry.get_sample_value("hive_repeat_failure_collect_duration_seconds_bucket",
                                     {"le": "0.0025"}) == 0


@pytest.mark.parametrize("name, value", [("DEBOUNCE_S", 0.02), ("SESSION_POLL_S", 5.0),
                                         ("MAX_SLEEP_S", 1.0), ("UNHEALTHY_AFTER_S", 120.0)])
def test_the_loops_constants(name, value):
    import repeat_failure.sidecar.loop as loop
    assert getattr(loop, name) == value


def test_a_wake_collects_only_the_agents_whose_files_changed(tmp_path, monkeypatch):
    """Issue 28 item 16: a record arriving alone cost more with every agent served (4.6 ms of
    CPU with 1 agent, 35 ms with 300): each wake collected every agent, listing the records
    directory once per agent. Now, with the real loop and inotify, a wake for one agent's record
    collects that agent alone, checks that agent's hook files (every agent's once a second at
    most), and lists the directory for no agent once the first pass found no leftover file."""
    import os
    import time
    from pathlib import Path

    import orjson

    from repeat_failure.config import AgentSpec
    from repeat_failure.sidecar import collector as collector_mod, hook
    from repeat_failure.sidecar.app import Sidecar

    config = Path(tmp_path) / "config.yaml"
    config.write_text("repeat_failure:\n  enabled: true\n  collect_grace_s: 0.5\n"
                      "  collect_interval_s: 30\n")
    sc = Sidecar(tmp_path / "shared", [AgentSpec(f"a{i}", "bash") for i in range(50)], config)
    collected: list[str] = []
    listed: list[int] = []
    repaired: list[int] = []
    real_collect, real_listdir = sc.collector.collect, os.listdir
    real_repair = sc._shared.repair

    def collect(agent):
        collected.append(agent)
        return real_collect(agent)

    def listdir(path):
        listed.append(1)
        return real_listdir(path)

    def repair(hooks):
        repaired.append(len(hooks))
        return real_repair(hooks)

    monkeypatch.setattr(sc.collector, "collect", collect)
    monkeypatch.setattr(collector_mod.os, "listdir", listdir)
    monkeypatch.setattr(sc._shared, "repair", repair)
    stop = threading.Event()
    loop = threading.Thread(target=sc.run_forever, args=(stop,), daemon=True)
    loop.start()
    try:
        deadline = time.monotonic() + 5
        while len(set(collected)) < 50:  # the first, timed pass covers every agent
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(0.1)
        assert len(listed) == 50
        collected.clear(), listed.clear(), repaired.clear()
        with open(hook.records_path(sc.shared_dir, "a7"), "ab") as f:
            f.write(orjson.dumps({"v": 1, "ts": time.time(), "agent": "a7", "backend": "bash",
                                  "route": "bash_env", "exit": 2, "cmd": "make"}) + b"\n")
        while sum(sc.agents["a7"].records.values()) < 1:
            assert time.monotonic() < deadline + 5
            time.sleep(0.01)
        time.sleep(0.2)
    finally:
        stop.set()
        loop.join(10)
    wake = [a for a in collected if a != "a7"]
    assert (sorted(set(collected)), wake, listed) == (["a7"], [], [])
    # Every agent's hook files are checked once a second at most; a wake checks its agent's.
    assert set(repaired) <= {1, 50} and repaired.count(50) <= 1
