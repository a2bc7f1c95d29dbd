"""What the detector (:mod:`repeat_failure.rules.detector`) says: a raised note as the
dashboard shows it (:class:`Note`, its message per spec C11) and the events it returns when a
note is raised or cleared. No rule lives here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from repeat_failure.rules.detector_store import FAILED, ExitKey
from repeat_failure.rules.normalize import UNKNOWN, command_label


@dataclass(frozen=True)
class Note:
    """A raised note as the dashboard shows it.

    ``count`` is the failures of the shown result now in the window; ``minutes`` is the time
    from the first to the last of them, rounded up, at least 1.
    """

    command: str
    exit: ExitKey
    count: int
    minutes: int
    first_ts: float
    last_ts: float
    #: Whether those failures had the same output every time (``same``: with output matching,
    #: issue 26, every note whose output is known), ``changing`` output (only with
    #: ``match_output: false``), or ``unknown`` (no route gave the output: the neutral route
    #: alone). Issue 19; :func:`repeat_failure.rules.normalize.output_kind`. Not part of
    #: :attr:`message` (spec C11).
    output: str = UNKNOWN

    @property
    def message(self) -> str:
        """``Repeating failure: <command> failed N times in M min (exit S)`` (spec C11); the
        command cut to 200 characters."""
        result = "(failed)" if self.exit == FAILED else f"(exit {self.exit})"
        return (
            f"Repeating failure: {command_label(self.command)} failed {self.count} times "
            f"in {self.minutes} min {result}"
        )


@dataclass(frozen=True)
class NoteRaised:
    """Event: a note was raised (log it once, count it)."""

    note: Note


@dataclass(frozen=True)
class NoteCleared:
    """Event: a note cleared; ``reason`` is ``success``, ``expired``, ``evicted`` or
    ``reconfigured`` (``match_output`` switched on: its failures are no longer one result)."""

    command: str
    reason: str


Event = Union[NoteRaised, NoteCleared]
