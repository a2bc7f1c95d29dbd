"""Route deduplication (spec C3): one command seen by two routes counts once.

A backend whose session log is also a route (:attr:`SessionLogReader.route_records`) may have
some commands recorded by the neutral ``BASH_ENV`` route as well (a CLI version that starts a
real bash for some commands). Both records describe one command run, so the detector must see
it once. :class:`RouteDedup` sits after normalization: a record is a duplicate when the *other*
route already delivered an unmatched record with the same normalized command and the same
outcome (failed or not) within :data:`WINDOW_S` seconds of it; the pair is then matched and
never matches again. Arrival order does not matter (either route may be read first).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

#: Seconds between the two routes' times for one command: the hook writes its record when the
#: shell exits, the CLI logs the result after reading the output.
WINDOW_S = 5.0
#: Unmatched records remembered per route (the oldest are forgotten first).
MAX_PENDING = 1024

NEUTRAL = "neutral"
SESSION = "session"


@dataclass
class Seen:
    """A record remembered by :class:`RouteDedup`: its normalized ``command``, whether it
    ``failed``, its time ``ts``, its detector exit key (``exit``: a number or ``"failed"``) and
    its output digest (``output``, 0 when its route gives none). ``matched`` once paired."""

    command: str
    failed: bool
    ts: float
    exit: object = None
    output: int = 0
    matched: bool = False


class RouteDedup:
    """Remembers recent records of each route kind (``"neutral"`` or ``"session"``)."""

    def __init__(self) -> None:
        self._recent: dict[str, deque[Seen]] = {NEUTRAL: deque(), SESSION: deque()}

    def is_duplicate(self, kind: str, command: str, failed: bool, ts: float) -> bool:
        """True when ``(command, failed)`` at ``ts`` from route kind ``kind`` was already
        delivered by the other route kind within :data:`WINDOW_S`; otherwise remember it and
        return False. ``kind`` is :data:`NEUTRAL` or :data:`SESSION` (ValueError otherwise)."""
        return self.match(kind, command, failed, ts) is not None

    def match(self, kind: str, command: str, failed: bool, ts: float, exit: object = None,
              output: int = 0) -> Seen | None:
        """:meth:`is_duplicate` that returns the other route's record it matched (so the
        caller can keep the session record's output digest when the neutral record was counted
        first, issue 19), or ``None`` after remembering this one with its ``exit`` key and
        ``output`` digest. Raises ValueError for a ``kind`` other than :data:`NEUTRAL` or
        :data:`SESSION`."""
        if kind not in self._recent:
            raise ValueError(f"route kind {kind!r}: expected {NEUTRAL!r} or {SESSION!r}")
        other = self._recent[SESSION if kind == NEUTRAL else NEUTRAL]
        while other and other[0].ts < ts - 10 * WINDOW_S:  # old enough never to match again
            other.popleft()
        for seen in other:
            if (not seen.matched and seen.command == command and seen.failed == failed
                    and abs(seen.ts - ts) <= WINDOW_S):
                seen.matched = True
                return seen
        mine = self._recent[kind]
        mine.append(Seen(command, failed, ts, exit, output))
        while len(mine) > MAX_PENDING:
            mine.popleft()
        return None
