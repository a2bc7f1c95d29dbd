"""Shell activity and the "not receiving data" safeguard (spec C12, C-AC10).

The route (``BASH_ENV``) can go silent without anyone noticing: a CLI update changes how it
starts its shell and no record arrives any more. The backend's own session log still shows its
shell-tool calls, so :class:`Activity` compares the two, per agent:

- A **finished** shell call is *matched* when a record has arrived whose time is no earlier than
  the call's start minus :data:`MATCH_SLACK_S` (the record is written when the command exits,
  usually before the CLI logs the result). An unmatched finished call starts the timer at its
  finish time; the timer keeps the oldest such time and survives the end of a turn (a route
  that is broken stays broken in the next turn, and short turns must not hide it).
- A record arriving stops the timer ("clears when a record arrives").
- A call that started and has not finished is a running command: it never starts the timer
  (a long build is not missing data), and a turn whose only shell call is still running does
  not show a timer left from an earlier turn either.
- A call that finished before the sidecar could see records (:attr:`Activity.not_before`: its
  start, or the check being turned on) never starts the timer: it had no hook.
- File reads, edits and other tools are not shell activity and never start it.
- The state is ``not_receiving_data`` when a turn is in progress, that turn has shell activity
  (a shell call finished in it), and the timer has run for at least ``no_data_after_s``.
- Turns are tracked per session file (the event's ``source``): an agent with two sessions
  open is "in a turn with shell activity" while either is.

Beside the timer, :class:`Activity` keeps whether the agent's newest sign of shell use is a
session file whose shell calls the reader cannot read (:meth:`Activity.on_unrecognized`,
:mod:`repeat_failure.sessions.unrecognized`, issue 26): from then until a shell call of any of
the agent's session files is recognised, the safeguard cannot see the agent's commands, and
the row says so rather than ``on``.

Times are seconds since the epoch: the session log's own times for its events, the record's
``ts`` for records, the sidecar's clock for "now". :class:`Activity` holds no command text.
"""

from __future__ import annotations

import math
from typing import Any

from repeat_failure.backends import SHELL_END, SHELL_START, TURN_END, TURN_START, SessionEvent

#: A record written up to this many seconds before the call's logged start still matches it
#: (clocks of one pod agree; the CLI may log the start after the shell began).
MATCH_SLACK_S = 2.0
#: Running calls remembered per agent (ids of calls whose end we never see are dropped oldest
#: first, and all of them at a turn's end).
MAX_RUNNING = 256
#: Sessions whose turn state is remembered per agent (the oldest are forgotten first).
MAX_SESSIONS = 64


class Activity:
    """One agent's shell activity as its session log shows it, and the C12 timer.

    Feed it :meth:`on_event` for every session event and :meth:`on_record` for every record the
    routes deliver; ask :meth:`receiving_data`. JSON-serialisable through :meth:`to_dict`.
    """

    def __init__(self, not_before: float = 0.0) -> None:
        #: session source -> [turn in progress, a shell call finished in it]
        self.turns: dict[str, list[bool]] = {}
        self.running: dict[str, float] = {}  # call id -> start time
        self.unmatched_since: float | None = None
        self.last_record_ts: float | None = None
        self.last_shell_ts: float | None = None  # newest shell start or end, for the exporter
        self.not_before = not_before  # epoch seconds: calls that ended earlier had no hook
        self.last_end_ts: float | None = None  # newest recognised shell call's end
        #: When a session file was found unrecognised after the newest recognised call (issue 26).
        self.unrecognized_ts: float | None = None
        self._anon = 0

    @property
    def turn_open(self) -> bool:
        """A turn is in progress in some session."""
        return any(open_ for open_, _ in self.turns.values())

    @property
    def turn_shell(self) -> bool:
        """Some session's turn in progress has a finished shell call."""
        return any(open_ and shell for open_, shell in self.turns.values())

    def _turn(self, source: str) -> list[bool]:
        turn = self.turns.pop(source, None) or [False, False]
        self.turns[source] = turn  # newest last
        while len(self.turns) > MAX_SESSIONS:
            del self.turns[next(iter(self.turns))]
        return turn

    def on_record(self, ts: float) -> None:
        """A record arrived (from any route): the timer stops."""
        if self.last_record_ts is None or ts > self.last_record_ts:
            self.last_record_ts = ts
        self.unmatched_since = None

    def on_event(self, event: SessionEvent) -> None:
        """Apply one session event (``ts`` set)."""
        ts = float(event.ts or 0.0)
        if event.kind in (TURN_START, TURN_END):
            self._turn(event.source)[:] = [event.kind == TURN_START, False]
            prefix = f"{event.source}:"
            for key in [k for k in self.running if k.startswith(prefix) or ":" not in k]:
                del self.running[key]
        elif event.kind == SHELL_START:
            self._turn(event.source)[0] = True  # a shell call means a turn is running
            key = event.call_id or self._anonymous_id()
            self.running[key] = ts
            while len(self.running) > MAX_RUNNING:
                del self.running[next(iter(self.running))]
            self._touch(ts)
        elif event.kind == SHELL_END:
            started = self.running.pop(event.call_id, None) if event.call_id else \
                self._pop_oldest()
            start = ts if started is None else min(started, ts)
            turn = self._turn(event.source)
            if turn[0]:
                turn[1] = True
            self._touch(ts)
            if self.last_end_ts is None or ts > self.last_end_ts:
                self.last_end_ts = ts
            if self.unrecognized_ts is not None and ts >= self.unrecognized_ts:
                self.unrecognized_ts = None  # a shell call is read again
            if ts < self.not_before:
                return  # it ran before the hook could record it
            if self.last_record_ts is None or self.last_record_ts < start - MATCH_SLACK_S:
                if self.unmatched_since is None or ts < self.unmatched_since:
                    self.unmatched_since = ts

    def on_unrecognized(self, ts: float) -> None:
        """A session file of the agent was found unrecognised at ``ts``: it counts when it is
        newer than the newest recognised shell call (an old file must not hide a CLI that is
        read well now), and holds until a shell call ends at or after it."""
        if self.last_end_ts is None or ts > self.last_end_ts:
            self.unrecognized_ts = ts if self.unrecognized_ts is None else max(
                self.unrecognized_ts, ts)

    @property
    def unrecognized(self) -> bool:
        """The agent's newest sign of shell use is a session file its reader cannot read."""
        return self.unrecognized_ts is not None

    def receiving_data(self, now: float, no_data_after_s: float) -> bool:
        """False when a turn with shell activity is in progress and the timer has run for at
        least ``no_data_after_s`` seconds at ``now``."""
        return not (self.turn_open and self.turn_shell and self.unmatched_since is not None
                    and now - self.unmatched_since >= no_data_after_s)

    def next_change(self, no_data_after_s: float) -> float | None:
        """The time (epoch seconds) at which :meth:`receiving_data` turns false if nothing else
        happens, or ``None``."""
        if self.turn_open and self.turn_shell and self.unmatched_since is not None:
            return self.unmatched_since + no_data_after_s
        return None

    def _touch(self, ts: float) -> None:
        if self.last_shell_ts is None or ts > self.last_shell_ts:
            self.last_shell_ts = ts

    def _anonymous_id(self) -> str:
        self._anon += 1
        return f"\0anon{self._anon}"

    def _pop_oldest(self) -> float | None:
        for key in self.running:
            if key.startswith("\0anon"):
                return self.running.pop(key)
        return None

    def to_dict(self) -> dict[str, Any]:
        """The tracker as JSON-ready data (times and call ids only)."""
        return {"turns": {k: list(v) for k, v in self.turns.items()},
                "running": dict(self.running), "unmatched_since": self.unmatched_since,
                "last_record_ts": self.last_record_ts, "last_shell_ts": self.last_shell_ts,
                "not_before": self.not_before, "last_end_ts": self.last_end_ts,
                "unrecognized_ts": self.unrecognized_ts}

    def load_dict(self, data: Any) -> None:
        """Restore :meth:`to_dict`'s output; fields of the wrong type are ignored."""
        if not isinstance(data, dict):
            return
        turns = data.get("turns")
        if isinstance(turns, dict):
            self.turns = {str(k): [v[0], v[1]] for k, v in list(turns.items())[-MAX_SESSIONS:]
                          if isinstance(v, list) and len(v) == 2
                          and all(isinstance(b, bool) for b in v)}
        not_before = data.get("not_before")
        if isinstance(not_before, (int, float)) and not isinstance(not_before, bool) \
                and math.isfinite(not_before):
            self.not_before = min(self.not_before, float(not_before)) if self.not_before \
                else float(not_before)
        for name in ("unmatched_since", "last_record_ts", "last_shell_ts", "last_end_ts",
                     "unrecognized_ts"):
            value = data.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool) \
                    and math.isfinite(value):
                setattr(self, name, float(value))
        running = data.get("running")
        if isinstance(running, dict):
            self.running = {str(k): float(v) for k, v in list(running.items())[:MAX_RUNNING]
                            if isinstance(v, (int, float)) and not isinstance(v, bool)}
