"""Route deduplication (spec C3): a command seen by the neutral route and the session-log route
counts once, whichever arrives first. The real-session test is in tests/test_safeguard.py."""

from __future__ import annotations

import pytest

from sidecar.dedup import MAX_PENDING, NEUTRAL, SESSION, WINDOW_S, RouteDedup

T0 = 1_800_000_000.0


@pytest.mark.parametrize("first,second", [(NEUTRAL, SESSION), (SESSION, NEUTRAL)])
def test_same_command_from_both_routes_counts_once(first: str, second: str) -> None:
    d = RouteDedup()
    assert d.is_duplicate(first, "ls /nonexistent", True, T0) is False
    assert d.is_duplicate(second, "ls /nonexistent", True, T0 + WINDOW_S) is True


def test_each_record_matches_at_most_once() -> None:
    """Five runs seen by both routes: five counted, five duplicates."""
    d = RouteDedup()
    got = []
    for i in range(5):
        got.append(d.is_duplicate(NEUTRAL, "make", True, T0 + i))
        got.append(d.is_duplicate(SESSION, "make", True, T0 + i + 0.4))
    assert got == [False, True] * 5


def test_same_route_twice_is_two_commands() -> None:
    d = RouteDedup()
    assert [d.is_duplicate(NEUTRAL, "make", True, T0) for _ in range(3)] == [False] * 3


@pytest.mark.parametrize("command,failed,ts", [
    ("make test", True, T0 + 1),   # another command
    ("make", False, T0 + 1),       # another outcome
    ("make", True, T0 + WINDOW_S + 0.01),  # outside the window
])
def test_different_records_are_not_duplicates(command: str, failed: bool, ts: float) -> None:
    d = RouteDedup()
    d.is_duplicate(NEUTRAL, "make", True, T0)
    assert d.is_duplicate(SESSION, command, failed, ts) is False


def test_memory_is_bounded() -> None:
    d = RouteDedup()
    for i in range(MAX_PENDING + 500):
        d.is_duplicate(NEUTRAL, f"cmd {i}", True, T0)
    assert d.is_duplicate(SESSION, "cmd 0", True, T0) is False  # forgotten: oldest first
    assert d.is_duplicate(SESSION, f"cmd {MAX_PENDING + 499}", True, T0) is True


def test_unknown_route_kind() -> None:
    with pytest.raises(ValueError, match="route kind 'x'"):
        RouteDedup().is_duplicate("x", "make", True, T0)
