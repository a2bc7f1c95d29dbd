"""One agent's records, from a collected line to the detector's notes.

A line of ``records/<agent>.jsonl`` → :mod:`parse` → :func:`~repeat_failure.rules.pipeline.record_command`
(:mod:`scrub`, :mod:`normalize`) → :mod:`exclude` → :mod:`dedup` (where the agent's session log
is a second route, C3) → :mod:`detector`; each record counted once by ``(backend, route,
outcome)`` in :attr:`AgentState.records <repeat_failure.sidecar.agent.AgentState.records>`, each
rejected line by reason. :class:`RecordPipeline` holds the rules every agent shares (the
exclusions, the clocks, where a raised note's Kubernetes Event goes); the agent's own state is
passed in. The caller holds the sidecar's lock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from repeat_failure.backends import SessionEvent
from repeat_failure.sidecar import hook
from repeat_failure.sidecar.agent import DUPLICATE, EXCLUDED, FAILURE, SUCCESS, AgentState
from repeat_failure.sidecar.dedup import NEUTRAL, SESSION
from repeat_failure.rules.detector import NoteCleared, NoteRaised, exit_key
from repeat_failure.rules.exclude import Exclusions
from repeat_failure.rules.normalize import command_label
from repeat_failure.rules.parse import TORN, Record, RecordError, parse_line, salvage
from repeat_failure.rules.pipeline import failure_output, record_command, session_record
from repeat_failure.rules.scrub import scrub

log = logging.getLogger("repeat_failure")

#: Rejected record files logged per agent (one line each) within REJECTED_LOG_WINDOW_S
#: seconds; past that they are only counted, and the next line logged says how many were not.
REJECTED_LOG_LINES = 10
REJECTED_LOG_WINDOW_S = 60.0


class RecordPipeline:
    """The per-record path every agent's records take.

    ``exclusions`` are the config's ``exclude`` patterns (replaced when the config changes).
    ``monotonic`` (seconds) paces the rejected-file log lines. ``publish(agent, backend,
    message)`` is called once per raised note with its scrubbed message (the sidecar queues a
    Kubernetes Event there while Events are on); it must not block. ``now`` arguments are
    epoch seconds. Nothing here raises for bad input: a bad line is counted by reason."""

    def __init__(self, exclusions: Exclusions, monotonic: Callable[[], float],
                 publish: Callable[[str, str, str], None]) -> None:
        self.exclusions = exclusions
        self._monotonic = monotonic
        self._publish = publish

    def line(self, state: AgentState, line: bytes | str, now: float) -> None:
        """One collected line (bytes, parsed here) or a rejection reason the collector gave
        instead of a line (str): a line that does not parse is counted in ``state.rejected``
        by its :class:`RecordError` reason, unless it is a fragment a short write left with the
        next record appended (:func:`~repeat_failure.rules.parse.salvage`): then the fragment
        counts as ``torn`` and that record goes on; a record goes on to :meth:`record`."""
        if isinstance(line, str):  # a rejection reason from the collector
            state.rejected[line] += 1
            state.dirty = True
            return
        try:
            record = parse_line(line, state.spec.name, state.spec.backend, now)
        except RecordError as exc:
            state.dirty = True
            tail = salvage(line)  # a short write's fragment, then the next record (issue 28)
            if tail is None:
                state.rejected[exc.reason] += 1
                return
            state.rejected[TORN] += 1
            try:
                record = parse_line(tail, state.spec.name, state.spec.backend, now)
            except RecordError as exc:
                state.rejected[exc.reason] += 1
                return
        self.record(state, record, now)

    def record(self, state: AgentState, record: Record, now: float, output: int = 0) -> None:
        """scrub → normalize → exclude → dedup → detector, for a record of any route;
        ``output`` is a failure's output digest (0: unknown, the neutral route's case).

        A neutral-route failure of an agent whose session log is read, and whose output that
        log has not given yet, is fed as awaited (issue 26: it counts with its output once the
        session log's line comes, :meth:`session_output`, or with its output unknown after
        :data:`repeat_failure.rules.detector.OUTPUT_WAIT_S`)."""
        from_session = record.route.endswith("_session_log")
        if not from_session:
            state.activity.on_record(record.ts)
        command = record_command(record, now, state.cut_key)
        matched = None
        pending = False
        events: list = []
        if not command or self.exclusions.matches(command):
            outcome = EXCLUDED
        elif state.session_route and (matched := state.dedup.match(
                SESSION if from_session else NEUTRAL, command, record.failed, record.ts,
                exit_key(record.exit), output)) is not None:
            outcome = DUPLICATE
            if from_session and record.failed:
                # Counted from the neutral route first: the session record's output is its own.
                events = state.detector.set_output(command, matched.exit, matched.ts, output,  # type: ignore[arg-type]
                                                   now) or []
        else:
            outcome = FAILURE if record.failed else SUCCESS
            if not from_session and record.failed and state.tail is not None:
                if state.session_route:
                    pending = True  # the session route's record of it may still come
                else:
                    # The session log is read beside the neutral route: its output of this
                    # failure, when it came first (else it is attached when it comes, below).
                    seen = state.outputs.match(NEUTRAL, command, True, record.ts,
                                               exit_key(record.exit))
                    output = seen.output if seen is not None else 0
                    pending = seen is None
        state.records[(record.backend, record.route, outcome)] += 1
        if state.last_record_ts is None or record.ts > state.last_record_ts:
            state.last_record_ts = record.ts
        state.dirty = True
        if outcome in (EXCLUDED, DUPLICATE):
            self.report(state, events)
            return
        events = state.detector.record(command, record.exit, record.failed, record.ts, now,
                                       output, pending)
        self.report(state, events)

    @staticmethod
    def session_record(state: AgentState, event: SessionEvent, now: float) -> Record | None:
        """The record of a finished shell call of a session-log route
        (:func:`repeat_failure.rules.pipeline.session_record`: the neutral route's rules); a time more than
        ``MAX_CLOCK_SKEW_S`` ahead is refused (None; counted ``future_ts``)."""
        record = session_record(event, state.spec.name, state.spec.backend, now)
        if record is None:
            state.reader_errors["future_ts"] += 1
        return record

    def session_output(self, state: AgentState, event: SessionEvent, now: float) -> None:
        """A failed shell call in the session log of a backend whose records come from the
        neutral route: its output digest (0 when the log gives none) goes to that route's
        record of the same call (same command and outcome within
        :data:`repeat_failure.sidecar.dedup.WINDOW_S`), now if the record was counted first
        (its wait ends: issue 26), else when it comes. Issue 19."""
        record = session_record(event, state.spec.name, state.spec.backend, now)
        if record is None or not record.failed:
            return
        command = record_command(record, now, state.cut_key)
        if not command or self.exclusions.matches(command):
            return
        output = failure_output(event, True, state.cut_key, now)
        seen = state.outputs.match(SESSION, command, True, record.ts, exit_key(record.exit),
                                   output)
        if seen is not None:
            self.report(state, state.detector.set_output(command, seen.exit, seen.ts, output,  # type: ignore[arg-type]
                                                         now) or [])

    def rejected_file(self, state: AgentState, name: str, reason: str, what: str) -> None:
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
            extra["unlogged"], state.rejected_unlogged = state.rejected_unlogged, 0  # type: ignore[assignment]
        log.warning("record file rejected and removed unread", extra=extra)

    def report(self, state: AgentState, events: list) -> None:
        """Act on detector events: count and log a raised note once (and hand its message to
        ``publish``: the detector raises a note once per raise, so a note that stays raised
        makes no second Event), log a cleared one. Every event marks the state dirty."""
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
                self._publish(state.spec.name, state.spec.backend, note.message)
            elif isinstance(event, NoteCleared):
                log.info("repeating failure note cleared", extra={
                    "event": "note_cleared", "agent": state.spec.name,
                    "backend": state.spec.backend, "command": command_label(event.command),
                    "reason": event.reason})
