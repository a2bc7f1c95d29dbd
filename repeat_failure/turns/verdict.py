"""Turn verdicts: was an agent turn a success, or did the CLI exit 0 having done nothing?

Source: seed ``ard-0038-run-health-verdicts.txt`` §1 and §2. Agent CLIs often end a turn with
exit status 0 after an auth hiccup, a refusal or an empty reply, so the exit status alone calls
that a success. A turn is classified from what its session log (or stream-json transcript)
shows, by one backend-neutral rule fed by every reader (:mod:`repeat_failure.backends`): the reader
turns its lines into :class:`~repeat_failure.backends.SessionEvent` values, and this module counts the
turn's text and tool calls, watches for a terminal error, and decides.

Verdicts, in precedence order (the first that applies wins):

==================  ==========================================================================
``agent_error``     the turn ended on an error the CLI or the model provider reported (a
                    terminal stream result carrying an error, an API error logged as the turn's
                    reply): the most specific account of what went wrong, so it comes first.
``nonzero_exit``    the CLI's exit status is known and is not 0 (a killed or crashed run), with
                    no error event to say why. Only where the run's exit is known: the
                    ``repeat-failure verdict`` command is told it; a session log never says it,
                    so the sidecar never gives this verdict.
``agent_no_output`` zero text output **and** zero tool calls over the whole turn (the seed's
                    ``agent_no_output`` class). A turn whose text says "nothing to change" has
                    text, so it is not empty. Text is model text with something other than
                    whitespace in it.
``ok``              none of the above.
==================  ==========================================================================

:data:`EXIT_CODES` gives each verdict the distinct exit status of ``repeat-failure verdict``
(0 for ``ok``), so a CI job can tell "the agent produced nothing" from "the build failed".

:class:`TurnTracker` follows one agent's turns per session file (the event's ``source``): a
``turn_start`` opens a turn, its events are counted, its ``turn_end`` classifies it. A
``turn_start`` arriving while a turn of the same session is open ends that turn first (the CLI
moved on to a new prompt; what it had is classified). A turn whose start the tracker never saw
(it began before the sidecar read the file, or a CLI rewrote a reply after the turn's end) is
classified only when it shows an error: a part of a turn proves neither "no output" nor "ok".
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from repeat_failure.backends import (ERROR, SHELL_START, TEXT, TOOL, TURN_END, TURN_START,
                              ReaderFormatError, SessionEvent, StreamReader, stream_readers)
from repeat_failure.rules.scrub import scrub

OK, AGENT_NO_OUTPUT, AGENT_ERROR, NONZERO_EXIT = "ok", "agent_no_output", "agent_error", \
    "nonzero_exit"
#: Every verdict, in precedence order after ``ok`` (DESIGN-style enumeration for label values).
VERDICTS = (OK, AGENT_ERROR, NONZERO_EXIT, AGENT_NO_OUTPUT)
#: ``repeat-failure verdict``'s exit status per verdict. 1 and 2 stay the command line's own
#: (a transcript that cannot be read, bad usage).
EXIT_CODES = {OK: 0, AGENT_NO_OUTPUT: 3, AGENT_ERROR: 4, NONZERO_EXIT: 5}
#: Characters of a terminal error's text kept (scrubbed) for the audit log line.
MAX_ERROR_CHARS = 300
#: Characters of a raw error text or turn id scrubbed (a longer one is cut first and scrubbed
#: as cut, so the head of a secret at the cut is redacted too).
MAX_RAW_CHARS = 4096
#: Characters of a turn id kept.
MAX_TURN_ID_CHARS = 128
#: Sessions whose open turn is remembered per agent (the oldest forgotten first).
MAX_SESSIONS = 64


def classify(text: int, tools: int, error: bool, exit_status: int | None = None) -> str:
    """The verdict of a turn that showed ``text`` pieces of model text and ``tools`` tool calls
    (shell or any other), ended on an error or not (``error``), and whose CLI exited with
    ``exit_status`` (``None``: not known). Precedence as in the module docstring."""
    if error:
        return AGENT_ERROR
    if exit_status is not None and exit_status != 0:
        return NONZERO_EXIT
    if text == 0 and tools == 0:
        return AGENT_NO_OUTPUT
    return OK


@dataclass(slots=True)
class TurnCounts:
    """What one turn showed so far. ``error`` is the terminal error's text and ``turn_id`` the
    turn's id, both scrubbed (:func:`clean`) as they are added, so nothing raw is kept or saved;
    ``""`` when none. ``errors`` counts error events (a reader may report one error twice, say
    as a message and as a result). ``edits``: tool calls that wrote or edited files (the dev
    surface, for the preview probe). ``seen_start``: the turn's start was seen."""

    text: int = 0
    tools: int = 0
    edits: int = 0
    errors: int = 0
    error: str = ""
    turn_id: str = ""
    seen_start: bool = True

    def add(self, event: SessionEvent, edit_tools: frozenset[str] = frozenset()) -> None:
        """Count one event of the turn (``turn_start``/``turn_end`` are the tracker's)."""
        if event.kind == TEXT:
            self.text += 1
        elif event.kind in (SHELL_START, TOOL):
            self.tools += 1
            if event.tool in edit_tools:
                self.edits += 1
        elif event.kind == ERROR:
            self.errors += 1
            if not self.error:
                self.error = clean(event.detail, MAX_ERROR_CHARS) or "error"
        if event.turn_id and not self.turn_id:
            self.turn_id = clean(event.turn_id, MAX_TURN_ID_CHARS)

    def verdict(self, exit_status: int | None = None) -> str:
        """:func:`classify` of these counts."""
        return classify(self.text, self.tools, self.errors > 0, exit_status)

    def to_list(self) -> list[Any]:
        """The counts as a JSON-ready list (the error text scrubbed: the state file holds only
        scrubbed text)."""
        return [self.text, self.tools, self.edits, self.errors, self.error, self.turn_id,
                self.seen_start]

    @classmethod
    def from_list(cls, data: Any) -> "TurnCounts | None":
        """:meth:`to_list`'s output back, or ``None`` for anything else."""
        if not (isinstance(data, list) and len(data) == 7
                and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                        for n in data[:4])
                and isinstance(data[4], str) and isinstance(data[5], str)
                and isinstance(data[6], bool)):
            return None
        return cls(*data[:4], clean(data[4], MAX_ERROR_CHARS),  # type: ignore[call-arg]
                   clean(data[5], MAX_TURN_ID_CHARS), data[6])


@dataclass(frozen=True, slots=True)
class Turn:
    """A classified turn: its ``verdict``, the session file it came from (``source``), the time
    it ended (``ts``, epoch seconds), what it showed, and ``error``: the terminal error's text,
    scrubbed and cut to :data:`MAX_ERROR_CHARS` (``""`` when none); ``turn_id`` scrubbed."""

    verdict: str
    source: str
    ts: float
    turn_id: str
    text: int
    tools: int
    edits: int
    error: str

    @classmethod
    def from_counts(cls, counts: TurnCounts, source: str, ts: float,
                    exit_status: int | None = None) -> "Turn":
        """The classified turn of ``counts``."""
        return cls(counts.verdict(exit_status), source, ts, counts.turn_id, counts.text,
                   counts.tools, counts.edits, counts.error)


def clean(text: str, limit: int) -> str:
    """``text`` scrubbed (:func:`repeat_failure.rules.scrub.scrub`) and cut to ``limit`` characters (ending
    in ``…`` when cut). A text over :data:`MAX_RAW_CHARS` is cut before it is scrubbed and
    scrubbed as cut (``cut=True``: the head of a secret at the cut is redacted too), so the
    time spent is bounded and no part of a secret survives either cut."""
    if not text:
        return ""
    cut = len(text) > MAX_RAW_CHARS
    text = scrub(text[:MAX_RAW_CHARS] if cut else text, cut=cut)
    return text if len(text) <= limit else text[:limit - 1] + "…"


class TurnTracker:
    """One agent's open turns, per session file, and the turns they become.

    ``edit_tools``: the backend's tool names that write or edit files
    (:attr:`repeat_failure.backends.SessionLogReader.edit_tools`). Feed every session event to
    :meth:`on_event`; it returns the turns the event finished (usually none, at most two).
    JSON-serialisable through :meth:`to_dict` (counts and scrubbed text only)."""

    def __init__(self, edit_tools: frozenset[str] = frozenset()) -> None:
        self.edit_tools = edit_tools
        self.open: dict[str, TurnCounts] = {}  # session source -> the open turn, newest last

    def _finish(self, source: str, ts: float) -> list[Turn]:
        counts = self.open.pop(source, None)
        if counts is None:
            return []
        if not counts.seen_start and not counts.errors:
            # Only the tail of a turn: its output proves nothing about the whole (and a CLI
            # that writes one reply twice, or text before its tool calls, would count a turn
            # twice); an error in it is still the turn's error.
            return []
        return [Turn.from_counts(counts, source, ts)]

    def _opened(self, source: str, counts: TurnCounts) -> TurnCounts:
        self.open[source] = counts
        while len(self.open) > MAX_SESSIONS:
            del self.open[next(iter(self.open))]
        return counts

    def on_event(self, event: SessionEvent) -> list[Turn]:
        """Apply one event (``ts`` and ``source`` set, as :mod:`repeat_failure.sessions.tail` gives
        them); the turns it finished, oldest first."""
        ts = float(event.ts or 0.0)
        if event.kind == TURN_START:
            done = self._finish(event.source, ts)
            self._opened(event.source,
                         TurnCounts(turn_id=clean(event.turn_id, MAX_TURN_ID_CHARS)))
            return done
        if event.kind == TURN_END:
            counts = self.open.get(event.source)
            if counts is None:
                return []  # an end without a start or output seen: nothing to classify
            return self._finish(event.source, ts)
        counts = self.open.get(event.source)
        if counts is None:
            counts = self._opened(event.source, TurnCounts(seen_start=False))
        counts.add(event, self.edit_tools)
        return []

    def to_dict(self) -> dict[str, Any]:
        """The open turns as JSON-ready data."""
        return {"open": {source: counts.to_list() for source, counts in self.open.items()}}

    def load_dict(self, data: Any) -> None:
        """Restore :meth:`to_dict`'s output; malformed entries are ignored."""
        if not isinstance(data, dict) or not isinstance(data.get("open"), dict):
            return
        for source, item in list(data["open"].items())[-MAX_SESSIONS:]:
            counts = TurnCounts.from_list(item)
            if isinstance(source, str) and counts is not None:
                self.open[source] = counts


# -- transcripts (``repeat-failure verdict``) ------------------------------------------------------

#: Lines of a transcript read before its format must be known (leading lines that are not a
#: known format's first line, such as a CLI's warnings on stdout, are skipped up to this many).
DETECT_LINES = 50
#: A transcript line longer than this is skipped and counted (a whole tool output on one line is
#: far smaller).
MAX_TRANSCRIPT_LINE = 16 << 20
#: Bytes of a transcript read at most (issue 28 item 19: ``repeat-failure verdict /dev/zero``
#: read for ever). A long ``claude -p`` run's transcript is a few MB; past this bound reading
#: stops with :class:`TranscriptError`, which names it.
MAX_TRANSCRIPT_BYTES = 1 << 30


#: The error of a transcript with no terminal line, no error and no non-zero exit status.
INCOMPLETE = "the transcript ends before the run's terminal result: the CLI stopped mid-run"


class TranscriptError(ValueError):
    """A transcript that cannot be classified: empty, no JSON line, a format no reader knows,
    or not the format asked for. The message says which."""


@dataclass(frozen=True, slots=True)
class TranscriptVerdict:
    """The verdict of one run's transcript, read as one turn: ``format`` read, ``text`` and
    ``tools`` counted over the whole run, ``error`` (the terminal error's text, scrubbed, ``""``
    when none), ``complete`` (the stream's terminal line was read), ``exit_status`` as given,
    ``lines`` read and ``unrecognised`` lines (not JSON, or a shape the reader does not know;
    skipped). ``format`` is ``None`` when no line could be read as a known format and the
    verdict comes from the exit status (``unreadable`` says why)."""

    verdict: str
    format: str | None
    text: int
    tools: int
    error: str
    complete: bool
    exit_status: int | None
    lines: int
    unrecognised: int
    #: Why the transcript could not be read (``TranscriptError``'s message), when the verdict
    #: comes from the exit status alone (``format`` is then ``None``); ``""`` otherwise.
    unreadable: str = ""

    def to_json(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict (``repeat-failure verdict --json``)."""
        return {"verdict": self.verdict, "format": self.format, "text": self.text,
                "tools": self.tools, "error": self.error, "complete": self.complete,
                "exit_status": self.exit_status, "lines": self.lines,
                "unrecognised": self.unrecognised, "unreadable": self.unreadable,
                "exit_code": EXIT_CODES[self.verdict]}


def bounded_lines(stream: Any, limit: int = MAX_TRANSCRIPT_LINE,
                  total: int | None = None) -> Iterator[bytes]:
    """The lines of the binary file object ``stream`` (``readline``), each at most ``limit``
    bytes held in memory: a longer line is given as ``limit + 1`` bytes of it (which
    :func:`read_transcript` skips as too long) and the rest of it is read and dropped in pieces,
    so a transcript that is one endless line cannot exhaust memory. At most ``total`` bytes
    (default :data:`MAX_TRANSCRIPT_BYTES`) are read in all: past them it raises
    :class:`TranscriptError` naming the bound, so an endless stream (``/dev/zero``) ends."""
    bound = MAX_TRANSCRIPT_BYTES if total is None else total
    read = 0

    def over() -> TranscriptError:
        return TranscriptError(f"the transcript is over {bound:,} bytes (MAX_TRANSCRIPT_BYTES): "
                               "not read further")

    while True:
        line = stream.readline(min(limit + 1, bound - read + 1))
        if not line:
            return
        read += len(line)
        if read > bound:
            raise over()
        if len(line) > limit and not line.endswith(b"\n"):
            while True:  # drop the rest of the line
                rest = stream.readline(min(1 << 20, bound - read + 1))
                read += len(rest)
                if read > bound:
                    raise over()
                if not rest or rest.endswith(b"\n"):
                    break
        yield line


def _detects(reader: StreamReader, obj: Any) -> bool:
    try:
        return bool(reader.detects(obj))
    except Exception:  # noqa: BLE001 - a detector meeting an odd shape says "not mine"
        return False


def _detect(obj: Any, fmt: str | None) -> StreamReader:
    readers = stream_readers()
    if fmt is not None:
        reader = readers.get(fmt)
        if reader is None:
            raise TranscriptError(f"unknown format {fmt!r} (known: {', '.join(sorted(readers))})")
        try:
            mine = reader.detects(obj)
        except Exception:  # noqa: BLE001 - an odd shape: not this format's first line
            mine = False
        if not mine:
            others = [name for name, r in readers.items() if name != fmt and _detects(r, obj)]
            hint = f" (it is a {others[0]} transcript's)" if others else ""
            raise TranscriptError(f"the first JSON line is not a {fmt} transcript's first "
                                  f"line{hint}")
        return reader
    for reader in readers.values():
        if _detects(reader, obj):
            return reader
    raise TranscriptError("no JSON line is the start of a known transcript format "
                          f"(known: {', '.join(sorted(readers))})")


def read_transcript(lines: Iterable[bytes], exit_status: int | None = None,
                    fmt: str | None = None) -> TranscriptVerdict:
    """Classify one run from its transcript ``lines`` (bytes, one JSON object each, newline
    optional), whose CLI exited with ``exit_status`` (``None``: unknown). ``fmt`` names the
    format (a key of :func:`repeat_failure.backends.stream_readers`); by default the first JSON line
    decides. The whole transcript is one turn: text and tool calls are counted over all of it,
    any terminal error counts (a ``claude -p`` run, a ``codex exec`` run, a headless
    ``gemini`` run are each one turn of the agent). A transcript that ends before its terminal
    line, with no error in it and an exit status unknown or 0, is ``agent_error``
    (:data:`INCOMPLETE`): the run did not finish (Gemini CLI 0.61.0 exits 0 when killed); with
    a non-zero exit status it is ``nonzero_exit``.

    A transcript that cannot be read (empty, no JSON line, no known format, or not ``fmt``) is
    still classified when the exit status says enough (seed ard-0038 §1: a non-zero exit is a
    failed turn whatever the transcript holds): ``nonzero_exit`` for a non-zero exit status (an
    agent that crashed before writing anything), ``agent_no_output`` for exit status 0 and no
    line at all but blank ones (the CLI exited 0 having written nothing: zero text, zero tool
    calls); ``format`` is then ``None`` and ``unreadable`` says why it could not be read.

    Raises :class:`TranscriptError` when it cannot be read and the exit status is unknown, or
    is 0 and the transcript holds lines that are not blank (another program's output, a format
    no reader knows: a verdict would hide the misconfiguration). The transcript cannot be read
    when no line is JSON, the format is not recognised within the first :data:`DETECT_LINES`
    lines (or, with ``fmt``, the first JSON line is not that format's first line), or no line
    at all was given."""
    seen = _Seen()
    try:
        return _read_transcript(lines, exit_status, fmt, seen)
    except TranscriptError as exc:
        if exit_status is None or (exit_status == 0 and seen.nonblank):
            raise
        return TranscriptVerdict(
            verdict=NONZERO_EXIT if exit_status else AGENT_NO_OUTPUT, format=None, text=0,
            tools=0, error="", complete=False, exit_status=exit_status, lines=seen.read,
            unrecognised=seen.nonblank, unreadable=str(exc))


@dataclass
class _Seen:
    """What :func:`_read_transcript` got through before it gave up: lines read, non-blank
    ones among them."""

    read: int = 0
    nonblank: int = 0


def _read_transcript(lines: Iterable[bytes], exit_status: int | None, fmt: str | None,
                     seen: _Seen) -> TranscriptVerdict:
    """:func:`read_transcript`'s reading: raises :class:`TranscriptError` for a transcript it
    cannot read, counting into ``seen`` as it goes."""
    reader: StreamReader | None = None
    other_json = False  # a JSON line that starts no known format was seen
    state: dict[str, Any] = {}
    counts = TurnCounts()
    read = unrecognised = 0
    for raw in lines:
        read += 1
        seen.read = read
        if read == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]  # a UTF-8 byte order mark
        if raw.strip():
            seen.nonblank += 1
        if len(raw) > MAX_TRANSCRIPT_LINE or not raw.strip():
            unrecognised += bool(raw.strip())
            continue
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            unrecognised += 1
            if reader is None and read >= DETECT_LINES:
                break
            continue
        if reader is None:
            try:
                reader = _detect(obj, fmt)
            except TranscriptError:
                if fmt is not None or read >= DETECT_LINES:
                    raise
                unrecognised += 1  # a CLI's own notice before the stream starts: skipped
                other_json = True
                continue
            state = reader.new_file_state()
        try:
            events = reader.parse_line(obj, state)
        except ReaderFormatError:
            unrecognised += 1
            continue
        for event in events:
            if event.kind not in (TURN_START, TURN_END):
                counts.add(event)
    if reader is None:
        if other_json:
            _detect(None, None)  # raises, naming the known formats
        raise TranscriptError("no JSON line in the transcript" if read else
                              "the transcript is empty")
    for event in reader.finish(state):
        counts.add(event)
    complete = state.get("terminal") is True
    if not complete and not counts.errors and not exit_status:
        # The stream stopped before its terminal result and the exit status does not say why
        # (Gemini CLI 0.61.0 exits 0 on SIGTERM; a job may not pass --exit-status): the run did
        # not finish, which is not a success.
        counts.add(SessionEvent(ERROR, detail=INCOMPLETE))
    return TranscriptVerdict(
        verdict=counts.verdict(exit_status), format=reader.format, text=counts.text,
        tools=counts.tools, error=counts.error, complete=complete,
        exit_status=exit_status, lines=read, unrecognised=unrecognised)
