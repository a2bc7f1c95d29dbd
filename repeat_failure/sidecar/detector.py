"""Detector: the same command failing the same way ``threshold`` times within ``window_s`` (C6).

Rules (DESIGN.md "Pipeline", spec C6, C10, C11, C-AC2, C-AC3, C-AC8):

* Failures are counted per (normalized command, exit) — "the same result". ``exit`` is the exit
  number, or ``"failed"`` where the route gives none.
* A note is raised for a command when one of its keys has ``threshold`` failures whose record
  times span less than ``window_s``. One note per distinct command.
* Counting uses each record's own ``ts``; expiry uses ``now``, passed in by the caller (the
  detector never reads a clock, so tests never sleep). A failure is in the window while
  ``ts > now - window_s``.
* A success of the command forgets its failures up to the success and clears its note (unless
  later failures still qualify). A note also clears when its last failure leaves the window; until
  then it stays, even if its count drops below the threshold. It can be raised again later.
* If two exits qualify, the note shows the one whose last failure is newest. An empty command
  never counts.

Monitor only (C10): the detector returns events; nothing here touches the agent.

The store the rules work on (per-command failure times, their saved form) is
:mod:`repeat_failure.sidecar.detector_store`.
"""

from __future__ import annotations

import bisect
import math
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Union

import orjson

from repeat_failure.sidecar.detector_store import (FAILED, CommandState, ExitKey, Times, exit_key,
                                                 parse_key, saved_item, unpack_outputs)
from repeat_failure.sidecar.normalize import UNKNOWN, command_label, output_kind

#: Distinct commands tracked per agent; beyond it the command that failed least recently goes.
MAX_COMMANDS = 10_000
#: Bytes of normalized command text tracked per agent, all commands together (as counted by
#: :func:`text_bytes`); beyond it, as beyond ``MAX_COMMANDS``, the commands that failed least
#: recently go. Without it memory grew with command length: 10,000 distinct commands of 3.9 KB
#: held 39 MB of text and wrote a 39 MB state file.
MAX_COMMAND_BYTES = 4 << 20
#: Failures kept per (command, exit) key: the highest threshold the config allows
#: (:data:`repeat_failure.config` ``threshold`` maximum), so any allowed threshold can be reached.
MAX_FAILURES_PER_KEY = 10_000
#: Failure times kept per agent, all keys together. Past it, a key holding more failures than
#: the threshold needs to qualify loses its oldest (the newest ``threshold`` are all a note
#: needs); otherwise the commands that failed least recently go, as past ``MAX_COMMANDS``.
#: ``MAX_COMMANDS`` commands at the default threshold (5) fit. Without it the state file grew
#: with the failures in the window (issue 17: 1,000 commands failing 1,000 times an hour wrote
#: 18 MB, over the 8 MiB a restart loads, and every note was lost at the next restart); with
#: it the largest state the bounds allow stays under that load limit (tests/test_memory.py).
MAX_FAILURES = 50_000
STATE_VERSION = 1


class StateError(ValueError):
    """A saved detector state that cannot be loaded (torn, wrong shape, future version)."""


@dataclass(frozen=True)
class Note:
    """A raised note as the dashboard shows it.

    ``count`` is the failures of the shown key now in the window; ``minutes`` is the time from
    the first to the last of them, rounded up, at least 1.
    """

    command: str
    exit: ExitKey
    count: int
    minutes: int
    first_ts: float
    last_ts: float
    #: Whether those failures had the same output every time (``same``), ``changing`` output,
    #: or ``unknown`` (some failure's output not known: the neutral route gives none). Issue 19;
    #: :func:`repeat_failure.sidecar.normalize.output_kind`. Not part of :attr:`message` (spec C11).
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
    """Event: a note cleared; ``reason`` is ``success``, ``expired`` or ``evicted``."""

    command: str
    reason: str


Event = Union[NoteRaised, NoteCleared]


def text_bytes(command: str) -> int:
    """What ``command`` counts against :data:`MAX_COMMAND_BYTES`: the larger of its size in the
    state file (UTF-8, JSON-escaped: a control character takes 6 bytes there) and its size in
    memory (CPython keeps a str at 1, 2 or 4 bytes a character, by its widest one), so that
    neither exceeds the bound."""
    try:
        size = len(orjson.dumps(command)) - 2  # without the quotes
    except TypeError:  # a lone surrogate, which orjson refuses: the most any text can take
        return 6 * len(command)
    if command.isascii():
        return size
    widest = max(map(ord, command))
    return max(size, len(command) * (1 if widest < 0x100 else 2 if widest < 0x10000 else 4))


class Detector:
    """Sliding-window repeat detector for one agent.

    ``threshold`` is N (>= 1); ``window_s`` the window in seconds (> 0).
    """

    def __init__(self, threshold: int, window_s: float) -> None:
        self.threshold = threshold
        self.window_s = window_s
        # Ordered by most recent failure last, so eviction takes the first entry in O(1).
        self._commands: OrderedDict[str, CommandState] = OrderedDict()
        self._text_bytes = 0  # text_bytes() of every key of _commands
        self._failures = 0  # failure times held, all commands and keys together

    @property
    def command_bytes(self) -> int:
        """The :func:`text_bytes` of all tracked commands together (at most
        :data:`MAX_COMMAND_BYTES`)."""
        return self._text_bytes

    @property
    def failure_count(self) -> int:
        """The failure times held, all commands together (at most :data:`MAX_FAILURES`)."""
        return self._failures

    def reconfigure(self, threshold: int, window_s: float, now: float) -> list[Event]:
        """Apply new thresholds and re-judge what is already counted: a lower threshold raises
        the notes it now justifies at once, a shorter window expires what fell out of it."""
        self.threshold = threshold
        self.window_s = window_s
        events: list[Event] = list(self.expire(now))
        for command, state in self._commands.items():
            qualified = {k for k, times in state.items() if self._qualifies(times)}
            if qualified:
                if state.qualified is None:
                    state.qualified = set()
                state.qualified |= qualified
            if state.qualified and not state.raised:
                state.raised = True
                note = self._note(command, state, now)
                if note is not None:
                    events.append(NoteRaised(note))
        return events

    # -- feeding -------------------------------------------------------------------------------

    def record(self, command: str, exit_status: int | None, failed: bool, ts: float,
               now: float, output: int = 0) -> list[Event]:
        """Feed one record: ``command`` normalized, ``ts`` its time, ``now`` the current time,
        ``output`` the digest of a failure's output (:func:`repeat_failure.sidecar.normalize.output_digest`;
        0 when the route gives none).

        Returns the events it caused (a note raised or cleared). A failure already outside the
        window (``ts <= now - window_s``) and an empty command change nothing.

        A new command is tracked only within ``MAX_COMMANDS`` commands and ``MAX_COMMAND_BYTES``
        of their text (:func:`text_bytes`): the commands that failed least recently are
        forgotten until it fits, each raised note among them cleared with reason ``evicted``.
        A command whose text alone is over ``MAX_COMMAND_BYTES`` is never tracked. Past
        ``MAX_FAILURES`` failure times in all, the key just fed drops its oldest failure when it
        holds more than ``threshold`` (so its count, and its note's, stops growing), else the
        commands that failed least recently are forgotten as above (:meth:`_make_room`).
        """
        if not command:
            return []
        if not failed:
            return self._success(command, ts)
        if ts <= now - self.window_s:
            return []
        events: list[Event] = []
        state = self._commands.get(command)
        if state is None:
            size = text_bytes(command)
            if size > MAX_COMMAND_BYTES:
                return []
            while self._commands and (len(self._commands) >= MAX_COMMANDS
                                      or self._text_bytes + size > MAX_COMMAND_BYTES):
                events.extend(self._evict_one())
            state = self._commands[command] = CommandState()
            self._text_bytes += size
        else:
            self._commands.move_to_end(command)
        key = exit_key(exit_status)
        times = state.get(key)
        self._failures += 1
        if times is None:
            times = Times((ts,), (output,))
            state.add(key, times)
            pos = 0
        else:
            pos = bisect.bisect_right(times, ts)
            times.put(pos, ts, output)
            if len(times) > MAX_FAILURES_PER_KEY:
                del times[0]
                self._failures -= 1
                pos = max(0, pos - 1)
        if self._failures > MAX_FAILURES:
            pos = self._make_room(state, times, pos, events)
        if self._qualifies(times, pos):
            if state.qualified is None:
                state.qualified = set()
            state.qualified.add(key)
            if not state.raised:
                state.raised = True
                note = self._note(command, state, now)
                if note is not None:
                    events.append(NoteRaised(note))
        return events

    def set_output(self, command: str, exit_status: ExitKey | None, ts: float,
                   digest: int) -> bool:
        """Give the failure of ``command`` with exit ``exit_status`` (a number, ``"failed"`` or
        ``None`` for no number) at exactly ``ts`` the output ``digest``: the session log's
        output for a failure the neutral route recorded first (:mod:`repeat_failure.sidecar.dedup`, issue 19:
        the session record's digest is kept). Returns False when no such failure is held (it
        left the window, or was never counted)."""
        state = self._commands.get(command)
        times = state.get(exit_status if exit_status is not None else FAILED) if state else None
        if times is None:
            return False
        pos = bisect.bisect_left(times, ts)
        if pos == len(times) or times[pos] != ts:
            return False
        times.set_digest(pos, digest)
        return True

    def note(self, command: str, now: float) -> Note | None:
        """``command``'s raised note as it stands at ``now``, or ``None`` when none is raised."""
        state = self._commands.get(command)
        if state is None or not state.raised:
            return None
        return self._note(command, state, now)

    def _make_room(self, state: CommandState, times: array, pos: int, events: list[Event]) -> int:
        """Bring the failure times held back to ``MAX_FAILURES`` after one was added to
        ``times`` (at ``pos``) of ``state``, the most recently failed command; returns where
        that failure now is (``-1``: it was dropped itself, being the oldest).

        The key just fed drops its oldest failure if it holds more than ``threshold``: beyond
        the newest ``threshold`` failures a key needs none to qualify. Otherwise the commands
        that failed least recently are forgotten (their raised notes cleared, ``evicted``);
        if ``state`` is the only command left, its fullest key drops its oldest failure."""
        if len(times) <= self.threshold:
            while self._failures > MAX_FAILURES and len(self._commands) > 1:
                events.extend(self._evict_one())
            if self._failures <= MAX_FAILURES:
                return pos
            fullest = max((t for _, t in state.items()), key=len)
            if fullest is not times:
                del fullest[0]
                self._failures -= 1
                return pos
        del times[0]
        self._failures -= 1
        return pos - 1

    def _qualifies(self, times: array, pos: int | None = None) -> bool:
        """Whether some run of ``threshold`` failures spans less than the window: one that
        includes ``times[pos]``, or any run when ``pos`` is None."""
        n = self.threshold
        if pos is not None and pos < 0:  # the failure fed was dropped: nothing new qualifies
            return False
        first, last = (0, len(times) - n) if pos is None else (max(0, pos - n + 1),
                                                                 min(pos, len(times) - n))
        return any(times[start + n - 1] - times[start] < self.window_s
                   for start in range(first, last + 1))

    def _settle(self, command: str, state: CommandState, reason: str) -> list[Event]:
        """Clear the command's note if no key still qualifies; forget a command with no
        failures left."""
        events: list[Event] = []
        if state.raised and not state.qualified:
            state.raised = False
            events.append(NoteCleared(command, reason))
        if state.times is None:
            del self._commands[command]
            self._text_bytes -= text_bytes(command)
        return events

    def _success(self, command: str, ts: float) -> list[Event]:
        state = self._commands.get(command)
        if state is None:
            return []
        self._failures -= state.count()
        state.forget_until(ts)
        self._failures += state.count()
        state.qualified = {k for k, times in state.items() if self._qualifies(times)} or None
        return self._settle(command, state, "success")

    def _evict_one(self) -> list[Event]:
        command, state = self._commands.popitem(last=False)
        self._text_bytes -= text_bytes(command)
        self._failures -= state.count()
        return [NoteCleared(command, "evicted")] if state.raised else []

    def evict_oldest(self, nbytes: int) -> list[Event]:
        """Forget the commands that failed least recently until their entries in the saved
        state (:meth:`iter_json`) add up to at least ``nbytes`` bytes, or none is left; returns
        the notes cleared (reason ``evicted``). The caller's last resort when a saved state
        would not fit its load limit."""
        events: list[Event] = []
        freed = 0
        while self._commands and freed < nbytes:
            command, state = next(iter(self._commands.items()))
            freed += len(orjson.dumps(saved_item(command, state))) + 1
            events.extend(self._evict_one())
        return events

    def expire(self, now: float) -> list[Event]:
        """Forget failures that left the window (``ts <= now - window_s``); clear notes whose
        last failure is among them. Returns the cleared events."""
        horizon = now - self.window_s
        events: list[Event] = []
        for command in list(self._commands):
            state = self._commands[command]
            self._failures -= state.count()
            state.forget_until(horizon)
            self._failures += state.count()
            if state.qualified:
                state.qualified &= set(state.keys())
                state.qualified = state.qualified or None
            events += self._settle(command, state, "expired")
        return events

    def next_change(self) -> float | None:
        """The earliest time at which :meth:`expire` would change something, or ``None``."""
        oldest = min(
            (times[0] for s in self._commands.values() for _, times in s.items()),
            default=None,
        )
        return None if oldest is None else oldest + self.window_s

    # -- views ---------------------------------------------------------------------------------

    def _note(self, command: str, state: CommandState, now: float) -> Note | None:
        horizon = now - self.window_s
        best: tuple[float, ExitKey, Times, int] | None = None
        for key in state.qualified or ():
            held = state.get(key)
            if not held:
                continue
            start = bisect.bisect_right(held, horizon)
            if start < len(held) and (best is None or held[-1] > best[0]):
                best = (held[-1], key, held, start)
        if best is None:
            return None
        last, key, held, start = best
        minutes = max(1, math.ceil((last - held[start]) / 60.0 - 1e-9))
        return Note(command, key, len(held) - start, minutes, held[start], last,
                    output_kind(held.digests(start)))

    def notes(self, now: float) -> list[Note]:
        """Raised notes, the one whose last failure is newest first."""
        found = [
            note for command, state in self._commands.items() if state.raised
            if (note := self._note(command, state, now)) is not None
        ]
        found.sort(key=lambda n: (-n.last_ts, n.command))
        return found

    def failures(self, now: float, limit: int) -> list[tuple[str, ExitKey, int]]:
        """The ``limit`` (command, exit, count) keys with the most failures now in the window."""
        horizon = now - self.window_s
        rows: list[tuple[int, float, str, ExitKey]] = []
        for command, state in self._commands.items():
            for key, times in state.items():
                count = len(times) - bisect.bisect_right(times, horizon)
                if count:
                    rows.append((count, times[-1], command, key))
        rows.sort(key=lambda r: (-r[0], -r[1], r[2], str(r[3])))
        return [(command, key, count) for count, _, command, key in rows[:limit]]

    # -- persistence ---------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready snapshot (commands are already scrubbed and normalized)."""
        return {
            "version": STATE_VERSION,
            "commands": [saved_item(command, state) for command, state in self._commands.items()],
        }

    def iter_json(self, chunk_bytes: int = 1 << 16) -> Iterator[bytes]:
        """:meth:`to_dict` as compact JSON, in pieces of about ``chunk_bytes`` bytes (the last
        one shorter): joined, exactly the bytes of ``orjson.dumps(self.to_dict())``.

        Built one command at a time, so that saving the state of ``MAX_COMMANDS`` commands
        never holds all their dicts at once (a few MiB of small objects that would stay behind
        as a fragmented heap), nor a second copy of the text (about 1 MiB for 10,000
        commands) when the caller appends the pieces to its own buffer as they come. Raises
        ``TypeError`` where ``orjson.dumps`` would. The commands must not change while the
        pieces are taken."""
        parts = [b'{"version":%d,"commands":[' % STATE_VERSION]
        size = 0
        for i, (command, state) in enumerate(self._commands.items()):
            part = orjson.dumps(saved_item(command, state))
            parts.append(b"," + part if i else part)
            size += len(part) + 1
            if size >= chunk_bytes:
                yield b"".join(parts)
                parts, size = [], 0
        parts.append(b"]}")
        yield b"".join(parts)

    def load_dict(self, data: Any) -> int:
        """Replace the current state with a snapshot from :meth:`to_dict`; returns how many of
        its commands were left out to stay within the bounds.

        The bounds of :meth:`record` apply: the most recently failed commands are restored,
        newest first, while they fit in ``MAX_COMMANDS`` commands, ``MAX_COMMAND_BYTES`` of
        text and ``MAX_FAILURES`` failure times; the older ones (a state saved by a version
        without these bounds, or with bigger ones) are left out, their notes with them. A command listed twice counts
        once, the later entry winning. Raises :class:`StateError` (and changes nothing) when
        ``data`` has another version or the wrong shape, in any of its commands.
        """
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
            raise StateError(f"not a version {STATE_VERSION} detector state")
        kept: list[tuple[str, CommandState]] = []  # newest first
        seen: set[str] = set()
        total = 0
        failures = 0
        left_out = 0
        full = False
        try:
            for item in reversed(data["commands"]):
                state = CommandState(raised=bool(item["raised"]))
                saved = item["failures"]
                unpacked = unpack_outputs(item.get("outputs"), [len(t) for t in saved.values()])
                for index, (key_text, times) in enumerate(saved.items()):
                    # Absent (a state saved before issue 19) or malformed: unknown.
                    digests = unpacked[index] if unpacked is not None else [0] * len(times)
                    pairs = sorted(zip((float(t) for t in times), digests))
                    if not all(math.isfinite(t) for t, _ in pairs):
                        raise StateError("a failure time is not finite")
                    if pairs:
                        key = parse_key(key_text)
                        pairs = pairs[-MAX_FAILURES_PER_KEY:]
                        kept_times = Times([t for t, _ in pairs], [d for _, d in pairs])
                        if state.get(key) is not None:
                            # "1" and "01" name one key: the last one wins, in its place
                            if state.key == key:
                                state.times = kept_times
                            else:
                                state.more[key] = kept_times
                        else:
                            state.add(key, kept_times)
                state.qualified = ({parse_key(k) for k in item["qualified"]}
                                   & set(state.keys())) or None
                command = item["command"]
                if not isinstance(command, str) or not command:
                    raise StateError("a command is not a non-empty string")
                if state.times is None or command in seen:
                    continue
                seen.add(command)
                size = text_bytes(command)
                held = state.count()
                if (full or len(kept) >= MAX_COMMANDS or total + size > MAX_COMMAND_BYTES
                        or failures + held > MAX_FAILURES):
                    full = True  # eviction keeps the newest ones only: so does loading
                    left_out += 1
                    continue
                kept.append((command, state))
                total += size
                failures += held
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StateError(f"detector state has the wrong shape: {exc.__class__.__name__}") from None
        self._commands = OrderedDict(reversed(kept))
        self._text_bytes = total
        self._failures = failures
        return left_out
