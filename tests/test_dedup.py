"""Route deduplication (spec C3): a command seen by the neutral route and the session-log route
counts once, whichever arrives first. The real-session test is in tests/test_safeguard.py."""

from __future__ import annotations

import pytest

from harness.evidence import primary
from repeat_failure.sidecar.dedup import MAX_PENDING, NEUTRAL, SESSION, WINDOW_S, RouteDedup

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


def test_real_run_seen_by_both_routes_counts_once(tmp_path, monkeypatch) -> None:
    """C3 on a real run: Claude Code's five `ls /nonexistent` as its session log shows them and
    as the hook recorded them (harness/evidence/claude.json, records with their own times).
    With Claude Code's session log made a route too, each command counts once: 5 failures from
    the session log, the hook's 5 are duplicates, and the note says 5, not 10."""
    import json

    import orjson

    from repeat_failure.sidecar import hook
    from repeat_failure.sidecar.app import Sidecar
    from repeat_failure.backends import session_reader
    from repeat_failure.config import AgentSpec

    evidence_dir = primary()
    evidence = json.loads((evidence_dir / "claude.json").read_text())
    home = tmp_path / "home"
    for rel in evidence["session_files"]:
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_bytes((evidence_dir / "claude" / rel).read_bytes())
    run = evidence["runs"][-1]
    assert run["repeat"] == 5
    shared = tmp_path / "shared"
    hook.prepare_shared_dir(shared)
    with open(hook.records_path(shared, "a1"), "wb") as f:
        for r in run["records"]:
            f.write(orjson.dumps({"v": 1, "ts": r["ts"], "agent": "a1", "backend": "claude",
                                  "route": "bash_env", "exit": r["exit"], "cmd": r["raw"]}) + b"\n")
    monkeypatch.setattr(type(session_reader("claude")), "route_records", True)
    config = tmp_path / "config.yaml"
    config.write_text("repeat_failure:\n  enabled: true\n  collect_grace_s: 0.5\n")
    now = max(r["ts"] for r in run["records"]) + 1
    sc = Sidecar(shared, [AgentSpec("a1", "claude", str(home))], config, clock=lambda: now)
    sc.run_once()
    assert dict(sc.agents["a1"].records) == {
        ("claude", "claude_session_log", "failure"): 5,
        ("claude", "bash_env", "duplicate"): 5,
        ("claude", "bash_env", "excluded"): 2,  # Claude Code's helper shells
    }
    (row,) = sc.rows()
    assert row.message == "Repeating failure: ls /nonexistent failed 5 times in 1 min (exit 2)"
