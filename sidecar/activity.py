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
  (a long build is not missing data).
- File reads, edits and other tools are not shell activity and never start it.
- The state is ``not_receiving_data`` when a turn is in progress, that turn has shell activity
  (a shell call started in it), and the timer has run for at least ``no_data_after_s``.

Times are seconds since the epoch: the session log's own times for its events, the record's
``ts`` for records, the sidecar's clock for "now". :class:`Activity` holds no command text.
"""

from __future__ import annotations

from typing import Any

from sidecar.backends import SHELL_END, SHELL_START, TURN_END, TURN_START, SessionEvent

#: A record written up to this many seconds before the call's logged start still matches it
#: (clocks of one pod agree; the CLI may log the start after the shell began).
MATCH_SLACK_S = 2.0
#: Running calls remembered per agent (ids of calls whose end we never see are dropped oldest
#: first, and all of them at a turn's end).
MAX_RUNNING = 256


class Activity:
    """One agent's shell activity as its session log shows it, and the C12 timer.

    Feed it :meth:`on_event` for every session event and :meth:`on_record` for every record the
    routes deliver; ask :meth:`receiving_data`. JSON-serialisable through :meth:`to_dict`.
    """

    def __init__(self) -> None:
        self.turn_open = False
        self.turn_shell = False  # a shell call started in the open turn
        self.running: dict[str, float] = {}  # call id -> start time
        self.unmatched_since: float | None = None
        self.last_record_ts: float | None = None
        self.last_shell_ts: float | None = None  # newest shell start or end, for the exporter
        self._anon = 0

    def on_record(self, ts: float) -> None:
        """A record arrived (from any route): the timer stops."""
        if self.last_record_ts is None or ts > self.last_record_ts:
            self.last_record_ts = ts
        self.unmatched_since = None

    def on_event(self, event: SessionEvent) -> None:
        """Apply one session event (``ts`` set)."""
        ts = float(event.ts or 0.0)
        if event.kind == TURN_START:
            self.turn_open, self.turn_shell = True, False
            self.running.clear()
        elif event.kind == TURN_END:
            self.turn_open, self.turn_shell = False, False
            self.running.clear()
        elif event.kind == SHELL_START:
            self.turn_open = self.turn_shell = True  # a shell call means a turn is running
            key = event.call_id or self._anonymous_id()
            self.running[key] = ts
            while len(self.running) > MAX_RUNNING:
                del self.running[next(iter(self.running))]
            self._touch(ts)
        elif event.kind == SHELL_END:
            started = self.running.pop(event.call_id, None) if event.call_id else \
                self._pop_oldest()
            start = ts if started is None else min(started, ts)
            if self.turn_open:
                self.turn_shell = True
            self._touch(ts)
            if self.last_record_ts is None or self.last_record_ts < start - MATCH_SLACK_S:
                if self.unmatched_since is None or ts < self.unmatched_since:
                    self.unmatched_since = ts

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
        return {"turn_open": self.turn_open, "turn_shell": self.turn_shell,
                "running": dict(self.running), "unmatched_since": self.unmatched_since,
                "last_record_ts": self.last_record_ts, "last_shell_ts": self.last_shell_ts}

    def load_dict(self, data: Any) -> None:
        """Restore :meth:`to_dict`'s output; fields of the wrong type are ignored."""
        if not isinstance(data, dict):
            return
        for name in ("turn_open", "turn_shell"):
            if isinstance(data.get(name), bool):
                setattr(self, name, data[name])
        for name in ("unmatched_since", "last_record_ts", "last_shell_ts"):
            value = data.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
                setattr(self, name, float(value))
        running = data.get("running")
        if isinstance(running, dict):
            self.running = {str(k): float(v) for k, v in list(running.items())[:MAX_RUNNING]
                            if isinstance(v, (int, float)) and not isinstance(v, bool)}
