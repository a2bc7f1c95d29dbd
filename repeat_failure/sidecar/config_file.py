"""The sidecar's config file, as it changes on disk: read at start-up, read again when its inode,
mtime or size change, and a change that does not validate refused with a log line, the last
good config staying in force.

What a new config changes is the sidecar's business (:meth:`Sidecar.reload_config`); this
module only says when there is one and what it is (:func:`repeat_failure.config.load_config`).
"""

from __future__ import annotations

import logging
import os

from repeat_failure.config import Config, ConfigError, load_config

log = logging.getLogger("repeat_failure")


class ConfigFile:
    """The config file at ``path`` (``None``: the built-in defaults, never read again).

    With ``optional`` a file missing at start-up is not an error: :meth:`initial` gives the
    built-in defaults (check off) until the file appears; once read, the file behaves as
    without the flag."""

    def __init__(self, path: str | os.PathLike[str] | None, optional: bool = False) -> None:
        self.path = path
        self._stamp = self.stamp()
        self._seen = not (optional and path is not None and self._stamp is None)

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
        :meth:`reread` (or at start-up): appearing or disappearing counts."""
        return self._stamp != self.stamp()

    def reread(self, force: bool = False) -> Config | None:
        """The file's config if it changed since last looked at (or ``force``); None when it
        did not, when an optional file is still missing, or when the file does not validate
        (logged "config change refused"). Never raises for the file's content."""
        stamp = self.stamp()
        if not force and stamp == self._stamp:
            return None
        self._stamp = stamp
        if stamp is None and not self._seen:
            return None  # --config-optional and still no file: the defaults stay, no log line
        self._seen = True
        try:
            return load_config(self.path, allow_empty=False)
        except ConfigError as exc:
            log.error("config change refused, keeping the previous config",
                      extra={"error": str(exc)})
            return None
