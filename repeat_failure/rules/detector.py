"""Detector: the same command failing the same way ``threshold`` times within ``window_s`` (C6).

Rules (docs/requirements.md C6, C10, C11, C-AC2, C-AC3, C-AC8; "the same result", issue 26):

* Failures are counted per (normalized command, result). A result is the exit (the exit
  number, or ``"failed"`` where the route gives none) and, where a route knows the failure's
  output, that output after :func:`repeat_failure.rules.normalize.normalize_output` (its
  keyed digest; failures whose output is unknown share the result "unknown output"). So a
  test-fix-retest cycle, whose output changes with every edit, never adds up, while a flaky
  test that keeps failing the same two ways still can. With ``match_output`` off (the config's
  ``match_output: false``) a result is the exit alone (the rule before issue 26).
* A neutral-route failure of an agent whose session log gives outputs is *awaited* (fed with
  ``pending=True``): it counts for no result until the session log's line gives its output
  (:meth:`Detector.set_output`) or :data:`OUTPUT_WAIT_S` seconds pass (it then counts with
  its output unknown). So a note never appears for the wrong result and then vanishes.
* A note is raised for a command when one of its results has ``threshold`` failures whose
  record times span less than ``window_s``. One note per distinct command.
* Counting uses each record's own ``ts``; expiry uses ``now``, passed in by the caller (the
  detector never reads a clock, so tests never sleep). A failure is in the window while
  ``ts > now - window_s``.
* A success of the command forgets its failures (of every result) up to the success and clears
  its note (unless later failures still qualify). A note also clears when the last failure of
  its results leaves the window; until then it stays, even if its count drops below the
  threshold. It can be raised again later.
* If two results qualify, the note shows the one whose last failure is newest. An empty command
  never counts.

Monitor only (C10): the detector returns events; nothing here touches the agent.

The store the rules work on (per-command failure times and output digests, their saved form)
is :mod:`repeat_failure.rules.detector_store`; when a result qualifies,
:mod:`repeat_failure.rules.detector_results`; the notes and events it returns are
:mod:`repeat_failure.rules.detector_notes`. Names re-exported here for callers: ``Note``,
``NoteRaised``, ``NoteCleared``, ``Event``, ``ExitKey``, ``FAILED``, ``exit_key``,
``text_bytes``.
"""

from __future__ import annotations

import bisect
import math
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import orjson

from repeat_failure.rules.detector_notes import Event, Note, NoteCleared, NoteRaised
from repeat_failure.rules.detector_results import in_mode, qualifies_at, qualifying
from repeat_failure.rules.detector_store import (FAILED, PENDING, CommandState, ExitKey, Result,
                                                   Times, exit_key, iter_state_json, parse_key,
                                                   parse_result, result_text, saved_item,
                                                   text_bytes, unpack_outputs)
from repeat_failure.rules.normalize import SAME, UNKNOWN, output_kind

#: Distinct commands tracked per agent; beyond it the command that failed least recently goes.
MAX_COMMANDS = 10_000
#: Bytes of normalized command text tracked per agent, all commands together (as counted by
#: :func:`~repeat_failure.rules.detector_store.text_bytes`); beyond it, as beyond ``MAX_COMMANDS``, the commands that failed least
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
#: Seconds an awaited failure (fed with ``pending=True``) waits for its output before it counts
#: with its output unknown: three session-log polls (:data:`repeat_failure.sidecar.loop.SESSION_POLL_S`,
#: 5 s), which covers the two routes' times differing by up to
#: :data:`repeat_failure.sidecar.dedup.WINDOW_S` (5 s) and the CLI writing its line after
#: reading the output. Issue 26.
OUTPUT_WAIT_S = 15.0
#: Failures awaiting their output at once, per agent; past it the oldest stops waiting (counts
#: with its output unknown).
MAX_AWAITED = 1024


class StateError(ValueError):
    """A saved detector state that cannot be loaded (torn, wrong shape, future version)."""


class Detector:
    """Sliding-window repeat detector for one agent.

    ``threshold`` is N (>= 1); ``window_s`` the window in seconds (> 0); ``match_output``
    whether a failure's output is part of its result (issue 26; ``False``: exit alone).
    """

    def __init__(self, threshold: int, window_s: float, match_output: bool = True) -> None:
        self.threshold = threshold
        self.window_s = window_s
        self.match_output = match_output
        # Ordered by most recent failure last, so eviction takes the first entry in O(1).
        self._commands: OrderedDict[str, CommandState] = OrderedDict()
        self._text_bytes = 0  # text_bytes() of every key of _commands
        self._failures = 0  # failure times held, all commands and keys together
        # Awaited failures, (command, exit key, ts) -> when they stop waiting (epoch seconds),
        # in the order they came.
        self._awaited: dict[tuple[str, ExitKey, float], float] = {}

    @property
    def command_bytes(self) -> int:
        """The :func:`text_bytes` of all tracked commands together (at most
        :data:`MAX_COMMAND_BYTES`)."""
        return self._text_bytes

    @property
    def failure_count(self) -> int:
        """The failure times held, all commands together (at most :data:`MAX_FAILURES`)."""
        return self._failures

    @property
    def awaited_count(self) -> int:
        """The failures awaiting their output (at most :data:`MAX_AWAITED`)."""
        return len(self._awaited)

    def reconfigure(self, threshold: int, window_s: float, now: float,
                    match_output: bool | None = None) -> list[Event]:
        """Apply new thresholds (and, unless ``None``, a new ``match_output``) and re-judge
        what is already counted: a lower threshold raises the notes it now justifies at once, a
        shorter window expires what fell out of it. Turning ``match_output`` off stops every
        wait (awaited failures count at once, by exit)."""
        self.threshold = threshold
        self.window_s = window_s
        events: list[Event] = []
        if match_output is not None and match_output != self.match_output:
            self.match_output = match_output
            if not match_output:
                events += self._stop_waiting(math.inf, now)
            for command, state in list(self._commands.items()):
                if state.qualified:
                    state.qualified = in_mode(self, state, state.qualified)
                    events += self._settle(command, state, "reconfigured")
        events += self.expire(now)
        for command, state in self._commands.items():
            qualified = qualifying(self, state)
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
               now: float, output: int = 0, pending: bool = False) -> list[Event]:
        """Feed one record: ``command`` normalized, ``ts`` its time, ``now`` the current time,
        ``output`` the digest of a failure's output (:func:`repeat_failure.rules.normalize.output_digest`;
        0 when the route gives none). ``pending``: the output is unknown now but the agent's
        session log may still give it (a neutral-route failure of an agent whose session log is
        read): with ``match_output`` the failure is awaited (counts for no result) until
        :meth:`set_output` gives it or :data:`OUTPUT_WAIT_S` passes (:meth:`expire`).

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
        awaited = pending and not output and self.match_output
        if awaited:
            output = PENDING
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
        if awaited:
            if pos >= 0:
                self._awaited[(command, key, ts)] = now + OUTPUT_WAIT_S
                if len(self._awaited) > MAX_AWAITED:
                    events += self._stop_waiting(1, now)
            return events
        self._judge(command, state, key, times, pos, now, events)
        return events

    def _judge(self, command: str, state: CommandState, key: ExitKey, times: Times, pos: int,
               now: float, events: list[Event]) -> None:
        """Whether the failure at ``pos`` of ``key``'s ``times`` makes its result qualify; if
        so, mark it and raise the command's note unless it is raised. The note raised is as of
        that failure's time when ``now`` is later (an awaited failure judged when its output
        came or its wait ended): the failures it qualified with may have left the window since,
        and the note would say fewer failures than the threshold."""
        result = qualifies_at(self, key, times, pos)
        if result is None:
            return
        if state.qualified is None:
            state.qualified = set()
        state.qualified.add(result)
        if not state.raised:
            state.raised = True
            note = self._note(command, state, min(now, times[pos]))
            if note is not None:
                events.append(NoteRaised(note))

    def set_output(self, command: str, exit_status: ExitKey | None, ts: float,
                   digest: int, now: float | None = None) -> list[Event] | None:
        """Give the failure of ``command`` with exit ``exit_status`` (a number, ``"failed"`` or
        ``None`` for no number) at exactly ``ts`` the output ``digest`` (0: the session log had
        none): the session log's output for a failure the neutral route recorded first
        (:mod:`repeat_failure.sidecar.dedup`, issues 19 and 26). An awaited failure stops waiting
        and is judged with that output at ``now`` (epoch seconds; default ``ts``): the events
        are returned. With ``match_output``, a failure that already counts keeps its result
        (its output only labels nothing then: returns ``[]``); without it, the output labels
        the note (``same``/``changing``). Returns ``None`` when no such failure is held (it
        left the window, or was never counted)."""
        key = exit_status if exit_status is not None else FAILED
        state = self._commands.get(command)
        times = state.get(key) if state else None
        if times is None:
            return None
        pos = bisect.bisect_left(times, ts)
        end = bisect.bisect_right(times, ts)
        if pos == end:
            return None
        for i in range(pos, end):  # the awaited one first, when several failed at ts
            if times.digest(i) == PENDING:
                pos = i
                break
        events: list[Event] = []
        if times.digest(pos) == PENDING:
            times.set_digest(pos, digest)
            if not any(times.digest(i) == PENDING for i in range(pos, end)):
                self._awaited.pop((command, key, ts), None)
            self._judge(command, state, key, times, pos, ts if now is None else now, events)  # type: ignore[arg-type]
        elif not self.match_output:
            times.set_digest(pos, digest)
        return events

    def note(self, command: str, now: float) -> Note | None:
        """``command``'s raised note as it stands at ``now``, or ``None`` when none is raised."""
        state = self._commands.get(command)
        if state is None or not state.raised:
            return None
        return self._note(command, state, now)

    def _make_room(self, state: CommandState, times: Times, pos: int, events: list[Event]) -> int:
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

    def _stop_waiting(self, limit: float, now: float, until: float | None = None) -> list[Event]:
        """Stop the wait of the ``limit`` oldest awaited failures, or of those whose wait ends
        at or before ``until``: each counts with its output unknown, judged at ``now``. With
        ``until`` every awaited failure is looked at, not only the first ones: the order they
        came in is not the order their waits end when the wall clock stepped back between them
        (the later one's wait ends first; stopping at the first wait still running left it
        waiting past its end, and :meth:`next_change` in the past made the run loop spin)."""
        events: list[Event] = []
        done = 0
        for item, deadline in list(self._awaited.items()):
            if done >= limit:
                break
            if until is not None and deadline > until:
                continue
            done += 1
            del self._awaited[item]
            command, key, ts = item
            state = self._commands.get(command)
            times = state.get(key) if state else None
            if times is None:
                continue
            for pos in range(bisect.bisect_left(times, ts), bisect.bisect_right(times, ts)):
                if times.digest(pos) == PENDING:
                    times.set_digest(pos, 0)
                    self._judge(command, state, key, times, pos, now, events)  # type: ignore[arg-type]
        return events

    def _settle(self, command: str, state: CommandState, reason: str) -> list[Event]:
        """Clear the command's note if no result still qualifies; forget a command with no
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
        state.qualified = qualifying(self, state) or None
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
        """Stop the wait of awaited failures whose :data:`OUTPUT_WAIT_S` is over (they count
        with their output unknown, which may raise a note); forget failures that left the window
        (``ts <= now - window_s``); clear notes whose last failure is among them. Returns the
        events."""
        horizon = now - self.window_s
        events: list[Event] = self._stop_waiting(math.inf, now, until=now) if self._awaited else []
        for command in list(self._commands):
            state = self._commands[command]
            self._failures -= state.count()
            state.forget_until(horizon)
            self._failures += state.count()
            if state.qualified:
                state.qualified = {r for r in state.qualified if state.holds(r)} or None
            events += self._settle(command, state, "expired")
        return events

    def next_change(self) -> float | None:
        """The earliest time at which :meth:`expire` would change something (a failure leaving
        the window, an awaited failure's wait ending), or ``None``."""
        oldest = min(
            (times[0] for s in self._commands.values() for _, times in s.items()),
            default=None,
        )
        due = None if oldest is None else oldest + self.window_s
        if self._awaited:
            wait_ends = min(self._awaited.values())
            due = wait_ends if due is None else min(due, wait_ends)
        return due

    # -- views ---------------------------------------------------------------------------------

    def _note(self, command: str, state: CommandState, now: float) -> Note | None:
        """The note of ``command`` at ``now``: of its qualified results still in the window,
        the one whose last failure is newest (the first in :func:`result_text` order on a
        tie); ``None`` when none is in the window."""
        horizon = now - self.window_s
        best: tuple[float, Result, Times, list[float], int] | None = None
        for result in sorted(state.qualified or (), key=result_text):
            key, digest = result
            held = state.get(key)
            if not held:
                continue
            start = bisect.bisect_right(held, horizon)
            if digest is None:
                if start < len(held) and (best is None or held[-1] > best[0]):
                    best = (held[-1], result, held, list(held[start:]), start)
                continue
            times = held.of_result(digest, start)
            if times and (best is None or times[-1] > best[0]):
                best = (times[-1], result, held, times, start)
        if best is None:
            return None
        last, (key, digest), held, times, start = best
        minutes = max(1, math.ceil((last - times[0]) / 60.0 - 1e-9))
        if digest is None:
            kind = output_kind(held.digests(start))
        else:
            kind = SAME if digest else UNKNOWN
        return Note(command, key, len(times), minutes, times[0], last, kind)

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
        """:meth:`to_dict` as compact JSON, in pieces of about ``chunk_bytes`` bytes
        (:func:`repeat_failure.rules.detector_store.iter_state_json`: joined, exactly the
        bytes of ``orjson.dumps(self.to_dict())``, built one command at a time). Raises
        ``TypeError`` where ``orjson.dumps`` would. The commands must not change while the
        pieces are taken."""
        return iter_state_json(STATE_VERSION, self._commands.items(), chunk_bytes)

    def load_dict(self, data: Any, now: float | None = None) -> int:
        """Replace the current state with a snapshot from :meth:`to_dict`; returns how many of
        its commands were left out to stay within the bounds.

        A failure saved while it awaited its output (a restart in the wait) awaits it again,
        from ``now`` (epoch seconds) for :data:`OUTPUT_WAIT_S`, oldest first within
        :data:`MAX_AWAITED`; with ``now`` ``None``, by exit alone (``match_output`` off), or
        past that bound, its output is unknown. Before, it loaded as unknown at once: the
        session log's line read after the restart could no longer give it, and five failures
        of a test-fix-retest cycle counted as one result ("unknown"), raising a note at the
        next failure or config reload. A qualified result saved with the awaited digest is
        left out (it names no output).

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
                                state.more[key] = kept_times  # type: ignore[index]
                        else:
                            state.add(key, kept_times)
                # "2" (by exit alone, or saved before issue 26) or "2@<digest>": in this
                # detector's form, kept only while it still holds failures of that result.
                results = in_mode(self, state, {parse_result(k) for k in item["qualified"]})
                state.qualified = {r for r in results or ()
                                   if r[1] != PENDING and state.holds(r)} or None
                # A note with no result left is not raised (else a result qualifying later
                # would find it raised and make no NoteRaised: no log line, no Event).
                state.raised = state.raised and state.qualified is not None
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
        self._awaited = {}
        waiting = sorted(((times[i], command, key)
                          for command, state in self._commands.items()
                          for key, times in state.items() if times.outs is not None
                          for i in range(len(times)) if times.outs[i] == PENDING),
                         key=lambda w: (w[0], w[1], str(w[2])))  # exit keys: int or "failed"
        for ts, command, key in waiting:
            if now is not None and self.match_output and len(self._awaited) < MAX_AWAITED:
                self._awaited[(command, key, ts)] = now + OUTPUT_WAIT_S
                continue
            times = self._commands[command].get(key)
            for i in range(bisect.bisect_left(times, ts), bisect.bisect_right(times, ts)):  # type: ignore[arg-type]
                if times.digest(i) == PENDING:  # type: ignore[union-attr]
                    times.set_digest(i, 0)  # type: ignore[union-attr]
        return left_out

    def awaited(self) -> list[tuple[str, ExitKey, float]]:
        """The failures awaiting their output, as (command, exit key, ts), in the order they
        came (a time held twice is listed once)."""
        return list(self._awaited)
