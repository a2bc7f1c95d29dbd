"""Kilo Code CLI: the session-log reader for its SQLite store (an opencode fork).

Seen in the harness's real run (``harness/evidence/kilo.json``, Kilo Code CLI 7.7.7): Kilo keeps
its sessions in ``~/.local/share/kilo/kilo.db`` (``$XDG_DATA_HOME/kilo``) with opencode's schema
and row shapes: ``message`` rows (user prompt; assistant steps with ``time.completed`` and
``finish`` ``tool-calls`` … ``stop``) and ``part`` rows (tool ``bash``, ``state.status``
``completed`` with ``state.metadata.exit`` 2 for each ``ls /nonexistent``; the status says
``completed`` for a failed command). Differences that do not change what is read: the bash
part's ``metadata`` also has ``description`` and ``approval``, ``step-start`` / ``step-finish``
parts carry times, the default agent is ``code`` (opencode's is ``build``), and the database has
a ``kilo_board`` table and extra indexes on ``json_extract(data, ...)`` of ``message`` and
``part`` (the reader's queries use only the rowid and the primary keys). The harness's
``read`` / ``running`` / ``midturn`` snapshots look like opencode's. So :class:`KiloReader` is
:class:`OpencodeReader` with Kilo's name and path.
"""

from __future__ import annotations

from typing import ClassVar

from repeat_failure.backends import register_reader
from repeat_failure.backends.opencode import OpencodeReader


class KiloReader(OpencodeReader):
    """Kilo Code CLI's ``kilo.db`` → :class:`~repeat_failure.backends.SessionEvent` values, read
    exactly as :class:`OpencodeReader` reads ``opencode.db`` (same tables, row shapes, events,
    state, errors and bounds; verified on Kilo Code CLI 7.7.7's real run)."""

    backend: ClassVar[str] = "kilo"
    globs: ClassVar[tuple[str, ...]] = ("$XDG_DATA_HOME/kilo/kilo.db",)
    signal: ClassVar[str] = (
        "~/.local/share/kilo/kilo.db: part rows of tool bash (state.status running → "
        "completed or error; exit status in state.metadata.exit)")


register_reader(KiloReader())
