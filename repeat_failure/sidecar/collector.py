"""Collector: take raw record files from the shared volume by rename-then-read.

Contract (docs/operations.md "Shared volume", spec Constraints):

* ``records/<agent>.jsonl`` is renamed to ``records/<agent>.jsonl.collecting.<n>`` first, so new
  records go to a fresh file and none are torn by the collection itself.
* The renamed file is read, its lines handed on (the caller parses and scrubs them), and then
  deleted by :meth:`Collector.release`. Its descriptor stays open for ``grace_s`` seconds: a
  writer that opened the old name just before the rename still lands in that inode, and what it
  appends is read on the next passes ("grace" files).
* Leftover ``.collecting.*`` files (a sidecar that died mid-pass) are read on the next pass.
* A line longer than 4095 bytes is rejected as ``oversized`` without being held in memory; a last
  line with no newline when the grace period ends is ``torn``; an oversized line that is such a
  fragment with the next record appended to it gives ``oversized`` and that record (a shorter
  one goes on whole: the pipeline counts the fragment ``torn`` and takes the record); a path that is a symlink, a FIFO
  or anything but a regular file is ``unreadable`` and removed without being followed.
* A record file that others may read or write (mode ``o+r``/``o+w``: the hook writes it
  ``0660`` under ``umask 007``), that has another name (a hard link), or whose owner is neither the sidecar's user nor in the
  records directory's group, is ``insecure``: removed unread, one rejection per file. Records
  are the agent's commands and may hold secrets before scrubbing; a file others can read leaked
  them already, and one others can write may carry forged records.
* Each file removed unread is also named in the batch (:attr:`Batch.rejected_files`: its name,
  the reason and what was wrong with it), for the caller to log.

:class:`Watcher` wakes the caller on writes (inotify) and on config changes; the caller's timer
guarantees a pass at least every ``collect_interval_s``.
"""

from __future__ import annotations

import errno
import itertools
import os
import shutil
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import inotify_simple

from repeat_failure.rules.parse import (INSECURE, MAX_LINE_BYTES, OVERSIZED, TORN, UNREADABLE,
                                          salvage)

_CHUNK = 1 << 16
COLLECTING = ".collecting."


class _Lines:
    """Splits a byte stream into lines, dropping (and reporting) lines over the size limit.

    A line over the limit that ends in a record after a fragment (:func:`salvage`: a short
    write's fragment and the next record together pass the limit) gives ``oversized`` and then
    that record, so a partial write never costs the next good record; a shorter such line is
    handed on whole, and the pipeline takes the record from it when it does not parse."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._discarding = False
        #: While discarding: the line's last bytes, where a record after a fragment would be.
        self._tail = bytearray()

    def _keep_tail(self, data: bytes | bytearray) -> None:
        self._tail += data
        del self._tail[:-MAX_LINE_BYTES]  # a record is at most 4095 bytes, after 1 of a fragment

    def feed(self, data: bytes) -> Iterator[bytes | str]:
        """Yield each complete line (bytes, without newline) or the reason string ``oversized``."""
        start = 0
        while True:
            nl = data.find(b"\n", start)
            if nl < 0:
                break
            if self._discarding:
                self._discarding = False
                self._buf.clear()
                self._keep_tail(data[start:nl])
                record = salvage(self._tail)
                self._tail.clear()
                if record is not None:
                    yield record
            else:
                if len(self._buf) + nl - start >= MAX_LINE_BYTES:
                    self._keep_tail(self._buf)
                    self._keep_tail(data[start:nl])
                    self._buf.clear()
                    yield OVERSIZED
                    record = salvage(self._tail)
                    self._tail.clear()
                    if record is not None:
                        yield record
                else:
                    self._buf += data[start:nl]
                    yield bytes(self._buf)
                    self._buf.clear()
            start = nl + 1
        rest = len(data) - start
        if self._discarding:
            self._keep_tail(data[start:])
            return
        if len(self._buf) + rest >= MAX_LINE_BYTES:
            self._keep_tail(self._buf)
            self._keep_tail(data[start:])
            self._buf.clear()
            self._discarding = True
            yield OVERSIZED
        else:
            self._buf += data[start:]

    def pending(self) -> int:
        """Bytes fed but not yet handed out as a line (a partial line being assembled)."""
        return 0 if self._discarding else len(self._buf)

    def finish(self) -> Iterator[str]:
        """End of stream: a partial last line is ``torn``."""
        if self._buf:
            self._buf.clear()
            yield TORN
        self._discarding = False
        self._tail.clear()


@dataclass
class _Held:
    """A collected file: renamed away, read as far as the budget allowed, its descriptor kept
    open for late writers until ``deadline`` (and until it is read to the end). It stays on
    disk until then, so a sidecar killed meanwhile reads the rest at its next start."""

    agent: str
    name: str
    fd: int
    deadline: float
    lines: _Lines = field(default_factory=_Lines)
    read: int = 0
    at_eof: bool = False

    @property
    def offset(self) -> int:
        """Bytes of complete lines handed out: where a restart resumes (the checkpoint)."""
        return self.read - self.lines.pending()


@dataclass
class Batch:
    """What one pass read for one agent: ``lines`` are raw record lines (bytes, may hold
    secrets) or rejection reasons (str). ``checkpoint`` maps each collected file still on disk to
    the offset its lines were handed out up to: save it with the records' effects, then hand the
    batch to :meth:`Collector.release`, which deletes the files that are done. ``more`` says the
    byte budget ran out: call :meth:`Collector.collect` again soon."""

    agent: str
    lines: list[bytes | str] = field(default_factory=list)
    more: bool = False
    checkpoint: dict[str, int] = field(default_factory=dict)
    done: list[str] = field(default_factory=list)
    #: Files removed unread: (name as found, ``unreadable`` or ``insecure``, what was wrong
    #: with it, e.g. ``a symlink`` or ``others may read or write it (mode 0666)``). The name
    #: is raw (an agent chose it): scrub it before logging.
    rejected_files: list[tuple[str, str, str]] = field(default_factory=list)


#: Collected files held open per agent at most; at it the oldest read to the end is closed early
#: so each pass can still take the live file (a record of a writer that opened it more than a
#: whole series of passes ago is lost, not the sidecar; issue 28 item 14).
MAX_HELD_PER_AGENT = 64


class Collector:
    """Collects ``<records_dir>/<agent>.jsonl`` files.

    ``grace_s`` is how long a collected file's descriptor stays open after it is read (0 closes
    it at once: only for tests, a late writer's record is then lost); ``clock`` returns
    monotonic seconds (injectable for tests); ``budget`` caps the bytes one pass reads per agent,
    so a huge file is processed in slices with bounded memory and lock hold times.

    Every file operation is relative to a descriptor of ``records_dir`` opened with
    ``O_NOFOLLOW``: if ``records_dir`` itself is replaced by a symlink, the pass reads nothing
    (one ``unreadable``) instead of following it out of the shared directory.

    Crash safety: a file is deleted only after its grace period, once read to the end and once
    the caller saved the batch's checkpoint with the records' effects. At start-up
    :meth:`restore` takes the saved checkpoint, so a leftover file is read from where the saved
    state stops: nothing is lost and nothing counted twice.
    """

    def __init__(self, records_dir: str | os.PathLike[str], grace_s: float,
                 clock: Callable[[], float] = time.monotonic, budget: int = 256 << 10) -> None:
        self.records_dir = Path(records_dir)
        self.grace_s = grace_s
        self.budget = budget
        self._clock = clock
        self._held: list[_Held] = []
        self._closed: dict[str, dict[str, int]] = {}  # agent -> closed name -> final offset
        self._resume: dict[str, int] = {}
        self._seq = itertools.count()
        #: Agents whose leftover ``.collecting.*`` files were all taken: the records directory
        #: is not listed for them again (issue 28 item 16: a pass listed it once per agent,
        #: every file of every agent each time). Only this collector makes such files, and it
        #: knows those it makes; leftovers come from an earlier process.
        self._listed: set[str] = set()

    def restore(self, checkpoint: dict[str, int]) -> None:
        """Resume leftover files at the offsets a saved checkpoint gives (file name -> bytes)."""
        self._resume.update({n: o for n, o in checkpoint.items()
                             if isinstance(n, str) and isinstance(o, int) and o >= 0})
        self._listed.clear()

    # -- one pass ------------------------------------------------------------------------------

    def collect(self, agent: str) -> Batch:
        """Run one pass for ``agent``: read held files further, then leftover ``.collecting.*``
        files, then rename the live file away and read it, up to the byte budget. Never raises
        for file trouble; it becomes an ``unreadable`` rejection in the batch."""
        batch = Batch(agent)
        budget = [self.budget]
        now = self._clock()
        mine = [h for h in self._held if h.agent == agent]
        for held in list(mine):  # oldest first
            self._read(held, batch, budget)
            # At the bound, the oldest files read to the end are closed early so the live file
            # can be taken below (issue 28 item 14: at exactly the bound, nothing was closed and
            # the live file not taken, so collection stalled until a grace period ended).
            if held.at_eof and (now >= held.deadline or len(mine) >= MAX_HELD_PER_AGENT):
                self._close(held, batch)
                mine.remove(held)
        try:
            dir_fd = os.open(self.records_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                             | os.O_CLOEXEC)
        except OSError:
            batch.lines.append(UNREADABLE)
            return self._finish(batch)
        try:
            live = f"{agent}.jsonl"
            if agent not in self._listed:
                held_names = {h.name for h in self._held} | set(self._closed.get(agent, ()))
                leftovers = sorted(n for n in os.listdir(dir_fd)
                                   if n.startswith(live + COLLECTING) and n not in held_names)
                retry = False
                for name in leftovers:
                    if budget[0] <= 0 or len(mine) >= MAX_HELD_PER_AGENT:
                        retry = True
                        break
                    rejected = len(batch.rejected_files)
                    held = self._take(agent, dir_fd, name, batch, now, budget)  # type: ignore[assignment]
                    if held is not None:
                        mine.append(held)
                    elif len(batch.rejected_files) == rejected:  # left for a later pass
                        retry = True
                if not retry:
                    self._listed.add(agent)
            if budget[0] > 0 and len(mine) < MAX_HELD_PER_AGENT:
                target = f"{live}{COLLECTING}{time.time_ns()}-{next(self._seq)}"
                try:
                    os.rename(live, target, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                except FileNotFoundError:
                    pass
                except OSError:
                    batch.lines.append(UNREADABLE)
                else:
                    self._take(agent, dir_fd, target, batch, now, budget, shown=live)
        except OSError:
            batch.lines.append(UNREADABLE)
        finally:
            os.close(dir_fd)
        return self._finish(batch)

    def _finish(self, batch: Batch) -> Batch:
        agent = batch.agent
        batch.checkpoint = {h.name: h.offset for h in self._held if h.agent == agent}
        batch.checkpoint.update(self._closed.get(agent, {}))
        batch.done = list(self._closed.get(agent, {}))
        batch.more = any(h.agent == agent and not h.at_eof for h in self._held)
        return batch

    def _take(self, agent: str, dir_fd: int, name: str, batch: Batch, now: float,
              budget: list[int], shown: str | None = None) -> _Held | None:
        """Open ``name`` (in ``dir_fd``) and read it as far as the budget goes, or reject it:
        a file never to be read is removed and named in ``batch.rejected_files`` under
        ``shown`` (the live name it was renamed from) or its own name."""
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         dir_fd=dir_fd)
        except OSError as exc:
            batch.lines.append(UNREADABLE)
            if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR, errno.EACCES, errno.EPERM):
                # A symlink, FIFO or socket is never ours to read; a file the sidecar may not
                # open (an agent's umask 077) never will be: removed, counted once.
                what = ("a symlink" if exc.errno == errno.ELOOP
                        else "a socket or FIFO" if exc.errno == errno.ENXIO
                        else "a directory" if exc.errno == errno.EISDIR
                        else "not readable by the sidecar (permission denied)")
                batch.rejected_files.append((shown or name, UNREADABLE, what))
                _discard(dir_fd, name)
            return None  # out of descriptors, say: leave the file for a later pass
        info = os.fstat(fd)
        what = (_not_regular(info.st_mode) if not stat.S_ISREG(info.st_mode)  # type: ignore[assignment]
                else _untrusted(info, os.fstat(dir_fd)))
        if what is not None:
            os.close(fd)
            reason = UNREADABLE if not stat.S_ISREG(info.st_mode) else INSECURE
            batch.lines.append(reason)
            batch.rejected_files.append((shown or name, reason, what))
            _discard(dir_fd, name)
            return None
        held = _Held(agent, name, fd, now + self.grace_s)
        start = self._resume.pop(name, 0)
        if start:
            held.read = os.lseek(fd, start, os.SEEK_SET)
        self._held.append(held)
        self._read(held, batch, budget)
        if held.at_eof and self.grace_s <= 0:
            self._close(held, batch)
        return held

    def _read(self, held: _Held, batch: Batch, budget: list[int]) -> None:
        held.at_eof = False
        while budget[0] > 0:
            try:
                data = os.read(held.fd, min(_CHUNK, budget[0]))
            except OSError:
                batch.lines.append(UNREADABLE)
                held.at_eof = True
                return
            if not data:
                held.at_eof = True
                return
            budget[0] -= len(data)
            held.read += len(data)
            batch.lines.extend(held.lines.feed(data))

    def _close(self, held: _Held, batch: Batch) -> None:
        batch.lines.extend(held.lines.finish())
        os.close(held.fd)
        self._held.remove(held)
        self._closed.setdefault(held.agent, {})[held.name] = held.read

    def release(self, batch: Batch) -> None:
        """Delete the files the batch finished with (read to the end, grace period over). Call
        after the batch's records and checkpoint are saved."""
        if not batch.done:
            return
        try:
            dir_fd = os.open(self.records_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                             | os.O_CLOEXEC)
        except OSError:
            return
        try:
            closed = self._closed.get(batch.agent, {})
            for name in batch.done:
                _discard(dir_fd, name)
                closed.pop(name, None)
        finally:
            os.close(dir_fd)

    def flush(self, agent: str | None = None) -> list[Batch]:
        """Read every held file (of ``agent``, or all) to the end and close it: end their grace
        now. Returns one batch per agent (release each after saving it)."""
        agents = sorted({h.agent for h in self._held if agent is None or h.agent == agent}
                        | ({agent} if agent else set(self._closed)))
        batches = []
        for name in agents:
            batch = Batch(name)
            for held in [h for h in self._held if h.agent == name]:
                self._read(held, batch, [1 << 62])
                self._close(held, batch)
            batches.append(self._finish(batch))
        return batches

    def due_agents(self) -> set[str]:
        """The agents with a held file that needs a pass now: one not read to the end, or one
        whose grace period is over."""
        now = self._clock()
        return {h.agent for h in self._held if not h.at_eof or now >= h.deadline}

    def next_deadline(self) -> float | None:
        """The monotonic time a held file next needs a pass (now, if one is not read to the
        end), or ``None``."""
        return min((h.deadline if h.at_eof else self._clock() for h in self._held), default=None)

    def holding(self) -> int:
        """How many collected files are still held open for late writers."""
        return len(self._held)


def _untrusted(info: os.stat_result, records_dir: os.stat_result) -> str | None:
    """Why a record file (``info``, from ``fstat``) may not be read, or ``None`` when it may:
    nobody but its owner and group can read or write it, it has no other name (a hard link
    planted at the record path would make the sidecar read, and export scrubbed lines of, a
    file that lives elsewhere), and it belongs to the sidecar's user or to the records
    directory's group (the set-group-ID directory gives every file created in it that
    group)."""
    if info.st_mode & (stat.S_IROTH | stat.S_IWOTH):
        return f"others may read or write it (mode {stat.S_IMODE(info.st_mode):04o})"
    if info.st_nlink != 1:
        return f"it has {info.st_nlink} names (a hard link)"
    if info.st_uid == os.geteuid() or info.st_gid == records_dir.st_gid:
        return None
    return (f"owned by uid {info.st_uid} and gid {info.st_gid}: neither the sidecar's user nor "
            "the records directory's group")


def _not_regular(mode: int) -> str:
    """What a file that is not a regular one is (for a rejection's log line)."""
    return ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "a device" if stat.S_ISCHR(mode)
            or stat.S_ISBLK(mode) else "not a regular file")


def _discard(dir_fd: int, name: str) -> None:
    """Remove ``name`` in ``dir_fd`` whatever it is (a directory tree is removed without
    following symlinks); never raises."""
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    except (IsADirectoryError, PermissionError):
        shutil.rmtree(name, dir_fd=dir_fd, ignore_errors=True)
    except OSError:
        pass


class Watcher:
    """inotify on the records directory (and the config file's directory, if any), plus the
    session-log directories the caller names (:meth:`watch_session_dirs`).

    :meth:`wait` blocks until a write, a config change, a session-log change, or ``timeout_s``
    and says which. A queue overflow (``IN_Q_OVERFLOW``) or a watched directory that vanished
    counts as "may have changed": the caller then collects, and the timer pass covers anything
    missed.
    """

    #: Session-log directories watched at most (each costs one inotify watch).
    MAX_SESSION_WATCHES = 128
    _SESSION_MASK = (inotify_simple.flags.CLOSE_WRITE | inotify_simple.flags.MODIFY
                     | inotify_simple.flags.CREATE | inotify_simple.flags.MOVED_TO)

    _RECORD_MASK = (inotify_simple.flags.CLOSE_WRITE | inotify_simple.flags.MODIFY
                    | inotify_simple.flags.CREATE | inotify_simple.flags.MOVED_TO)
    _CONFIG_MASK = (inotify_simple.flags.CLOSE_WRITE | inotify_simple.flags.MOVED_TO
                    | inotify_simple.flags.CREATE | inotify_simple.flags.DELETE)

    def __init__(self, records_dir: str | os.PathLike[str],
                 config_path: str | os.PathLike[str] | None = None) -> None:
        self._inotify = inotify_simple.INotify()
        self._records_dir = Path(records_dir)
        # The file's own folder, not its resolved one: a ConfigMap swaps a `..data` symlink in
        # that folder and deletes the old timestamped folder the file resolved to.
        self._config_dir = Path(config_path).absolute().parent if config_path else None
        self._records_wd: int | None = None
        self._config_wd: int | None = None
        self._session_wds: dict[int, Path] = {}
        #: Agents whose record file changed since :meth:`take_changed_agents` (None: any may
        #: have, after a queue overflow or a lost watch).
        self._changed: set[str] | None = set()
        #: Session files the watches saw change since :meth:`take_session_paths` (at most
        #: :data:`MAX_SESSION_PATHS`; None: more, or an overflow).
        self._session_paths: set[Path] | None = set()
        self._arm()

    #: Session files remembered between two polls at most; more means "any may have changed".
    MAX_SESSION_PATHS = 1024

    def take_session_paths(self) -> set[Path] | None:
        """The session files whose change the waits since the last call saw (a directory's
        watch names them), or None when more than :data:`MAX_SESSION_PATHS` or an overflow;
        starts a new set."""
        paths, self._session_paths = self._session_paths, set()
        return paths

    def take_changed_agents(self) -> set[str] | None:
        """The agents whose ``<agent>.jsonl`` the waits since the last call saw change (by
        the inotify event's name), or None when any may have (an overflow, a lost watch);
        starts a new set."""
        changed, self._changed = self._changed, set()
        return changed

    def watch_session_dirs(self, dirs: list[Path]) -> None:
        """Watch exactly ``dirs`` (the first :attr:`MAX_SESSION_WATCHES`) for session-log
        writes; a directory that cannot be watched (gone, no permission) is skipped."""
        wanted = list(dict.fromkeys(dirs))[:self.MAX_SESSION_WATCHES]
        for wd, path in list(self._session_wds.items()):
            if path not in wanted:
                try:
                    self._inotify.rm_watch(wd)
                except OSError:
                    pass
                del self._session_wds[wd]
        have = set(self._session_wds.values())
        for path in wanted:
            if path not in have:
                try:
                    self._session_wds[self._inotify.add_watch(path, self._SESSION_MASK)] = path
                except OSError:
                    continue

    def _arm(self) -> None:
        if self._records_wd is None:
            try:
                self._records_wd = self._inotify.add_watch(self._records_dir, self._RECORD_MASK)
            except OSError:
                self._records_wd = None
        if self._config_dir is not None and self._config_wd is None:
            try:
                self._config_wd = self._inotify.add_watch(self._config_dir, self._CONFIG_MASK)
            except OSError:
                self._config_wd = None

    def wait(self, timeout_s: float) -> tuple[bool, bool, bool]:
        """Wait up to ``timeout_s`` seconds; return (records may have changed, config may have
        changed, session logs may have changed)."""
        self._arm()
        events = self._inotify.read(timeout=max(0, int(timeout_s * 1000)))
        records = config = sessions = False
        for event in events:
            if event.mask & inotify_simple.flags.Q_OVERFLOW:
                records = config = sessions = True
                self._changed = self._session_paths = None
            elif event.mask & inotify_simple.flags.IGNORED:
                # The watched directory went away; re-arm on the next wait.
                if event.wd == self._records_wd:
                    self._records_wd, records = None, True
                    self._changed = None
                if event.wd == self._config_wd:
                    self._config_wd, config = None, True
                if self._session_wds.pop(event.wd, None) is not None:
                    sessions = True
            elif event.wd == self._records_wd:
                if COLLECTING not in event.name:
                    records = True
                    if self._changed is not None and event.name.endswith(".jsonl"):
                        self._changed.add(event.name[:-len(".jsonl")])
            elif event.wd == self._config_wd:
                config = True
            elif event.wd in self._session_wds:
                sessions = True
                if self._session_paths is not None and event.name:
                    self._session_paths.add(self._session_wds[event.wd] / event.name)
                    if len(self._session_paths) > self.MAX_SESSION_PATHS:
                        self._session_paths = None
        return records, config, sessions

    def close(self) -> None:
        """Release the inotify descriptor."""
        self._inotify.close()
