"""The sidecar's run loop: when a collection pass, a session-log poll and a config reload run.

The loop sleeps until inotify reports a change (``records/``, the config file, an agent's
session-log directory: :class:`repeat_failure.sidecar.collector.Watcher`) or the soonest of
these is due, at most :data:`MAX_SLEEP_S` at a time:

- the next timed collection pass (every ``collect_interval_s`` of the config);
- the collector's grace deadline for a file it holds open;
- the next change nothing else would wake for: a note's last failure leaving its window, an
  agent's C12 state flipping (:func:`soonest_change`);
- the next session-log poll, :data:`SESSION_POLL_S` after the last one (when a log is read).

A records change is debounced (:data:`DEBOUNCE_S`) so a burst is collected in one pass, and
such a pass (or one for a held file's grace) covers only the agents whose record files changed
or are due; the timed pass covers every agent (issue 28). A
failing pass or poll is logged and retried on the next wake: a bug must not stop monitoring.
:class:`RunLoop` drives anything shaped like :class:`Driven` (the sidecar); :class:`PassHealth`
counts how the passes go, for the metrics and ``/healthz``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol

from prometheus_client import CollectorRegistry, Histogram

from repeat_failure.config import Config
from repeat_failure.sidecar.agent import AgentState
from repeat_failure.sidecar.collector import Collector, Watcher

log = logging.getLogger("repeat_failure")

#: After an inotify wake, wait this long for more writes so a burst is collected in one pass.
DEBOUNCE_S = 0.02
#: Seconds between session-log polls when inotify says nothing (inotify wakes them sooner).
SESSION_POLL_S = 5.0
#: The longest single sleep (seconds), so a stop or a config change made without an inotify
#: event is seen within it.
MAX_SLEEP_S = 1.0
#: ``/healthz`` fails once no collection pass (nor a slice of a long one) has completed for this
#: long: four passes at the longest ``collect_interval_s`` (30 s). A pass failing every time,
#: or a loop stuck somewhere, then shows to the kubelet's liveness probe (issue 17: a relative
#: --shared-dir failed every pass while /healthz said ok).
UNHEALTHY_AFTER_S = 120.0
#: Outcomes of a collection pass (``hive_repeat_failure_collect_passes_total{outcome}``).
PASS_OK, PASS_FAILED = "ok", "failed"


class PassHealth:
    """How the collection passes go: how many ended ok or failed, when (epoch seconds) the last
    ok one ended, when (``monotonic`` seconds) the last pass or slice of one completed, and
    ``hive_repeat_failure_collect_duration_seconds`` (a histogram in ``registry``). Holds no
    lock: the caller's guards it."""

    def __init__(self, registry: CollectorRegistry, monotonic: Callable[[], float]) -> None:
        self._monotonic = monotonic
        self.passes: Counter = Counter({PASS_OK: 0, PASS_FAILED: 0})
        self.last_ok_ts: float | None = None
        self._progress_at = monotonic()
        self.duration = Histogram(
            "hive_repeat_failure_collect_duration_seconds",
            "Time per collection pass over all agents.",
            registry=registry,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
        )

    def progressed(self) -> None:
        """A slice of a pass completed."""
        self._progress_at = self._monotonic()

    def failed(self) -> None:
        """A pass raised."""
        self.passes[PASS_FAILED] += 1

    def ended_ok(self, now: float) -> None:
        """A pass completed at ``now`` (epoch seconds)."""
        self.passes[PASS_OK] += 1
        self.last_ok_ts = now
        self._progress_at = self._monotonic()

    def health(self) -> tuple[bool, str]:
        """``(healthy, text)`` for ``GET /healthz``: unhealthy once no collection pass (nor a
        slice of one) has completed for :data:`UNHEALTHY_AFTER_S` seconds (every pass
        failing, or the loop stuck), counted from the start."""
        idle = self._monotonic() - self._progress_at
        failed = self.passes[PASS_FAILED]
        if idle < UNHEALTHY_AFTER_S:
            return True, "ok"
        return False, (f"unhealthy: no collection pass has completed for {idle:.0f} s "
                       f"({failed} failed; the log says why: \"collection pass failed\")")


def soonest_change(states: Iterable[AgentState], now: float, no_data_after_s: float,
                   enabled: bool) -> float | None:
    """The soonest time (epoch seconds) a note of one of ``states`` expires
    (:meth:`Detector.next_change`) or, with the check ``enabled``, an agent's C12 state flips
    (:meth:`AgentState.safeguard_change` after ``no_data_after_s`` seconds); None when nothing
    is due. A flip at or before ``now`` stays past: it is nothing to wait for (waiting on it
    would spin)."""
    times = []
    for state in states:
        times.append(state.detector.next_change())
        flip = state.safeguard_change(no_data_after_s) if enabled else None
        times.append(flip if flip is not None and flip > now else None)
    return min((t for t in times if t is not None), default=None)


class Driven(Protocol):
    """What :class:`RunLoop` drives (:class:`repeat_failure.sidecar.app.Sidecar`)."""

    config: Config  #: the config in force; replaced by :meth:`reload_config`
    agents: dict[str, AgentState]
    collector: Collector
    clock: Callable[[], float]  #: epoch seconds
    session_polled_at: float  #: monotonic time of the last session-log poll (0.0: none yet)

    def run_once(self, stop: threading.Event | None = None, sessions: bool = True,
                 agents: set[str] | None = None) -> None:
        """One collection pass (and expiry) over ``agents`` (None: every agent); may
        raise."""

    def poll_sessions(self, rescan: bool = False, changed: set[Path] | None = None) -> None:
        """Read what the session logs added (``changed``: the files inotify saw change);
        sets ``session_polled_at``; may raise."""

    def session_dirs(self) -> list[Path]:
        """The directories to watch for session-log changes."""

    def config_changed(self) -> bool:
        """True when the config file changed on disk since it was last read."""

    def reload_config(self) -> bool:
        """Re-read the config file."""

    def drain(self) -> None:
        """Stop the helpers and hand what the collector still holds to the pipeline (on the
        way out)."""


class RunLoop:
    """Runs ``driven``'s passes until a stop event is set (:meth:`run`).

    ``watcher`` makes the inotify watcher (called once per :meth:`run`); an ``OSError`` from
    it (no inotify instance left) leaves the loop on its timers alone. ``monotonic`` is the
    clock deadlines are kept in (seconds)."""

    def __init__(self, driven: Driven, watcher: Callable[[], Watcher],
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.driven = driven
        self._make_watcher = watcher
        self._monotonic = monotonic

    def _watch_sessions(self, watcher: Watcher | None) -> None:
        if watcher is None:
            return
        try:
            watcher.watch_session_dirs(self.driven.session_dirs())
        except Exception:  # the timer still polls; a bug must not stop monitoring
            log.exception("session-log directories not watched")

    def run(self, stop: threading.Event) -> None:
        """Collect on inotify wakes and at least every ``collect_interval_s`` until ``stop``
        is set; expire notes on time; poll the session logs; reload the config when its file
        changes. On the way out (a stop or an exception) closes the watcher and calls
        ``driven.drain()``. Exceptions from a pass or a poll are logged, not raised."""
        d, monotonic = self.driven, self._monotonic
        try:
            watcher: Watcher | None = self._make_watcher()
        except OSError as exc:  # fs.inotify.max_user_instances, say: the timer still collects
            log.error("inotify unavailable; collecting on the timer only",
                      extra={"error": str(exc)})
            watcher = None
        try:
            next_pass = monotonic()
            self._watch_sessions(watcher)
            has_sessions = any(s.tail is not None for s in d.agents.values())
            while not stop.is_set():
                # Collection passes (and expiry) are due at these; session polls separately.
                deadlines = [next_pass]
                grace = d.collector.next_deadline()
                if grace is not None:
                    deadlines.append(grace)
                soonest = soonest_change(d.agents.values(), d.clock(), d.config.no_data_after_s,
                                         d.config.enabled)
                if soonest is not None:
                    deadlines.append(monotonic() + max(0.0, soonest - d.clock()) + 0.001)
                wake = min(deadlines)
                if has_sessions:
                    wake = min(wake, d.session_polled_at + SESSION_POLL_S)
                timeout = max(0.0, min(wake - monotonic(), MAX_SLEEP_S))
                if watcher is not None:
                    records_changed, config_changed, sessions_changed = watcher.wait(timeout)
                else:
                    stop.wait(timeout)
                    records_changed = config_changed = sessions_changed = False
                if stop.is_set():
                    break
                if config_changed or d.config_changed():
                    d.reload_config()
                if has_sessions and (sessions_changed or monotonic()
                                     >= d.session_polled_at + SESSION_POLL_S):
                    try:
                        d.poll_sessions(changed=watcher.take_session_paths()
                                        if watcher is not None else None)
                    except Exception:  # a bug must not stop monitoring
                        log.exception("session-log pass failed")
                    self._watch_sessions(watcher)
                if records_changed:
                    stop.wait(DEBOUNCE_S)
                if records_changed or monotonic() >= min(deadlines) - 0.0005:
                    # A timed pass covers every agent; one woken by records or a held file's
                    # grace covers the agents whose files changed or are due (issue 28 item
                    # 16: each wake scanned every agent's files).
                    changed = watcher.take_changed_agents() if watcher is not None else None
                    agents = (None if changed is None or monotonic() >= next_pass - 0.0005
                              else changed | d.collector.due_agents())
                    try:
                        d.run_once(stop, sessions=False, agents=agents)
                    except Exception:  # a bug must not stop monitoring; the next pass retries
                        log.exception("collection pass failed")
                    if monotonic() >= next_pass:
                        next_pass = monotonic() + d.config.collect_interval_s
        finally:
            try:
                if watcher is not None:
                    watcher.close()
            finally:
                d.drain()
