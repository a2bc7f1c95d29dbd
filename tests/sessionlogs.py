"""What the session-log reader tests (``tests/test_backend_*.py``) share: finding the harness's
real session logs, reading them as the sidecar does, breaking real lines on purpose, and the
checks every reader passes.

Every reader is tested on the real session logs the harness kept for its backend. They are
found through ``harness/evidence/<backend>.json`` (``session_files``, and ``scenario_sessions``
when the harness kept them), never named in a test: a harness re-run replaces them with new ids
and times, so every id and time a test expects is read from the files (or rows) themselves.

- :class:`SessionLog`: one JSON Lines backend's evidence, session files and reader, and how the
  tests read them.
- :class:`SessionLogChecks`: the tests every JSON Lines reader passes. A backend's test module
  subclasses it (``class TestSessionLog(SessionLogChecks)``) and states its backend's facts as
  class attributes; pytest collects the tests through the subclass.
- :class:`StoreChecks`: the same for the SQLite readers (opencode, and Kilo Code CLI, its fork),
  with the helpers that copy, open, poll and rewrite a real store.
- :func:`set_path`, :func:`drop_path`, :func:`junk_variants`: real lines changed on purpose;
  :func:`check_event`, :func:`assert_reader_error`: what a reader may return or raise.

``tests/`` is not a package: pytest puts it on ``sys.path``, and the test modules import this
one as ``from sessionlogs import ...``.
"""

from __future__ import annotations

import dataclasses
import copy
import json
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

import orjson
import pytest

from harness import evidence as evidence_dirs
from repeat_failure.backends import (
    EVENT_KINDS,
    SHELL_END,
    SHELL_START,
    TEXT,
    TOOL,
    TURN_END,
    TURN_START,
    ReaderFormatError,
    SessionEvent,
    SessionLogReader,
    session_reader,
)
from repeat_failure.backends.coverage import COVERAGE
from repeat_failure.rules.normalize import normalize
from repeat_failure.sessions.tail import SessionTail, expand_globs

REPO = Path(__file__).resolve().parent.parent
#: The evidence the tests read for the pinned releases: the committed ``harness/evidence/``, or
#: the fresh directory a harness run wrote outside the checkout (``$REPEAT_FAILURE_EVIDENCE_DIR``,
#: set by ``./scripts/test``); :mod:`harness.evidence`.
EVIDENCE_DIR = evidence_dirs.primary()
#: The session scenarios the harness runs besides the shell runs (``scenarios`` in the evidence).
SCENARIO_NAMES = ("read", "running", "midturn")
#: The harness's shell run whose session every reader is tested on: the stub asks for this
#: command ``SHELL_REPEAT`` times in one turn, and it exits ``SHELL_EXIT`` each time.
SHELL_COMMAND = "ls /nonexistent"
SHELL_REPEAT = 5
SHELL_EXIT = 2


def evidence_of(backend: str, root: Path | None = None) -> dict[str, Any]:
    """The backend's evidence JSON under ``root`` (default :data:`EVIDENCE_DIR`, the pinned
    release's), read now (the harness may have replaced it)."""
    return json.loads(((root or EVIDENCE_DIR) / f"{backend}.json").read_text())


def version_params(backend: str) -> list[Any]:
    """One ``pytest.param(root, id="<backend>-<version>")`` per verified release of ``backend``
    (:func:`harness.evidence.versions`: the pin first, then the earlier releases whose real
    captures are kept), for a test that must hold on every release users may run (issue 15's
    version matrix)."""
    return [pytest.param(root, id=f"{backend}-{version}")
            for version, root in evidence_dirs.versions(backend, EVIDENCE_DIR)]


def iso_ts(text: str) -> float:
    """Seconds since the epoch of an ISO-8601 time with an offset (``Z`` on Python 3.11+)."""
    return datetime.fromisoformat(text).timestamp()


def check_event(event: SessionEvent) -> None:
    """``event`` is well formed: a known kind, a float or no time, string ids, command, tool
    and turn, an int (not bool) or no exit, and ``failed`` a bool on every ``shell_end``."""
    assert isinstance(event, SessionEvent) and event.kind in EVENT_KINDS
    assert event.ts is None or isinstance(event.ts, float)
    assert all(isinstance(v, str) for v in (event.call_id, event.command, event.tool,
                                            event.turn_id))
    assert event.exit is None or (isinstance(event.exit, int) and not isinstance(event.exit, bool))
    assert event.failed is None or isinstance(event.failed, bool)
    if event.kind == SHELL_END:
        assert isinstance(event.failed, bool)


def assert_reader_error(reader: SessionLogReader, obj: Any, reason: str,
                        state: dict[str, Any] | None = None) -> None:
    """Reading ``obj`` (with ``state``, else a fresh one) raises :class:`ReaderFormatError`
    with ``reason``, and its message does not quote the line (no ``ls /nonexistent``)."""
    with pytest.raises(ReaderFormatError) as caught:
        reader.parse_line(obj, reader.new_file_state() if state is None else state)
    assert caught.value.reason == reason
    assert "nonexistent" not in str(caught.value)


# -- real lines changed on purpose ---------------------------------------------------------------

def set_path(line: Any, path: tuple[Any, ...], value: Any) -> Any:
    """``line`` (changed in place) with the field at ``path`` (keys and list indexes) set to
    ``value``."""
    node = line
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return line


def drop_path(line: Any, path: tuple[Any, ...]) -> Any:
    """``line`` (changed in place) without the field at ``path``."""
    node = line
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return line


def field_paths(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every field of ``node`` at every depth (object keys and list indexes),
    parents before their children."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield (*path, key)
            yield from field_paths(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield (*path, index)
            yield from field_paths(value, (*path, index))


#: Values of every JSON type (and shapes readers look for) that replace a field in
#: :func:`junk_variants`.
JUNK = (None, True, 0, -1, 2.5, float("inf"), "", "x", [], [1], [None], {}, {"type": "text"},
        {"type": 1})


def junk_variants(line: Any) -> Iterator[Any]:
    """Copies of ``line`` with one field (every field at every depth, in turn) deleted, or
    replaced by each value of :data:`JUNK`."""
    for path in field_paths(line):
        broken = copy.deepcopy(line)
        yield drop_path(broken, path)
        for value in JUNK:
            broken = copy.deepcopy(line)
            yield set_path(broken, path, value)


# -- JSON Lines logs -----------------------------------------------------------------------------

class SessionLog:
    """One JSON Lines backend's real session logs as the harness kept them under
    ``harness/evidence/<backend>/``, and its registered reader."""

    def __init__(self, backend: str, root: Path | None = None) -> None:
        self.backend = backend
        #: The evidence directory of one release (:func:`version_params`).
        self.root = root or EVIDENCE_DIR
        self.home = self.root / backend

    @property
    def version(self) -> str:
        """The CLI release these captures come from (the evidence's ``version``)."""
        return self.evidence()["version"]

    @property
    def reader(self) -> SessionLogReader:
        """The reader registered for the backend."""
        reader = session_reader(self.backend)
        assert reader is not None, f"no session-log reader for {self.backend}"
        return reader

    def evidence(self) -> dict[str, Any]:
        """The evidence JSON, read now."""
        return evidence_of(self.backend, self.root)

    def shell_run(self) -> dict[str, Any]:
        """The evidence's last run: the ``ls /nonexistent`` x5 one whose session is kept."""
        return self.evidence()["runs"][-1]

    def session_files(self) -> list[Path]:
        """The JSON Lines files of ``session_files`` (the shell run's session)."""
        return [self.home / rel for rel in self.evidence()["session_files"]
                if rel.endswith(".jsonl")]

    def session(self) -> Path:
        """The shell run's session file: the one file of ``session_files``."""
        (path,) = self.session_files()
        return path

    def _scenario_paths(self, name: str) -> list[Path]:
        listed = self.evidence().get("scenario_sessions") or {}
        rels = listed.get(name) if isinstance(listed, dict) else None
        paths = []
        for rel in [rels] if isinstance(rels, str) else rels or []:
            # copied to ``<backend>/<name>/<path under HOME>``; older runs kept ``<backend>/<path>``
            for base in (self.home / name, self.home):
                if (base / rel).is_file():
                    paths.append(base / rel)
                    break
        return paths

    def scenario_files(self, name: str) -> list[Path]:
        """The session files of scenario ``name`` (``scenario_sessions``); skips the test when
        the harness has not kept them yet."""
        paths = self._scenario_paths(name)
        if not paths:
            pytest.skip(f"no {name!r} scenario session kept for {self.backend} yet")
        return paths

    def all_files(self) -> list[Path]:
        """The shell run's session files, then every scenario's files the harness kept."""
        listed = self.evidence().get("scenario_sessions") or {}
        return [*self.session_files(), *(path for name in listed
                                         for path in self._scenario_paths(name))]

    def home_of(self, path: Path) -> Path:
        """The copy of the agent's HOME that ``path`` (a kept session file) is under:
        ``<backend>/<scenario>/`` for a scenario's copy, else ``<backend>/``."""
        first = path.relative_to(self.home).parts[0]
        return self.home / first if first in SCENARIO_NAMES else self.home

    def snapshot(self, name: str) -> dict[str, Any]:
        """What the harness says about the moment it copied scenario ``name``'s files:
        ``cli_running`` (the CLI, so the turn, still running) and ``running_command_logged``
        (the copies mention the running command)."""
        return ((self.evidence().get("scenarios") or {}).get(name) or {}).get("snapshot") or {}

    def scenario_run(self, name: str) -> dict[str, Any]:
        """The evidence of scenario ``name`` (its ``steps`` and the ``tool_calls`` it asked
        for)."""
        return self.evidence()["scenarios"][name]

    @staticmethod
    def lines(path: Path) -> list[Any]:
        """The decoded whole lines of ``path``, as the sidecar's tail reads them: a last line
        without its newline (a snapshot taken while the CLI was writing) is not read yet."""
        data = path.read_bytes()
        whole = data[:data.rfind(b"\n") + 1]
        return [orjson.loads(line) for line in whole.split(b"\n") if line.strip()]

    def session_lines(self) -> list[Any]:
        """The decoded lines of the shell run's session file."""
        return self.lines(self.session())

    def read(self, lines: list[Any], state: dict[str, Any] | None = None) -> list[SessionEvent]:
        """Every event of ``lines`` read in order with one file state (``state``, else a
        fresh one)."""
        state = self.reader.new_file_state() if state is None else state
        return [event for line in lines for event in self.reader.parse_line(line, state)]

    def read_indexed(self, lines: list[Any]) -> list[tuple[int, SessionEvent]]:
        """Every event of ``lines`` read in order with one file state, with its line's index."""
        reader, state = self.reader, self.reader.new_file_state()
        return [(i, event) for i, line in enumerate(lines)
                for event in reader.parse_line(line, state)]


def check_junk_in_every_field(log: SessionLog) -> int:
    """Every field of every line of the shell run's session files, in turn deleted or replaced
    by each value of :data:`JUNK`, read both with the state the real lines before it built and
    with a fresh state: the reader returns well-formed events or raises
    :class:`ReaderFormatError`, nothing else. Returns how many broken lines were read."""
    reader = log.reader
    count = 0
    for path in log.session_files():
        state = reader.new_file_state()
        for line in log.lines(path):
            for broken in junk_variants(line):
                for before in (copy.deepcopy(state), reader.new_file_state()):
                    count += 1
                    try:
                        events = reader.parse_line(copy.deepcopy(broken), before)
                    except ReaderFormatError:
                        continue
                    for event in events:
                        check_event(event)
            reader.parse_line(line, state)
    return count


def check_shell_calls(log: SessionLog, events: list[SessionEvent],
                      repeat: int = SHELL_REPEAT) -> None:
    """The shell calls of the shell run's ``events``: ``repeat`` of them (fewer than the five
    the stub asked for when the CLI's own loop guard stopped the turn), each ``shell_end``
    pairs with the ``shell_start`` before it by a call id of its own, both carry ``ls
    /nonexistent``, each end has exit 2 and ``failed``; unless the reader is the backend's
    record route, the exits are those the neutral route recorded for the command in that
    run, or, for a release the coverage row names as read only (``read_only``: the route does
    not see its commands), the route recorded nothing."""
    starts = [e for e in events if e.kind == SHELL_START]
    ends = [e for e in events if e.kind == SHELL_END]
    ids = [e.call_id for e in starts]
    assert ids == [e.call_id for e in ends]
    assert len(set(ids)) == repeat and all(ids)
    assert [e.command for e in starts] == [SHELL_COMMAND] * repeat
    assert [(e.command, e.exit, e.failed) for e in ends] == \
        [(SHELL_COMMAND, SHELL_EXIT, True)] * repeat
    if not log.reader.route_records:
        run = log.shell_run()
        row = COVERAGE.get(log.backend)
        if row is not None and log.version in row.read_only:
            assert run["records"] == []
            return
        recorded = [r["exit"] for r in run["records"]
                    if normalize(r["raw"], log.backend) == run["command"]]
        assert [e.exit for e in ends] == recorded


def check_scenario(log: SessionLog, name: str) -> None:
    """The harness's snapshot of session scenario ``name``, file by file:

    - ``read`` (a file-tool call): the turn starts and ends, the tools the stub asked for are
      ``tool`` events, and there is no shell activity;
    - ``running`` (copied while a command ran): the turn has started and, while the CLI runs,
      not ended; the running command's ``shell_start`` has no ``shell_end``. When the harness
      says the copies do not mention the running command (``running_command_logged`` false: the
      CLI writes a call only once it has finished), there is no shell event at all;
    - ``midturn`` (copied after a failing call finished, while the next one ran): the finished
      ``ls /nonexistent`` (start, then end with exit 2, failed), then the running command's
      start under another call id (unless not logged, as above); the turn has not ended.
    """
    snapshot = log.snapshot(name)
    run = log.scenario_run(name)
    logged = snapshot.get("running_command_logged", True)
    for path in log.scenario_files(name):
        events = log.read(log.lines(path))
        kinds = [e.kind for e in events]
        assert kinds[0] == TURN_START
        shells = [e for e in events if e.kind in (SHELL_START, SHELL_END)]
        if name == "read":
            assert shells == [] and kinds[-1] == TURN_END
            tools = [e.tool for e in events if e.kind == TOOL]
            assert tools and tools == [call["name"] for call in run["tool_calls"]]
            continue
        running = [step["arg"] for step in run["steps"] if step["kind"] == "shell"][-1]
        expected = [(SHELL_START, SHELL_COMMAND, None, None),
                    (SHELL_END, SHELL_COMMAND, SHELL_EXIT, True)] if name == "midturn" else []
        if logged:
            expected.append((SHELL_START, running, None, None))
        assert [(e.kind, e.command, e.exit, e.failed) for e in shells] == expected
        if name == "midturn" and logged:
            assert shells[0].call_id == shells[1].call_id != shells[2].call_id
        if snapshot.get("cli_running", True):
            assert TURN_END not in kinds


class SessionLogChecks:
    """The tests every JSON Lines session-log reader passes on its backend's real files. A
    backend's test module subclasses it as ``Test...`` and sets:

    - ``log``: the backend's :class:`SessionLog`;
    - ``reader_class``: the class its registered reader must be;
    - ``route_records``: whether the reader is the backend's record route;
    - ``line_kinds_in_every_file``: line kinds (:meth:`line_kind`) every real file has;
    - ``known_line_kinds``: when set, every line kind of every real file is one of these (so a
      new kind in a later harness run shows up).
    """

    log: ClassVar[SessionLog]
    reader_class: ClassVar[type[SessionLogReader]]
    route_records: ClassVar[bool] = False
    #: The shell calls of the repeated run: fewer than :data:`SHELL_REPEAT` for a CLI whose own
    #: loop guard stops the turn (Qwen Code 0.24.4, Cline 3.0.65: four), and whether the run's
    #: log ends with the answer's text and the turn's end (a guarded turn ends with neither).
    shell_repeat: ClassVar[int] = SHELL_REPEAT
    answered: ClassVar[bool] = True
    #: Run every check on each verified release's captures (:func:`version_params`), not only
    #: the pin's.
    every_version: ClassVar[bool] = True

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """Parametrize the class's tests by release: ``evidence_root`` takes each verified
        release's evidence directory (pytest calls this hook on the test class)."""
        if "evidence_root" in metafunc.fixturenames:
            roots = version_params(self.log.backend) if self.every_version else \
                [pytest.param(self.log.root, id=self.log.backend)]
            metafunc.parametrize("evidence_root", roots)

    @pytest.fixture(autouse=True)
    def _at_release(self, evidence_root: Path) -> None:
        """Point :attr:`log` at this test's release (a backend's own :class:`SessionLog`
        subclass stays that class)."""
        self.log = type(self.log)(self.log.backend, evidence_root)
    line_kinds_in_every_file: ClassVar[frozenset[str]] = frozenset()
    known_line_kinds: ClassVar[frozenset[str] | None] = None

    @staticmethod
    def line_kind(line: Any) -> Any:
        """What :attr:`line_kinds_in_every_file` and :attr:`known_line_kinds` list of a line:
        its ``type``."""
        return line.get("type")

    def test_reader_is_registered_and_finds_the_real_files(self) -> None:
        """The backend's reader is registered, reads JSON Lines, is (or is not) the backend's
        record route, and its globs, expanded as the sidecar does with the default
        directories, find every session file the harness kept (scenario copies under their
        own ``<name>/`` home)."""
        reader = self.log.reader
        assert isinstance(reader, self.reader_class) and reader.backend == self.log.backend
        assert reader.kind == "jsonl" and reader.route_records is self.route_records
        for path in self.log.all_files():
            home = self.log.home_of(path)
            assert path in {found for base, pattern in expand_globs(reader, home, env={})
                            for found in base.glob(pattern)}

    def test_every_real_line_is_recognised(self) -> None:
        """No line of any real session file (the shell run's and the scenarios') raises, every
        event is well formed, and the files' line kinds are the ones listed."""
        seen: set[Any] = set()
        for path in self.log.all_files():
            lines = self.log.lines(path)
            for event in self.log.read(lines):
                check_event(event)
            kinds = {self.line_kind(line) for line in lines}
            assert self.line_kinds_in_every_file <= kinds, path.name
            seen |= kinds
        if self.known_line_kinds is not None:
            assert seen <= self.known_line_kinds

    def test_shell_session_gives_the_exact_events(self) -> None:
        """The stub asked for ``ls /nonexistent`` 5 times in one turn: the turn starts, each
        call starts and ends (:attr:`shell_repeat` of them), the final answer is text and ends
        the turn (unless not :attr:`answered`); nothing else, and in time order. A state that is an empty dict (a reader must cope with a state
        missing its keys) gives the same events."""
        run = self.log.shell_run()
        assert (run["command"], run["repeat"]) == (SHELL_COMMAND, SHELL_REPEAT)
        lines = self.log.session_lines()
        events = self.log.read(lines)
        assert [e.kind for e in events] == [TURN_START, *[SHELL_START, SHELL_END] * self.shell_repeat,
                                            *([TEXT, TURN_END] if self.answered else [])]
        times = [e.ts for e in events]
        assert None not in times and times == sorted(times)
        assert self.log.read(lines, {}) == events

    def test_shell_calls_pair_and_match_the_route(self) -> None:
        """See :func:`check_shell_calls`."""
        check_shell_calls(self.log, self.log.read(self.log.session_lines()), self.shell_repeat)

    def test_junk_in_any_field_of_a_real_line_never_raises_anything_else(self) -> None:
        """See :func:`check_junk_in_every_field`; a real file gives well over 1000 such
        lines."""
        assert check_junk_in_every_field(self.log) > 1000

    @pytest.mark.parametrize("name", SCENARIO_NAMES)
    def test_scenario_snapshots(self, name: str) -> None:
        """See :func:`check_scenario` (skipped until the harness has kept the scenario)."""
        check_scenario(self.log, name)


def pi_messages(lines: list[Any], role: str) -> list[int]:
    """Indexes of the ``message`` entries (pi's log format) whose message has ``role``."""
    return [i for i, line in enumerate(lines)
            if line.get("type") == "message" and line["message"].get("role") == role]


def first_pi_message(log: SessionLog, role: str) -> dict[str, Any]:
    """A copy of the first ``message`` entry with ``role`` of the shell run's session."""
    lines = log.session_lines()
    return copy.deepcopy(lines[pi_messages(lines, role)[0]])


class PiLogChecks:
    """The tests of pi's log format, which Oh My Pi's log shares (entries ``{"type",
    "timestamp", ...}``; a ``message`` entry's ``assistant`` message holds the ``toolCall``
    blocks, a ``toolResult`` message ends a call). The test modules of pi and omp mix it into
    their :class:`SessionLogChecks` subclass (``log`` as there)."""

    log: ClassVar[SessionLog]

    def test_shell_calls_carry_id_command_and_exit(self) -> None:
        """Each ``shell_end`` pairs with its ``shell_start`` by the file's toolCall id, has the
        command (kept from the call: the toolResult does not repeat it), ``tool`` ``bash`` and
        exit 2 (pi: the result's ``Command exited with code 2`` line; omp: its
        ``details.exitCode``); the format names no turn."""
        lines = self.log.session_lines()
        call_ids = [block["id"] for i in pi_messages(lines, "assistant")
                    for block in lines[i]["message"]["content"] if block["type"] == "toolCall"]
        assert len(call_ids) == 5 and len(set(call_ids)) == 5
        events = self.log.read(lines)
        starts = [(e.call_id, e.command, e.tool) for e in events if e.kind == SHELL_START]
        ends = [(e.call_id, e.command, e.exit, e.failed, e.tool) for e in events
                if e.kind == SHELL_END]
        assert starts == [(c, "ls /nonexistent", "bash") for c in call_ids]
        assert ends == [(c, "ls /nonexistent", 2, True, "bash") for c in call_ids]
        assert all(e.turn_id == "" for e in events)

    def test_timestamps_are_the_lines_own(self) -> None:
        """Every event's ``ts`` is its own line's ``timestamp``; the turn starts at the user
        message and ends at the last assistant message; starts and ends sit on their own
        lines."""
        lines = self.log.session_lines()
        read = self.log.read_indexed(lines)
        for i, event in read:
            assert event.ts == iso_ts(lines[i]["timestamp"])
        by_kind = {kind: [i for i, e in read if e.kind == kind] for kind in EVENT_KINDS}
        assert by_kind[TURN_START] == pi_messages(lines, "user")
        assert by_kind[TURN_END] == [pi_messages(lines, "assistant")[-1]]
        assert by_kind[SHELL_END] == pi_messages(lines, "toolResult")
        assert by_kind[SHELL_START] == pi_messages(lines, "assistant")[:-1]

    def test_result_without_its_call_still_ends_a_shell_call(self) -> None:
        """After a sidecar restart the state is fresh: the real toolResult line alone still
        gives a ``shell_end`` with its exit, and an empty command (for omp, whose reader is its
        record route, the record then has no command)."""
        reader = self.log.reader
        line = first_pi_message(self.log, "toolResult")
        (event,) = reader.parse_line(line, reader.new_file_state())
        assert (event.kind, event.call_id, event.command, event.exit, event.failed) == \
            (SHELL_END, line["message"]["toolCallId"], "", 2, True)


# -- SQLite stores (opencode, Kilo Code CLI) -----------------------------------------------------
#
# Everything below reads a real captured store: a copy of the database the harness kept
# (``harness/evidence/<backend>/<session file>``, found through the evidence JSON's
# ``session_files`` / ``scenario_sessions``). Ids and times are taken from the rows.

def store_copy(backend: str, rel: str, dest: Path, scenario: str = "",
               root: Path | None = None) -> Path | None:
    """A private, writable copy at ``dest`` of the real database the harness kept (with its
    ``-wal`` / ``-shm`` when there are any): ``<root>/<backend>/[<scenario>/]<rel>``, ``root``
    the evidence directory of one release (default :data:`EVIDENCE_DIR`, the pin's). ``None``
    when the harness has not kept it."""
    base = (root or EVIDENCE_DIR) / backend / scenario / rel
    if not base.is_file():
        return None
    dest.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        src = Path(f"{base}{suffix}")
        if src.exists():
            shutil.copy(src, Path(f"{dest}{suffix}"))
    return dest


def open_ro(path: Path) -> sqlite3.Connection:
    """The database opened the way the sidecar opens it: read-only URI, autocommit,
    ``query_only``."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    conn.execute("PRAGMA query_only = 1")
    return conn


def rows_of(db: Path, table: str) -> list[dict[str, Any]]:
    """Every row of ``table`` in rowid order, ``data`` decoded."""
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        out = []
        for r in conn.execute(f"SELECT * FROM {table} ORDER BY rowid"):
            row = dict(r)
            row["data"] = json.loads(row["data"])
            out.append(row)
        return out
    finally:
        conn.close()


def poll(reader: SessionLogReader, db: Path, state: dict) -> list[SessionEvent]:
    """One poll through a fresh read-only connection; the state goes through JSON (as the
    sidecar's state file keeps it) and comes back into ``state``."""
    conn = open_ro(db)
    try:
        events = reader.poll_db(conn, state)
    finally:
        conn.close()
    saved = json.loads(json.dumps(state))
    state.clear()
    state.update(saved)
    return events


def main_store(backend: str, tmp_path: Path) -> Path:
    """A copy of the store of the backend's shell run (the ``ls /nonexistent`` x5 session)."""
    (rel,) = evidence_of(backend)["session_files"]
    db = store_copy(backend, rel, tmp_path / "store" / Path(rel).name)
    assert db is not None, f"no captured store for {backend}"
    return db


def check_kept_store(backend: str, root: Path, tmp_path: Path) -> None:
    """A copy of the shell run's real store kept in the evidence directory ``root`` (one
    release's, :func:`version_params`): one poll gives the turn, the five ``ls /nonexistent``
    calls (exit 2, failed) and the answer, exactly as its rows say (:func:`expected_session`);
    a second poll gives nothing."""
    (rel,) = evidence_of(backend, root)["session_files"]
    db = store_copy(backend, rel, tmp_path / Path(rel).name, root=root)
    assert db is not None, f"no captured store for {backend} under {root}"
    reader, state = session_reader(backend), {}
    events = poll(reader, db, state)
    assert [e.kind for e in events] == [TURN_START, *[SHELL_START, SHELL_END] * SHELL_REPEAT,
                                        TEXT, TURN_END]
    assert [(e.command, e.exit, e.failed) for e in events if e.kind == SHELL_END] == \
        [(SHELL_COMMAND, SHELL_EXIT, True)] * SHELL_REPEAT
    assert events == expected_session(db)
    assert poll(reader, db, state) == []


def expected_session(db: Path) -> list[SessionEvent]:
    """What the captured shell session must give, built from its rows: the prompt, then per
    bash part its start and end (times from ``state.time``), the answer's text, and the turn's
    end at the ``time.completed`` of the assistant message that finished with ``stop``."""
    messages, parts = rows_of(db, "message"), rows_of(db, "part")
    (user,) = [m for m in messages if m["data"]["role"] == "user"]
    turn = user["id"]
    out = [SessionEvent(TURN_START, user["data"]["time"]["created"] / 1000, turn_id=turn)]
    roles = {m["id"]: m["data"]["role"] for m in messages}
    for p in parts:
        d = p["data"]
        if d["type"] == "tool" and d["tool"] == "bash":
            s = d["state"]
            out.append(SessionEvent(SHELL_START, s["time"]["start"] / 1000, call_id=d["callID"],
                                    command=s["input"]["command"], tool="bash", turn_id=turn))
            out.append(SessionEvent(SHELL_END, s["time"]["end"] / 1000, call_id=d["callID"],
                                    command=s["input"]["command"], exit=s["metadata"]["exit"],
                                    failed=s["metadata"]["exit"] != 0, tool="bash",
                                    turn_id=turn, output=s["output"]))
        elif d["type"] == "text" and roles[p["message_id"]] == "assistant":
            out.append(SessionEvent(TEXT, d["time"]["start"] / 1000, turn_id=turn))
    (last,) = [m for m in messages if m["data"].get("finish") == "stop"]
    out.append(SessionEvent(TURN_END, last["data"]["time"]["completed"] / 1000, turn_id=turn))
    return out


def replay_events(backend: str, tmp_path: Path) -> tuple[Path, list[tuple[int, str]],
                                                          Callable[[int], None]]:
    """The real store emptied of its message and part rows, plus a function that re-applies
    the store's own ``event`` log (``message.updated.1`` / ``message.part.updated.1`` /
    ``message.part.removed.1``, in ``seq`` order) one event at a time, the way opencode projects them (insert, or update the
    same row's ``data``), in WAL mode as the CLI writes. Each step is a real intermediate state
    of the session (pending, running, completed parts; open and completed steps). Returns
    (db, [(seq, type)], apply)."""
    db = main_store(backend, tmp_path)
    final = {t: {r["id"]: r for r in rows_of(db, t)} for t in ("message", "part")}
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode = WAL")  # as the CLI keeps it: rows land in -wal first
    log = [(seq, kind, json.loads(data)) for seq, kind, data in conn.execute(
        "SELECT seq, type, data FROM event ORDER BY seq")]
    conn.execute("DELETE FROM part")
    conn.execute("DELETE FROM message")
    conn.commit()
    conn.close()

    def apply(i: int) -> None:
        _seq, kind, data = log[i]
        w = sqlite3.connect(db)
        w.execute("PRAGMA synchronous = OFF")  # a test copy: no need to wait for the disk
        if kind == "message.updated.1":
            info = dict(data["info"])
            mid, sid = info.pop("id"), info.pop("sessionID")
            row = final["message"][mid]
            w.execute("INSERT INTO message (id, session_id, time_created, time_updated, data)"
                      " VALUES (?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET"
                      " data = excluded.data, time_updated = excluded.time_updated",
                      (mid, sid, row["time_created"], row["time_updated"], json.dumps(info)))
        elif kind == "message.part.updated.1":
            part = dict(data["part"])
            pid, sid, mid = part.pop("id"), part.pop("sessionID"), part.pop("messageID")
            w.execute("INSERT INTO part (id, message_id, session_id, time_created,"
                      " time_updated, data) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE"
                      " SET data = excluded.data, time_updated = excluded.time_updated",
                      (pid, mid, sid, data["time"], data["time"], json.dumps(part)))
        elif kind == "message.part.removed.1":
            w.execute("DELETE FROM part WHERE id = ?", (data["partID"],))
        w.commit()
        w.close()

    return db, [(seq, kind) for seq, kind, _ in log], apply


def scenario_store(backend: str, name: str, tmp_path: Path) -> Path:
    """The store of a session scenario (read / running / midturn), or skip when the harness has
    not produced it yet."""
    files = evidence_of(backend).get("scenario_sessions", {}).get(name) or []
    for rel in files:
        db = store_copy(backend, rel, tmp_path / name / Path(rel).name, scenario=name)
        if db is not None:
            return db
    pytest.skip(f"no {name!r} scenario snapshot for {backend} yet")


#: How the bad-row tests break a real row: (SQL run on the row's id, reason expected).
BREAKS = [
    ("UPDATE part SET data = substr(data, 1, length(data) - 3) WHERE id = ?", "not_json"),
    ("UPDATE part SET data = json_set(data, '$.state.metadata.exit', 'two') WHERE id = ?",
     "bad_exit"),
    ("UPDATE part SET data = json_remove(data, '$.state.metadata.exit') WHERE id = ?",
     "bad_exit"),
    ("UPDATE part SET data = json_set(data, '$.state.status', 'finished') WHERE id = ?",
     "unknown_shape"),
    ("UPDATE part SET data = json_set(data, '$.state.input', json('[1]')) WHERE id = ?",
     "unknown_shape"),
    ("UPDATE part SET data = '[]' WHERE id = ?", "unknown_shape"),
]


class StoreChecks:
    """The tests an opencode-family SQLite reader passes on its backend's real store. A
    backend's test module subclasses it as ``Test...`` and sets ``backend`` and ``unlogged``:
    the part types the CLI writes outside its ``event`` log (the replay cannot rebuild
    them)."""

    backend: ClassVar[str]
    unlogged: ClassVar[frozenset[str]] = frozenset()

    def test_reader_finds_the_store(self, tmp_path: Path) -> None:
        """The reader is registered, reads SQLite, and its glob (with ``XDG_DATA_HOME`` unset)
        names the file the harness found; the sidecar's tail opens it and gets the events."""
        reader = session_reader(self.backend)
        assert reader is not None and reader.kind == "sqlite" and not reader.route_records
        (rel,) = evidence_of(self.backend)["session_files"]
        assert reader.signal.startswith(f"~/{rel}: ")
        base, pattern = expand_globs(reader, tmp_path / "home", env={})[0]  # the store's glob
        assert base / pattern == tmp_path / "home" / rel
        db = store_copy(self.backend, rel, tmp_path / "home" / rel)
        assert db is not None
        tail = SessionTail(reader, tmp_path / "home", env={})
        result = tail.poll(rescan=True)
        source = {e.source for e in result.events}
        assert len(source) == 1 and all(e.call_id.startswith(f"{e.source}:")
                                        for e in result.events if e.call_id)
        assert [dataclasses.replace(e, source="", call_id=e.call_id.partition(":")[2])
                for e in result.events] == expected_session(db) and not result.errors
        assert tail.poll(rescan=True).events == []

    def test_captured_session_events(self, tmp_path: Path) -> None:
        """One poll of the real store gives the whole ``ls /nonexistent`` x5 turn in order,
        with the rows' own times: TURN_START, five SHELL_START/SHELL_END pairs (exit 2,
        failed), the answer's TEXT, TURN_END; the five SHELL_ENDs are the commands and exits
        the neutral route recorded in that run."""
        db = main_store(self.backend, tmp_path)
        reader = session_reader(self.backend)
        events = poll(reader, db, {})
        assert [e.kind for e in events] == ([TURN_START] + [SHELL_START, SHELL_END] * 5
                                            + [TEXT, TURN_END])
        assert events == expected_session(db)
        ends = [(e.command, e.exit, e.failed) for e in events if e.kind == SHELL_END]
        assert ends == [("ls /nonexistent", 2, True)] * 5
        (run,) = [r for r in evidence_of(self.backend)["runs"] if r["repeat"] == 5]
        assert [(c, x) for c, x, _ in ends] == [(r["raw"], r["exit"]) for r in run["records"]]
        starts = [e.call_id for e in events if e.kind == SHELL_START]
        assert starts == [e.call_id for e in events if e.kind == SHELL_END]
        assert len(set(starts)) == 5 and all(starts)

    def test_second_poll_is_empty(self, tmp_path: Path) -> None:
        """Polling again (also with the state after a JSON round trip, as after a sidecar
        restart) gives nothing: no event is emitted twice. The state holds ids and counters,
        no text."""
        db = main_store(self.backend, tmp_path)
        reader = session_reader(self.backend)
        state: dict = {}
        assert len(poll(reader, db, state)) == 13
        assert poll(reader, db, state) == []
        assert poll(reader, db, json.loads(json.dumps(state))) == []
        text = json.dumps(state)
        assert "nonexistent" not in text and "Done" not in text
        assert state["open_parts"] == {} and state["open_messages"] == []
        assert state["errors"] == {} and state["pending_error"] is None

    def test_incremental_replay_of_the_event_log(self, tmp_path: Path) -> None:
        """Polling after every event of the real event log (:func:`replay_events`) gives
        exactly the one-poll sequence, and each shell call's SHELL_START comes in an earlier
        poll than its SHELL_END (it was seen running, then its SHELL_END came once when the row
        turned completed). The replay rebuilds every real final row exactly, but for the part
        types in ``unlogged``."""
        backend = self.backend
        whole = expected_session(main_store(backend, tmp_path / "whole"))
        real = main_store(backend, tmp_path / "final")
        final = {t: rows_of(real, t) for t in ("message", "part")}
        db, log, apply = replay_events(backend, tmp_path)
        reader = session_reader(backend)
        state: dict = {}
        got: list[tuple[int, SessionEvent]] = []
        saw_running = False
        for i in range(len(log)):
            apply(i)
            for e in poll(reader, db, state):
                got.append((i, e))
            kinds = [e.kind for _, e in got]
            if kinds and kinds[-1] == SHELL_START:
                saw_running = True  # a snapshot with a call running: no end yet, turn open
                assert kinds.count(SHELL_START) == kinds.count(SHELL_END) + 1
                assert TURN_END not in kinds
                assert list(state["open_parts"].values()) == ["started"]
            assert len(json.dumps(state)) < 2000
        assert saw_running
        assert [e for _, e in got] == whole
        poll_of = {(e.kind, e.call_id): i for i, e in got if e.kind in (SHELL_START, SHELL_END)}
        for call in {e.call_id for e in whole if e.kind == SHELL_END}:
            assert poll_of[(SHELL_START, call)] < poll_of[(SHELL_END, call)]
        assert state["open_parts"] == {} and state["open_messages"] == []
        for table in ("message", "part"):
            replayed = {r["id"]: r["data"] for r in rows_of(db, table)}
            assert list(replayed) == [r["id"] for r in final[table]]
            for r in final[table]:
                if r["data"].get("type") not in self.unlogged:
                    assert replayed[r["id"]] == r["data"]

    @pytest.mark.parametrize("sql,reason", BREAKS)
    def test_bad_row_does_not_stop_the_others(self, tmp_path: Path, sql: str,
                                              reason: str) -> None:
        """One real bash part (the second) broken by ``sql`` in a copy of the store (JSON cut
        short, a non-number or missing exit, an unknown status, a non-object input, a
        non-object data): the poll still returns every other event, counts the bad row in the
        state and raises its reason at the next poll, before reading anything; then nothing
        more comes (the bad row is never read again, nothing is emitted twice)."""
        db = main_store(self.backend, tmp_path)
        whole = expected_session(db)
        bash = [p for p in rows_of(db, "part") if p["data"].get("tool") == "bash"]
        broken = bash[1]["data"]["callID"]
        w = sqlite3.connect(db)
        w.execute(sql, (bash[1]["id"],))
        w.commit()
        w.close()
        reader = session_reader(self.backend)
        state: dict = {}
        events = poll(reader, db, state)
        assert events == [e for e in whole if e.call_id != broken]
        assert state["errors"] == {reason: 1} and state["pending_error"] == reason
        with pytest.raises(ReaderFormatError) as raised:
            poll(reader, db, state)
        assert raised.value.reason == reason
        assert "nonexistent" not in str(raised.value)
        assert state["pending_error"] is None and state["errors"] == {reason: 1}
        assert poll(reader, db, state) == []

    def test_only_bad_rows_raise_at_once(self, tmp_path: Path) -> None:
        """A poll whose only new row is bad raises at once (nothing is lost: there were no good
        events), and the watermark has moved past it. The row is the store's last real part
        row, taken out before the first poll and put back with its JSON cut short."""
        db = main_store(self.backend, tmp_path)
        last = rows_of(db, "part")[-1]
        conn = sqlite3.connect(db)
        conn.row_factory = sqlite3.Row
        raw = dict(conn.execute("SELECT * FROM part WHERE id = ?", (last["id"],)).fetchone())
        conn.execute("DELETE FROM part WHERE id = ?", (last["id"],))
        conn.commit()
        reader = session_reader(self.backend)
        state: dict = {}
        assert len(poll(reader, db, state)) == 13  # step-finish parts give no event
        raw["data"] = raw["data"][:-2]
        conn.execute(f"INSERT INTO part ({', '.join(raw)}) VALUES ({', '.join('?' * len(raw))})",
                     list(raw.values()))
        conn.commit()
        conn.close()
        with pytest.raises(ReaderFormatError) as raised:
            poll(reader, db, state)
        assert raised.value.reason == "not_json" and state["pending_error"] is None
        assert state["part"][1] == last["id"] and state["errors"] == {"not_json": 1}
        assert poll(reader, db, state) == []

    def test_undo_reuses_rowids(self, tmp_path: Path) -> None:
        """opencode deletes rows on an undo (revert) or a session delete, and SQLite then gives
        new rows the freed rowids. Replaying the real event log: poll after the third bash
        call's step is written, delete that step (its message and parts), replay the rest: the
        reader reads the later rows though their rowids are at or below its watermark, and
        emits nothing twice."""
        whole = expected_session(main_store(self.backend, tmp_path / "whole"))
        db, log, apply = replay_events(self.backend, tmp_path)
        reader = session_reader(self.backend)
        calls = [e.call_id for e in whole if e.kind == SHELL_END]
        # the event that completes the third call's assistant step (its message gets its finish)
        conn = sqlite3.connect(db)
        state: dict = {}
        got: list[SessionEvent] = []
        cut = None
        for i in range(len(log)):
            apply(i)
            if cut is None:
                done = conn.execute("SELECT count(*) FROM message WHERE"
                                    " json_extract(data, '$.finish') = 'tool-calls'").fetchone()[0]
                if done == 3:
                    cut = i
                    got += poll(reader, db, state)
                    (victim,) = conn.execute(
                        "SELECT message_id FROM part WHERE json_extract(data, '$.callID') = ?",
                        (calls[2],)).fetchone()
                    high = conn.execute("SELECT max(rowid) FROM part").fetchone()[0]
                    conn.execute("DELETE FROM part WHERE message_id = ?", (victim,))
                    conn.execute("DELETE FROM message WHERE id = ?", (victim,))
                    conn.commit()
        conn.close()
        assert cut is not None
        got += poll(reader, db, state)
        after = rows_of(db, "part")
        reused = [p for p in after if p["data"].get("callID") == calls[3]]
        assert reused  # the fourth call's part now sits at a rowid the third call's step had
        conn = sqlite3.connect(db)
        (rowid,) = conn.execute("SELECT rowid FROM part WHERE id = ?",
                                (reused[0]["id"],)).fetchone()
        conn.close()
        assert rowid <= high
        assert got == whole

    @pytest.mark.parametrize("name", SCENARIO_NAMES)
    def test_scenario_snapshots(self, tmp_path: Path, name: str) -> None:
        """The session scenarios' real snapshots (skipped until the harness has produced them):
        ``read`` gives TOOL events (the tools the stub asked for) and no shell; ``running`` a
        SHELL_START without SHELL_END and the turn not ended; ``midturn`` one finished failing
        call, then one running call, the turn not ended."""
        backend = self.backend
        db = scenario_store(backend, name, tmp_path)
        reader = session_reader(backend)
        state: dict = {}
        events = poll(reader, db, state)
        kinds = [e.kind for e in events]
        run = evidence_of(backend)["scenarios"][name]
        (user,) = [m for m in rows_of(db, "message") if m["data"]["role"] == "user"]
        assert kinds[0] == TURN_START and {e.turn_id for e in events} == {user["id"]}
        if name == "read":
            assert SHELL_START not in kinds and SHELL_END not in kinds
            tools = [e.tool for e in events if e.kind == TOOL]
            assert tools and tools == [c["name"] for c in run["tool_calls"]]
            assert kinds[-1] == TURN_END
        else:
            shells = [e for e in events if e.kind in (SHELL_START, SHELL_END)]
            if name == "running":
                assert [e.kind for e in shells] == [SHELL_START]
            else:
                assert [e.kind for e in shells] == [SHELL_START, SHELL_END, SHELL_START]
                assert (shells[1].command, shells[1].exit, shells[1].failed) == (
                    "ls /nonexistent", 2, True)
                assert shells[0].call_id == shells[1].call_id != shells[2].call_id
            asked = [c["input"]["command"] for c in run["tool_calls"]]
            assert [e.command for e in shells if e.kind == SHELL_START] == asked
            assert "sleep 8" in shells[-1].command
            assert TURN_END not in kinds
            assert list(state["open_parts"].values()) == ["started"]
            assert len(state["open_messages"]) == 1
        assert poll(reader, db, state) == []
