"""Normalize: turn a scrubbed command into the text "same command" is judged on (spec C7).

Steps, in order: strip the backend's wrapper (:mod:`repeat_failure.backends`); replace paths under
``/tmp``, ``/var/tmp`` and ``$TMPDIR`` with ``<tmp>``; replace timestamps with ``<ts>`` (ISO-8601
dates and date-times, and 10-digit second or 13-digit millisecond Unix times that fall between
ten years before and one year after ``now``, so most IDs that happen to have ten digits stay);
collapse runs of whitespace to one space. Nothing else changes: ``gh pr view 123`` and
``gh pr view 456`` stay different (the spec forbids Hive's fleetreport.NormalizeMessage blur).
"""

from __future__ import annotations

import hashlib
import os
import re
import time

from repeat_failure.backends import wrapper_stripper

TMP = "<tmp>"
TS = "<ts>"

_YEAR_S = 365.25 * 86400
# Characters that end a path in shell text: whitespace, quotes, and shell operators.
_PATH_TAIL = r"(?:/[^\s'\"`;|&<>()]*)?"
_ISO = re.compile(
    r"(?<![0-9])\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])"
    r"(?:[Tt ](?:[01]\d|2[0-3]):[0-5]\d(?::[0-5]\d(?:[.,]\d+)?)?(?:[Zz]|[+-](?:[01]\d|2[0-3]):?[0-5]\d)?)?"
    r"(?![0-9])"
)
_UNIX = re.compile(r"(?<![0-9.])(\d{13}|\d{10}(?:\.\d{1,9})?)(?![0-9])")


# Four and ten digits in a row: a text without them holds no ISO date (_ISO) or Unix time
# (_UNIX), and searching for these is several times cheaper than running those patterns. In an
# ASCII text ``\d`` is ``[0-9]``, which the engine scans for far faster than the Unicode class.
_DIGITS4 = re.compile(r"\d{4}")
_DIGITS10 = re.compile(r"\d{10}")
_ASCII_DIGITS4 = re.compile(r"[0-9]" * 4)
_ASCII_DIGITS10 = re.compile(r"[0-9]" * 10)


def _tmp_pattern() -> tuple[re.Pattern[str], tuple[str, ...]]:
    """The tmp-path pattern and its needles: every match holds one of the needles (the roots'
    literal text: ``/tmp`` is in ``/var/tmp``, ``TMPDIR`` in both ``$TMPDIR`` forms)."""
    roots = [r"/var/tmp", r"/tmp", r"\$\{TMPDIR\}", r"\$TMPDIR\b"]
    needles = ["/tmp", "TMPDIR"]
    tmpdir = os.environ.get("TMPDIR", "").rstrip("/")
    if tmpdir and tmpdir not in ("/tmp", "/var/tmp") and tmpdir.startswith("/") and len(tmpdir) > 1:
        roots.insert(0, re.escape(tmpdir))
        needles.append(tmpdir)
    pattern = re.compile(r"(?<![\w./-])(?:" + "|".join(roots) + r")(?![\w.-])" + _PATH_TAIL)
    return pattern, tuple(needles)


_TMP, _TMP_NEEDLES = _tmp_pattern()


def _unix_time(match: re.Match[str], low: float, high: float) -> str:
    text = match.group(1)
    seconds = float(text) / 1000.0 if len(text) == 13 else float(text)
    return TS if low <= seconds <= high else text


def normalize(command: str, backend: str, now: float | None = None) -> str:
    """Return the normalized form of ``command`` (already scrubbed) run on ``backend``.

    ``now`` (seconds since the epoch, default the current time) bounds which 10/13-digit numbers
    count as Unix times. Returns ``""`` for a command that is only whitespace. Never raises.
    """
    stripper = wrapper_stripper(backend)
    if stripper is not None:
        command = stripper(command)
    for needle in _TMP_NEEDLES:
        if needle in command:
            command = _TMP.sub(TMP, command)
            break
    ascii_ = command.isascii()
    if (_ASCII_DIGITS4 if ascii_ else _DIGITS4).search(command) is not None:
        command = _ISO.sub(TS, command)
        if (_ASCII_DIGITS10 if ascii_ else _DIGITS10).search(command) is not None:
            if now is None:
                now = time.time()
            low, high = now - 10 * _YEAR_S, now + _YEAR_S
            command = _UNIX.sub(lambda m: _unix_time(m, low, high), command)
    return " ".join(command.split())


#: Longest command text shown in a label or a message (docs/metrics.md "Series").
MAX_COMMAND_CHARS = 200
#: The mark ending a command the route cut short (:func:`mark_cut`).
CUT_MARK = re.compile(r" \[cut:[0-9a-f]{12}\]\Z")


def mark_cut(command: str, kept: str, key: bytes) -> str:
    """A cut record's command made distinct: ``command`` (its text scrubbed with ``cut=True``,
    which redacts the last word, and normalized) plus `` [cut:<12 hex digits>]``, a digest of
    ``kept`` (the same text scrubbed as a whole command and normalized: the cut's last word
    included) keyed with ``key`` (the agent's random key, kept in its state file).

    Issue 17: the cut takes the head of the last word, which may be a secret's, so it is never
    shown; but without it two long commands that differ only there (``ls /nonexistent_aaa…``
    and ``ls /other_dir_bbb…``, 100 KB each) both became ``ls [REDACTED]`` and one note
    counted both. The digest tells them apart and shows nothing of the text: it is keyed
    (BLAKE2b's keyed mode), so a guess at a short secret head cannot be checked against it,
    and 48 bits keep 10,000 commands apart (a collision about once in 5 million agents)."""
    digest = hashlib.blake2b(kept.encode("utf-8", "surrogatepass"), key=key,
                             digest_size=6).hexdigest()
    return f"{command} [cut:{digest}]"


def command_label(command: str) -> str:
    """``command`` cut to at most 200 characters, the last being ``…`` when cut: the form used
    in metric labels, row messages and log lines. A cut record's mark (:func:`mark_cut`) is
    kept after the ``…``, so two cut commands with the same first 200 characters keep two
    labels."""
    if len(command) <= MAX_COMMAND_CHARS:
        return command
    mark = CUT_MARK.search(command)
    if mark is not None:
        return command[: MAX_COMMAND_CHARS - len(mark.group()) - 1] + "…" + mark.group()
    return command[: MAX_COMMAND_CHARS - 1] + "…"


# -- command output (issue 19) -------------------------------------------------------------------

#: Output labels of a note (``hive_repeat_failure_note{output}``, ``/status``): whether the
#: failures now in its window had the same output every time, changing output, or unknown
#: (a route that gives no output: the neutral route).
SAME, CHANGING, UNKNOWN = "same", "changing", "unknown"
OUTPUTS = (SAME, CHANGING, UNKNOWN)
#: Characters of an output kept for its digest: the first and the last this many, with the
#: length of the whole (:func:`cut_output`). Outputs of one failing command rarely differ only
#: in their middle, and the sidecar holds the outputs of a whole poll of a session log at once
#: (a SQLite backfill reads thousands of rows): 16 KiB per failure at most.
OUTPUT_EDGE_CHARS = 8 << 10
#: Room for the length mark between the two edges, so that a cut output is never cut again.
_CUT_MARK_CHARS = 32
HEX = "<hex>"
DUR = "<dur>"
SEED = "<seed>"
PID = "<pid>"
PORT = "<port>"
_HEX_ADDR = re.compile(r"(?<![0-9A-Za-z_])0x[0-9a-fA-F]{4,}(?![0-9A-Za-z_])")
# A number with a time unit: "0.52s", "12 ms", "3m2.5s", "1.5 seconds", "(took 120µs)".
_DURATION = re.compile(
    r"(?<![\w.])\d+(?:\.\d+)?\s?(?:ns|us|µs|ms|s|sec|secs|seconds?|m|min|mins|minutes?|h|hours?)"
    r"(?:\s?\d+(?:\.\d+)?\s?(?:ms|s|sec|seconds?))?(?![\w])")


# A random or hash seed a test runner prints: "random seed: 12345" (SymPy's runner),
# "PYTHONHASHSEED=3456" / "hash randomization: on (PYTHONHASHSEED=…)", "Using
# --randomly-seed=1234" (pytest-randomly), "Randomized with seed 4242" (RSpec), "--seed=7"
# (Jest), "-test.shuffle 1700000000" (go test).
_SEED = re.compile(
    r"(?i)(\b(?:random(?:ized)?[ _-]?seed|hash[ _-]?seed|pythonhashseed|randomly-seed"
    r"|seed|test\.shuffle)\b(?: with seed)?\s*(?:[:=]\s*|\s)\s*)\d+\b")
# A process id: "pid 4242", "PID: 4242", "(pid=4242)", "pgid 17", "Killed process 4242".
_PID = re.compile(r"(?i)(\b(?:pid|pgid|ppid|tid|killed process)\b\s*[:=#]?\s*)\d+\b")
# A port a server picked on a local address ("127.0.0.1:43817", "localhost:51234",
# "[::1]:40001", "port 45679"): only ephemeral ports (32768-65535, Linux's
# ip_local_port_range starts at 32768), so a fixed port (":8080", ":5432") stays.
_PORT = re.compile(
    r"(?i)((?:\b(?:localhost|127\.0\.0\.1|0\.0\.0\.0)|\[::1?\]|::1?)\s?:|\bport\s+)"
    r"(3276[89]|327[7-9]\d|32[89]\d\d|3[3-9]\d{3}|[45]\d{4}|6[0-4]\d{3}|65[0-4]\d\d"
    r"|655[0-2]\d|6553[0-5])\b")


# npm's log file name, an ISO-8601 time with "_" for ":" ("2026-12-02T08_21_53_123Z-debug-0.log"),
# which npm prints after an error of its own ("A complete log of this run can be found in: …",
# npm 11.19.1 here for an `npm install` that cannot fetch): replaced before :func:`normalize`,
# whose ISO pattern would take the date alone and leave the time.
_ISO_UNDERSCORE = re.compile(
    r"(?<![0-9])\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])T(?:[01]\d|2[0-3])_[0-5]\d_[0-5]\d"
    r"(?:_\d+)?Z?(?![0-9])")
# A clock time on its own, as a logger or `date` prints it ("[08:21:53]", "Thu Dec  3
# 08:21:53 UTC 2026"), or a duration in clock form ("00:00:01.23"): hours, minutes, seconds. Not
# after a word, ":" or "." (a file's "a.ts:12:34:56" line and column stay).
_CLOCK = re.compile(r"(?<![\w:.])(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:[.,]\d+)?(?![\w:])")


def normalize_output(output: str, now: float | None = None) -> str:
    """The text an output's digest is taken of: what :func:`normalize` does to a command
    (``/tmp`` paths → ``<tmp>``, ISO-8601 and Unix times → ``<ts>``, whitespace collapsed; no
    backend wrapper to strip), plus what differs between runs of one failure while the failure
    stays the same (issue 26): hex addresses of 4 digits or more (``0x7f3a2c1d`` → ``<hex>``,
    as a crash or a Python repr prints them), durations (``0.52s``, ``12 ms``, ``1.5 seconds``
    → ``<dur>``, as test runners print them), random and hash seeds (``random seed: 12345``,
    ``PYTHONHASHSEED=99`` → ``<seed>``), process ids after ``pid``/``pgid``/``ppid``/``tid``
    (``<pid>``) and ephemeral ports (32768-65535) on a local address or after ``port``
    (``<port>``). Everything else is kept: another assertion value, line number or fixed
    port is another output. Times also in npm's log file name (``2026-12-02T08_21_53_123Z``)
    and clock times on their own (``[08:21:53]``, ``00:00:01.23``) → ``<ts>``. Issues 19 and
    26. Never raises."""
    if "_" in output:
        output = _ISO_UNDERSCORE.sub(TS, output)
    text = normalize(output, "", now)
    if ":" in text:
        text = _CLOCK.sub(TS, text)
    if "0x" in text:
        text = _HEX_ADDR.sub(HEX, text)
    text = _DURATION.sub(DUR, text)
    lowered = text.lower()
    if "seed" in lowered or "shuffle" in lowered:
        text = _SEED.sub(lambda m: m.group(1) + SEED, text)
    if "id" in lowered or "killed" in lowered:
        text = _PID.sub(lambda m: m.group(1) + PID, text)
    if ":" in text or "port" in lowered:
        text = _PORT.sub(lambda m: m.group(1) + PORT, text)
    return text


def cut_output(output: str) -> str:
    """``output`` when it has at most ``2 * OUTPUT_EDGE_CHARS`` characters and a little more,
    else its first and last :data:`OUTPUT_EDGE_CHARS` characters around its length
    (``"\n[<n> chars]\n"``). Idempotent: a cut output is returned as it is."""
    if len(output) <= 2 * OUTPUT_EDGE_CHARS + _CUT_MARK_CHARS:
        return output
    return (f"{output[:OUTPUT_EDGE_CHARS]}\n[{len(output)} chars]\n"
            f"{output[-OUTPUT_EDGE_CHARS:]}")


def output_digest(output: str, key: bytes, now: float | None = None) -> int:
    """A 32-bit keyed digest (BLAKE2b keyed with ``key``, the agent's random key) of
    ``output`` scrubbed (:func:`repeat_failure.rules.scrub.scrub`) and normalized (:func:`normalize_output`),
    never 0 (0 stands for "no output known") nor 0xFFFFFFFF (an output awaited). Only the first and last
    :data:`OUTPUT_EDGE_CHARS` characters are read, with the length of the whole
    (:func:`cut_output`). Two failures
    with equal digests had the same output after normalization (a chance collision once in
    4 billion pairs); the digest shows nothing of the text, and keyed, a guess at it cannot be
    checked without the key."""
    from repeat_failure.rules.scrub import scrub

    text = normalize_output(scrub(cut_output(output)), now)
    value = int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), key=key,
                                           digest_size=4).digest(), "big")
    # 0 stands for "unknown" and 0xFFFFFFFF for "awaited" (detector_store.PENDING).
    return min(value, 0xFFFFFFFE) or 1


def output_kind(digests: "list[int] | tuple[int, ...]") -> str:
    """:data:`SAME`, :data:`CHANGING` or :data:`UNKNOWN` for the output digests of a note's
    failures (0: no output known for that failure): ``changing`` when two known digests
    differ; ``same`` when every failure's digest is known and all are equal; otherwise
    ``unknown`` (no digest known, or some known and equal with others unknown)."""
    known = {d for d in digests if d}
    if len(known) > 1:
        return CHANGING
    if known and all(digests):
        return SAME
    return UNKNOWN
