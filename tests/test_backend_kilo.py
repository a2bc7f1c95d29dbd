"""Kilo Code CLI's shells (spec C7, C8, C-AC1), on the harness's real records; and its
session-log reader, opencode's, on Kilo's real store.

Kilo Code CLI 7.7.7 (an opencode fork) runs its ``bash`` tool as ``$SHELL -c <cmd>`` with the
agent's command as is: no wrapper and no helper shells of its own, so every record is an agent
command, byte for byte, and ``kilo`` needs no wrapper stripper. The reader's checks are the ones
opencode's store passes (same schema, same reader: ``tests/sessionlogs.py``,
:class:`TestStore`); they read Kilo's evidence. The store of every kept release (7.7.7 and
7.0.33, issue 26 item 3) gives the shell session exactly
(:func:`test_every_kept_release_reads_exactly`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repeat_failure.backends import session_reader
from repeat_failure.backends.kilo import KiloReader
from repeat_failure.backends.opencode import OpencodeReader

from sessionlogs import EVIDENCE_DIR, StoreChecks, check_kept_store, version_params

EVIDENCE = json.loads((EVIDENCE_DIR / "kilo.json").read_text())


def test_session_store_exported() -> None:
    """The session store is SQLite; the harness keeps every row as JSON lines, and the bash tool
    parts carry the command and its exit status."""
    assert EVIDENCE["session_files"] == [".local/share/kilo/kilo.db"]
    export = EVIDENCE_DIR / "kilo" / ".local/share/kilo/kilo.db.jsonl"
    rows = [json.loads(line) for line in export.read_text().splitlines()]
    parts = [json.loads(r["row"]["data"]) for r in rows if r["table"] == "part"]
    bash = [(p["state"]["input"]["command"], p["state"]["metadata"]["exit"]) for p in parts
            if p.get("tool") == "bash" and p.get("state", {}).get("status") == "completed"]
    assert bash == [("ls /nonexistent", 2)] * 5


def test_reader_is_opencodes() -> None:
    """Kilo's reader is opencode's with Kilo's name, path and coverage text (no logic of its
    own)."""
    reader = session_reader("kilo")
    assert isinstance(reader, KiloReader) and isinstance(reader, OpencodeReader)
    assert reader.globs == ("$XDG_DATA_HOME/kilo/kilo.db",)
    assert not [name for name, value in vars(KiloReader).items() if callable(value)]


class TestStore(StoreChecks):
    """Kilo Code CLI 7.7.7's store is ``~/.local/share/kilo/kilo.db`` (``$XDG_DATA_HOME/kilo``),
    read as opencode's. Kilo writes its ``step-start`` parts' ``time`` outside the event log
    (the replayed step-start rows lack it; the reader ignores step-start parts); every other
    real row is rebuilt exactly by the replay."""

    backend = "kilo"
    unlogged = frozenset({"step-start"})


def test_the_kept_releases() -> None:
    """The pin 7.7.7 and 7.0.33, the oldest Kilo Code CLI release the registry serves here
    (issue 26 item 3)."""
    assert [p.id for p in version_params("kilo")] == ["kilo-7.7.7", "kilo-7.0.33"]


@pytest.mark.parametrize("root", [p.values[0] for p in version_params("kilo")],
                         ids=[p.id for p in version_params("kilo")])
def test_every_kept_release_reads_exactly(root: Path, tmp_path: Path) -> None:
    """See :func:`check_kept_store`, on each kept release's real store."""
    check_kept_store("kilo", root, tmp_path)
