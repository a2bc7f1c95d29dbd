"""Finding an agent's session files: :func:`discover` (every match, with its ``lstat``) and
:class:`Scanner`, which finds the most recently modified ones again and again at a cost that
does not grow with the files that do not change (issue 28 item 13).

Claude Code writes one session file per ``claude -p`` run, so a long-lived agent's home holds
tens of thousands of them, almost all never written again. A rescan with :func:`discover` ran
``lstat`` and ``realpath`` on each (60,000 files: 30 % of a core and over 100 MB, past the
chart's 96Mi limit). :class:`Scanner` keeps, per directory the globs reach, the directory's
``(device, inode, mtime)`` and a digest of each file's name and inode number: a directory
whose stamp did not change is not listed again, and a changed one is listed (names and inode
numbers, no ``stat``) and only its new files are ``lstat``-ed. The files followed are ``lstat``-ed at each
scan. Whether a directory leaves the home through a symlink is decided once per directory, not
once per file (a regular file's real path is its directory's plus its name).

What this misses until the next full scan (every :data:`FULL_SCAN_S`, or at once when a
followed file disappears) unless inotify names it (the sidecar passes the names its watches
report as ``hints``): an old file, not among those followed, that starts to grow again without
its directory changing.
"""

from __future__ import annotations

import fnmatch
import heapq
import os
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

#: Seconds between full scans (every file ``lstat``-ed again).
FULL_SCAN_S = 300.0
#: A directory changed this recently (seconds, by its mtime) is listed again at the next scan
#: too: a file created in the same clock tick as the last listing would otherwise be missed.
RACY_S = 2.0
_SKIPPED_SUFFIXES = ("-wal", "-shm", "-journal")


def discover(globs: Iterable[tuple[Path, str]],
             home: Path) -> list[tuple[Path, os.stat_result]]:
    """The session files the globs (:func:`repeat_failure.sessions.tail.expand_globs`) find
    under ``home``, with their ``lstat``: regular files only (never a symlink, a FIFO or a
    directory), not a SQLite ``-wal``, ``-shm`` or ``-journal`` file, and not reached through a
    symlinked directory that leaves the home. A directory that vanishes during the walk is
    skipped. This is how ``repeat-failure replay`` finds the session logs in a home (issue 19);
    the sidecar finds them with :class:`Scanner`."""
    real_home = Path(os.path.realpath(home))
    found: dict[Path, os.stat_result] = {}
    for base, pattern in globs:
        try:
            for path in base.glob(pattern):
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                if (stat.S_ISREG(st.st_mode) and not path.name.endswith(_SKIPPED_SUFFIXES)
                        and inside(path, real_home)):
                    found[path] = st
        except OSError:  # a directory vanished during the walk: the next scan sees it
            continue
    return list(found.items())


def inside(path: Path, real_home: Path) -> bool:
    """False for a path that leaves ``real_home`` (resolved) through a symlinked directory."""
    try:
        real = Path(os.path.realpath(path))
    except (OSError, ValueError):
        return False
    return real == real_home or real_home in real.parents


@dataclass
class _Dir:
    """What a scan knows of one directory the globs reach."""

    stamp: tuple[int, int, int] | None = None  # (dev, ino, mtime_ns) when listed; None: list
    #: ``hash((name, inode))`` of its matching files when listed: a new name, or a new inode
    #: under an old name (or an old inode number reused by a new file), is a new file.
    known: set[int] = field(default_factory=set)
    inside: bool = True


class Scanner:
    """The session files of ``globs`` (``(base, pattern)`` pairs, the pattern's last part a
    file-name pattern) under ``home``, found again at each :meth:`scan` without ``lstat``-ing
    the files that did not change (this module's docstring). ``wall`` gives epoch seconds and
    ``monotonic`` monotonic seconds (both injectable for tests)."""

    def __init__(self, globs: Iterable[tuple[Path, str]], home: Path,
                 wall: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.globs = [(base, Path(pattern)) for base, pattern in globs]
        self.real_home = Path(os.path.realpath(home))
        self._wall, self._monotonic = wall, monotonic
        self._dirs: dict[tuple[Path, str], _Dir] = {}  # (directory, file-name pattern) ->
        #: A directory a wildcard part lists -> (its stamp when listed, None: list again; the
        #: names of its subdirectories).
        self._subdirs: dict[Path, tuple[tuple[int, int, int] | None, list[str]]] = {}
        self._full_at: float | None = None
        #: Syscalls that touch one file (``lstat``), for tests and benchmarks.
        self.file_stats = 0

    def _directories(self) -> list[tuple[Path, str]]:
        """Each directory the globs' directory parts reach now, with its file-name pattern.
        A wildcard part lists the subdirectories of the directory it applies to, again only
        when that directory's stamp changed (Claude Code's ``projects/*/*/subagents`` would
        otherwise go through every session file of a project at each scan)."""
        out = []
        visited: set[Path] = set()
        for base, pattern in self.globs:
            dirs = [base]
            for part in pattern.parent.parts:
                if not any(c in part for c in "*?["):
                    dirs = [d / part for d in dirs]
                    continue
                dirs = [d / n for d in dirs for n in self._subdir_names(d, visited)
                        if fnmatch.fnmatchcase(n, part)]
            out += [(d, pattern.name) for d in dirs]
        for gone in [d for d in self._subdirs if d not in visited]:
            del self._subdirs[gone]
        return out

    def _subdir_names(self, directory: Path, visited: set[Path]) -> list[str]:
        """The names of ``directory``'s subdirectories (a symlink to one counts, as in
        ``Path.glob``), listed again only when its stamp changed; [] when it cannot be
        listed."""
        visited.add(directory)
        try:
            st = os.stat(directory)
        except OSError:
            return []
        stamp = (st.st_dev, st.st_ino, st.st_mtime_ns)
        cached = self._subdirs.get(directory)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        names = []
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    try:
                        if entry.is_dir():
                            names.append(entry.name)
                    except OSError:
                        continue
        except OSError:
            return []
        racy = self._wall() - st.st_mtime_ns / 1e9 < RACY_S
        self._subdirs[directory] = (None if racy else stamp, names)
        return names

    def scan(self, followed: Iterable[Path], limit: int, hints: Iterable[Path] = ()
             ) -> list[tuple[Path, os.stat_result]]:
        """The ``limit`` most recently modified session files, each with a fresh ``lstat``:
        among the ``followed`` ones (the caller's, from the last scan), the ``hints`` (files
        inotify saw change; one the globs do not match is ignored) and every file that
        appeared since; among all of them at a full scan (the first, every
        :data:`FULL_SCAN_S`, and whenever a followed file is gone). Never raises for what the
        home holds (a directory that vanishes is skipped)."""
        now = self._monotonic()
        followed = list(followed)
        full = self._full_at is None or now - self._full_at >= FULL_SCAN_S
        fresh: dict[Path, os.stat_result] = {}
        for path in followed:
            st = self._lstat(path)
            if st is None:
                full = True  # a followed file is gone: the next newest must be found
            else:
                fresh[path] = st
        if full:
            self._full_at = now
        seen: set[tuple[Path, str]] = set()
        for where in self._directories():  # two globs may share a directory (Gemini CLI's)
            if where in seen:
                continue
            seen.add(where)
            self._scan_dir(where, full, fresh)
        for gone in [d for d in self._dirs if d not in seen]:
            del self._dirs[gone]
        for path in hints:  # an old file growing again, in a directory that did not change
            if path in fresh or path.name.endswith(_SKIPPED_SUFFIXES):
                continue
            if any(d == path.parent and fnmatch.fnmatchcase(path.name, n)
                   and self._dirs.get((d, n), _Dir(inside=False)).inside for d, n in seen):
                got = self._lstat(path)
                if got is not None:
                    fresh[path] = got
        newest = heapq.nlargest(limit, fresh.items(), key=lambda kv: kv[1].st_mtime_ns)
        return newest

    def _scan_dir(self, where: tuple[Path, str], full: bool,
                  fresh: dict[Path, os.stat_result]) -> None:
        """Add to ``fresh`` the new files of the directory ``where[0]`` matching the pattern
        ``where[1]`` (all of them when ``full``), listing it only when its stamp changed (or
        ``full``)."""
        directory, name = where
        try:
            st = os.stat(directory)
        except OSError:
            self._dirs.pop(where, None)
            return
        if not stat.S_ISDIR(st.st_mode):
            return
        stamp = (st.st_dev, st.st_ino, st.st_mtime_ns)
        known = self._dirs.get(where)
        if known is not None and known.stamp == stamp and not full:
            return
        if known is None or known.stamp is None or known.stamp[:2] != stamp[:2]:
            known = self._dirs[where] = _Dir(inside=inside(directory, self.real_home))
        if not known.inside:
            known.stamp = stamp
            return
        racy = self._wall() - st.st_mtime_ns / 1e9 < RACY_S
        keys: set[int] = set()
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    if (not fnmatch.fnmatchcase(entry.name, name)
                            or entry.name.endswith(_SKIPPED_SUFFIXES)):
                        continue
                    try:
                        if not entry.is_file(follow_symlinks=False):
                            continue
                        key = hash((entry.name, entry.inode()))
                    except OSError:
                        continue
                    keys.add(key)
                    if full or key not in known.known:
                        path = directory / entry.name
                        if path not in fresh:
                            got = self._lstat(path)
                            if got is not None:
                                fresh[path] = got
        except OSError:  # vanished while listed: the next scan sees it
            self._dirs.pop(where, None)
            return
        known.known = keys
        known.stamp = None if racy else stamp

    def _lstat(self, path: Path) -> os.stat_result | None:
        """``lstat`` of a regular file at ``path``, or None (gone, or not a regular file)."""
        self.file_stats += 1
        try:
            st = os.lstat(path)
        except OSError:
            return None
        return st if stat.S_ISREG(st.st_mode) else None
