"""The fix-loop ledger: what each red pull request has tried, in SQLite on a volume.

Keyed by ``owner/repo#number`` (design adr-0010). One row per PR the sweep has seen red or
escalated; :class:`Entry` lists the fields. The ledger is a cache of what the forge says: the
``needs-human`` label on the PR, not the ledger, is the record that a PR is escalated
(:mod:`repeat_failure.fixloop.sweep`), so a lost or reset ledger costs budget, never a second comment.

One writer: the Deployment runs one replica with the ``Recreate`` strategy, and every change is
one transaction (:meth:`Ledger.put`), so a crash leaves each row as it was before or after a
pass's change to it. Text kept here (the CI excerpt) is scrubbed before it is stored.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
_COLUMNS = {
    "key": "TEXT PRIMARY KEY", "repo": "TEXT NOT NULL", "number": "INTEGER NOT NULL",
    "head_sha": "TEXT", "head_tree": "TEXT", "trees": "TEXT NOT NULL",
    "failing": "TEXT NOT NULL", "excerpt": "TEXT NOT NULL", "red_since": "REAL",
    "reengagements": "INTEGER NOT NULL", "kicks_delivered": "INTEGER NOT NULL",
    "last_kick_at": "REAL", "escalated": "INTEGER NOT NULL", "escalated_at": "REAL",
    "label_confirmed": "INTEGER NOT NULL", "escalations": "INTEGER NOT NULL",
    "escalated_checks": "TEXT NOT NULL", "over_incident": "INTEGER NOT NULL",
    "adopted": "INTEGER NOT NULL", "comment_pending": "INTEGER NOT NULL",
    "reviewer_sha": "TEXT", "reviewer_tree": "TEXT", "reviewed_at": "REAL",
    "last_seen": "REAL NOT NULL",
}
_JSON_FIELDS = ("trees", "failing", "escalated_checks")
_BOOL_FIELDS = ("escalated", "label_confirmed", "over_incident", "adopted", "comment_pending")


def pr_key(repo: str, number: int) -> str:
    """The ledger key of a pull request: ``owner/repo#number``."""
    return f"{repo}#{number}"


@dataclass
class Entry:
    """One pull request's row.

    - ``head_sha`` / ``head_tree``: the head commit last seen red and its tree.
    - ``trees``: the distinct head trees seen red, oldest first (attempts are counted per tree,
      so an empty retrigger commit is not an attempt).
    - ``failing``: the PR's own failing check names at the last red pass; ``excerpt``: their
      failure evidence (scrubbed).
    - ``red_since``: when the current head's red CI settled (epoch seconds; the staleness
      clock), ``None`` while there is none.
    - ``reengagements``: kicks delivered for the current head SHA (reset when the branch moves);
      ``kicks_delivered``: kicks delivered since the last reset; ``last_kick_at``: the last one.
    - ``escalated``, ``escalated_at``, ``label_confirmed`` (the label was seen on the PR in a
      listing after it was escalated, not merely added with a 200: its absence later means a
      human removed it; issue 31), ``escalations`` (how many
      times, kept across resets), ``escalated_checks`` (the failing checks escalated over),
      ``over_incident`` (all those checks were found to be shared breakage after the
      escalation), ``adopted`` (escalated because the PR wore the label, not by this ledger:
      no escalation comment is posted for it; a green head un-parks it like any other),
      ``comment_pending`` (the escalation comment was refused outright, so nothing was
      posted: it is tried again next pass).
    - ``reviewer_sha`` / ``reviewer_tree`` / ``reviewed_at``: the head (and its tree, when
      known) the reviewer's pass left and when it was reconciled (the label removed, or the
      head gone green: a repair); kept
      across resets, for the hand-off note, and not counted as an attempt.
    - ``last_seen``: the last pass that listed the PR (pruning).
    """

    repo: str
    number: int
    last_seen: float
    head_sha: str | None = None
    head_tree: str | None = None
    trees: list[str] = field(default_factory=list)
    failing: list[str] = field(default_factory=list)
    excerpt: str = ""
    red_since: float | None = None
    reengagements: int = 0
    kicks_delivered: int = 0
    last_kick_at: float | None = None
    escalated: bool = False
    escalated_at: float | None = None
    label_confirmed: bool = False
    escalations: int = 0
    escalated_checks: list[str] = field(default_factory=list)
    over_incident: bool = False
    adopted: bool = False
    comment_pending: bool = False
    reviewer_sha: str | None = None
    reviewer_tree: str | None = None
    reviewed_at: float | None = None

    @property
    def key(self) -> str:
        """``owner/repo#number``."""
        return pr_key(self.repo, self.number)

    def reset(self) -> None:
        """Forget the attempts (a green head, an un-park): trees, failing checks, excerpt, the
        staleness clock, the kicks and the escalation. ``escalations`` and the reviewer's stamp
        stay (the hand-off note needs them)."""
        self.head_sha = self.head_tree = None
        self.trees, self.failing, self.excerpt = [], [], ""
        self.red_since = self.last_kick_at = None
        self.reengagements = self.kicks_delivered = 0
        self.escalated = self.label_confirmed = self.over_incident = False
        self.adopted = self.comment_pending = False
        self.escalated_at = None
        self.escalated_checks = []


def open_ledger(path: str | os.PathLike[str]) -> Ledger:
    """The ledger at ``path``; a file that is not a usable ledger (corrupt, another schema
    version, an unknown layout) is moved aside to ``<path>.unusable.<epoch>`` with its ``-wal``
    and ``-shm`` files, and a new one started: the ledger is a cache of what the forge's labels
    say (design adr-0010), so losing it costs fix budget, never a second comment. Raises
    ``OSError`` or ``sqlite3.Error`` when even a new file cannot be opened."""
    import logging
    import time

    try:
        return Ledger(path)
    except sqlite3.DatabaseError as exc:
        aside = f"{path}.unusable.{int(time.time())}"
        for suffix in ("", "-wal", "-shm"):
            try:
                os.replace(f"{path}{suffix}", f"{aside}{suffix}")
            except FileNotFoundError:
                pass
        logging.getLogger("repeat_failure").error(
            "fix-loop ledger unusable: moved aside, starting a new one",
            extra={"event": "fixloop_ledger_reset", "path": str(path), "moved_to": aside,
                   "error": str(exc)})
        return Ledger(path)


class Ledger:
    """The SQLite ledger at ``path`` (created with its directory, mode 0600). Raises
    ``sqlite3.Error`` or ``OSError`` when it cannot be opened; a file that is not this ledger
    (another schema version, or a ``prs`` table of another layout) raises
    ``sqlite3.DatabaseError`` naming the problem."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
        os.close(fd)
        self._db = sqlite3.connect(self.path, isolation_level=None, timeout=10,
                                   check_same_thread=False)
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = NORMAL")
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version == 0:
            columns = ", ".join(f"{name} {kind}" for name, kind in _COLUMNS.items())
            with self._db:
                self._db.execute("BEGIN")
                self._db.execute(f"CREATE TABLE IF NOT EXISTS prs ({columns})")
                self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        elif version != SCHEMA_VERSION:
            self._db.close()
            raise sqlite3.DatabaseError(f"{self.path}: ledger schema version {version}, this "
                                        f"version of repeat-failure reads {SCHEMA_VERSION}")
        found = [row[1] for row in self._db.execute("PRAGMA table_info(prs)")]
        if found != list(_COLUMNS):
            self._db.close()
            raise sqlite3.DatabaseError(f"{self.path}: the prs table has another layout")

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    def get(self, key: str) -> Entry | None:
        """The entry for ``key`` (``owner/repo#number``), or ``None``."""
        row = self._db.execute(f"SELECT {', '.join(_COLUMNS)} FROM prs WHERE key = ?",
                               (key,)).fetchone()
        return _entry(row) if row else None

    def put(self, entry: Entry) -> None:
        """Write ``entry`` (insert or replace), one transaction."""
        data = asdict(entry)
        values = {"key": entry.key, **{k: data[k] for k in _COLUMNS if k != "key"}}
        for name in _JSON_FIELDS:
            values[name] = json.dumps(values[name])
        for name in _BOOL_FIELDS:
            values[name] = int(values[name])
        names = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        self._db.execute(f"INSERT OR REPLACE INTO prs ({names}) VALUES ({marks})",
                         tuple(values.values()))

    def delete(self, key: str) -> None:
        """Remove the entry for ``key`` (nothing when absent)."""
        self._db.execute("DELETE FROM prs WHERE key = ?", (key,))

    def entries(self) -> Iterator[Entry]:
        """Every entry, in key order."""
        rows = self._db.execute(f"SELECT {', '.join(_COLUMNS)} FROM prs ORDER BY key").fetchall()
        for row in rows:
            yield _entry(row)

    def prune(self, repos: set[str], before: float) -> list[str]:
        """Delete the entries of ``repos`` last seen before ``before`` (epoch seconds); the
        keys deleted."""
        gone = [e.key for e in self.entries() if e.repo in repos and e.last_seen < before]
        if gone:
            with self._db:
                self._db.execute("BEGIN")
                self._db.executemany("DELETE FROM prs WHERE key = ?", [(k,) for k in gone])
        return gone


def _entry(row: tuple[Any, ...]) -> Entry:
    data = dict(zip(_COLUMNS, row))
    data.pop("key")
    for name in _JSON_FIELDS:
        data[name] = json.loads(data[name])
    for name in _BOOL_FIELDS:
        data[name] = bool(data[name])
    known = {f.name for f in fields(Entry)}
    return Entry(**{k: v for k, v in data.items() if k in known})
