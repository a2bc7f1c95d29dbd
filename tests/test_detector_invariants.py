"""The detector's invariants under random interleavings (issue 26: awaited outputs), with small
bounds so every bound is reached: records of several commands and exits, awaited or not,
outputs given late or never, successes, expiry, config reloads that flip ``match_output``, a
save and load (a restart) and the wall clock stepping back. A fixed seed: the same run each
time.

After every step: the failure count matches what is held and stays within ``MAX_FAILURES``;
commands and awaited failures stay within their bounds; each key's times are sorted with one
digest each; a failure awaiting its output has a wait that will end; and after
:meth:`Detector.expire` at ``now`` the next change is later than ``now`` (else the run loop
would spin on it)."""

from __future__ import annotations

import random

import pytest

import repeat_failure.rules.detector as detector
from repeat_failure.rules.detector import PENDING, Detector

T0 = 1_800_000_000.0


@pytest.fixture
def small(monkeypatch):
    monkeypatch.setattr(detector, "MAX_FAILURES", 12)
    monkeypatch.setattr(detector, "MAX_COMMANDS", 3)
    monkeypatch.setattr(detector, "MAX_AWAITED", 5)
    monkeypatch.setattr(detector, "MAX_FAILURES_PER_KEY", 6)


def check(det: Detector, now: float) -> None:
    held = sum(state.count() for state in det._commands.values())
    assert det.failure_count == held <= detector.MAX_FAILURES
    assert len(det._commands) <= detector.MAX_COMMANDS
    assert det.awaited_count <= detector.MAX_AWAITED
    waiting = {command for command, _, _ in det.awaited()}
    for command, state in det._commands.items():
        for _, times in state.items():
            assert list(times) == sorted(times)
            assert times.outs is None or len(times.outs) == len(times)
            if times.outs is not None and PENDING in times.outs:
                assert command in waiting  # its wait ends (OUTPUT_WAIT_S), then it counts
        note = det.note(command, now)
        assert note is None or note.count >= 1


@pytest.mark.parametrize("seed", range(4))
def test_random_interleavings_keep_the_invariants(small, seed: int) -> None:
    rnd = random.Random(seed)
    for _ in range(250):
        det = Detector(rnd.choice([1, 2, 3]), rnd.choice([5.0, 30.0, 600.0]),
                       match_output=rnd.random() < 0.8)
        now = T0
        fed: list[tuple[str, float]] = []
        for _ in range(60):
            now += rnd.choice([0, 0.1, 1, 7, 16])
            op = rnd.random()
            command = f"c{rnd.randrange(5)}"
            if op < 0.5:
                ts = now - rnd.choice([0, 0, 0.5, 3, 700])
                det.record(command, rnd.choice([1, 2, None]), True, ts, now,
                           output=rnd.choice([0, 0, 5, 6]), pending=rnd.random() < 0.6)
                fed.append((command, ts))
            elif op < 0.65 and fed:
                command, ts = rnd.choice(fed)
                det.set_output(command, rnd.choice([1, 2, None]), ts, rnd.choice([0, 5, 6]), now)
            elif op < 0.7:
                det.record(command, 0, False, now, now)
            elif op < 0.82:
                det.expire(now)
                due = det.next_change()
                assert due is None or due > now
            elif op < 0.87:
                det.reconfigure(rnd.choice([1, 2, 3]), det.window_s, now, rnd.random() < 0.5)
            elif op < 0.93:
                again = Detector(det.threshold, det.window_s, det.match_output)
                again.load_dict(det.to_dict(), now=now)
                det = again
            else:
                now -= rnd.choice([60, 3600])  # the wall clock steps back (NTP)
            check(det, now)
