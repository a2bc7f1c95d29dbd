"""opencode's shells (spec C7, C8, C-AC1), on the harness's real records.

opencode 1.18.33 runs its ``bash`` tool as ``$SHELL -c <cmd>`` with the agent's command as is:
no wrapper, and no helper shells of its own, so every record is an agent command, byte for byte,
and ``opencode`` needs no wrapper stripper.
"""

from __future__ import annotations

import json
from pathlib import Path


EVIDENCE = json.loads((Path(__file__).resolve().parent.parent / "harness" / "evidence"
                       / "opencode.json").read_text())


def test_session_store_exported() -> None:
    """The session store is SQLite (its rows still in the write-ahead log at exit); the harness
    keeps every row as JSON lines, and the bash tool parts carry the exit status."""
    assert EVIDENCE["session_files"] == [".local/share/opencode/opencode.db"]
    export = (Path(__file__).resolve().parent.parent / "harness" / "evidence" / "opencode"
              / ".local/share/opencode/opencode.db.jsonl")
    rows = [json.loads(line) for line in export.read_text().splitlines()]
    parts = [json.loads(r["row"]["data"]) for r in rows if r["table"] == "part"]
    exits = [p["state"]["metadata"]["exit"] for p in parts
             if p.get("tool") == "bash" and p.get("state", {}).get("status") == "completed"]
    assert exits == [2] * 5
