"""The pipeline's per-record rules, shared by the sidecar (:mod:`repeat_failure.sidecar.records`,
:mod:`repeat_failure.sidecar.session_feed`) and
``repeat-failure replay`` (:mod:`repeat_failure.replay.run`), so that a replay says exactly what the sidecar
would (issue 19).

- :func:`session_record`: a finished shell call of a session log → the :class:`Record` the
  sidecar feeds to the detector (the neutral route's size and exit rules).
- :func:`record_command`: a record → the command text the detector counts (scrub, normalize,
  scrub again after a wrapper, the cut mark).
- :func:`failure_output`: a finished shell call's output → its digest, kept for failures only.
"""

from __future__ import annotations

from repeat_failure.backends import SessionEvent, wrapper_stripper
from repeat_failure.rules.normalize import mark_cut, normalize, output_digest
from repeat_failure.rules.parse import MAX_CLOCK_SKEW_S, MAX_LINE_BYTES, Record
from repeat_failure.rules.scrub import scrub


def session_record(event: SessionEvent, agent: str, backend: str, now: float) -> Record | None:
    """The record of a finished shell call (``event``, a ``shell_end`` with its ``ts`` set)
    of agent ``agent`` on ``backend``, held to the neutral route's rules (:mod:`repeat_failure.rules.parse`):
    the command cut to :data:`~repeat_failure.rules.parse.MAX_LINE_BYTES` UTF-8 bytes (and then scrubbed
    as cut), an exit outside 0-255 kept only as "failed", ``route``
    ``<backend>_session_log``. ``None`` for a time more than
    :data:`~repeat_failure.rules.parse.MAX_CLOCK_SKEW_S` ahead of ``now`` (the caller counts it
    ``future_ts``)."""
    ts = float(event.ts or 0.0)
    if ts > now + MAX_CLOCK_SKEW_S:
        return None
    exit_ = event.exit if event.exit is not None and 0 <= event.exit <= 255 else None
    failed = bool(event.failed) if event.failed is not None else bool(event.exit)
    raw = event.command.encode("utf-8", "surrogatepass")
    cut = len(raw) > MAX_LINE_BYTES
    cmd = raw[:MAX_LINE_BYTES].decode("utf-8", "ignore") if cut else event.command
    return Record(ts=ts, agent=agent, backend=backend, route=f"{backend}_session_log",
                  exit=exit_, failed=failed, cmd=cmd, cut=cut)


def record_command(record: Record, now: float, cut_key: bytes) -> str:
    """The command text the detector counts for ``record`` (README.md "How it works"): scrubbed
    (as cut when the route cut it), normalized for its backend at ``now`` (spec C7), scrubbed
    again when the backend has a wrapper (Codex writes each ``'`` as ``'"'"'``, which can hide
    a secret's shape until unwrapped), and for a cut record marked with a digest keyed with
    ``cut_key`` (:func:`repeat_failure.rules.normalize.mark_cut`, issue 17). ``""`` for a command that is
    only whitespace. Never raises."""
    command = normalize(scrub(record.cmd, cut=record.cut), record.backend, now)
    if wrapper_stripper(record.backend) is not None:
        command = scrub(command)
    if record.cut and command:
        command = mark_cut(command, normalize(scrub(record.cmd), record.backend, now), cut_key)
    return command


def failure_output(event: SessionEvent, failed: bool, key: bytes, now: float) -> int:
    """The output digest a failure carries (:func:`repeat_failure.rules.normalize.output_digest`, keyed with
    ``key``): 0 for a success (nothing needs its output) or when the log gives no output."""
    if not failed or event.output is None:
        return 0
    return output_digest(event.output, key, now)
