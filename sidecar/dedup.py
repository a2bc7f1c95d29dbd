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
class _Seen:
    command: str
    failed: bool
    ts: float
    matched: bool = False


class RouteDedup:
    """Remembers recent records of each route kind (``"neutral"`` or ``"session"``)."""

    def __init__(self) -> None:
        self._recent: dict[str, deque[_Seen]] = {NEUTRAL: deque(), SESSION: deque()}

    def is_duplicate(self, kind: str, command: str, failed: bool, ts: float) -> bool:
        """True when ``(command, failed)`` at ``ts`` from route kind ``kind`` was already
        delivered by the other route kind within :data:`WINDOW_S`; otherwise remember it and
        return False. ``kind`` is :data:`NEUTRAL` or :data:`SESSION` (ValueError otherwise)."""
        if kind not in self._recent:
            raise ValueError(f"route kind {kind!r}: expected {NEUTRAL!r} or {SESSION!r}")
        other = self._recent[SESSION if kind == NEUTRAL else NEUTRAL]
        while other and other[0].ts < ts - 10 * WINDOW_S:  # old enough never to match again
            other.popleft()
        for seen in other:
            if (not seen.matched and seen.command == command and seen.failed == failed
                    and abs(seen.ts - ts) <= WINDOW_S):
                seen.matched = True
                return True
        mine = self._recent[kind]
        mine.append(_Seen(command, failed, ts))
        while len(mine) > MAX_PENDING:
            mine.popleft()
        return False
