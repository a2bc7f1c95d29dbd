"""Trajectories of the agents used to evaluate models on benchmarks: mini-swe-agent's
``*.traj.json`` and SWE-agent's ``*.traj``, read by ``repeat-failure replay`` (issue 19). No
sidecar follows them live: a trajectory is one JSON document written when the run ends.

The shapes, from the two projects' public documentation (mini-swe-agent "Output files" and its
default observation template; SWE-agent "Output files / Trajectories"):

- mini-swe-agent (``"trajectory_format": "mini-swe-agent-1"`` and ``"mini-swe-agent-1.1"``): a
  ``messages`` list in the chat format, each message possibly with an ``extra`` object. An
  ``assistant`` message holds the model's reply, with exactly one fenced ``bash`` block (the
  action; a reply with none or several gets a format-error message back and runs nothing);
  version 1.1 may give the action as ``extra.actions[0].command`` instead. The next ``user``
  (or ``tool``) message is the observation: ``<returncode>N</returncode>`` and then the output
  (``<output>…</output>``, or ``<output_head>`` / ``<output_tail>`` when long), maybe after an
  ``<exception>`` line. The time is the model response's ``created`` (``extra.response.created``,
  seconds since the epoch), or an ``extra.timestamp``.
- SWE-agent (``*.traj``): a ``history`` list of the same chat messages (an ``assistant`` message
  may name its action in ``action``), besides the per-step ``trajectory``. Its observations
  carry ``<returncode>`` only with an observation template that writes one; a call whose
  observation has none has no known result and gives no ``shell_end`` (it is counted apart by
  replay). Some SWE-agent runs of 2024 (and CodeR's) also hold a ``messages`` list whose items
  are lists of messages (the conversation as sent at each step; seen in public trajectory
  sets, issue 26): ``history`` is read then, since those lists repeat each call once per later
  step.

:func:`read_trajectory` turns one document into ``shell_start`` / ``shell_end`` events in the
order of the messages; ``call_id`` is the assistant message's index.
"""

from __future__ import annotations

import re
from typing import Any

from repeat_failure.backends import (SHELL_END, SHELL_START, ReaderFormatError, SessionEvent,
                              text_blocks)

#: The name ``repeat-failure replay --backend`` takes for these files.
FORMAT = "mini-swe-agent"
#: File names read as trajectories (``Path.glob`` patterns below a directory).
GLOBS = ("**/*.traj.json", "**/*.traj")
SUFFIXES = (".traj.json", ".traj")

# The fences and tags are found with str.find and anchored matches, never with a lazy ``.*?``
# searched over the text: a message with many openings and no closing (an agent that cats a
# trajectory, or a hostile file) made those searches quadratic (8,000 ``<output>`` in 64 KB
# took 3.8 s; a 1 MB observation, many minutes).
_FENCE_OPEN = re.compile(r"```(?:bash|sh)[ \t]*\n")
_FENCE_CLOSE = re.compile(r"\n[ \t]*```")
_RETURNCODE = re.compile(r"<returncode>\s*(-?[0-9]+)\s*</returncode>")
#: Digits of a ``<returncode>`` read as a number; a longer one (no process exits so) is an
#: exit outside 0-255, kept as "failed" like any other (:func:`repeat_failure.rules.pipeline.session_record`).
_MAX_CODE_DIGITS = 18
_OUTPUT_TAGS = ("output_head", "output_tail")


def is_trajectory(name: str) -> bool:
    """True for a file name this module reads (``*.traj.json``, ``*.traj``)."""
    return name.endswith(SUFFIXES)


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if content is None:
        return ""
    return text_blocks(content)


def _time(message: dict[str, Any]) -> float | None:
    """``extra.response.created`` or ``extra.timestamp`` (seconds since the epoch), else None."""
    extra = message.get("extra")
    if not isinstance(extra, dict):
        return None
    response = extra.get("response")
    for value in ((response.get("created") if isinstance(response, dict) else None),
                  extra.get("timestamp")):
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return float(value)
    return None


def _action(message: dict[str, Any]) -> str | None:
    """The command an assistant message runs: ``extra.actions[0].command`` (1.1), SWE-agent's
    ``action``, else its one fenced bash block; None when it runs none (no block, or several:
    mini-swe-agent runs nothing then)."""
    extra = message.get("extra")
    actions = extra.get("actions") if isinstance(extra, dict) else None
    if isinstance(actions, list) and actions:
        first = actions[0]
        command = first.get("command") if isinstance(first, dict) else None
        if isinstance(command, str):
            return command
    action = message.get("action")
    if isinstance(action, str) and action.strip():
        return action
    blocks = _bash_blocks(_text(message), limit=2)
    return blocks[0] if len(blocks) == 1 else None


def _bash_blocks(text: str, limit: int) -> list[str]:
    """The bodies of the first ``limit`` fenced ``bash`` / ``sh`` blocks of ``text``, in
    order (a block: the fence, the language, a newline, the body, a newline, spaces or tabs,
    the closing fence). Linear in ``len(text)``: once no closing fence follows an opening,
    none follows a later one either."""
    blocks: list[str] = []
    pos = 0
    while len(blocks) < limit:
        start = text.find("```", pos)
        if start < 0:
            break
        opened = _FENCE_OPEN.match(text, start)
        if opened is None:
            pos = start + 1
            continue
        closed = _FENCE_CLOSE.search(text, opened.end())
        if closed is None:
            break
        blocks.append(text[opened.end():closed.start()])
        pos = closed.end()
    return blocks


def _tagged(text: str, tag: str, start: int = 0) -> str | None:
    """The body of the first ``<tag>…</tag>`` of ``text`` at or after ``start`` (one leading
    newline dropped), or None when there is none. Linear: one ``find`` for each end."""
    opened = text.find(f"<{tag}>", start)
    if opened < 0:
        return None
    body = opened + len(tag) + 2
    closed = text.find(f"</{tag}>", body)
    if closed < 0:
        return None
    return text[body + (text.startswith("\n", body)):closed]


def _output_parts(text: str) -> list[str]:
    """The bodies of every ``<output_head>…</output_head>`` and ``<output_tail>…</output_tail>``
    of ``text`` in order, not overlapping (one leading newline of each dropped). Linear: each
    tag's next opening is looked for once per block taken, and a tag with no closing left is
    not looked for again."""
    parts: list[str] = []
    pos = 0
    nxt = {tag: text.find(f"<{tag}>") for tag in _OUTPUT_TAGS}
    while True:
        live = [(at, tag) for tag, at in nxt.items() if at >= 0]
        if not live:
            return parts
        at, tag = min(live)
        body = at + len(tag) + 2
        closed = text.find(f"</{tag}>", body)
        if closed < 0:
            nxt[tag] = -1  # no closing after this opening: none after a later one either
            continue
        parts.append(text[body + (text.startswith("\n", body)):closed])
        pos = closed + len(tag) + 3
        for other, other_at in nxt.items():
            if 0 <= other_at < pos:
                nxt[other] = text.find(f"<{other}>", pos)


def _observation(text: str) -> tuple[int, str] | None:
    """``(returncode, output)`` of an observation text, or None without a ``<returncode>``."""
    match = _RETURNCODE.search(text)
    if match is None:
        return None
    parts = _output_parts(text)
    if parts:
        output = "\n".join(parts)
    else:
        found = _tagged(text, "output", match.end())
        output = found if found is not None else text[match.end():]
    digits = match.group(1)
    if len(digits.lstrip("-").lstrip("0")) > _MAX_CODE_DIGITS:
        return (-1 if digits.startswith("-") else 1 << 63), output  # out of range: "failed"
    return int(digits), output


def read_trajectory(doc: Any) -> list[SessionEvent]:
    """The shell events of one trajectory document (``orjson.loads`` of the file): per action
    a ``shell_start`` and, at the next user/tool message, a ``shell_end``: with its exit,
    ``failed`` (exit != 0) and output (the ``<output>`` text, or the head and tail of a long
    one) when the message has a ``<returncode>``, else with ``exit`` and ``failed`` ``None`` (no
    result known: a timeout, or an observation template that writes no return code). ``ts``
    is the assistant message's time, the observation's when it has its own; ``None`` when
    neither has one. Raises :class:`ReaderFormatError` ``unknown_shape`` for a document that
    is not an object with a ``messages`` (mini-swe-agent) or ``history`` (SWE-agent) list, or
    whose messages are not objects. ``messages`` is read when it is a non-empty list of objects,
    else ``history`` when it is a list (SWE-agent, also beside a ``messages`` list of lists),
    else ``messages``."""
    if not isinstance(doc, dict):
        raise ReaderFormatError("unknown_shape", "not a JSON object")
    messages, history = doc.get("messages"), doc.get("history")
    if isinstance(history, list) and not (
            isinstance(messages, list) and messages
            and all(isinstance(m, dict) for m in messages)):
        messages = history
    if not isinstance(messages, list):
        raise ReaderFormatError("unknown_shape", "no messages or history list")
    events: list[SessionEvent] = []
    pending: tuple[int, str, float | None] | None = None  # the action awaiting its observation
    try:
        for index, message in enumerate(messages):
            if not isinstance(message, dict):
                raise ReaderFormatError("unknown_shape", "a message is not an object")
            role = message.get("role")
            if role == "assistant":
                command = _action(message)
                pending = None
                if command is not None:
                    ts = _time(message)
                    pending = (index, command, ts)
                    events.append(SessionEvent(SHELL_START, ts, call_id=str(index),
                                               command=command, tool="bash"))
            elif role in ("user", "tool") and pending is not None:
                call, command, ts = pending
                pending = None
                seen = _observation(_text(message))
                end_ts = _time(message)
                if seen is None:  # no result known (a timeout, a template without one)
                    events.append(SessionEvent(SHELL_END, ts if end_ts is None else end_ts,
                                               call_id=str(call), command=command,
                                               tool="bash"))
                    continue
                code, output = seen
                events.append(SessionEvent(SHELL_END, ts if end_ts is None else end_ts,
                                           call_id=str(call), command=command, exit=code,
                                           failed=code != 0, tool="bash", output=output))
    except ReaderFormatError:
        raise
    except Exception:  # noqa: BLE001 - a shape no check foresaw: still only a reader error
        raise ReaderFormatError("unknown_shape") from None
    return events
