"""The sidecar's config file, as it changes on disk: read at start-up, read again when its inode,
mtime or size change, and a change that does not validate refused with a log line, the last
good config staying in force. A change that turns the check off waits for a stable read
(:data:`OFF_SETTLE_S`): a file caught half-written must not cost the agent's records.

What a new config changes is the sidecar's business (:meth:`Sidecar.reload_config`); this
module only says when there is one and what it is (:func:`repeat_failure.config.load_config`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

from repeat_failure.config import Config, ConfigError, load_config

log = logging.getLogger("repeat_failure")

#: A change that turns the check off is acted on only once the file read the same (same inode,
#: mtime, size and config) at least this many seconds apart (issue 28 item 12: a config
#: rewritten line by line validated part-way without ``enabled``, which is off; the sidecar
#: removed the hooks and deleted the state and the records not yet read, 37 to 46 times in 101
#: rewrites). Off loses data; on, or any other change, is applied at once.
OFF_SETTLE_S = 2.0


class ConfigFile:
    """The config file at ``path`` (``None``: the built-in defaults, never read again).

    With ``optional`` a file missing at start-up is not an error: :meth:`initial` gives the
    built-in defaults (check off) until the file appears; once read, the file behaves as
    without the flag."""

    def __init__(self, path: str | os.PathLike[str] | None, optional: bool = False,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self._monotonic = monotonic
        self._stamp = self.stamp()
        self._seen = not (optional and path is not None and self._stamp is None)
        #: A read that would turn the check off, not yet acted on: (stamp, config, monotonic
        #: time first read).
        self._off: tuple[tuple[int, int, int] | None, Config, float] | None = None

    def stamp(self) -> tuple[int, int, int] | None:
        """``(inode, mtime in ns, size)`` of the file now, or None (no path, or no file)."""
        if self.path is None:
            return None
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def initial(self) -> Config:
        """The config to start with: the file's, or the defaults (logged) while an optional
        file is missing. Raises :class:`ConfigError` for a file that does not validate, or a
        required one that is missing."""
        if self._seen:
            return load_config(self.path)
        log.warning("config file not found: running with the built-in defaults (check off) "
                    "until it appears", extra={"config": str(self.path)})
        return Config()

    def changed(self) -> bool:
        """True when :meth:`stamp` differs from when the file was last looked at by
        :meth:`reread` (or at start-up): appearing or disappearing counts. Also True while a
        read that turns the check off waits to be confirmed (:meth:`reread` with ``current``),
        so the caller reads again."""
        return self._off is not None or self._stamp != self.stamp()

    def reread(self, force: bool = False, current: Config | None = None) -> Config | None:
        """The file's config if it changed since last looked at (or ``force``); None when it
        did not, when an optional file is still missing, or when the file does not validate
        (logged "config change refused"). Never raises for the file's content.

        With ``current`` (the config in force, check on), a config that turns the check off is
        returned only once the file has read the same (stamp and config) :data:`OFF_SETTLE_S`
        seconds apart: until then it is None, :meth:`changed` stays True so the caller reads
        again, and the first such read is logged ("config turns the check off: waiting for
        the file to settle"). A read in between that does not turn it off ends the wait."""
        stamp = self.stamp()
        if not force and stamp == self._stamp and self._off is None:
            return None
        self._stamp = stamp
        if stamp is None and not self._seen:
            return None  # --config-optional and still no file: the defaults stay, no log line
        self._seen = True
        try:
            new = load_config(self.path, allow_empty=False)
        except ConfigError as exc:
            self._off = None
            log.error("config change refused, keeping the previous config",
                      extra={"error": str(exc)})
            return None
        if current is None or not current.enabled or new.enabled or OFF_SETTLE_S <= 0:
            self._off = None
            return new
        now = self._monotonic()
        if self._off is None or self._off[0] != stamp or self._off[1] != new:
            if self._off is None:
                log.info("config turns the check off: waiting for the file to settle",
                         extra={"settle_s": OFF_SETTLE_S})
            self._off = (stamp, new, now)
            return None
        if now - self._off[2] < OFF_SETTLE_S:
            return None
        self._off = None
        return new
