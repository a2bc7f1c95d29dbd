"""The detector's store (:mod:`repeat_failure.rules.detector`): how one agent's failures are
held per command, compact because there may be ``MAX_COMMANDS`` commands (issue 6: RSS after
1,000,000 records over 10,000 commands), and how one command is written to and read from the
saved state.

* :class:`Times`: one (command, exit) key's failure times, an ``array('d')`` of epoch seconds,
  sorted, with each failure's output digest beside it;
* :class:`CommandState`: a command's keys with their times, which keys qualified, whether its
  note is raised;
* :func:`saved_item`, :func:`pack_outputs`, :func:`unpack_outputs`, :func:`parse_key`: a
  command's entry in the state file, and back.

No rule lives here: what counts, qualifies, raises or clears a note is the detector's.
"""

from __future__ import annotations

import base64
import bisect
import sys
from array import array
from collections.abc import Iterable, Iterator
from typing import Any, Union, cast

import orjson

#: A failure's key beside its command: the exit number, or :data:`FAILED` when the route gives
#: none.
ExitKey = Union[int, str]
FAILED = "failed"
#: The digest a failure holds while its output is awaited (issue 26): a neutral-route failure
#: of an agent whose session log gives outputs, until that log's line comes or
#: :data:`repeat_failure.rules.detector.OUTPUT_WAIT_S` passes. No output digest takes this
#: value (:func:`repeat_failure.rules.normalize.output_digest`). Saved as it is: a restart
#: awaits the output again (:meth:`repeat_failure.rules.detector.Detector.load_dict`).
PENDING = 0xFFFFFFFF
#: A failure's result beside its command: its exit key and its output digest (0: unknown), or
#: ``None`` for the digest when results are told apart by exit alone (``match_output: false``).
Result = tuple[ExitKey, Union[int, None]]


def text_bytes(command: str) -> int:
    """What ``command`` counts against the detector's ``MAX_COMMAND_BYTES``: the larger of its size in the
    state file (UTF-8, JSON-escaped: a control character takes 6 bytes there) and its size in
    memory (CPython keeps a str at 1, 2 or 4 bytes a character, by its widest one), so that
    neither exceeds the bound."""
    try:
        size = len(orjson.dumps(command)) - 2  # without the quotes
    except TypeError:  # a lone surrogate, which orjson refuses: the most any text can take
        return 6 * len(command)
    if command.isascii():
        return size
    widest = max(map(ord, command))
    return max(size, len(command) * (1 if widest < 0x100 else 2 if widest < 0x10000 else 4))


def exit_key(exit_status: int | None) -> ExitKey:
    """The detector key for a record's exit: the number, or ``"failed"`` when there is none."""
    return FAILED if exit_status is None else exit_status


class Times(array):
    """The failure times of one (command, exit) key: an ``array('d')`` of epoch seconds, sorted,
    and beside it ``outs``, each failure's output digest (:func:`repeat_failure.rules.normalize.output_digest`,
    an ``array('I')``, 0 where unknown), or ``None`` while no failure of the key has a known
    output (the neutral route's case: no memory spent). Deleting from the times deletes the
    same digests (``del times[i]`` / ``del times[:n]``), so the two never disagree; add a
    failure with :meth:`put`."""

    __slots__ = ("outs",)
    outs: "array[int] | None"

    def __new__(cls, times: Iterable[float] = (), outs: Iterable[int] | None = None) -> "Times":
        self = cast("Times", super().__new__(cls, "d", times))  # typeshed: array[float]
        self.outs = None
        if outs is not None and any(outs):
            self.outs = array("I", outs)
        return self

    # array takes its arguments in __new__.
    def __init__(self, times: Iterable[float] = (), outs: Iterable[int] | None = None) -> None:
        pass

    def __delitem__(self, index) -> None:
        super().__delitem__(index)
        if self.outs is not None:
            del self.outs[index]

    def put(self, pos: int, ts: float, digest: int = 0) -> None:
        """Insert a failure at ``ts`` with output ``digest`` (0: unknown) at index ``pos``."""
        self.insert(pos, ts)
        if digest and self.outs is None:
            self.outs = array("I", bytes(4 * (len(self) - 1)))
        if self.outs is not None:
            self.outs.insert(pos, digest)

    def set_digest(self, pos: int, digest: int) -> None:
        """Set the output digest of the failure at index ``pos``."""
        if self.outs is None:
            if not digest:
                return
            self.outs = array("I", bytes(4 * len(self)))
        self.outs[pos] = digest

    def digests(self, start: int) -> list[int]:
        """The output digests of the failures from index ``start`` on (0 where unknown,
        :data:`PENDING` where awaited)."""
        n = len(self) - start
        return list(self.outs[start:]) if self.outs is not None else [0] * max(0, n)

    def digest(self, pos: int) -> int:
        """The output digest of the failure at index ``pos`` (0: unknown)."""
        return self.outs[pos] if self.outs is not None else 0

    def of_result(self, digest: int | None, start: int = 0) -> list[float]:
        """The times from index ``start`` on of the failures whose digest is ``digest``; all
        of them but the awaited ones for ``None`` (results told apart by exit alone)."""
        if self.outs is None:
            return list(self[start:]) if not digest else []
        outs = self.outs
        if digest is None:
            return [t for i, t in enumerate(self[start:], start) if outs[i] != PENDING]
        return [t for i, t in enumerate(self[start:], start) if outs[i] == digest]


class CommandState:
    """What the detector keeps per distinct command. There may be ``MAX_COMMANDS`` of them, so
    it is compact (issue 6: RSS after 1,000,000 records over 10,000 commands):

    * the failure times per exit key, in the order the keys first failed (what a dict would
      keep): the first key inline (``key``, ``times``), any further ones in ``more`` (a dict,
      ``None`` while there is one key, the usual case). Times are epoch seconds, sorted, in an
      ``array('d')``: 8 bytes a failure, no float object kept alive per failure. A key is
      never kept with no times;
    * ``qualified``: the results (:data:`Result`: exit key and output digest, or ``None`` for
      the digest when results are told apart by exit alone) that reached the threshold (a
      set), ``None`` when none (no empty set per command);
    * ``raised``: whether the command's note is raised.
    """

    __slots__ = ("key", "times", "more", "qualified", "raised")

    def __init__(self, raised: bool = False) -> None:
        self.key: ExitKey | None = None
        self.times: Times | None = None
        self.more: dict[ExitKey, Times] | None = None
        self.qualified: set[Result] | None = None
        self.raised = raised

    def items(self) -> list[tuple[ExitKey, Times]]:
        """(exit key, times) for every key with failures, in first-failed order."""
        if self.times is None:
            return []
        if self.more is None:
            return [(self.key, self.times)]  # type: ignore[list-item]
        return [(self.key, self.times), *self.more.items()]  # type: ignore[list-item]

    def keys(self) -> list[ExitKey]:
        """The exit keys with failures, in first-failed order."""
        return [key for key, _ in self.items()]

    def count(self) -> int:
        """The failure times held, all keys together."""
        if self.times is None:
            return 0
        if self.more is None:
            return len(self.times)
        return len(self.times) + sum(map(len, self.more.values()))

    def get(self, key: ExitKey) -> Times | None:
        """The failure times of ``key``, or ``None`` when it has none."""
        if self.times is not None and self.key == key:
            return self.times
        return self.more.get(key) if self.more is not None else None

    def holds(self, result: Result) -> bool:
        """Whether a failure of ``result`` is held (an exit-only result: any of its key)."""
        times = self.get(result[0])
        if not times:
            return False
        digest = result[1]
        if digest is None:
            return True
        return digest == 0 if times.outs is None else digest in times.outs

    def add(self, key: ExitKey, times: Times) -> None:
        """Start tracking ``key`` (one without failures so far) with ``times`` (non-empty)."""
        if self.times is None:
            self.key, self.times = key, times
        elif self.more is None:
            self.more = {key: times}
        else:
            self.more[key] = times

    def forget_until(self, ts: float) -> None:
        """Drop the failures at or before ``ts``, and keys left without any."""
        if self.times is None:
            return
        if self.more is None:
            times = self.times
            del times[: bisect.bisect_right(times, ts)]
            if not times:
                self.key = self.times = None
            return
        kept = self.items()
        self.key = self.times = self.more = None
        for key, times in kept:
            del times[: bisect.bisect_right(times, ts)]
            if times:
                self.add(key, times)


def result_text(result: Result) -> str:
    """A result's text in the saved state: the exit key's text (``"2"``, ``"failed"``) when
    told apart by exit alone, else with ``@`` and its output digest in 8 hex digits
    (``"2@00000000"``: output unknown; ``"2@1a2b3c4d"``)."""
    key, digest = result
    return str(key) if digest is None else f"{key}@{digest:08x}"


def parse_result(text: str) -> Result:
    """:func:`result_text` read back; raises :class:`ValueError` for any other text."""
    key, sep, digest = text.partition("@")
    if not sep:
        return parse_key(key), None
    if len(digest) != 8 or digest.strip("0123456789abcdef"):
        raise ValueError("a result's digest is not 8 hex digits")
    return parse_key(key), int(digest, 16)


def saved_item(command: str, state: CommandState) -> dict[str, Any]:
    """One command of :meth:`repeat_failure.rules.detector.Detector.to_dict`: ``command``, ``raised``, ``qualified`` (sorted
    result texts, :func:`result_text`), ``failures`` (key text -> list of epoch seconds) and, when some failure's
    output is known, ``outputs`` (their digests, 0 where unknown, packed in the order of
    ``failures``: :func:`pack_outputs`; issue 19; :data:`PENDING` where awaited)."""
    item = {
        "command": command,
        "raised": state.raised,
        "qualified": sorted(_saved_result(state, r) for r in state.qualified or ()),
        "failures": {str(k): list(v) for k, v in state.items()},
    }
    if any(v.outs is not None and any(v.outs) for _, v in state.items()):
        item["outputs"] = pack_outputs(state.items())
    return item


def _saved_result(state: CommandState, result: Result) -> str:
    """A qualified result's text in the saved state: the exit key alone where every failure of
    that key has the result's digest (read back as the result of the key's newest failure:
    the same), else :func:`result_text`. Keeps the largest state within its load limit
    (tests/test_memory.py)."""
    key, digest = result
    times = state.get(key)
    if digest is None or times is None:
        return str(key)
    outs = times.outs
    if (outs is None and digest == 0) or (outs is not None and min(outs) == max(outs) == digest):
        return str(key)
    return result_text(result)


def pack_outputs(items: list[tuple[ExitKey, Times]]) -> str:
    """Every failure's output digest, in the order of ``failures`` (key by key, time order),
    as base64 of 4-byte big-endian numbers (0: unknown, :data:`PENDING`: awaited): about 5.3 characters a failure, so
    the largest state the bounds allow stays within its load limit (tests/test_memory.py)."""
    packed = bytearray()
    for _, times in items:
        outs = times.outs if times.outs is not None else array("I", bytes(4 * len(times)))
        if sys.byteorder == "little":
            outs = array("I", outs)
            outs.byteswap()
        packed += outs.tobytes()
    return base64.b64encode(bytes(packed)).decode("ascii")


def unpack_outputs(text: Any, counts: list[int]) -> list[list[int]] | None:
    """:func:`pack_outputs` read back, split by the failure ``counts`` of the keys; None when
    ``text`` is not such a packing for those counts (the outputs are then unknown)."""
    if not isinstance(text, str):
        return None
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:
        return None
    if len(raw) != 4 * sum(counts):
        return None
    values = array("I")
    values.frombytes(raw)
    if sys.byteorder == "little":
        values.byteswap()
    out, start = [], 0
    for n in counts:
        out.append(list(values[start:start + n]))
        start += n
    return out


def parse_key(text: str) -> ExitKey:
    """An exit key from its text in the saved state: ``"failed"`` or a number 0-255; raises
    :class:`ValueError` for any other text."""
    if text == FAILED:
        return FAILED
    value = int(text)
    if not 0 <= value <= 255:
        raise ValueError("exit outside 0-255")
    return value


def iter_state_json(version: int, commands: Iterable[tuple[str, CommandState]],
                    chunk_bytes: int) -> Iterator[bytes]:
    """The saved state ``{"version": version, "commands": [saved_item(...), ...]}`` of
    ``commands`` (command, state) as compact JSON, in pieces of about ``chunk_bytes`` bytes (the
    last one shorter): joined, exactly the bytes ``orjson.dumps`` gives for that dict.

    Built one command at a time, so that saving the state of ``MAX_COMMANDS`` commands never
    holds all their dicts at once (a few MiB of small objects that would stay behind as a
    fragmented heap), nor a second copy of the text (about 1 MiB for 10,000 commands) when the
    caller appends the pieces to its own buffer as they come. Raises ``TypeError`` where
    ``orjson.dumps`` would."""
    parts = [b'{"version":%d,"commands":[' % version]
    size = 0
    for i, (command, state) in enumerate(commands):
        part = orjson.dumps(saved_item(command, state))
        parts.append(b"," + part if i else part)
        size += len(part) + 1
        if size >= chunk_bytes:
            yield b"".join(parts)
            parts, size = [], 0
    parts.append(b"]}")
    yield b"".join(parts)
