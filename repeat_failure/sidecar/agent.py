"""What the sidecar keeps for one agent (:class:`AgentState`) and the copy of it the exporter
reads (:class:`AgentView`).

Every other part of the sidecar works on an :class:`AgentState`: the record pipeline
(:mod:`repeat_failure.sidecar.records`) counts into it, the state file
(:mod:`repeat_failure.sidecar.state`) saves and restores it, the session feed
(:mod:`repeat_failure.sidecar.session_feed`) reads the agent's session log into it, and
:class:`repeat_failure.sidecar.app.Sidecar` holds one per agent. It holds no lock of its own:
the sidecar's lock guards it.
"""

from __future__ import annotations

import os
from collections import Counter, OrderedDict, deque
from dataclasses import dataclass, field

from repeat_failure.backends import session_reader
from repeat_failure.config import AgentSpec, Config
from repeat_failure.sessions.activity import Activity
from repeat_failure.sessions.tail import SessionTail
from repeat_failure.sidecar.checkstate import Row, build_row
from repeat_failure.sidecar.dedup import RouteDedup
from repeat_failure.rules.detector import Detector, ExitKey
from repeat_failure.turns.verdict import TurnTracker

#: A record's outcome in the pipeline (``hive_repeat_failure_records_total{outcome}``): counted
#: by the detector as a success or a failure, left out by an exclusion, or the second route's
#: copy of a call already counted.
SUCCESS, FAILURE, EXCLUDED, DUPLICATE = "success", "failure", "excluded", "duplicate"
OUTCOMES = (SUCCESS, FAILURE, EXCLUDED, DUPLICATE)
#: Tool-call ids of session-log records remembered per agent, so a session file read again
#: (rewritten by its CLI) never delivers a call twice.
MAX_DELIVERED_CALLS = 4096


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
    #: Keys the digest that tells cut commands apart (:func:`repeat_failure.rules.normalize.mark_cut`);
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
    #: Session files found unrecognised (repeat_failure.sessions.unrecognized), reason -> n.
    unrecognized_files: Counter = field(default_factory=Counter)
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
        """True the first time a session-log call id is delivered as a record (C3), or as a
        failure's output for the hook's record (issue 26); an empty id always counts as
        first."""
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

    def receiving(self, now: float, no_data_after_s: float) -> bool:
        """The C12 state at ``now`` (epoch seconds): False only where the safeguard applies
        and shell calls in the session log have had no record for ``no_data_after_s`` seconds
        (:meth:`repeat_failure.sessions.activity.Activity.receiving_data`)."""
        return not self.safeguard or self.activity.receiving_data(now, no_data_after_s)

    def safeguard_change(self, no_data_after_s: float) -> float | None:
        """When (epoch seconds) the C12 state flips next if nothing happens, or None where
        the safeguard does not apply (:meth:`Activity.next_change`)."""
        if not self.safeguard:
            return None
        return self.activity.next_change(no_data_after_s)

    def forget(self, threshold: int, window_s: float, now: float,
               match_output: bool = True, turns: bool = True) -> None:
        """Forget what the check knew (it was turned off): a new empty detector with
        ``threshold``, ``window_s`` and ``match_output``, a C12 timer counting from ``now`` (epoch seconds), no
        open turn, no last verdict, no session file reported unrecognised (one that still is is
        reported again). The counters and the session-log offsets stay. With ``turns`` False
        (turn health still on, issue 31) the open turns and the last verdict stay too."""
        self.detector = Detector(threshold, window_s, match_output)
        self.activity = Activity(not_before=now)
        if self.tail is not None:
            self.tail.forget_reports()
        if turns:
            self.forget_turns()

    def forget_turns(self) -> None:
        """Forget the open turns, the last verdict and the failed-in-a-row count (turn health
        was turned off); the verdict and probe counters stay."""
        self.turns = TurnTracker(self.turns.edit_tools)
        self.last_verdict, self.failed_in_a_row = None, 0

    def view(self, now: float, config: Config, events: dict) -> AgentView:
        """A copy of this state at ``now`` (epoch seconds) under ``config`` for the exporter:
        the check's row and failures only while the check is on (C14), verdicts and preview
        only while turn health is on (``turn_health``, issue 31); ``events`` is the agent's
        Kubernetes Event counts (outcome → n)."""
        on, name = config.enabled, self.spec.name
        health = config.turn_health
        receiving = self.receiving(now, config.no_data_after_s)
        row = build_row(name, self.spec.backend, self.detector.notes(now),
                        receiving, self.route_available,
                        not (self.tail is not None and self.activity.unrecognized)) if on else None
        records, rejected, notes_raised = self.saved_counts
        return AgentView(
            agent=name, backend=self.spec.backend, row=row,
            failures=tuple(self.detector.failures(now, config.top_commands)) if on else (),
            records=dict(records), rejected=dict(rejected),
            notes_raised=notes_raised, last_record_ts=self.last_record_ts,
            reader_errors=dict(self.reader_errors),
            reader_ignored=self.reader_ignored,
            unrecognized_files=dict(self.unrecognized_files)
            if on and self.tail is not None else None,
            last_shell_ts=self.activity.last_shell_ts,
            events=events,
            verdicts=dict(self.verdicts) if health and self.tail is not None else None,
            last_verdict=self.last_verdict if health else None,
            failed_in_a_row=self.failed_in_a_row,
            preview={"probes": self.preview_probes,
                     "errors": dict(self.preview_errors),
                     "state": self.preview_state}
            if health and self.spec.preview_url and self.tail is not None else None,
        )


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
    #: Session files found unrecognised by reason (issue 26): None when the session log is not
    #: read (no reader or home) or the check is off.
    unrecognized_files: dict | None = None
    last_shell_ts: float | None = None
    events: dict = field(default_factory=dict)  # Kubernetes Events: outcome -> n
    #: Turn verdicts (repeat_failure.turns.verdict): None when the agent's session log is not read
    #: or turn health is off.
    verdicts: dict | None = None
    last_verdict: str | None = None
    failed_in_a_row: int = 0
    #: The preview probe: None when the agent has no preview URL (or turn health is off), else
    #: {"probes": n, "errors": {(outcome, reason): n}, "state": outcome or None}.
    preview: dict | None = None
