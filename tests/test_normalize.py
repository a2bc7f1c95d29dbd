"""Normalization (spec C7, README.md "How it works") and exclusion (C9, C-AC6) on exact strings."""

from __future__ import annotations

import pytest

from repeat_failure.rules.exclude import Exclusions
from repeat_failure.rules.normalize import normalize

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


# -- command output (issue 19) -------------------------------------------------------------------

from repeat_failure.rules.normalize import (cut_output, normalize_output, output_digest,  # noqa: E402
                               output_kind)

KEY = bytes(range(16))


@pytest.mark.parametrize("a, b", [
    ("FAILED tests/test_x.py::test_a - 1 failed in 0.52s",
     "FAILED tests/test_x.py::test_a - 1 failed in 1.07s"),
    ("<Foo object at 0x7f3a9c2d1e50>", "<Foo object at 0x7f3a9c2d2f10>"),
    ("error at 2026-12-01T10:00:01Z: timeout", "error at 2026-12-02T11:30:00Z: timeout"),
    ("cannot open /tmp/pytest-of-root/pytest-12/x", "cannot open /tmp/pytest-of-root/pytest-13/x"),
    ("took 12 ms", "took 130 ms"), ("a  b\n", "a b"),
    # issue 26: seeds, process ids and ports a server picked
    ("random seed:        41938372", "random seed:        10523561"),
    ("hash randomization: on (PYTHONHASHSEED=2835917024)",
     "hash randomization: on (PYTHONHASHSEED=17)"),
    ("Using --randomly-seed=1234567", "Using --randomly-seed=98"),
    ("Randomized with seed 4242", "Randomized with seed 31337"),
    ("Killed process 4242 (python)", "Killed process 5151 (python)"),
    ("worker (pid=4242) died", "worker (pid=77) died"), ("PID: 99 exited", "PID: 1234 exited"),
    ("listening on 127.0.0.1:43817", "listening on 127.0.0.1:59001"),
    ("GET http://localhost:51234/x 500", "GET http://localhost:40001/x 500"),
    ("[::1]:40001 refused", "[::1]:61000 refused"), ("port 45679 in use", "port 33000 in use"),
    # npm's log file name (printed after an npm error: npm 11.19.1, an install that cannot
    # fetch), clock times a logger or `date` prints, and a duration in clock form
    ("npm ERR! A complete log of this run can be found in: "
     "/root/.npm/_logs/2026-12-02T08_21_53_123Z-debug-0.log",
     "npm ERR! A complete log of this run can be found in: "
     "/root/.npm/_logs/2026-12-02T09_02_17_456Z-debug-0.log"),
    ("[08:21:53] Error: build failed", "[08:22:10] Error: build failed"),
    ("Thu Dec  3 08:21:53 UTC 2026: failed", "Thu Dec  3 08:22:07 UTC 2026: failed"),
    ("Elapsed: 00:00:01.23", "Elapsed: 00:00:02.71"),
])
def test_outputs_that_differ_only_in_run_noise_have_one_digest(a: str, b: str) -> None:
    """Durations, hex addresses, times, temp paths and whitespace are normalized away; so are
    random and hash seeds, process ids and ephemeral ports on a local address (issue 26)."""
    assert normalize_output(a) == normalize_output(b)
    assert output_digest(a, KEY) == output_digest(b, KEY)


@pytest.mark.parametrize("a, b", [
    ("E   assert 3 == 4", "E   assert 5 == 4"), ("exit 0x1", "exit 0x2"),
    ("tests/test_x.py:12: AssertionError", "tests/test_x.py:14: AssertionError"),
    # fixed ports, and numbers beside words that only look like the noise, stay
    ("bind 0.0.0.0:8080 failed", "bind 0.0.0.0:8081 failed"),
    ("connect localhost:5432 refused", "connect localhost:5433 refused"),
    ("seeds 3 items", "seeds 4 items"), ("valid 12345", "valid 12346"),
    ("example.com:40001 refused", "example.com:40002 refused"),
    # a line and column, a version, a ratio: not clock times
    ("src/a.ts:12:34: error", "src/a.ts:12:35: error"),
    ("src/a.ts:12:34:56 x", "src/a.ts:12:34:57 x"),
    ("ratio 1:2:3", "ratio 1:2:4"),
])
def test_outputs_that_really_differ_keep_apart(a: str, b: str) -> None:
    """What the agent changed stays: other values, other line numbers, short hex numbers."""
    assert output_digest(a, KEY) != output_digest(b, KEY)


def test_digest_is_keyed_bounded_and_never_zero() -> None:
    """Another key gives another digest (a guess cannot be checked without the key); a secret
    in the output is scrubbed first (two outputs differing only in a token are the same);
    megabytes are read at their edges only; 0 is never a digest."""
    text = "Error: bad credentials"
    assert output_digest(text, KEY) != output_digest(text, bytes(16))
    token = "ghp_" + "A" * 36
    other = "ghp_" + "B" * 36
    assert (output_digest(f"auth {token} refused", KEY)
            == output_digest(f"auth {other} refused", KEY))
    big = "x" * (1 << 20)
    assert output_digest(big + "a" + big, KEY) == output_digest(big + "b" + big, KEY)
    assert output_digest(big + "a", KEY) != output_digest(big + "b", KEY)
    assert output_digest(big + "a", KEY) != output_digest(big + "xa", KEY)  # the length counts
    cut = cut_output(big + "a")
    assert len(cut) < 17_000 and cut_output(cut) == cut and cut.endswith("xa")
    assert cut_output("short") == "short"
    assert all(output_digest(str(i), KEY) for i in range(1000))
    assert (output_kind([3, 3]), output_kind([3, 4]), output_kind([3, 0]), output_kind([])) == (
        "same", "changing", "unknown", "unknown")
