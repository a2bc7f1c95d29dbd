"""Kilo Code CLI's shells (spec C7, C8, C-AC1), on the harness's real records.

Kilo Code CLI 7.7.7 (an opencode fork) runs its ``bash`` tool as ``$SHELL -c <cmd>`` with the
agent's command as is: no wrapper and no helper shells of its own, so every record is an agent
command, byte for byte, and ``kilo`` needs no wrapper stripper.
"""

from __future__ import annotations

import json
from pathlib import Path


REPO = Path(__file__).resolve().parent.parent
EVIDENCE = json.loads((REPO / "harness" / "evidence" / "kilo.json").read_text())


def test_session_store_exported() -> None:
    """The session store is SQLite; the harness keeps every row as JSON lines, and the bash tool
    parts carry the command and its exit status."""
    assert EVIDENCE["session_files"] == [".local/share/kilo/kilo.db"]
    export = REPO / "harness" / "evidence" / "kilo" / ".local/share/kilo/kilo.db.jsonl"
    rows = [json.loads(line) for line in export.read_text().splitlines()]
    parts = [json.loads(r["row"]["data"]) for r in rows if r["table"] == "part"]
    bash = [(p["state"]["input"]["command"], p["state"]["metadata"]["exit"]) for p in parts
            if p.get("tool") == "bash" and p.get("state", {}).get("status") == "completed"]
    assert bash == [("ls /nonexistent", 2)] * 5
