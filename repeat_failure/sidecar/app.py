"""The sidecar, wired: one place where the pipeline stages meet.

``records/<agent>.jsonl`` → :mod:`collector` (rename, read) → :mod:`parse` → :mod:`scrub` →
:mod:`normalize` → :mod:`exclude` → :mod:`dedup` → :mod:`detector` → :mod:`checkstate` →
:mod:`exporter`.

Beside it, the agent's own session log (in its home) → :mod:`sessionlog` (tail, the backend's
reader in :mod:`repeat_failure.backends`) → :mod:`activity` (the C12 safeguard, read by
:mod:`checkstate`); for a backend whose reader is a route (C3), its finished shell calls join the
pipeline above at :mod:`scrub` as records of the route ``<backend>_session_log``.

:class:`Sidecar` owns one :class:`~repeat_failure.sidecar.agent.AgentState` per agent, the
loop that drives it, the session-log polling and the config in force; it wires the units that
work on the agent's state: the shared dir's layout (:mod:`~repeat_failure.sidecar.layout`), the
record pipeline (:mod:`~repeat_failure.sidecar.records`) and the state files
(:mod:`~repeat_failure.sidecar.state`). The exporter reads :meth:`Sidecar.snapshot` and owns
nothing. Wall-clock time comes from an injectable
``clock`` so tests drive windows without sleeping.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from prometheus_client import CollectorRegistry, Histogram

from repeat_failure.backends import SHELL_END, session_reader
from repeat_failure.config import AgentSpec, Config, ConfigError, load_config
from repeat_failure.kube.events import PREVIEW_REASON, EventPublisher, EventStats
from repeat_failure.sessions.activity import Activity
from repeat_failure.sessions.tail import SessionTail
from repeat_failure.sidecar import hook
from repeat_failure.sidecar.agent import AgentState, AgentView
from repeat_failure.sidecar.checkstate import Row
from repeat_failure.sidecar.collector import Batch, Collector, Watcher
from repeat_failure.sidecar.detector import Detector
from repeat_failure.sidecar.exclude import Exclusions
from repeat_failure.sidecar.layout import SharedDir
from repeat_failure.sidecar.pipeline import failure_output
from repeat_failure.sidecar.records import RecordPipeline
from repeat_failure.sidecar.scrub import scrub
from repeat_failure.sidecar.state import StateFile
from repeat_failure.turns.probe import OK as PROBE_OK, PREVIEW_ERROR, PreviewProber, ProbeResult
from repeat_failure.turns.verdict import OK, Turn, TurnTracker

log = logging.getLogger("repeat_failure")

#: After an inotify wake, wait this long for more writes so a burst is collected in one pass.
DEBOUNCE_S = 0.02
#: Seconds between session-log polls when inotify says nothing (inotify wakes them sooner).
SESSION_POLL_S = 5.0
#: ``/healthz`` fails once no collection pass (nor a slice of a long one) has completed for this
#: long: four passes at the longest ``collect_interval_s`` (30 s). A pass failing every time,
#: or a loop stuck somewhere, then shows to the kubelet's liveness probe (issue 17: a relative
#: --shared-dir failed every pass while /healthz said ok).
UNHEALTHY_AFTER_S = 120.0
#: Outcomes of a collection pass (``hive_repeat_failure_collect_passes_total{outcome}``).
PASS_OK, PASS_FAILED = "ok", "failed"



class Sidecar:
    """The repeat-failure sidecar for one pod.

    ``agents`` are watched under ``shared_dir``; ``config_path`` (or ``None`` for defaults) is
    re-read when it changes; ``chain_bash_env`` is baked into rendered hooks. ``clock`` returns
    seconds since the epoch and ``monotonic`` monotonic seconds (both injectable for tests).
    ``registry`` receives the collection-duration histogram. With ``config_optional`` a config
    file missing at start-up is not an error: the built-in defaults (check off) apply until the
    file appears, then it is read as on any change. ``events_configuration`` makes the
    ``kubernetes.client.Configuration`` for Kubernetes Events (default: the pod's in-cluster
    config; see :class:`repeat_failure.kube.events.EventPublisher`); it is used only with Events on.
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
        self._config_stamp = self._stamp()
        self._config_seen = not (config_optional and config_path is not None
                                 and self._config_stamp is None)
        if self._config_seen:
            self.config = load_config(config_path)
        else:
            self.config = Config()
            log.warning("config file not found: running with the built-in defaults (check off) "
                        "until it appears", extra={"config": str(config_path)})
        self._lock = threading.RLock()
        #: Probes agents' previews after turns that edited files; its thread starts on first use.
        self.prober = PreviewProber(self._on_probe)
        self._records = RecordPipeline(Exclusions(self.config.exclude), monotonic, self._publish)
        # Instance attributes, not methods: the per-line path calls the pipeline directly, and
        # a test can still wrap them (tests/test_app.py crashes a pass mid-batch this way).
        self._process_line = self._records.line
        self._process_record = self._records.record
        self._session_record = self._records.session_record
        self.agents = {
            spec.name: AgentState(spec, Detector(self.config.threshold, self.config.window_s),
                                  tail=self._tail(spec))
            for spec in agents
        }
        self._session_polled_at = 0.0
        started = self.clock()
        for state in self.agents.values():
            state.activity = Activity(not_before=started)
            if state.tail is not None:
                state.turns = TurnTracker(state.tail.reader.edit_tools)
            self._describe_sessions(state)
        homes = [s.spec.home for s in self.agents.values() if s.tail is not None]
        for home in {h for h in homes if homes.count(h) > 1}:
            log.warning("agents share one home: each reads the other's session logs, so one "
                        "agent's shell calls count as the other's activity; give each agent its "
                        "own home", extra={"home": home})
        self.collect_duration = Histogram(
            "hive_repeat_failure_collect_duration_seconds",
            "Time per collection pass over all agents.",
            registry=self.registry,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
        )
        self._shared.prepare()
        self._monotonic = monotonic
        self.collect_passes: Counter = Counter({PASS_OK: 0, PASS_FAILED: 0})
        self.last_collect_ts: float | None = None  # epoch seconds of the last pass that ended ok
        self._progress_at = monotonic()  # the last pass or slice completed (for /healthz)
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
                self._state_file.load(state)

    def _publish(self, agent: str, backend: str, message: str, **reason: str) -> None:
        """Queue a Kubernetes Event (a raised note, or with ``reason`` a preview error) while
        Events are on; nothing otherwise. Never blocks: a bounded queue, a daemon thread."""
        if self.events is not None:
            self.events.publish(agent, backend, message, self.clock(), **reason)

    def _describe_sessions(self, state: AgentState) -> None:
        """Log where the agent's session log is looked for, and warn when that cannot work (no
        home given, or a home that is not a directory the sidecar can read)."""
        spec = state.spec
        if not state.route_available:
            log.error("no agent home given, and this backend is recorded from its own session "
                      "log: nothing is recorded and the row says not available; pass "
                      "--agent-home DIR (or `home:` in repeat_failure.agents)",
                      extra={"agent": spec.name, "backend": spec.backend})
            return
        if state.tail is None and spec.preview_url:
            log.warning("preview URL given, but the agent's session log is not read (no home, "
                        "or no session-log reader for this backend): no turn is seen, so no "
                        "preview probe runs and no turn verdict is given",
                        extra={"agent": spec.name, "backend": spec.backend})
        if state.tail is None:
            if spec.home is not None:
                log.info("no session-log reader for this backend: the home is not read",
                         extra={"agent": spec.name, "backend": spec.backend})
            elif session_reader(spec.backend) is not None:
                log.info("no agent home given: the 'not receiving data' safeguard is off "
                         "(--agent-home)", extra={"agent": spec.name, "backend": spec.backend})
            return
        home = Path(spec.home)
        usable = home.is_dir() and os.access(home, os.R_OK | os.X_OK)
        (log.info if usable else log.warning)(
            "session log read from the agent's home" if usable else
            "agent home is not a readable directory: its session log cannot be read until it is",
            extra={"agent": spec.name, "backend": spec.backend, "home": str(home),
                   "globs": [str(base / pattern) for base, pattern in state.tail.globs]})

    def _tail(self, spec: AgentSpec, backfill_s: float | None = None) -> SessionTail | None:
        """The agent's session-log tail, or None (no reader for its backend, or no home).
        By default files older than what can still matter (a note's window, the C12 timer)
        start at their end: the agent's history from before the sidecar ran is not replayed."""
        reader = session_reader(spec.backend)
        if reader is None or spec.home is None:
            return None
        if backfill_s is None:
            backfill_s = max(self.config.window_s, self.config.no_data_after_s) + 60.0
        return SessionTail(reader, spec.home, env=dict(spec.session_env), backfill_s=backfill_s,
                           clock=self.clock)

    # -- config --------------------------------------------------------------------------------

    def _stamp(self) -> tuple | None:
        if self.config_path is None:
            return None
        try:
            st = os.stat(self.config_path)
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def _apply_enabled(self) -> None:
        """Render (check on) or remove (check off) each agent's hook; with the check off, also
        forget the agent's notes, C12 timer, turns and state file. A failure is logged, not
        raised: the next pass repairs the layout and tries again."""
        for name, state in self.agents.items():
            try:
                if self.config.enabled:
                    self._shared.render_hook(name, state.spec.backend)
                else:
                    if self._shared.remove_hook(name):
                        log.info("check off: hook removed", extra={"agent": name})
                    state.forget(self.config.threshold, self.config.window_s, self.clock())
                    self.prober.clear()
                    self._state_file.remove(name)
            except (OSError, hook.HookError) as exc:
                log.error("hook files not updated", extra={"agent": name, "error": str(exc)})

    def _apply_events(self) -> None:
        """Start (check and ``events`` on) or stop (either off) the Kubernetes Events publisher.
        Off costs nothing: no thread, and ``kubernetes`` is never imported."""
        wanted = self.config.enabled and self.config.events
        if wanted and self.events is None:
            self.events = EventPublisher(self._event_stats, self._events_configuration).start()
            log.info("Kubernetes Events on: one Event per raised note",
                     extra={"pod": self.events.pod.name if self.events.pod else None})
        elif not wanted and self.events is not None:
            self.events.close()
            self.events = None
            log.info("Kubernetes Events off")

    def reload_config(self, force: bool = False) -> bool:
        """Re-read the config file if it changed on disk (or ``force``). A file that does not
        validate is logged and ignored; the last good config stays. Returns True on a change."""
        stamp = self._stamp()
        if not force and stamp == self._config_stamp:
            return False
        self._config_stamp = stamp
        if stamp is None and not self._config_seen:
            return False  # --config-optional and still no file: the defaults stay, no log line
        self._config_seen = True
        try:
            new = load_config(self.config_path, allow_empty=False)
        except ConfigError as exc:
            log.error("config change refused, keeping the previous config",
                      extra={"error": str(exc)})
            return False
        if new == self.config:
            return False
        if new.agents != self.config.agents:
            log.warning("repeat_failure.agents changed: the agent list is read at start-up only; "
                        "restart the sidecar to apply it")
        with self._lock:
            if new.enabled and not self.config.enabled:
                # Off → on: what the session logs gained while the check was off had no records
                # (no hook), so it is skipped, not read as missing data.
                for state in self.agents.values():
                    state.tail = self._tail(state.spec, backfill_s=0.0)
                    state.activity = Activity(not_before=self.clock())
                    state.turns = TurnTracker(state.tail.reader.edit_tools
                                              if state.tail is not None else frozenset())
            self.config = new
            self._records.exclusions = Exclusions(new.exclude)
            self.collector.grace_s = new.collect_grace_s
            self._apply_enabled()
            self._apply_events()
            now = self.clock()
            for state in self.agents.values():
                self._records.report(state, state.detector.reconfigure(new.threshold,
                                                                       new.window_s, now))
                if state.dirty and new.enabled:
                    self._save_state(state)
        log.info("config reloaded", extra={"enabled": new.enabled})
        return True

    # -- one pass ------------------------------------------------------------------------------

    def _repair_layout(self) -> None:
        """:meth:`SharedDir.repair`, with every agent's hook while the check is on."""
        self._shared.repair({name: state.spec.backend for name, state in self.agents.items()}
                            if self.config.enabled else {})

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

    def poll_sessions(self, rescan: bool = False) -> None:
        """Read what each agent's session log added (:mod:`sessionlog`): feed the shell
        activity to the C12 tracker and, where the session log is a route (C3), its finished
        shell calls to the pipeline. Reader errors are counted by reason, never raised."""
        self._session_polled_at = time.monotonic()
        if not self.config.enabled:  # C14: with the check off, the agent's home is not read
            return
        for state in list(self.agents.values()):
            if state.tail is None:
                continue
            result = state.tail.poll(rescan=rescan)
            with self._lock:
                state.reader_errors.update(result.errors)
                state.reader_ignored += result.ignored
                if result.events or result.errors:
                    state.dirty = True
                now = self.clock()
                for event in result.events:
                    state.activity.on_event(event)
                    for turn in state.turns.on_event(event):
                        self._on_turn(state, turn)
                    if (state.session_route and event.kind == SHELL_END and event.command
                            and state.first_delivery(event.call_id)):
                        record = self._session_record(state, event, now)
                        if record is not None:
                            self._process_record(state, record, now, failure_output(
                                event, record.failed, state.cut_key, now))
                    elif (not state.session_route and event.kind == SHELL_END and event.failed
                            and event.command and event.output is not None):
                        self._records.session_output(state, event, now)

    def _on_turn(self, state: AgentState, turn: Turn) -> None:
        """A turn was classified (:mod:`repeat_failure.turns.verdict`): count it, and log a failed one as
        the audit event ``turn_failed`` (one JSON line: verdict, agent, backend, turn id, what
        the turn showed, the scrubbed error text)."""
        state.verdicts[turn.verdict] += 1
        state.last_verdict = turn.verdict
        state.failed_in_a_row = 0 if turn.verdict == OK else state.failed_in_a_row + 1
        state.dirty = True
        if turn.verdict != OK:
            log.warning("agent turn failed", extra={
                "event": "turn_failed", "agent": state.spec.name, "backend": state.spec.backend,
                "verdict": turn.verdict, "turn_id": turn.turn_id, "text": turn.text,
                "tools": turn.tools, "error": turn.error, "failed_in_a_row": state.failed_in_a_row})
        if turn.edits and state.spec.preview_url and self.config.enabled:
            # Seed ard-0038 §3: after a turn that touched the dev surface, probe the preview
            # once; off the pipeline's thread (repeat_failure.turns.probe.PreviewProber).
            self.prober.request(state.spec.name, state.spec.preview_url,
                                self.config.preview_timeout_s)

    def _on_probe(self, agent: str, url: str, result: ProbeResult) -> None:
        """A preview probe finished (on the prober's thread): count it, set the agent's preview
        state, log a failed one (scrubbed: ``detail`` and the URL) and, with Events on, make a
        ``PreviewError`` Event for a ``preview_error``."""
        with self._lock:
            state = self.agents.get(agent)
            if state is None or not self.config.enabled:
                return
            state.preview_probes += 1
            before, state.preview_state = state.preview_state, result.outcome
            extra = {"agent": agent, "backend": state.spec.backend, "url": scrub(url),
                     "outcome": result.outcome, "reason": result.reason, "status": result.status,
                     "detail": result.detail, "seconds": round(result.elapsed_s, 3)}
            if result.outcome == PROBE_OK:
                if before not in (None, PROBE_OK):
                    log.info("preview ok again", extra={"event": "preview_ok", **extra})
                return
            state.preview_errors[(result.outcome, result.reason)] += 1
            log.warning("preview error" if result.outcome == PREVIEW_ERROR
                        else "preview server down", extra={"event": result.outcome, **extra})
            if result.outcome == PREVIEW_ERROR and self.events is not None:
                self.events.publish(agent, state.spec.backend,
                                    f"Preview error ({result.reason}) at {extra['url']}: "
                                    f"{result.detail}",
                                    self.clock(), reason=PREVIEW_REASON)

    def session_dirs(self) -> list[Path]:
        """The directories holding the agents' session logs (for inotify); empty while the
        check is off (the home is not read)."""
        if not self.config.enabled:
            return []
        return [d for s in self.agents.values() if s.tail is not None for d in s.tail.watch_dirs()]

    def run_once(self, stop: threading.Event | None = None, sessions: bool = True) -> None:
        """One pass: the session logs (unless ``sessions`` is False: :meth:`run_forever` polls
        them on its own schedule), then collection over every agent, then expiry. A large file
        is taken in slices of the collector's byte budget; the lock is released between slices
        so scrapes are answered meanwhile, and ``stop`` ends the pass between slices."""
        started = time.perf_counter()
        try:
            with self._lock:
                self._repair_layout()
            if sessions:
                self.poll_sessions()
            for state in list(self.agents.values()):
                more = True
                while more and not (stop is not None and stop.is_set()):
                    with self._lock:
                        batch = self.collector.collect(state.spec.name)
                        self._handle(state, batch, self.clock())
                        self._progress_at = self._monotonic()
                    more = batch.more
                    if more:
                        time.sleep(0.001)  # let a waiting scrape take the lock between slices
                with self._lock:
                    if state.dirty and self.config.enabled:
                        self._save_state(state)
            self.expire()
        except Exception:
            with self._lock:
                self.collect_passes[PASS_FAILED] += 1
            raise
        with self._lock:
            self.collect_passes[PASS_OK] += 1
            self.last_collect_ts = self.clock()
            self._progress_at = self._monotonic()
        self.collect_duration.observe(time.perf_counter() - started)

    def health(self) -> tuple[bool, str]:
        """``(healthy, text)`` for ``GET /healthz``: unhealthy once no collection pass (nor a
        slice of one) has completed for :data:`UNHEALTHY_AFTER_S` seconds (every pass
        failing, or the loop stuck), counted from the start."""
        with self._lock:
            idle = self._monotonic() - self._progress_at
            failed = self.collect_passes[PASS_FAILED]
        if idle < UNHEALTHY_AFTER_S:
            return True, "ok"
        return False, (f"unhealthy: no collection pass has completed for {idle:.0f} s "
                       f"({failed} failed; the log says why: \"collection pass failed\")")

    def collect_stats(self) -> tuple[dict[str, int], float | None]:
        """The collection passes so far by outcome (``ok``, ``failed``) and the time (epoch
        seconds) the last one ended ok, ``None`` before the first: for the exporter."""
        with self._lock:
            return dict(self.collect_passes), self.last_collect_ts

    def expire(self, now: float | None = None) -> None:
        """Clear notes whose last failure left the window, and log each agent whose C12 state
        changed (uses the current time)."""
        now = self.clock() if now is None else now
        with self._lock:
            for state in self.agents.values():
                events = state.detector.expire(now)
                self._records.report(state, events)
                receiving = (state.receiving(now, self.config.no_data_after_s)
                             or not self.config.enabled)
                if receiving != state.receiving_logged:
                    state.receiving_logged = receiving
                    extra = {"event": "receiving_data" if receiving else "not_receiving_data",
                             "agent": state.spec.name, "backend": state.spec.backend,
                             "since": state.activity.unmatched_since}
                    if receiving:
                        log.info("records arrive again: check state on", extra=extra)
                    else:
                        log.warning("repeat-failure check not receiving data: shell-tool calls "
                                    "in the session log, no record", extra=extra)
                if state.dirty and self.config.enabled:
                    self._save_state(state)

    def _next_change(self) -> float | None:
        """The soonest time (epoch seconds) a note expires or an agent's C12 state flips. A
        flip already past stays past: it is nothing to wait for (waiting on it would spin)."""
        now = self.clock()
        times = []
        for state in self.agents.values():
            times.append(state.detector.next_change())
            flip = (state.safeguard_change(self.config.no_data_after_s)
                    if self.config.enabled else None)
            times.append(flip if flip is not None and flip > now else None)
        return min((t for t in times if t is not None), default=None)

    def _watch_sessions(self, watcher: Watcher | None) -> None:
        if watcher is None:
            return
        try:
            watcher.watch_session_dirs(self.session_dirs())
        except Exception:  # the timer still polls; a bug must not stop monitoring
            log.exception("session-log directories not watched")

    def run_forever(self, stop: threading.Event) -> None:
        """Collect on inotify wakes and at least every ``collect_interval_s`` until ``stop``;
        expire notes on time; reload the config when its file changes. Drains held files on
        the way out."""
        try:
            watcher: Watcher | None = Watcher(self.shared_dir / hook.RECORDS_DIR, self.config_path)
        except OSError as exc:  # fs.inotify.max_user_instances, say: the timer still collects
            log.error("inotify unavailable; collecting on the timer only",
                      extra={"error": str(exc)})
            watcher = None
        try:
            next_pass = time.monotonic()
            self._watch_sessions(watcher)
            has_sessions = any(s.tail is not None for s in self.agents.values())
            while not stop.is_set():
                # Collection passes (and expiry) are due at these; session polls separately.
                deadlines = [next_pass]
                grace = self.collector.next_deadline()
                if grace is not None:
                    deadlines.append(grace)
                soonest = self._next_change()
                if soonest is not None:
                    deadlines.append(time.monotonic() + max(0.0, soonest - self.clock()) + 0.001)
                wake = min(deadlines)
                if has_sessions:
                    wake = min(wake, self._session_polled_at + SESSION_POLL_S)
                timeout = max(0.0, min(wake - time.monotonic(), 1.0))
                if watcher is not None:
                    records_changed, config_changed, sessions_changed = watcher.wait(timeout)
                else:
                    stop.wait(timeout)
                    records_changed = config_changed = sessions_changed = False
                if stop.is_set():
                    break
                if config_changed or self._config_stamp != self._stamp():
                    self.reload_config()
                if has_sessions and (sessions_changed or time.monotonic()
                                     >= self._session_polled_at + SESSION_POLL_S):
                    try:
                        self.poll_sessions()
                    except Exception:  # a bug must not stop monitoring
                        log.exception("session-log pass failed")
                    self._watch_sessions(watcher)
                if records_changed:
                    stop.wait(DEBOUNCE_S)
                if records_changed or time.monotonic() >= min(deadlines) - 0.0005:
                    try:
                        self.run_once(stop, sessions=False)
                    except Exception:  # a bug must not stop monitoring; the next pass retries
                        log.exception("collection pass failed")
                    if time.monotonic() >= next_pass:
                        next_pass = time.monotonic() + self.config.collect_interval_s
        finally:
            self.prober.close()
            if watcher is not None:
                watcher.close()
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
