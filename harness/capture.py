"""Capture what a CLI run left behind, scrubbed, as evidence.

The records the neutral route wrote (:func:`_records`), the shell calls the backend's session-log
reader finds (:func:`_session_records`), the CLI's session files copied from its HOME
(:func:`_copy_sessions`: text as text, a SQLite store as a consistent copy plus JSON lines,
:func:`_sqlite_copy`), JSON kept parseable while scrubbed (:func:`scrub_json`), whether a snapshot
mentions the running command (:func:`_mentions_command`) and the note the real sidecar pipeline
raises on a run's records (:func:`_pipeline_note`). Used by :mod:`harness.run`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.install import Backend, HarnessError
from repeat_failure.backends import SHELL_END, session_reader
from repeat_failure.config import AgentSpec
from repeat_failure.sessions.tail import SessionTail
from repeat_failure.sidecar.app import Sidecar
from repeat_failure.rules.normalize import normalize
from repeat_failure.rules.scrub import scrub

#: The agent name the rendered hook and its records are kept under.
AGENT = "harness"


def _records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_bytes().splitlines():
        rec = json.loads(line.decode("utf-8", "replace"))
        raw = scrub(rec["cmd"])
        out.append({"raw": raw, "normalized": normalize(raw, rec["backend"]),
                    "exit": rec["exit"], "cut": rec.get("cut", False), "ts": rec["ts"]})
    return out


def _session_records(backend: str, home: Path) -> list[dict[str, Any]] | None:
    """The finished shell calls the backend's session-log reader finds under ``home`` (what the
    session-log route would record, and the C12 signal): ``[{"command" (scrubbed, normalized),
    "exit", "failed", "ts"}]``, or ``None`` for a backend without a reader."""
    reader = session_reader(backend)
    if reader is None:
        return None
    result = SessionTail(reader, home, backfill_s=float("inf")).poll(rescan=True)
    return [{"command": normalize(scrub(e.command), backend), "exit": e.exit, "failed": e.failed,
             "ts": e.ts} for e in result.events if e.kind == SHELL_END]


def _sqlite_copy(path: Path, target: Path) -> str:
    """Copy the SQLite database at ``path`` (a CLI's session store, in WAL mode and possibly
    still open in the CLI) to ``target``; return every row of every table as JSON lines
    (``{"table": <name>, "row": {<column>: <value>}}``, blobs decoded as UTF-8), a form a test
    can read.

    The copy is one consistent state of the database including the committed content of its
    write-ahead log: the backup API over a read-only connection, which never writes the CLI's
    database or its log and never checkpoints (like any reader, it takes its read lock in the
    ``-shm`` index). The copy is switched to rollback-journal mode (opening it leaves no
    ``-wal``/``-shm`` files beside it), its text values are scrubbed, and it is VACUUMed (no free
    pages: nothing from before the scrub survives, and the file stays small). The rows are read
    before the scrub; the caller scrubs the returned text.
    """
    import sqlite3

    target.parent.mkdir(parents=True, exist_ok=True)
    source = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    copy = sqlite3.connect(target)
    try:
        source.backup(copy)
        copy.execute("PRAGMA journal_mode = DELETE")
        tables = [r[0] for r in copy.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "ORDER BY name")]
        lines = []
        for table in tables:
            cursor = copy.execute(f'SELECT * FROM "{table}"')
            names = [d[0] for d in cursor.description]
            for row in cursor:
                values = {n: (v.decode("utf-8", "replace") if isinstance(v, bytes) else v)
                          for n, v in zip(names, row)}
                lines.append(json.dumps({"table": table, "row": values}, default=str))
        copy.create_function("scrub", 1, scrub_json, deterministic=True)
        for table in tables:
            # Every text column, keys too (only scrubbed text is kept); where scrubbing makes two
            # values of a unique column one (opencode 1.18's event.id, before the scrubber left
            # time-ordered ids alone), the run fails naming the column, never keeping it raw.
            for column in [r[1] for r in copy.execute(f'PRAGMA table_info("{table}")')]:
                try:
                    copy.execute(f'UPDATE "{table}" SET "{column}" = scrub("{column}") '
                                 f'WHERE typeof("{column}") = \'text\' '
                                 f'AND scrub("{column}") != "{column}"')
                except sqlite3.IntegrityError as exc:
                    raise HarnessError(f"{path}: scrubbing {table}.{column} made two values one "
                                       f"({exc}); the copy is not kept") from None
        copy.commit()
        copy.execute("VACUUM")
        return "\n".join(lines) + "\n"
    finally:
        source.close()
        copy.close()


def _scrub_value(key: str, value: Any) -> Any:
    """``value`` of ``key`` in a JSON object, scrubbed with the key as its context (so the
    name-says-secret rules see ``"api_key": "..."``): a string whose pair the scrubber changes
    becomes what the scrubbed pair holds, or ``"[REDACTED]"`` when the scrubbed pair is no
    longer the same one-key JSON object."""
    if not isinstance(value, str):
        return _scrub_node(value)
    pair = json.dumps({key: value}, ensure_ascii=False)
    done = scrub(pair)
    if done == pair:
        return value
    try:
        back = json.loads(done)
    except ValueError:
        return "[REDACTED]"
    return back[key] if isinstance(back, dict) and list(back) == [key] else "[REDACTED]"


def _scrub_node(node: Any) -> Any:
    if isinstance(node, dict):
        return {scrub(k): _scrub_value(k, v) for k, v in node.items()}
    if isinstance(node, list):
        return [_scrub_node(v) for v in node]
    return scrub(node) if isinstance(node, str) else node


def scrub_json(text: str) -> str:
    """``text`` scrubbed so that JSON stays JSON: a JSON object or array (a whole document, or
    every non-empty line of a JSON Lines file) is scrubbed value by value, each string with its
    key (:func:`_scrub_value`), and a line only re-written when something in it changed; any
    other text is scrubbed as a whole (:func:`repeat_failure.rules.scrub.scrub`). The scrubber replaces a
    quoted secret with a bare ``[REDACTED]``, which would leave a session copy or transcript
    line that no reader can parse (seen on Claude Code 2.1.332's transcript)."""
    def parsed(line: str) -> Any:
        if not line.lstrip().startswith(("{", "[")):
            raise ValueError("not a JSON container")
        return json.loads(line)

    try:
        return json.dumps(_scrub_node(parsed(text)), ensure_ascii=False) \
            if scrub(text) != text else text
    except ValueError:
        pass
    lines = text.split("\n")
    try:
        docs = [parsed(line) if line.strip() else None for line in lines]
    except ValueError:
        return scrub(text)
    out = []
    for line, doc in zip(lines, docs):
        if doc is None or scrub(line) == line:
            out.append(line)
        else:
            out.append(json.dumps(_scrub_node(doc), ensure_ascii=False, separators=(",", ":")))
    return "\n".join(out)


def _copy_sessions(backend: Backend, home: Path, dest: Path) -> list[str]:
    """Copy the session files the CLI wrote under ``home`` to the same paths under ``dest``,
    scrubbed, and return those paths (relative to ``home``). Text files are copied as text; a
    SQLite database is kept as a consistent copy (:func:`_sqlite_copy`) and as ``<name>.jsonl``
    (one JSON line per row)."""
    found = []
    for pattern in backend.session_globs:
        for path in sorted(home.glob(pattern)):
            if not path.is_file() or path.name.endswith(("-wal", "-shm")):
                continue
            rel = path.relative_to(home)
            found.append(str(rel))
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "rb") as f:
                is_sqlite = f.read(16) == b"SQLite format 3\0"
            if is_sqlite:
                text = _sqlite_copy(path, target)
                target = target.with_name(target.name + ".jsonl")
            else:
                text = path.read_text(encoding="utf-8", errors="replace")
            target.write_text(scrub_json(text))
    return found


def _mentions_command(dest: Path, marker: Path) -> bool:
    """Whether any file copied under ``dest`` mentions the running command: its marker's absolute
    path (JSON may escape ``/`` as ``\\/``). The file's bare name is not enough: Codex 0.64.0's
    ``ghost_snapshot`` lists the work dir's untracked files, and when it is taken just after the
    command's ``touch`` it names ``.harness-running`` while the call itself is not logged yet (a
    real CI run, 2026-12-02)."""
    needles = (str(marker), str(marker).replace("/", "\\/"))
    return any(any(n in p.read_text(encoding="utf-8", errors="replace") for n in needles)
               for p in dest.rglob("*") if p.is_file())



def _pipeline_note(shared: Path, backend: str, home: Path) -> str:
    """Feed the run's raw record file and the CLI's session log (``home``) through the real
    sidecar pipeline; the row message. For a backend whose session log is its route (omp), the
    note comes from the session log."""
    config = shared.parent / "config.yaml"
    config.write_text("repeat_failure:\n  enabled: true\n  collect_grace_s: 0.5\n")
    # The records were read for the evidence but not collected: collect them now.
    sidecar = Sidecar(shared, [AgentSpec(AGENT, backend, str(home))], config)
    sidecar.run_once()
    rows = sidecar.rows()
    return rows[0].message if rows else ""
