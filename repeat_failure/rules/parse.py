"""Parse: one raw record line (bytes) into a :class:`Record`, or a rejection with its reason.

The raw record format (C1; written by the hook, docs/neutral-route.md "Guarantees"):
``{"v":1,"ts":<seconds>,"agent":…,"backend":…,"route":…,"exit":<0-255>|null[,"failed":bool]
[,"cut":true],"cmd":…}``, one line of at most 4096 bytes including the newline.

The command text is still raw here (it may hold secrets): a Record must go through
:func:`repeat_failure.rules.scrub.scrub` before its text is stored, logged or exported. Rejection reasons
never carry the line's text for the same reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import orjson

MAX_LINE_BYTES = 4096
RECORD_VERSION = 1
#: Routes that produce records; a record naming another route is malformed (its value becomes a
#: metric label, so it must come from a short fixed list). Backend routes add theirs here.
ROUTES = frozenset({"bash_env"})
#: A record more than this far in the future (seconds) is refused: the hook and the sidecar
#: share the node's clock, and a far-future time would keep a note raised forever.
MAX_CLOCK_SKEW_S = 300.0

# Rejection reasons, the values of records_rejected_total{reason}.
MALFORMED = "malformed"
TORN = "torn"
OVERSIZED = "oversized"
UNREADABLE = "unreadable"
#: A record file others may read or write (mode o+r or o+w), with a second name (a hard link),
#: or owned by a user who is neither the sidecar's nor in the records directory's group:
#: refused unread (the hook writes 0660).
INSECURE = "insecure"
REASONS = (MALFORMED, TORN, OVERSIZED, UNREADABLE, INSECURE)


#: How every line the hook writes starts. Inside a record's JSON strings a quote is escaped, so
#: a whole record holds it only at its start: found later in a line, it starts a record written
#: after a fragment (issue 28 item 9).
RECORD_START = b'{"v":1,"ts":'


def salvage(line: bytes | bytearray) -> bytes | None:
    """The record at the end of ``line`` when a fragment comes before it, else None.

    A write cut short (ENOSPC, a file-size limit: the kernel writes what fits) leaves part of a
    line without its newline, and the writer's next record is appended to it; the last
    :data:`RECORD_START` after the line's first byte starts that record. Called only for a line
    that did not parse (or was too long), so whole records cost nothing."""
    i = line.rfind(RECORD_START, 1)
    return bytes(line[i:]) if i > 0 else None


class RecordError(ValueError):
    """A line that is not a valid record; ``reason`` is one of :data:`REASONS`.

    The message says which field is wrong, never what the line contained.
    """

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Record:
    """One shell command an agent ran and how it ended (spec C1).

    ``ts`` is seconds since the epoch. ``exit`` is the exit status 0-255, or ``None`` where the
    route only knows failed/succeeded; ``failed`` is always set (``exit != 0`` when known).
    ``cmd`` is raw until the scrub stage replaces the record. ``cut`` says the hook shortened
    the command to fit one line.
    """

    ts: float
    agent: str
    backend: str
    route: str
    exit: int | None
    failed: bool
    cmd: str
    cut: bool = False


def _field(obj: dict, name: str, kinds: tuple[type, ...]) -> object:
    value = obj.get(name)
    # bool is an int subclass: a true/false where a number belongs is a wrong type.
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise RecordError(MALFORMED, f"field {name!r} missing or of the wrong type")
    return value


def parse_line(line: bytes, agent: str, backend: str, now: float) -> Record:
    """Parse one line (without its newline) from ``records/<agent>.jsonl``.

    Invalid UTF-8 is decoded with U+FFFD replacement (bash passes any bytes through). The
    record's ``agent`` and ``backend`` must be the file's agent and that agent's configured
    backend: the file's name and permissions, not the text inside it, say whose command it was.
    ``now`` is the current time (seconds since the epoch).

    Raises :class:`RecordError` with reason ``oversized`` (longer than 4095 bytes) or
    ``malformed`` (not JSON, not an object, wrong version, a field missing or of the wrong type,
    a non-finite or negative ``ts`` or one more than :data:`MAX_CLOCK_SKEW_S` ahead of ``now``,
    an exit status outside 0-255, another agent or backend, a route not in :data:`ROUTES`).
    """
    if len(line) >= MAX_LINE_BYTES:
        raise RecordError(OVERSIZED, f"line of {len(line) + 1} bytes exceeds {MAX_LINE_BYTES}")
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        try:
            obj = orjson.loads(line.decode("utf-8", errors="replace"))
        except orjson.JSONDecodeError:
            raise RecordError(MALFORMED, "not valid JSON") from None
    if not isinstance(obj, dict):
        raise RecordError(MALFORMED, "not a JSON object")
    # Each field is checked in the order the rejection messages promise. The values orjson
    # gives have exact types (no subclasses), so ``type(x) is T`` takes the usual path and
    # anything else goes through _field, which raises for a wrong type or passes the value on.
    get = obj.get
    version = get("v")
    if version != RECORD_VERSION or type(version) is bool:
        raise RecordError(MALFORMED, f"field 'v' is not {RECORD_VERSION}")
    ts = get("ts")
    if type(ts) is not float:
        ts = _field(obj, "ts", (int, float))
    ts = float(ts)  # type: ignore[arg-type]
    if not math.isfinite(ts) or ts < 0:
        raise RecordError(MALFORMED, "field 'ts' is not a finite time")
    if ts > now + MAX_CLOCK_SKEW_S:
        raise RecordError(MALFORMED, "field 'ts' is in the future")
    rec_agent = get("agent")
    if type(rec_agent) is not str:
        rec_agent = _field(obj, "agent", (str,))
    if rec_agent != agent:
        raise RecordError(MALFORMED, "field 'agent' does not match the record file")
    rec_backend = get("backend")
    if type(rec_backend) is not str:
        rec_backend = _field(obj, "backend", (str,))
    if rec_backend != backend:
        raise RecordError(MALFORMED, "field 'backend' is not the agent's backend")
    route = get("route")
    if type(route) is not str:
        route = _field(obj, "route", (str,))
    if route not in ROUTES:
        raise RecordError(MALFORMED, "field 'route' is not a known route")
    cmd = get("cmd")
    if type(cmd) is not str:
        cmd = _field(obj, "cmd", (str,))
    exit_status = get("exit")
    if exit_status is None:
        failed = _field(obj, "failed", (bool,))
    else:
        if type(exit_status) is not int:
            exit_status = _field(obj, "exit", (int,))
        if not 0 <= exit_status <= 255:  # type: ignore[operator]
            raise RecordError(MALFORMED, "field 'exit' is outside 0-255")
        failed = exit_status != 0
    cut = get("cut", False)
    if type(cut) is not bool:
        raise RecordError(MALFORMED, "field 'cut' is not a boolean")
    return Record(
        ts=ts,
        agent=rec_agent,  # type: ignore[arg-type]
        backend=backend,
        route=route,  # type: ignore[arg-type]
        exit=exit_status,  # type: ignore[arg-type]
        failed=bool(failed),
        cmd=cmd,  # type: ignore[arg-type]
        cut=cut,
    )
