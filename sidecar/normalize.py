"""Normalize: turn a scrubbed command into the text "same command" is judged on (spec C7).

Steps, in order: strip the backend's wrapper (:mod:`sidecar.backends`); replace paths under
``/tmp``, ``/var/tmp`` and ``$TMPDIR`` with ``<tmp>``; replace timestamps with ``<ts>`` (ISO-8601
dates and date-times, and 10-digit second or 13-digit millisecond Unix times that fall between
ten years before and one year after ``now``, so most IDs that happen to have ten digits stay);
collapse runs of whitespace to one space. Nothing else changes: ``gh pr view 123`` and
``gh pr view 456`` stay different (the spec forbids Hive's fleetreport.NormalizeMessage blur).
"""

from __future__ import annotations

import os
import re
import time

from sidecar.backends import wrapper_stripper

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


def _tmp_pattern() -> re.Pattern[str]:
    roots = [r"/var/tmp", r"/tmp", r"\$\{TMPDIR\}", r"\$TMPDIR\b"]
    tmpdir = os.environ.get("TMPDIR", "").rstrip("/")
    if tmpdir and tmpdir not in ("/tmp", "/var/tmp") and tmpdir.startswith("/") and len(tmpdir) > 1:
        roots.insert(0, re.escape(tmpdir))
    return re.compile(r"(?<![\w./-])(?:" + "|".join(roots) + r")(?![\w.-])" + _PATH_TAIL)


_TMP = _tmp_pattern()


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
    command = _TMP.sub(TMP, command)
    command = _ISO.sub(TS, command)
    if now is None:
        now = time.time()
    low, high = now - 10 * _YEAR_S, now + _YEAR_S
    command = _UNIX.sub(lambda m: _unix_time(m, low, high), command)
    return " ".join(command.split())


#: Longest command text shown in a label or a message (DESIGN.md "Metrics").
MAX_COMMAND_CHARS = 200


def command_label(command: str) -> str:
    """``command`` cut to at most 200 characters, the last being ``…`` when cut: the form used
    in metric labels, row messages and log lines."""
    if len(command) <= MAX_COMMAND_CHARS:
        return command
    return command[: MAX_COMMAND_CHARS - 1] + "…"
