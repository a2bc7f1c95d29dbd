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

The store of every kept SQLite release (issue 26 item 3: the pin 1.18.33 and 1.2.1, the oldest
release that keeps sessions in SQLite) gives the shell session exactly
(:func:`test_every_kept_release_reads_exactly`); releases before 1.2 keep JSON files under
``storage/``, read and tested in ``tests/test_backend_opencode_storage.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sessionlogs import EVIDENCE_DIR, StoreChecks, check_kept_store, version_params

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


#: The kept releases that keep their sessions in SQLite (1.2 on); the earlier ones keep JSON
#: files (tests/test_backend_opencode_storage.py).
SQLITE_RELEASES = [p for p in version_params("opencode")
                   if tuple(int(x) for x in p.id.split("-")[1].split(".")[:2]) >= (1, 2)]


def test_the_kept_releases() -> None:
    """The pin 1.18.33 and 1.2.1 (the oldest release here that keeps its sessions in SQLite),
    then 1.1.65 and 1.0.152 (JSON files under ``storage/``)."""
    assert [p.id for p in version_params("opencode")] == [
        "opencode-1.18.33", "opencode-1.2.1", "opencode-1.1.65", "opencode-1.0.152"]
    assert [p.id for p in SQLITE_RELEASES] == ["opencode-1.18.33", "opencode-1.2.1"]


@pytest.mark.parametrize("root", [p.values[0] for p in SQLITE_RELEASES],
                         ids=[p.id for p in SQLITE_RELEASES])
def test_every_kept_release_reads_exactly(root: Path, tmp_path: Path) -> None:
    """See :func:`check_kept_store`, on each kept release's real store."""
    check_kept_store("opencode", root, tmp_path)
