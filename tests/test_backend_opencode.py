"""opencode's shells (spec C7, C8, C-AC1), on the harness's real records; and its session-log
reader (``poll_db``), on the real store.

opencode 1.18.33 runs its ``bash`` tool as ``$SHELL -c <cmd>`` with the agent's command as is:
no wrapper, and no helper shells of its own, so every record is an agent command, byte for byte,
and ``opencode`` needs no wrapper stripper.

The reader's tests read a copy of the real captured store (``harness/evidence/opencode/<session
file>``, found through ``session_files`` / ``scenario_sessions``); ids and times are taken from
the rows, never written here. They are the checks every opencode-family store passes
(``tests/sessionlogs.py``, :class:`TestStore`); Kilo's tests (``tests/test_backend_kilo.py``)
run the same checks on Kilo's store.

The store of every kept release (issue 26 item 3: the pin 1.18.33 and 1.2.1, the oldest release
that keeps sessions in SQLite; releases before 1.2 keep JSON files under ``storage/``, which no
reader reads) gives the shell session exactly (:func:`test_every_kept_release_reads_exactly`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from repeat_failure.backends import SHELL_END, SHELL_START, TEXT, TURN_END, TURN_START
from repeat_failure.backends import session_reader
from sessionlogs import (EVIDENCE_DIR, SHELL_COMMAND, SHELL_EXIT, SHELL_REPEAT, StoreChecks,
                         evidence_of, expected_session, poll, version_params)

EVIDENCE = json.loads((EVIDENCE_DIR / "opencode.json").read_text())


def test_session_store_exported() -> None:
    """The session store is SQLite (its rows still in the write-ahead log at exit); the harness
    keeps every row as JSON lines, and the bash tool parts carry the exit status."""
    assert EVIDENCE["session_files"] == [".local/share/opencode/opencode.db"]
    export = EVIDENCE_DIR / "opencode" / ".local/share/opencode/opencode.db.jsonl"
    rows = [json.loads(line) for line in export.read_text().splitlines()]
    parts = [json.loads(r["row"]["data"]) for r in rows if r["table"] == "part"]
    exits = [p["state"]["metadata"]["exit"] for p in parts
             if p.get("tool") == "bash" and p.get("state", {}).get("status") == "completed"]
    assert exits == [2] * 5


class TestStore(StoreChecks):
    """opencode 1.18.33's store is ``~/.local/share/opencode/opencode.db``
    (``$XDG_DATA_HOME/opencode``): the sidecar's tail finds and reads it; one poll gives the
    ``ls /nonexistent`` x5 turn exactly, a second nothing; the replay of its own event log
    rebuilds every real row exactly; bad rows, undo and the scenarios as the checks say."""

    backend = "opencode"


def test_the_kept_releases() -> None:
    """The pin 1.18.33 and 1.2.1 (the oldest release here that keeps its sessions in SQLite)."""
    assert [p.id for p in version_params("opencode")] == ["opencode-1.18.33", "opencode-1.2.1"]


@pytest.mark.parametrize("root", [p.values[0] for p in version_params("opencode")],
                         ids=[p.id for p in version_params("opencode")])
def test_every_kept_release_reads_exactly(root: Path, tmp_path: Path) -> None:
    """A copy of each kept release's real store (with its write-ahead log): one poll gives the
    turn, the five ``ls /nonexistent`` calls (exit 2, failed) and the answer, exactly as its rows
    say (:func:`expected_session`); a second poll gives nothing."""
    (rel,) = evidence_of("opencode", root)["session_files"]
    db = tmp_path / Path(rel).name
    for suffix in ("", "-wal", "-shm"):
        src = Path(f"{root / 'opencode' / rel}{suffix}")
        if src.exists():
            shutil.copy(src, Path(f"{db}{suffix}"))
    reader, state = session_reader("opencode"), {}
    events = poll(reader, db, state)
    assert [e.kind for e in events] == [TURN_START, *[SHELL_START, SHELL_END] * SHELL_REPEAT,
                                        TEXT, TURN_END]
    assert [(e.command, e.exit, e.failed) for e in events if e.kind == SHELL_END] == \
        [(SHELL_COMMAND, SHELL_EXIT, True)] * SHELL_REPEAT
    assert events == expected_session(db)
    assert poll(reader, db, state) == []
