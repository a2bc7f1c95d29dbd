"""Each agent's state file, ``state/<agent>.json`` on the shared volume: what a restart resumes
from (docs/operations.md "Shared volume", issue 17).

One JSON object: ``version`` (:data:`STATE_FILE_VERSION`), ``agent``, ``last_record_ts``,
``collecting`` (the collector's checkpoint: file name → offset handed out), ``activity`` (the
C12 timer), ``turns`` (open turns, the last verdict, ``failed_in_a_row``), ``sessions`` (the
session-log tail's offsets), ``session_calls`` (call ids delivered as records), ``cut_key``
(32 hex digits), ``counters`` (the pipeline's ``records``, ``rejected``, ``notes_raised``) and
``detector`` (its commands, written last, a command at a time). The command text in it is
scrubbed (it is written after the pipeline, and scrubbed again as it is read back).

:class:`StateFile` reads and writes it for an :class:`~repeat_failure.sidecar.agent.AgentState`;
a file that cannot be used is logged and ignored (the agent starts empty), never raised; a
part of a readable file that cannot be used is left out, and any error a part of it causes
while it is restored is logged ("state file ignored from the part that could not be used",
with the error's class) and never raised (issue 28 item 11: the agent's user can write the
file).
"""

from __future__ import annotations

import logging
import os
import re
import stat
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from repeat_failure.sidecar import hook
from repeat_failure.sidecar.agent import MAX_DELIVERED_CALLS, OUTCOMES, AgentState
from repeat_failure.sidecar.dedup import NEUTRAL
from repeat_failure.rules.detector import StateError
from repeat_failure.rules.parse import REASONS, ROUTES
from repeat_failure.rules.scrub import scrub
from repeat_failure.rules.terminal import json_bytes
from repeat_failure.turns.verdict import VERDICTS

log = logging.getLogger("repeat_failure")

STATE_FILE_VERSION = 1
#: A state file larger than this is ignored unread (logged "state file ignored"). Parsing
#: (orjson) peaks at 3 to 5 times the file's size on top of the process (about 30 MiB), so a
#: file of 8 MiB restarts at under 70 MiB, well inside the chart's 96Mi memory limit. What the
#: sidecar saves always loads: the detector's bounds (MAX_COMMAND_BYTES of command text, about
#: 60 bytes per command besides, MAX_FAILURES failure times of at most about 35 bytes with
#: their exit key) and the other parts' bounds (session call ids, session files) keep the
#: largest state they allow at about 7 MiB (tests/test_memory.py), and a state that would
#: still be larger forgets its least recently failed commands until it fits (issue 17).
MAX_STATE_BYTES = 8 << 20


class StateFile:
    """The state files under ``directory`` (the shared dir's ``state/``), one per agent.

    ``restore_collecting`` receives the saved collector checkpoint (a dict, file name →
    offset) while a state file is loaded (:meth:`repeat_failure.sidecar.collector.Collector.restore`).
    ``report`` acts on the detector events a save causes: when the state would be over
    :data:`MAX_STATE_BYTES`, the least recently failed commands are forgotten and the notes
    they held are cleared (the record pipeline's
    :meth:`~repeat_failure.sidecar.records.RecordPipeline.report`)."""

    def __init__(self, directory: Path, restore_collecting: Callable[[dict], None],
                 report: Callable[[AgentState, list], None]) -> None:
        self.directory = directory
        self._restore_collecting = restore_collecting
        self._report = report

    def path(self, agent: str) -> Path:
        """``<directory>/<agent>.json``."""
        return self.directory / f"{agent}.json"

    def remove(self, agent: str) -> None:
        """Delete the agent's state file (the check turned off); absent is fine. Raises
        ``OSError`` for any other failure."""
        try:
            self.path(agent).unlink()
        except FileNotFoundError:
            pass

    def load(self, state: AgentState, now: float | None = None) -> None:
        """Restore the agent's saved state, if any. A file over ``MAX_STATE_BYTES`` is ignored
        without being parsed, as is one that is unreadable, not a regular file or not JSON (the
        agent starts empty); the detector restores only the newest commands that fit in its
        bounds (``Detector.load_dict``), and says how many it left out. Failures saved while
        awaiting their output await it again from ``now`` (epoch seconds; ``None``: they load
        with it unknown), and the route match that gives it is remembered again (issue 26)."""
        path = self.path(state.spec.name)
        try:
            raw = _read_regular(path, MAX_STATE_BYTES)
            data = orjson.loads(raw)
        except FileNotFoundError:
            return
        except (OSError, orjson.JSONDecodeError) as exc:
            log.warning("state file ignored: unreadable, not a regular file, too big or not JSON",
                        extra={"agent": state.spec.name, "error": exc.__class__.__name__})
            return
        finally:
            raw = None  # type: ignore[assignment]  # the parsed objects are all that is needed from here on
        try:
            if not isinstance(data, dict) or data.get("version") != STATE_FILE_VERSION:
                raise StateError(f"not a version {STATE_FILE_VERSION} state file")
            detector = data.get("detector")
            if isinstance(detector, dict) and isinstance(detector.get("commands"), list):
                # Re-scrub: a state written by an older, leakier scrubber must not export its text.
                for item in detector["commands"]:
                    if isinstance(item, dict) and isinstance(item.get("command"), str):
                        item["command"] = scrub(item["command"])
            left_out = state.detector.load_dict(detector, now)
            # The session log's line of an awaited failure finds it as it would have before the
            # restart (records.RecordPipeline.record / session_output).
            routes = state.dedup if state.session_route else state.outputs
            for command, key, ts in state.detector.awaited():
                routes.match(NEUTRAL, command, True, ts, key)
            data.pop("detector", None)
            detector = None  # what load_dict did not keep can go now
            if left_out:
                log.warning("state file: commands over the detector's memory bound not restored",
                            extra={"agent": state.spec.name, "commands": left_out})
            collecting = data.get("collecting")
            if isinstance(collecting, dict):
                self._restore_collecting(collecting)
            state.activity.load_dict(data.get("activity"))
            load_counters(state, data.get("counters"))
            cut_key = data.get("cut_key")
            if isinstance(cut_key, str) and re.fullmatch(r"[0-9a-f]{32}", cut_key):
                state.cut_key = bytes.fromhex(cut_key)
            load_turns(state, data.get("turns"))
            calls = data.get("session_calls")
            if isinstance(calls, list):
                for call_id in calls[-MAX_DELIVERED_CALLS:]:
                    if isinstance(call_id, str):
                        state.delivered_calls[call_id] = None
            if state.tail is not None:
                state.tail.load_dict(data.get("sessions"))
            last = data.get("last_record_ts")
            state.last_record_ts = float(last) if isinstance(last, (int, float)) else None
        except StateError as exc:
            log.warning("state file ignored", extra={"agent": state.spec.name, "error": str(exc)})
        except Exception as exc:  # noqa: BLE001 - issue 28 item 11: the agent's user can write
            # the file; a shape no check above foresaw must not crash-loop the sidecar. What was
            # restored before the part that failed stays (each part is checked as it loads).
            log.warning("state file ignored from the part that could not be used",
                        extra={"agent": state.spec.name, "error": exc.__class__.__name__})

    def save(self, state: AgentState) -> None:
        """Write the agent's scrubbed state; a failure (a full disk) is logged and retried at the
        next pass, and never stops the collected raw files from being deleted. On success
        ``state.dirty`` is False and ``state.saved_counts`` holds the counters written; either
        way ``state.saved_at`` is the monotonic time of this attempt."""
        data = {"version": STATE_FILE_VERSION, "agent": state.spec.name,
                "last_record_ts": state.last_record_ts, "collecting": state.checkpoint,
                "activity": state.activity.to_dict(),
                "turns": {**state.turns.to_dict(), "last_verdict": state.last_verdict,
                          "failed_in_a_row": state.failed_in_a_row},
                "sessions": state.tail.to_dict() if state.tail is not None else {},
                "session_calls": list(state.delivered_calls),
                "cut_key": state.cut_key.hex(),
                "counters": {"records": [[*key, n] for key, n in state.records.items()],
                             "rejected": dict(state.rejected),
                             "notes_raised": state.notes_raised}}
        state.saved_at = time.monotonic()
        try:
            out = state_bytes(state, data)
            if len(out) > MAX_STATE_BYTES:
                # Unreachable within the bounds (see MAX_STATE_BYTES); were it reached, a file
                # too big to load would lose every note at the next restart.
                events = state.detector.evict_oldest(len(out) - MAX_STATE_BYTES)
                log.warning("state over its size bound: the least recently failed commands are "
                            "forgotten", extra={"agent": state.spec.name, "bytes": len(out),
                                                "limit": MAX_STATE_BYTES})
                self._report(state, events)
                out = state_bytes(state, data)
            path = self.path(state.spec.name)
            _clear_path(state, path)
            hook.write_atomic(path, out, 0o600)
        except (OSError, TypeError, ValueError) as exc:  # TypeError: orjson met unexpected data
            log.error("state file not saved; open notes survive a restart only once it is, and "
                      "the collected record files are kept until then",
                      extra={"agent": state.spec.name, "error": str(exc)})
            return
        state.dirty = False
        state.saved_counts = (dict(state.records), dict(state.rejected), state.notes_raised)


def state_bytes(state: AgentState, data: dict) -> bytearray:
    """The state file's bytes: ``data`` (a dict orjson can write, without ``"detector"``) plus
    the detector under ``"detector"``, in one buffer the detector is appended to a command at
    a time (:meth:`Detector.iter_json`): no dict per command, no second copy of the text
    (issue 6, memory). Every unprintable character (a bidi override, a C1 control, DEL: orjson
    escapes C0 controls only) is written as its ``\\uXXXX`` escape (:func:`json_bytes`), so the
    file is safe to print and loads as the same text (issue 28 item 20); each piece is whole
    UTF-8, the detector's split between commands. Raises ``TypeError`` for data orjson cannot
    write."""
    out = bytearray(json_bytes(orjson.dumps(data))[:-1])
    out += b',"detector":'
    for piece in state.detector.iter_json():
        out += json_bytes(piece)
    out += b"}"
    return out


def load_counters(state: AgentState, data: object) -> None:
    """Restore the pipeline's counters from the state file's ``counters`` (what
    :meth:`StateFile.save` wrote); an entry of another shape, or naming another backend, an
    unknown route, outcome or reason, is left out (its count starts again at zero)."""
    if not isinstance(data, dict):
        return
    backend = state.spec.backend
    routes = ROUTES | {f"{backend}_session_log"}

    def count(value: object) -> int | None:
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        return value if ok else None  # type: ignore[return-value]

    records = data.get("records")
    for item in records if isinstance(records, list) else ():
        if (isinstance(item, list) and len(item) == 4 and item[0] == backend
                and isinstance(item[1], str) and item[1] in routes
                and isinstance(item[2], str) and item[2] in OUTCOMES
                and count(item[3]) is not None):
            state.records[(item[0], item[1], item[2])] = item[3]
    rejected = data.get("rejected")
    for reason, n in (rejected.items() if isinstance(rejected, dict) else ()):
        if isinstance(reason, str) and reason in REASONS and count(n) is not None:
            state.rejected[reason] = n
    state.notes_raised = count(data.get("notes_raised")) or 0
    state.saved_counts = (dict(state.records), dict(state.rejected), state.notes_raised)


def load_turns(state: AgentState, data: object) -> None:
    """Restore the turn tracker and the last verdict from the state file's ``turns``; a
    ``last_verdict`` that is no verdict, or a ``failed_in_a_row`` that is not a count, is left
    as it was."""
    if not isinstance(data, dict):
        return
    state.turns.load_dict(data)
    if data.get("last_verdict") in VERDICTS:
        state.last_verdict = data["last_verdict"]
    n = data.get("failed_in_a_row")
    if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
        state.failed_in_a_row = n


def _clear_path(state: AgentState, path: Path) -> None:
    """Move a directory standing at the state file's path aside to
    ``state/.<agent>.json.foreign.<ns>`` (no rename can replace a directory, so every save
    would fail), as :func:`hook.prepare_shared_dir` does with a planted folder. Anything
    else there (a symlink, a FIFO) the save's rename replaces without following it.
    Raises ``OSError`` when it cannot be moved."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        return
    aside = path.with_name(f".{path.name}.foreign.{time.time_ns()}")
    os.rename(path, aside)
    log.warning("a directory stood at the state file's path; moved aside",
                extra={"agent": state.spec.name, "moved_to": aside.name})


def _read_regular(path: Path, limit: int) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes; never follows a
    symlink or blocks on a FIFO. Raises ``FileNotFoundError`` or another ``OSError``."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            raise OSError(f"{path} is not a regular file of at most {limit} bytes")
        data = f.read(limit + 1)
        if len(data) > limit:  # it grew after its size was checked
            raise OSError(f"{path} is over {limit} bytes")
        return data
