"""The sidecar, wired: one place where the pipeline stages meet.

``records/<agent>.jsonl`` → :mod:`collector` (rename, read) → :mod:`parse` → :mod:`scrub` →
:mod:`normalize` → :mod:`exclude` → :mod:`dedup` → :mod:`detector` → :mod:`checkstate` →
:mod:`exporter`.

Beside it, the agent's own session log (in its home) → :mod:`sessionlog` (tail, the backend's
reader in :mod:`repeat_failure.backends`) → :mod:`activity` (the C12 safeguard, read by
:mod:`checkstate`); for a backend whose reader is a route (C3), its finished shell calls join the
pipeline above at :mod:`scrub` as records of the route ``<backend>_session_log``.

:class:`Sidecar` owns the per-agent state (detector, counters) and the loop that drives it;
the exporter reads :meth:`Sidecar.snapshot` and owns nothing. Wall-clock time comes from an
injectable ``clock`` so tests drive windows without sleeping.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from prometheus_client import CollectorRegistry, Histogram

from repeat_failure.sidecar import hook
from repeat_failure.sessions.activity import Activity
from repeat_failure.backends import SHELL_END, SessionEvent, session_reader
from repeat_failure.sidecar.checkstate import Row, build_row
from repeat_failure.sidecar.collector import Batch, Collector, Watcher
from repeat_failure.config import AgentSpec, Config, ConfigError, load_config
from repeat_failure.sidecar.dedup import NEUTRAL, SESSION, RouteDedup
from repeat_failure.sidecar.detector import Detector, ExitKey, NoteCleared, NoteRaised, StateError, exit_key
from repeat_failure.kube.events import PREVIEW_REASON, EventPublisher, EventStats
from repeat_failure.sidecar.exclude import Exclusions
from repeat_failure.sidecar.normalize import command_label
from repeat_failure.sidecar.parse import REASONS, ROUTES, Record, RecordError, parse_line
from repeat_failure.sidecar.pipeline import failure_output, record_command, session_record
from repeat_failure.turns.probe import OK as PROBE_OK, PREVIEW_ERROR, PreviewProber, ProbeResult
from repeat_failure.sidecar.scrub import scrub
from repeat_failure.sessions.tail import SessionTail
from repeat_failure.turns.verdict import OK, VERDICTS, Turn, TurnTracker

log = logging.getLogger("repeat_failure")

#: After an inotify wake, wait this long for more writes so a burst is collected in one pass.
DEBOUNCE_S = 0.02
STATE_FILE_VERSION = 1
#: A state file larger than this is ignored unread (logged "state file ignored"). Parsing
#: (orjson) peaks at 3 to 5 times the file's size on top of the process (about 30 MiB), so a
#: file of 8 MiB restarts at under 70 MiB, well inside the chart's 96Mi memory limit. What the
#: sidecar saves always loads: the detector's bounds (MAX_COMMAND_BYTES of command text, about
#: 60 bytes per command besides, MAX_FAILURES failure times of at most about 35 bytes with
#: their exit key) and the other parts' bounds (session call ids, session files) keep the
#: largest state they allow at about 7 MiB (tests/test_memory.py), and a state that would
#: still be larger forgets its least recently failed commands until it fits (issue 17).
MAX_STATE_BYTES = 8 << 20

SUCCESS, FAILURE, EXCLUDED, DUPLICATE = "success", "failure", "excluded", "duplicate"
OUTCOMES = (SUCCESS, FAILURE, EXCLUDED, DUPLICATE)
#: Seconds between session-log polls when inotify says nothing (inotify wakes them sooner).
SESSION_POLL_S = 5.0
#: Tool-call ids of session-log records remembered per agent, so a session file read again
#: (rewritten by its CLI) never delivers a call twice.
MAX_DELIVERED_CALLS = 4096
#: Rejected record files logged per agent (one line each) within REJECTED_LOG_WINDOW_S
#: seconds; past that they are only counted, and the next line logged says how many were not.
REJECTED_LOG_LINES = 10
REJECTED_LOG_WINDOW_S = 60.0
#: ``/healthz`` fails once no collection pass (nor a slice of a long one) has completed for this
#: long: four passes at the longest ``collect_interval_s`` (30 s). A pass failing every time,
#: or a loop stuck somewhere, then shows to the kubelet's liveness probe (issue 17: a relative
#: --shared-dir failed every pass while /healthz said ok).
UNHEALTHY_AFTER_S = 120.0
#: Outcomes of a collection pass (``hive_repeat_failure_collect_passes_total{outcome}``).
PASS_OK, PASS_FAILED = "ok", "failed"


@dataclass
class AgentState:
    """Everything the sidecar keeps for one agent. The pipeline's counters (``records``,
    ``rejected``, ``notes_raised``) are saved in the state file with the checkpoint and
    restored at start-up, so each record counts once across restarts (issue 17); the
    exporter shows them as of the last save (``saved_counts``), which a restart resumes from,
    so a crash never makes them go back. The other counters start at zero with the process."""

    spec: AgentSpec
    detector: Detector
    records: Counter = field(default_factory=Counter)  # (backend, route, outcome) -> n
    rejected: Counter = field(default_factory=Counter)  # reason -> n
    notes_raised: int = 0
    #: (records, rejected, notes_raised) as last saved or loaded: what is exported.
    saved_counts: tuple[dict, dict, int] = ({}, {}, 0)
    #: Keys the digest that tells cut commands apart (:func:`repeat_failure.sidecar.normalize.mark_cut`);
    #: kept in the state file, so a restart gives a cut command the same key.
    cut_key: bytes = field(default_factory=lambda: os.urandom(16))
    #: Monotonic times of the rejected-file lines logged lately, and the rejections not logged.
    rejected_logged: deque = field(default_factory=deque)
    rejected_unlogged: int = 0
    last_record_ts: float | None = None
    dirty: bool = False
    checkpoint: dict = field(default_factory=dict)  # collected file name -> offset handed out
    saved_at: float = 0.0  # monotonic time of the last state save
    tail: SessionTail | None = None  # the backend's session log, when a reader and home exist
    activity: Activity = field(default_factory=Activity)
    reader_errors: Counter = field(default_factory=Counter)  # reason -> n
    reader_ignored: int = 0  # session-log lines of a type the reader does not know
    dedup: RouteDedup = field(default_factory=RouteDedup)
    #: Pairs the neutral route's failures with the session log's record of the same call, for
    #: a backend whose session log is read but is not a route: the log's output digest goes to
    #: the hook's record (issue 19).
    outputs: RouteDedup = field(default_factory=RouteDedup)
    delivered_calls: OrderedDict = field(default_factory=OrderedDict)  # call id -> None
    receiving_logged: bool = True  # the C12 state last logged
    turns: TurnTracker = field(default_factory=TurnTracker)  # open turns (repeat_failure.turns.verdict)
    verdicts: Counter = field(default_factory=Counter)  # verdict -> turns classified
    last_verdict: str | None = None  # the newest classified turn's verdict
    failed_in_a_row: int = 0  # turns classified not ok since the last ok one
    preview_probes: int = 0  # preview probes run (repeat_failure.turns.probe)
    preview_errors: Counter = field(default_factory=Counter)  # (outcome, reason) -> n
    preview_state: str | None = None  # the newest probe's outcome

    def first_delivery(self, call_id: str) -> bool:
        """True the first time a session-log call id is delivered as a record (an empty id
        always counts as first)."""
        if not call_id:
            return True
        if call_id in self.delivered_calls:
            return False
        self.delivered_calls[call_id] = None
        while len(self.delivered_calls) > MAX_DELIVERED_CALLS:
            self.delivered_calls.popitem(last=False)
        return True

    @property
    def session_route(self) -> bool:
        """True when the session log is a route for this agent (C3: its shell calls are
        records)."""
        return self.tail is not None and self.tail.reader.route_records

    @property
    def route_available(self) -> bool:
        """False when the agent's backend is recorded from its session log (C3) but the
        sidecar has no home to read it in: nothing can be recorded."""
        reader = session_reader(self.spec.backend)
        return not (reader is not None and reader.route_records and self.tail is None)

    @property
    def safeguard(self) -> bool:
        """True when the C12 safeguard applies: the session log is read and is an independent
        signal (not itself the route whose silence it would detect)."""
        return self.tail is not None and not self.tail.reader.route_records


@dataclass(frozen=True)
class AgentView:
    """A consistent copy of one agent's state for the exporter. ``row`` is ``None`` while the
    check is off (C14: no check state, no note). ``records``, ``rejected`` and
    ``notes_raised`` are the counts as last saved in the state file (:class:`AgentState`)."""

    agent: str
    backend: str
    row: Row | None
    failures: tuple[tuple[str, ExitKey, int], ...]
    records: dict
    rejected: dict
    notes_raised: int
    last_record_ts: float | None
    reader_errors: dict = field(default_factory=dict)
    reader_ignored: int = 0
    last_shell_ts: float | None = None
    events: dict = field(default_factory=dict)  # Kubernetes Events: outcome -> n
    #: Turn verdicts (repeat_failure.turns.verdict): None when the agent's session log is not read.
    verdicts: dict | None = None
    last_verdict: str | None = None
    failed_in_a_row: int = 0
    #: The preview probe: None when the agent has no preview URL (or the check is off), else
    #: {"probes": n, "errors": {(outcome, reason): n}, "state": outcome or None}.
    preview: dict | None = None


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
        for spec in agents:  # HookError now, not at every pass (the CLI exits 2)
            hook.check_names(self.shared_dir, spec.name, spec.backend, chain_bash_env)
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
        self._exclusions = Exclusions(self.config.exclude)
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
        self._layout_error: str | None = None
        self._prepare_layout()
        self._layout_ok = self._layout()
        self._monotonic = monotonic
        self.collect_passes: Counter = Counter({PASS_OK: 0, PASS_FAILED: 0})
        self.last_collect_ts: float | None = None  # epoch seconds of the last pass that ended ok
        self._progress_at = monotonic()  # the last pass or slice completed (for /healthz)
        self.collector = Collector(self.shared_dir / hook.RECORDS_DIR, self.config.collect_grace_s,
                                   clock=monotonic)
        self._apply_enabled()
        self._event_stats = EventStats()
        self._events_configuration = events_configuration
        self.events: EventPublisher | None = None  # running only with the check and Events on
        self._apply_events()
        for state in self.agents.values():
            self._load_state(state)

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

    # -- config and hook files -----------------------------------------------------------------

    def _stamp(self) -> tuple | None:
        if self.config_path is None:
            return None
        try:
            st = os.stat(self.config_path)
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def _apply_enabled(self) -> None:
        """Render (check on) or remove (check off) each agent's hook. A failure is logged, not
        raised: the next pass repairs the layout and tries again."""
        for name, state in self.agents.items():
            try:
                if self.config.enabled:
                    hook.render(self.shared_dir, name, state.spec.backend, self.chain_bash_env)
                else:
                    if hook.remove(self.shared_dir, name):
                        log.info("check off: hook removed", extra={"agent": name})
                    state.detector = Detector(self.config.threshold, self.config.window_s)
                    state.activity = Activity(not_before=self.clock())
                    state.turns = TurnTracker(state.turns.edit_tools)
                    state.last_verdict, state.failed_in_a_row = None, 0
                    self.prober.clear()
                    _unlink(self._state_path(name))
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

    def _layout(self) -> dict[str, tuple[bool, int] | None]:
        """Each shared-dir folder: (is a real directory, permission bits), or None if absent."""
        found: dict[str, tuple[bool, int] | None] = {}
        for name in hook.LAYOUT_MODES:
            try:
                info = os.lstat(self.shared_dir / name)
            except FileNotFoundError:
                found[name] = None
            else:
                found[name] = (stat.S_ISDIR(info.st_mode), stat.S_IMODE(info.st_mode))
        return found

    def _prepare_layout(self) -> None:
        """:func:`hook.prepare_shared_dir`, never raising: a failure is logged once per distinct
        error (the next passes try again), and a folder an agent replaced is reported."""
        try:
            moved = hook.prepare_shared_dir(self.shared_dir)
        except OSError as exc:
            if str(exc) != self._layout_error:
                self._layout_error = str(exc)
                log.error("shared dir layout cannot be repaired; records are not collected until "
                          "it is", extra={"dir": str(self.shared_dir), "error": str(exc)})
            return
        self._layout_error = None
        for aside in moved:
            log.warning("a shared dir folder belonged to another user (an agent replaced ours); "
                        "moved aside and recreated", extra={"dir": str(self.shared_dir),
                                                            "moved_to": aside})

    def _repair_layout(self) -> None:
        """Recreate what someone deleted or replaced on the shared volume while the sidecar
        runs: the folders (a symlink in their place is removed, never followed; a folder whose
        mode was changed, say ``records/`` opened to others, gets its mode back), and the hook
        files while the check is on (a shell must keep finding its hook)."""
        found = self._layout()
        if found != self._layout_ok and found != {n: (True, m) for n, m in
                                                  hook.LAYOUT_MODES.items()}:
            log.warning("shared dir layout missing, replaced or its modes changed, recreating",
                        extra={"dir": str(self.shared_dir)})
            self._prepare_layout()
            # What the file system allowed (it may drop the set-group-ID bit): the next passes
            # compare with this, so a mode that cannot be set does not log at every pass.
            self._layout_ok = self._layout()
        if self.config.enabled:
            for name, state in self.agents.items():
                if not hook.hook_path(self.shared_dir, name).is_file() or \
                        not hook.slow_path(self.shared_dir, name).is_file() or \
                        (self.chain_bash_env and
                         not hook.trap_path(self.shared_dir, name).is_file()):
                    log.warning("hook file missing, rendering it again", extra={"agent": name})
                    hook.render(self.shared_dir, name, state.spec.backend, self.chain_bash_env)

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
            self._exclusions = Exclusions(new.exclude)
            self.collector.grace_s = new.collect_grace_s
            self._apply_enabled()
            self._apply_events()
            now = self.clock()
            for state in self.agents.values():
                self._report(state, state.detector.reconfigure(new.threshold, new.window_s, now))
                if state.dirty and new.enabled:
                    self._save_state(state)
        log.info("config reloaded", extra={"enabled": new.enabled})
        return True

    # -- state file ----------------------------------------------------------------------------

    def _state_path(self, agent: str) -> Path:
        return self.shared_dir / hook.STATE_DIR / f"{agent}.json"

    def _load_state(self, state: AgentState) -> None:
        """Restore the agent's saved state, if any. A file over ``MAX_STATE_BYTES`` is ignored
        without being parsed, as is one that is unreadable, not a regular file or not JSON (the
        agent starts empty); the detector restores only the newest commands that fit in its
        bounds (``Detector.load_dict``), and says how many it left out."""
        if not self.config.enabled:
            return
        path = self._state_path(state.spec.name)
        try:
            raw = _read_regular(path, MAX_STATE_BYTES)
            data = orjson.loads(raw)
        except FileNotFoundError:
            return
        except (OSError, orjson.JSONDecodeError) as exc:
            log.warning("state file ignored: unreadable, not a regular file, too big or not JSON",
                        extra={"agent": state.spec.name, "error": exc.__class__.__name__})
            return
        finally:
            raw = None  # the parsed objects are all that is needed from here on
        try:
            if not isinstance(data, dict) or data.get("version") != STATE_FILE_VERSION:
                raise StateError(f"not a version {STATE_FILE_VERSION} state file")
            detector = data.get("detector")
            if isinstance(detector, dict) and isinstance(detector.get("commands"), list):
                # Re-scrub: a state written by an older, leakier scrubber must not export its text.
                for item in detector["commands"]:
                    if isinstance(item, dict) and isinstance(item.get("command"), str):
                        item["command"] = scrub(item["command"])
            left_out = state.detector.load_dict(detector)
            data.pop("detector", None)
            detector = None  # what load_dict did not keep can go now
            if left_out:
                log.warning("state file: commands over the detector's memory bound not restored",
                            extra={"agent": state.spec.name, "commands": left_out})
            collecting = data.get("collecting")
            if isinstance(collecting, dict):
                self.collector.restore(collecting)
            state.activity.load_dict(data.get("activity"))
            self._load_counters(state, data.get("counters"))
            cut_key = data.get("cut_key")
            if isinstance(cut_key, str) and re.fullmatch(r"[0-9a-f]{32}", cut_key):
                state.cut_key = bytes.fromhex(cut_key)
            self._load_turns(state, data.get("turns"))
            calls = data.get("session_calls")
            if isinstance(calls, list):
                for call_id in calls[-MAX_DELIVERED_CALLS:]:
                    if isinstance(call_id, str):
                        state.delivered_calls[call_id] = None
            if state.tail is not None:
                state.tail.load_dict(data.get("sessions"))
            last = data.get("last_record_ts")
            state.last_record_ts = float(last) if isinstance(last, (int, float)) else None
        except StateError as exc:
            log.warning("state file ignored", extra={"agent": state.spec.name, "error": str(exc)})

    def _save_state(self, state: AgentState) -> None:
        """Write the agent's scrubbed state; a failure (a full disk) is logged and retried at the
        next pass, and never stops the collected raw files from being deleted."""
        data = {"version": STATE_FILE_VERSION, "agent": state.spec.name,
                "last_record_ts": state.last_record_ts, "collecting": state.checkpoint,
                "activity": state.activity.to_dict(),
                "turns": {**state.turns.to_dict(), "last_verdict": state.last_verdict,
                          "failed_in_a_row": state.failed_in_a_row},
                "sessions": state.tail.to_dict() if state.tail is not None else {},
                "session_calls": list(state.delivered_calls),
                "cut_key": state.cut_key.hex(),
                "counters": {"records": [[*key, n] for key, n in state.records.items()],
                             "rejected": dict(state.rejected),
                             "notes_raised": state.notes_raised}}
        state.saved_at = time.monotonic()
        try:
            out = self._state_bytes(state, data)
            if len(out) > MAX_STATE_BYTES:
                # Unreachable within the bounds (see MAX_STATE_BYTES); were it reached, a file
                # too big to load would lose every note at the next restart.
                events = state.detector.evict_oldest(len(out) - MAX_STATE_BYTES)
                log.warning("state over its size bound: the least recently failed commands are "
                            "forgotten", extra={"agent": state.spec.name, "bytes": len(out),
                                                "limit": MAX_STATE_BYTES})
                self._report(state, events)
                out = self._state_bytes(state, data)
            path = self._state_path(state.spec.name)
            self._clear_state_path(state, path)
            hook.write_atomic(path, out, 0o600)
        except (OSError, TypeError, ValueError) as exc:  # TypeError: orjson met unexpected data
            log.error("state file not saved; open notes survive a restart only once it is, and "
                      "the collected record files are kept until then",
                      extra={"agent": state.spec.name, "error": str(exc)})
            return
        state.dirty = False
        state.saved_counts = (dict(state.records), dict(state.rejected), state.notes_raised)

    @staticmethod
    def _clear_state_path(state: AgentState, path: Path) -> None:
        """Move a directory standing at the state file's path aside to
        ``state/.<agent>.json.foreign.<ns>`` (no rename can replace a directory, so every save
        would fail), as :func:`hook.prepare_shared_dir` does with a planted folder. Anything
        else there (a symlink, a FIFO) the save's rename replaces without following it.
        Raises ``OSError`` when it cannot be moved."""
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(info.st_mode):
            return
        aside = path.with_name(f".{path.name}.foreign.{time.time_ns()}")
        os.rename(path, aside)
        log.warning("a directory stood at the state file's path; moved aside",
                    extra={"agent": state.spec.name, "moved_to": aside.name})

    @staticmethod
    def _state_bytes(state: AgentState, data: dict) -> bytearray:
        """The state file's bytes: ``data`` plus the detector under ``"detector"``, in one
        buffer the detector is appended to a command at a time (:meth:`Detector.iter_json`):
        no dict per command, no second copy of the text (issue 6, memory)."""
        out = bytearray(orjson.dumps(data)[:-1])
        out += b',"detector":'
        for piece in state.detector.iter_json():
            out += piece
        out += b"}"
        return out

    # -- the pipeline --------------------------------------------------------------------------

    def _process_line(self, state: AgentState, line: bytes | str, now: float) -> None:
        if isinstance(line, str):  # a rejection reason from the collector
            state.rejected[line] += 1
            state.dirty = True
            return
        try:
            record = parse_line(line, state.spec.name, state.spec.backend, now)
        except RecordError as exc:
            state.rejected[exc.reason] += 1
            state.dirty = True
            return
        self._process_record(state, record, now)

    def _process_record(self, state: AgentState, record: Record, now: float,
                        output: int = 0) -> None:
        """scrub → normalize → exclude → dedup → detector, for a record of any route;
        ``output`` is a failure's output digest (0: unknown, the neutral route's case)."""
        from_session = record.route.endswith("_session_log")
        if not from_session:
            state.activity.on_record(record.ts)
        command = record_command(record, now, state.cut_key)
        matched = None
        if not command or self._exclusions.matches(command):
            outcome = EXCLUDED
        elif state.session_route and (matched := state.dedup.match(
                SESSION if from_session else NEUTRAL, command, record.failed, record.ts,
                exit_key(record.exit), output)) is not None:
            outcome = DUPLICATE
            if from_session and output and record.failed:
                # Counted from the neutral route first: keep the session record's output.
                state.detector.set_output(command, matched.exit, matched.ts, output)
        else:
            outcome = FAILURE if record.failed else SUCCESS
            if not from_session and record.failed and state.tail is not None \
                    and not state.session_route:
                # The session log is read beside the neutral route: its output of this
                # failure, when it came first (else it is attached when it comes, below).
                seen = state.outputs.match(NEUTRAL, command, True, record.ts,
                                           exit_key(record.exit))
                output = seen.output if seen is not None else 0
        state.records[(record.backend, record.route, outcome)] += 1
        if state.last_record_ts is None or record.ts > state.last_record_ts:
            state.last_record_ts = record.ts
        state.dirty = True
        if outcome in (EXCLUDED, DUPLICATE):
            return
        events = state.detector.record(command, record.exit, record.failed, record.ts, now,
                                       output)
        self._report(state, events)

    def _session_output(self, state: AgentState, event: SessionEvent, now: float) -> None:
        """A failed shell call in the session log of a backend whose records come from the
        neutral route: its output digest goes to that route's record of the same call (same
        command and outcome within :data:`repeat_failure.sidecar.dedup.WINDOW_S`), now if the record was
        counted first, else when it comes. Issue 19."""
        record = session_record(event, state.spec.name, state.spec.backend, now)
        if record is None or not record.failed or event.output is None:
            return
        command = record_command(record, now, state.cut_key)
        if not command or self._exclusions.matches(command):
            return
        output = failure_output(event, True, state.cut_key, now)
        seen = state.outputs.match(SESSION, command, True, record.ts, exit_key(record.exit),
                                   output)
        if seen is not None:
            state.detector.set_output(command, seen.exit, seen.ts, output)

    def _log_rejected_file(self, state: AgentState, name: str, reason: str, what: str) -> None:
        """Log a record file the collector removed unread (issue 17: it only moved a counter):
        one warning line naming the file (scrubbed: an agent chose the name), the reason and
        what was wrong, at most :data:`REJECTED_LOG_LINES` per :data:`REJECTED_LOG_WINDOW_S`
        seconds per agent; the next line logged after a quiet spell carries ``unlogged``, the
        rejections left out meanwhile."""
        now = self._monotonic()
        logged = state.rejected_logged
        while logged and now - logged[0] >= REJECTED_LOG_WINDOW_S:
            logged.popleft()
        if len(logged) >= REJECTED_LOG_LINES:
            state.rejected_unlogged += 1
            return
        logged.append(now)
        shown = scrub(name.encode("utf-8", "backslashreplace").decode("utf-8"))
        extra = {"event": "record_file_rejected", "agent": state.spec.name,
                 "file": f"{hook.RECORDS_DIR}/{shown}", "reason": reason, "detail": what}
        if state.rejected_unlogged:
            extra["unlogged"], state.rejected_unlogged = state.rejected_unlogged, 0
        log.warning("record file rejected and removed unread", extra=extra)

    def _report(self, state: AgentState, events: list) -> None:
        """Act on detector events: count and log a raised note once (and queue its Kubernetes
        Event, with Events on: the detector raises a note once per raise, so a note that stays
        raised makes no second Event), log a cleared one."""
        for event in events:
            state.dirty = True
            if isinstance(event, NoteRaised):
                state.notes_raised += 1
                note = event.note
                log.warning("repeating failure note raised", extra={
                    "event": "note_raised", "agent": state.spec.name,
                    "backend": state.spec.backend, "command": command_label(note.command),
                    "exit": note.exit, "count": note.count, "minutes": note.minutes,
                    "output": note.output, "note": note.message})
                if self.events is not None:  # never blocks: a bounded queue, a daemon thread
                    self.events.publish(state.spec.name, state.spec.backend, note.message,
                                        self.clock())
            elif isinstance(event, NoteCleared):
                log.info("repeating failure note cleared", extra={
                    "event": "note_cleared", "agent": state.spec.name,
                    "backend": state.spec.backend, "command": command_label(event.command),
                    "reason": event.reason})

    def _handle(self, state: AgentState, batch: Batch, now: float) -> None:
        """Process a batch, save the state with the batch's checkpoint, delete finished files.

        While a backlog is read in slices, the state is saved at most once a second (and
        whenever a file is about to be deleted): a crash then resumes from the last saved
        checkpoint, which matches the last saved detector state."""
        if self.config.enabled:
            for line in batch.lines:
                self._process_line(state, line, now)
            for name, reason, what in batch.rejected_files:
                self._log_rejected_file(state, name, reason, what)
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
                        self._session_output(state, event, now)

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

    @staticmethod
    def _load_counters(state: AgentState, data: object) -> None:
        """Restore the pipeline's counters from the state file's ``counters`` (what
        :meth:`_save_state` wrote); an entry of another shape, or naming another backend, an
        unknown route, outcome or reason, is left out (its count starts again at zero)."""
        if not isinstance(data, dict):
            return
        backend = state.spec.backend
        routes = ROUTES | {f"{backend}_session_log"}

        def count(value: object) -> int | None:
            ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
            return value if ok else None  # type: ignore[return-value]

        records = data.get("records")
        for item in records if isinstance(records, list) else ():
            if (isinstance(item, list) and len(item) == 4 and item[0] == backend
                    and item[1] in routes and item[2] in OUTCOMES
                    and count(item[3]) is not None):
                state.records[(item[0], item[1], item[2])] = item[3]
        rejected = data.get("rejected")
        for reason, n in (rejected.items() if isinstance(rejected, dict) else ()):
            if reason in REASONS and count(n) is not None:
                state.rejected[reason] = n
        state.notes_raised = count(data.get("notes_raised")) or 0
        state.saved_counts = (dict(state.records), dict(state.rejected), state.notes_raised)

    @staticmethod
    def _load_turns(state: AgentState, data: object) -> None:
        """Restore the turn tracker and the last verdict from the state file's ``turns``."""
        if not isinstance(data, dict):
            return
        state.turns.load_dict(data)
        if data.get("last_verdict") in VERDICTS:
            state.last_verdict = data["last_verdict"]
        n = data.get("failed_in_a_row")
        if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
            state.failed_in_a_row = n

    @staticmethod
    def _session_record(state: AgentState, event: SessionEvent, now: float) -> Record | None:
        """The record of a finished shell call of a session-log route
        (:func:`repeat_failure.sidecar.pipeline.session_record`: the neutral route's rules); a time more than
        ``MAX_CLOCK_SKEW_S`` ahead is refused (None; counted ``future_ts``)."""
        record = session_record(event, state.spec.name, state.spec.backend, now)
        if record is None:
            state.reader_errors["future_ts"] += 1
        return record

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

    def _safeguard_change(self, state: AgentState) -> float | None:
        """When the agent's C12 state flips next if nothing happens (epoch seconds), or None."""
        if not state.safeguard or not self.config.enabled:
            return None
        return state.activity.next_change(self.config.no_data_after_s)

    def _receiving(self, state: AgentState, now: float) -> bool:
        return (not state.safeguard
                or state.activity.receiving_data(now, self.config.no_data_after_s))

    def expire(self, now: float | None = None) -> None:
        """Clear notes whose last failure left the window, and log each agent whose C12 state
        changed (uses the current time)."""
        now = self.clock() if now is None else now
        with self._lock:
            for state in self.agents.values():
                events = state.detector.expire(now)
                self._report(state, events)
                receiving = self._receiving(state, now) or not self.config.enabled
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
            flip = self._safeguard_change(state)
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
        views = []
        with self._lock:
            on = self.config.enabled
            for name, state in self.agents.items():
                receiving = self._receiving(state, now)
                row = build_row(name, state.spec.backend, state.detector.notes(now),
                                receiving, state.route_available) if on else None
                records, rejected, notes_raised = state.saved_counts
                views.append(AgentView(
                    agent=name, backend=state.spec.backend, row=row,
                    failures=tuple(state.detector.failures(now, self.config.top_commands)) if on else (),
                    records=dict(records), rejected=dict(rejected),
                    notes_raised=notes_raised, last_record_ts=state.last_record_ts,
                    reader_errors=dict(state.reader_errors),
                    reader_ignored=state.reader_ignored,
                    last_shell_ts=state.activity.last_shell_ts,
                    events=self._event_stats.counts(name, all_outcomes=self.events is not None),
                    verdicts=dict(state.verdicts) if on and state.tail is not None else None,
                    last_verdict=state.last_verdict if on else None,
                    failed_in_a_row=state.failed_in_a_row,
                    preview={"probes": state.preview_probes,
                             "errors": dict(state.preview_errors),
                             "state": state.preview_state}
                    if on and state.spec.preview_url and state.tail is not None else None,
                ))
        return views


def _read_regular(path: Path, limit: int) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes; never follows a
    symlink or blocks on a FIFO. Raises ``FileNotFoundError`` or another ``OSError``."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            raise OSError(f"{path} is not a regular file of at most {limit} bytes")
        data = f.read(limit + 1)
        if len(data) > limit:  # it grew after its size was checked
            raise OSError(f"{path} is over {limit} bytes")
        return data


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
