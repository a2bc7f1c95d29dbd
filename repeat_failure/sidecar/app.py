"""The sidecar, wired: one place where the pipeline stages meet.

``records/<agent>.jsonl`` → :mod:`collector` (rename, read) → :mod:`parse` → :mod:`scrub` →
:mod:`normalize` → :mod:`exclude` → :mod:`dedup` → :mod:`detector` → :mod:`checkstate` →
:mod:`exporter`.

Beside it, the agent's own session log (in its home) → :mod:`repeat_failure.sessions.tail` (the
backend's reader in :mod:`repeat_failure.backends`) → :mod:`repeat_failure.sessions.activity`
(the C12 safeguard, read by :mod:`checkstate`); for a backend whose reader is a route (C3), its finished shell calls join the
pipeline above at :mod:`scrub` as records of the route ``<backend>_session_log``.

:class:`Sidecar` owns one :class:`~repeat_failure.sidecar.agent.AgentState` per agent and wires
the units that work on it: the shared dir's layout (:mod:`~repeat_failure.sidecar.layout`), the
record pipeline (:mod:`~repeat_failure.sidecar.records`), the state files
(:mod:`~repeat_failure.sidecar.state`), the session feed
(:mod:`~repeat_failure.sidecar.session_feed`) and the run loop
(:mod:`~repeat_failure.sidecar.loop`); it keeps the config in force and reloads it. The exporter
reads :meth:`Sidecar.snapshot` and owns nothing. Wall-clock time comes from an injectable
``clock`` so tests drive windows without sleeping.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from prometheus_client import CollectorRegistry

from repeat_failure.config import AgentSpec, Config, ConfigError
from repeat_failure.events import EventPublisher, EventStats
from repeat_failure.sessions.activity import Activity
from repeat_failure.sidecar import hook
from repeat_failure.sidecar.agent import AgentState, AgentView
from repeat_failure.sidecar.checkstate import Row
from repeat_failure.sidecar.collector import Batch, Collector, Watcher
from repeat_failure.sidecar.config_file import ConfigFile
from repeat_failure.rules.detector import Detector
from repeat_failure.rules.exclude import Exclusions
from repeat_failure.sidecar.layout import SharedDir
from repeat_failure.sidecar.loop import PassHealth, RunLoop, soonest_change
from repeat_failure.sidecar.records import RecordPipeline
from repeat_failure.sidecar.session_feed import (SessionFeed, describe_sessions, log_receiving,
                                                 log_what_runs, session_tail)
from repeat_failure.sidecar.state import StateFile
from repeat_failure.turns.probe import PreviewProber, ProbeResult
from repeat_failure.turns.verdict import TurnTracker

log = logging.getLogger("repeat_failure")


class Sidecar:
    """The repeat-failure sidecar for one pod.

    ``agents`` are watched under ``shared_dir``; ``config_path`` (or ``None`` for defaults) is
    re-read when it changes; ``chain_bash_env`` is baked into rendered hooks. ``clock`` returns
    seconds since the epoch and ``monotonic`` monotonic seconds (both injectable for tests).
    ``registry`` receives the collection-duration histogram. With ``config_optional`` a config
    file missing at start-up is not an error: the built-in defaults (check off) apply until the
    file appears, then it is read as on any change. ``events_configuration`` makes the
    ``kubernetes.client.Configuration`` for Kubernetes Events (default: the pod's in-cluster
    config; see :class:`repeat_failure.events.EventPublisher`); it is used only with Events on.
    Raises :class:`ConfigError` for no agent or a config file that does not validate, and
    :class:`hook.HookError` for a name or path that cannot go into a hook.
    """

    def __init__(self, shared_dir: str | os.PathLike[str], agents: list[AgentSpec],
                 config_path: str | os.PathLike[str] | None = None,
                 chain_bash_env: str | None = None,
                 clock: Callable[[], float] = time.time,
                 registry: CollectorRegistry | None = None,
                 monotonic: Callable[[], float] = time.monotonic,
                 events_configuration: Callable[[], object] | None = None,
                 config_optional: bool = False) -> None:
        if not agents:
            raise ConfigError("no agent to watch: pass --agent/--backend or list "
                              "repeat_failure.agents in the config")
        # Absolute: the hook bakes its paths into the agent's shells, which run elsewhere, and
        # refuses a relative one (issue 17: every pass failed on it, unseen).
        self.shared_dir = Path(os.path.abspath(shared_dir))
        self._shared = SharedDir(self.shared_dir, chain_bash_env)
        for spec in agents:  # HookError now, not at every pass (the CLI exits 2)
            self._shared.check_names(spec.name, spec.backend)
        self.config_path = config_path
        self.chain_bash_env = chain_bash_env
        self.clock = clock
        self.registry = registry or CollectorRegistry()
        # --config-optional: a config file missing at start-up means the built-in defaults
        # (check off) until it appears; once read, the file behaves as without the flag.
        self.config_optional = config_optional
        self._config_file = ConfigFile(config_path, config_optional, monotonic)
        self.config: Config = self._config_file.initial()
        self._lock = threading.RLock()
        #: Probes agents' previews after turns that edited files; its thread starts on first use.
        self.prober = PreviewProber(self._on_probe)
        self._records = RecordPipeline(Exclusions(self.config.exclude), monotonic, self._publish)
        # Instance attributes, not methods: the per-line path calls the pipeline directly, and
        # a test can still wrap them (tests/test_app.py crashes a pass mid-batch this way).
        self._process_line = self._records.line
        self._process_record = self._records.record
        self._session_record = self._records.session_record
        self._feed = SessionFeed(self._records, self.prober, lambda: self.config, self._publish)
        # By default session files older than what can still matter (a note's window, the C12
        # timer) start at their end: the agent's history from before the sidecar ran is not
        # replayed.
        backfill_s = max(self.config.window_s, self.config.no_data_after_s) + 60.0
        self.agents = {
            spec.name: AgentState(spec, Detector(self.config.threshold, self.config.window_s,
                                                     self.config.match_output),
                                  tail=session_tail(spec, self.clock, backfill_s))
            for spec in agents
        }
        #: Monotonic time of the last session-log poll (0.0: none yet), for the run loop.
        self.session_polled_at = 0.0
        self._repaired_at = 0.0  # monotonic time every agent's hook files were last checked
        started = self.clock()
        for state in self.agents.values():
            state.activity = Activity(not_before=started)
            if state.tail is not None:
                state.turns = TurnTracker(state.tail.reader.edit_tools)
        describe_sessions(list(self.agents.values()))
        log_what_runs(self.config, list(self.agents.values()))
        self._passes = PassHealth(self.registry, monotonic)
        self._shared.prepare()
        self.collector = Collector(self.shared_dir / hook.RECORDS_DIR, self.config.collect_grace_s,
                                   clock=monotonic)
        self._state_file = StateFile(self.shared_dir / hook.STATE_DIR, self.collector.restore,
                                     self._records.report)
        self._apply_enabled()
        self._event_stats = EventStats()
        self._events_configuration = events_configuration
        self.events: EventPublisher | None = None  # running only with the check and Events on
        self._apply_events()
        if self.config.enabled:
            for state in self.agents.values():
                self._state_file.load(state, self.clock())

    def _publish(self, agent: str, backend: str, message: str, **reason: str) -> None:
        """Queue a Kubernetes Event (a raised note, or with ``reason`` a preview error) while
        Events are on; nothing otherwise. Never blocks: a bounded queue, a daemon thread."""
        if self.events is not None:
            self.events.publish(agent, backend, message, self.clock(), **reason)

    # -- config --------------------------------------------------------------------------------

    def config_changed(self) -> bool:
        """True when the config file changed on disk since it was last read
        (:meth:`ConfigFile.changed`)."""
        return self._config_file.changed()

    def _apply_enabled(self) -> None:
        """Render (check on) or remove (check off) each agent's hook; with the check off, also
        forget the agent's notes, C12 timer and state file, and its turns unless turn health is
        on (its own switch, issue 31); with turn health off, forget the turns and drop waiting
        preview probes. A failure is logged, not raised: the next pass repairs the layout and
        tries again."""
        health = self.config.turn_health
        if not health:
            self.prober.clear()
        for name, state in self.agents.items():
            if not health:
                state.forget_turns()
            try:
                if self.config.enabled:
                    self._shared.render_hook(name, state.spec.backend)
                else:
                    if self._shared.remove_hook(name):
                        log.info("check off: hook removed", extra={"agent": name})
                    state.forget(self.config.threshold, self.config.window_s, self.clock(),
                                 self.config.match_output, turns=not health)
                    self._state_file.remove(name)
            except (OSError, hook.HookError) as exc:
                log.error("hook files not updated", extra={"agent": name, "error": str(exc)})

    def _apply_events(self) -> None:
        """Start (``events`` on, and the check or turn health with a preview to probe) or stop
        the Kubernetes Events publisher. Off costs nothing: no thread, and ``kubernetes`` is
        never imported."""
        probes = self.config.turn_health and any(s.spec.preview_url for s in self.agents.values())
        wanted = self.config.events and (self.config.enabled or probes)
        if wanted and self.events is None:
            self.events = EventPublisher(self._event_stats, self._events_configuration).start()
            log.info("Kubernetes Events on: one Event per raised note or broken preview",
                     extra={"pod": self.events.pod.name if self.events.pod else None})
        elif not wanted and self.events is not None:
            self.events.close()
            self.events = None
            log.info("Kubernetes Events off")

    def reload_config(self, force: bool = False) -> bool:
        """Re-read the config file if it changed on disk (or ``force``). A file that does not
        validate is logged and ignored; the last good config stays; a change that turns the
        check off is applied only once the file reads the same ``OFF_SETTLE_S`` seconds apart
        (:meth:`ConfigFile.reread`; the run loop reads again meanwhile). Returns True on a
        change."""
        new = self._config_file.reread(force, self.config)
        if new is None or new == self.config:
            return False
        if new.agents != self.config.agents:
            log.warning("repeat_failure.agents changed: the agent list is read at start-up only; "
                        "restart the sidecar to apply it")
        with self._lock:
            if new.reads_sessions and not self.config.reads_sessions:
                # Not read → read: what the session logs gained meanwhile is skipped (it had no
                # records, no hook), not read as missing data or as turns.
                for state in self.agents.values():
                    state.tail = session_tail(state.spec, self.clock, 0.0)
                    state.turns = TurnTracker(state.tail.reader.edit_tools
                                              if state.tail is not None else frozenset())
            if new.enabled and not self.config.enabled:
                # Check off → on: the C12 timer starts now (calls read for turn health alone
                # had no hook to record them).
                for state in self.agents.values():
                    state.activity = Activity(not_before=self.clock())
            changed = (new.enabled, new.turn_health) != (self.config.enabled,
                                                         self.config.turn_health)
            self.config = new
            self._records.exclusions = Exclusions(new.exclude)
            self.collector.grace_s = new.collect_grace_s
            self._apply_enabled()
            self._apply_events()
            now = self.clock()
            for state in self.agents.values():
                self._records.report(state, state.detector.reconfigure(
                    new.threshold, new.window_s, now, new.match_output))
                if state.dirty and new.enabled:
                    self._save_state(state)
        log.info("config reloaded", extra={"enabled": new.enabled,
                                           "turn_health": new.turn_health})
        if changed:
            log_what_runs(new, list(self.agents.values()))
        return True

    # -- one pass ------------------------------------------------------------------------------

    def _repair_layout(self, agents: set[str] | None = None) -> None:
        """:meth:`SharedDir.repair`, with the hooks of ``agents`` (None: every agent's; every
        agent's anyway once a second) while the check is on."""
        now = time.monotonic()
        if agents is None or now - self._repaired_at >= 1.0:
            agents, self._repaired_at = set(self.agents), now
        self._shared.repair({name: self.agents[name].spec.backend for name in agents
                             if name in self.agents} if self.config.enabled else {})

    def _state_path(self, agent: str) -> Path:
        return self._state_file.path(agent)

    def _save_state(self, state: AgentState) -> None:
        self._state_file.save(state)

    def _handle(self, state: AgentState, batch: Batch, now: float) -> None:
        """Process a batch, save the state with the batch's checkpoint, delete finished files.

        While a backlog is read in slices, the state is saved at most once a second (and
        whenever a file is about to be deleted): a crash then resumes from the last saved
        checkpoint, which matches the last saved detector state."""
        if self.config.enabled:
            for line in batch.lines:
                self._process_line(state, line, now)
            for name, reason, what in batch.rejected_files:
                self._records.rejected_file(state, name, reason, what)
        if batch.checkpoint != state.checkpoint:
            state.checkpoint = batch.checkpoint
            state.dirty = True
        due = bool(batch.done) or not batch.more or time.monotonic() - state.saved_at >= 1.0
        if state.dirty and due and self.config.enabled:
            self._save_state(state)
        if state.dirty and self.config.enabled and batch.done:
            # Not saved: the files stay (the collector offers them again with the next batch),
            # so a restart reads them again from the last saved checkpoint instead of losing
            # what they held (issue 17).
            return
        self.collector.release(batch)

    def poll_sessions(self, rescan: bool = False, changed: set[Path] | None = None) -> None:
        """Read what each agent's session log added (its tail; ``changed``: the session files
        inotify saw change, so an old one growing again is found at once) and feed it to the
        agent's state (:meth:`SessionFeed.feed`: the C12 tracker, turn verdicts and, where the
        session log is a route (C3), the record pipeline). Reader errors are counted by
        reason, never raised."""
        self.session_polled_at = time.monotonic()
        if not self.config.reads_sessions:  # neither the check nor turn health: not read
            return
        for state in list(self.agents.values()):
            if state.tail is None:
                continue
            result = state.tail.poll(rescan=rescan, changed=changed or ())
            with self._lock:
                self._feed.feed(state, result, self.clock())

    def _on_probe(self, agent: str, url: str, result: ProbeResult) -> None:
        """A preview probe finished (on the prober's thread): :meth:`SessionFeed.probed`,
        unless the agent is unknown or turn health went off meanwhile."""
        with self._lock:
            state = self.agents.get(agent)
            if state is None or not self.config.turn_health:
                return
            self._feed.probed(state, url, result)

    def session_dirs(self) -> list[Path]:
        """The directories holding the agents' session logs (for inotify); empty while
        neither the check nor turn health is on (the home is not read)."""
        if not self.config.reads_sessions:
            return []
        return [d for s in self.agents.values() if s.tail is not None for d in s.tail.watch_dirs()]

    def run_once(self, stop: threading.Event | None = None, sessions: bool = True,
                 agents: set[str] | None = None) -> None:
        """One pass: the session logs (unless ``sessions`` is False: :meth:`run_forever` polls
        them on its own schedule), then collection over ``agents`` (names; None: every agent;
        the run loop names those whose record files changed, issue 28), then expiry. A large
        file is taken in slices of the collector's byte budget; the lock is released between
        slices so scrapes are answered meanwhile, and ``stop`` ends the pass between slices."""
        started = time.perf_counter()
        try:
            with self._lock:
                self._repair_layout(agents)
            if sessions:
                self.poll_sessions()
            states = (list(self.agents.values()) if agents is None
                      else [self.agents[n] for n in sorted(agents) if n in self.agents])
            for state in states:
                more = True
                while more and not (stop is not None and stop.is_set()):
                    with self._lock:
                        batch = self.collector.collect(state.spec.name)
                        self._handle(state, batch, self.clock())
                        self._passes.progressed()
                    more = batch.more
                    if more:
                        time.sleep(0.001)  # let a waiting scrape take the lock between slices
                with self._lock:
                    if state.dirty and self.config.enabled:
                        self._save_state(state)
            self.expire()
        except Exception:
            with self._lock:
                self._passes.failed()
            raise
        with self._lock:
            self._passes.ended_ok(self.clock())
        self._passes.duration.observe(time.perf_counter() - started)

    def health(self) -> tuple[bool, str]:
        """``(healthy, text)`` for ``GET /healthz`` (:meth:`PassHealth.health`: unhealthy
        once no pass nor slice has completed for ``UNHEALTHY_AFTER_S`` seconds)."""
        with self._lock:
            return self._passes.health()

    def started(self) -> tuple[bool, str]:
        """``(started, text)`` for ``GET /startupz``, the injected sidecar's startup probe
        (issue 29: a native sidecar's startup probe holds the agent container until it passes):
        with the check on, every agent's hook file is rendered and ``records/`` is a directory
        this process may write; with the check off there is nothing to wait for. Takes no lock
        (a long collection pass must not time the probe out): it reads the file system."""
        if not self.config.enabled:
            return True, "ok (check off)"
        records = self.shared_dir / hook.RECORDS_DIR
        if not (records.is_dir() and os.access(records, os.W_OK | os.X_OK)):
            return False, f"{records} is not a writable directory yet"
        missing = [name for name in self.agents
                   if not hook.hook_path(self.shared_dir, name).is_file()]
        if missing:
            return False, f"hook not rendered yet for agent {', '.join(missing)[:200]}"
        return True, "ok"

    def collect_stats(self) -> tuple[dict[str, int], float | None]:
        """The collection passes so far by outcome (``ok``, ``failed``) and the time (epoch
        seconds) the last one ended ok, ``None`` before the first: for the exporter."""
        with self._lock:
            return dict(self._passes.passes), self._passes.last_ok_ts

    def expire(self, now: float | None = None) -> None:
        """Clear notes whose last failure left the window, and log each agent whose C12 state
        changed (uses the current time)."""
        now = self.clock() if now is None else now
        with self._lock:
            for state in self.agents.values():
                events = state.detector.expire(now)
                self._records.report(state, events)
                log_receiving(state, state.receiving(now, self.config.no_data_after_s)
                              or not self.config.enabled)
                if state.dirty and self.config.enabled:
                    self._save_state(state)

    # -- the run loop --------------------------------------------------------------------------

    def _next_change(self) -> float | None:
        """:func:`repeat_failure.sidecar.loop.soonest_change` over every agent, now."""
        return soonest_change(self.agents.values(), self.clock(), self.config.no_data_after_s,
                              self.config.enabled)

    def run_forever(self, stop: threading.Event) -> None:
        """Collect on inotify wakes and at least every ``collect_interval_s`` until ``stop``;
        expire notes on time; reload the config when its file changes
        (:class:`repeat_failure.sidecar.loop.RunLoop`). Drains held files on the way out."""
        RunLoop(self, lambda: Watcher(self.shared_dir / hook.RECORDS_DIR,
                                      self.config_path)).run(stop)

    def drain(self) -> None:
        """On the way out of :meth:`run_forever`: stop the preview prober, then hand what the
        collector still holds open to the pipeline and save each state that changed."""
        self.prober.close()
        with self._lock:
            now = self.clock()
            for batch in self.collector.flush():
                state = self.agents[batch.agent]
                self._handle(state, batch, now)
                if state.dirty and self.config.enabled:
                    self._save_state(state)

    # -- views ---------------------------------------------------------------------------------

    def rows(self) -> list[Row]:
        """Each agent's dashboard row; empty while the check is off (C14)."""
        return [v.row for v in self.snapshot() if v.row is not None]

    def snapshot(self) -> list[AgentView]:
        """A consistent copy of every agent's state, for the exporter."""
        now = self.clock()
        with self._lock:
            return [state.view(now, self.config, self._event_stats.counts(
                        name, all_outcomes=self.events is not None))
                    for name, state in self.agents.items()]
