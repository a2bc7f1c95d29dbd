"""Check state: what each agent's dashboard row shows (spec C11, C12, C-AC9).

A row has the agent's check state and, separately, its note: a row can be
``not_receiving_data`` and still carry a note. States: ``on``; ``not_available`` (the backend is
not covered, :mod:`repeat_failure.backends.coverage`); ``not_receiving_data`` (C12: fed by the
session readers);
``session_log_unrecognized`` (C12, issue 26: the agent's session log shows its shell tool
called but the reader recognises no shell call in it, so the safeguard, and for a backend
recorded from its session log the check itself, cannot see its commands:
:mod:`repeat_failure.sessions.unrecognized`). With the check off there are no rows at all (C14).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from repeat_failure.backends.coverage import is_covered
from repeat_failure.rules.detector import Note
from repeat_failure.rules.normalize import command_label

ON = "on"
NOT_AVAILABLE = "not_available"
NOT_RECEIVING_DATA = "not_receiving_data"
SESSION_LOG_UNRECOGNIZED = "session_log_unrecognized"
STATES = (ON, NOT_AVAILABLE, NOT_RECEIVING_DATA, SESSION_LOG_UNRECOGNIZED)
#: Notes listed per agent in /status and as note series (the newest); the message still counts
#: every raised note in "(+K others)" ("(+1 other)" for one).
MAX_NOTES_SHOWN = 100
STATE_TEXT = {
    ON: "",
    NOT_AVAILABLE: "repeat-failure check not available for this backend",
    NOT_RECEIVING_DATA: "repeat-failure check not receiving data",
    SESSION_LOG_UNRECOGNIZED: "repeat-failure check cannot read this agent's session log",
}


@dataclass(frozen=True)
class Row:
    """One agent's row: ``notes`` newest first; ``message`` is the newest note's message plus
    `` (+K others)`` when K more notes are raised (`` (+1 other)`` for one, docs/metrics.md
    "The agent's row"), or ``""``."""

    agent: str
    backend: str
    state: str
    notes: tuple[Note, ...] = field(default_factory=tuple)

    @property
    def state_text(self) -> str:
        """The state's text; empty for ``on``."""
        return STATE_TEXT[self.state]

    @property
    def message(self) -> str:
        """The note message the row shows, or ``""`` when no note is raised."""
        if not self.notes:
            return ""
        others = len(self.notes) - 1
        if not others:
            return self.notes[0].message
        return f"{self.notes[0].message} (+{others} other{'s' if others > 1 else ''})"

    def to_json(self) -> dict:
        """The row as ``GET /status`` returns it (docs/metrics.md "The agent's row")."""
        return {
            "agent": self.agent,
            "backend": self.backend,
            "state": self.state,
            "state_text": self.state_text,
            "message": self.message,
            "notes": [
                {"command": command_label(n.command), "exit": n.exit, "count": n.count, "minutes": n.minutes,
                 "first_ts": n.first_ts, "last_ts": n.last_ts, "output": n.output,
                 "message": n.message}
                for n in self.notes[:MAX_NOTES_SHOWN]
            ],
        }


def agent_state(backend: str, receiving_data: bool = True, route_available: bool = True,
                session_log_read: bool = True) -> str:
    """The check state of an agent on ``backend`` while the check is on. ``route_available``
    is False when the agent's route cannot work where it runs (omp, recorded from its session
    log, with no agent home given): its row says "not available" rather than a silent ``on``.
    ``session_log_read`` is False while the agent's newest session file that shows shell use
    is one whose shell calls the reader cannot read (issue 26). The first that applies wins:
    not available, not receiving data (records are missing: the more urgent), session log
    unrecognised, on."""
    if not is_covered(backend) or not route_available:
        return NOT_AVAILABLE
    if not receiving_data:
        return NOT_RECEIVING_DATA
    return ON if session_log_read else SESSION_LOG_UNRECOGNIZED


def build_row(agent: str, backend: str, notes: list[Note], receiving_data: bool = True,
              route_available: bool = True, session_log_read: bool = True) -> Row:
    """The row for one agent, from its raised notes (newest first, as the detector gives them)."""
    return Row(agent, backend, agent_state(backend, receiving_data, route_available,
                                           session_log_read), tuple(notes))
