"""Normalization (spec C7, DESIGN.md) and exclusion (C9, C-AC6) on exact strings."""

from __future__ import annotations

import pytest

from sidecar.exclude import Exclusions
from sidecar.normalize import normalize

NOW = 1_764_500_000.0  # 2025-11-30


@pytest.mark.parametrize("raw, expected", [
    ("ls   /nonexistent\n", "ls /nonexistent"),
    ("cat /tmp/claude-1234-cwd", "cat <tmp>"),
    ("rm -rf /var/tmp/build.x && make", "rm -rf <tmp> && make"),
    ("cp a $TMPDIR/b ${TMPDIR}/c", "cp a <tmp> <tmp>"),
    ("ls /tmp", "ls <tmp>"),
    ("ls /tmpfoo /data/tmp/x", "ls /tmpfoo /data/tmp/x"),
    ("git log --since=2025-11-30T10:00:00Z", "git log --since=<ts>"),
    ("grep 2025-11-30 log", "grep <ts> log"),
    ("x 2025-11-30T10:00:00.123+01:00 y", "x <ts> y"),
    ("sleep-until 1764500000", "sleep-until <ts>"),
    ("fetch --since 1764500000123", "fetch --since <ts>"),
    ("echo 1764500000.5", "echo <ts>"),
    ("gh run view 1234567890", "gh run view 1234567890"),   # 2009: older than ten years
    ("gh run view 9999999999", "gh run view 9999999999"),   # 2286: more than a year ahead
    ("id 17645000001", "id 17645000001"),                   # 11 digits: never a time
    ("gh pr view 123", "gh pr view 123"),
    ("gh pr view 456", "gh pr view 456"),
    ("   ", ""),
])
def test_normalize(raw: str, expected: str) -> None:
    """C7: whitespace, tmp paths and timestamps change; nothing else does."""
    assert normalize(raw, "bash", now=NOW) == expected


def test_different_numbers_stay_different() -> None:
    """C-AC3: gh pr view 123 and gh pr view 456 do not compare equal."""
    assert normalize("gh pr view 123", "bash", NOW) != normalize("gh pr view 456", "bash", NOW)


@pytest.mark.parametrize("command, excluded", [
    ("gh pr checks", True),
    ("gh pr checks 123 --watch", True),
    ("gh run watch 99", True),
    ("gh pr checksum", False),
    ("gh pr view 1", False),
    ("echo gh pr checks", False),
])
def test_default_exclusions(command: str, excluded: bool) -> None:
    """C9/C-AC6: an entry matches the command itself or the command plus a space."""
    assert Exclusions(["gh pr checks", "gh run watch"]).matches(command) is excluded


def test_configured_list_replaces_defaults() -> None:
    """C9: a configured list replaces the default one."""
    ex = Exclusions(["make  wait"])
    assert ex.entries == ("make wait",)
    assert ex.matches("make wait 5") and not ex.matches("gh pr checks")
