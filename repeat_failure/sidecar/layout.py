"""The shared volume as the sidecar keeps it: its folders (:data:`hook.LAYOUT_MODES`:
``records/``, ``state/``, the hook folders, each with its mode) and each agent's hook files.

The agents share the volume and may delete, replace or re-mode what is on it while the sidecar
runs; :class:`SharedDir` notices at each pass and puts it back (a symlink in a folder's place is
removed, never followed; a folder another user made is moved aside), logging once per distinct
problem rather than at every pass. The file operations themselves are :mod:`hook`'s.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from repeat_failure.sidecar import hook

log = logging.getLogger("repeat_failure")

#: A folder as found: (is a real directory, permission bits), or None when absent.
Found = dict[str, tuple[bool, int] | None]


class SharedDir:
    """The shared dir at ``path`` (absolute: the hooks bake it into the agents' shells) whose
    hooks chain to ``chain_bash_env`` (or to nothing). Nothing is touched on disk until
    :meth:`prepare`."""

    def __init__(self, path: Path, chain_bash_env: str | None) -> None:
        self.path = path
        self.chain_bash_env = chain_bash_env
        self._error: str | None = None  # the last preparation error logged
        self._ok: Found | None = None  # the folders as the last preparation left them

    def check_names(self, agent: str, backend: str) -> None:
        """Raise :class:`hook.HookError` if ``agent``, ``backend``, the path or the chained
        file cannot go into a hook (:func:`hook.check_names`)."""
        hook.check_names(self.path, agent, backend, self.chain_bash_env)

    def folders(self) -> Found:
        """Each shared-dir folder of :data:`hook.LAYOUT_MODES`: (is a real directory,
        permission bits), or None if absent; never follows a symlink. Raises ``OSError`` for
        a folder that cannot be looked at (a file where the shared dir should be)."""
        found: Found = {}
        for name in hook.LAYOUT_MODES:
            try:
                info = os.lstat(self.path / name)
            except FileNotFoundError:
                found[name] = None
            else:
                found[name] = (stat.S_ISDIR(info.st_mode), stat.S_IMODE(info.st_mode))
        return found

    def prepare(self) -> None:
        """:func:`hook.prepare_shared_dir`, whose failure is logged once per distinct error,
        not raised (the next passes try again); a folder an agent replaced is reported. Then
        remembers the folders as the file system left them (it may drop the set-group-ID bit),
        so :meth:`repair` does not log at every pass for a mode that cannot be set. Raises
        ``OSError`` only when the folders cannot even be looked at (:meth:`folders`)."""
        try:
            moved = hook.prepare_shared_dir(self.path)
        except OSError as exc:
            if str(exc) != self._error:
                self._error = str(exc)
                log.error("shared dir layout cannot be repaired; records are not collected until "
                          "it is", extra={"dir": str(self.path), "error": str(exc)})
        else:
            self._error = None
            for aside in moved:
                log.warning("a shared dir folder belonged to another user (an agent replaced "
                            "ours); moved aside and recreated",
                            extra={"dir": str(self.path), "moved_to": aside})
        self._ok = self.folders()

    def repair(self, hooks: Mapping[str, str]) -> None:
        """Recreate what someone deleted or replaced on the shared volume while the sidecar
        runs: the folders (a symlink in their place is removed, never followed; a folder whose
        mode was changed, say ``records/`` opened to others, gets its mode back), and the hook
        files of each agent in ``hooks`` (agent → backend; empty while the check is off) so a
        shell keeps finding its hook. Raises ``OSError`` or :class:`hook.HookError` when a
        hook cannot be rendered."""
        found = self.folders()
        if found != self._ok and found != {n: (True, m) for n, m in hook.LAYOUT_MODES.items()}:
            log.warning("shared dir layout missing, replaced or its modes changed, recreating",
                        extra={"dir": str(self.path)})
            self.prepare()
        for name, backend in hooks.items():
            if not hook.hook_path(self.path, name).is_file() or \
                    not hook.slow_path(self.path, name).is_file() or \
                    (self.chain_bash_env and not hook.trap_path(self.path, name).is_file()):
                log.warning("hook file missing, rendering it again", extra={"agent": name})
                self.render_hook(name, backend)

    def render_hook(self, agent: str, backend: str) -> None:
        """Write the agent's hook files (:func:`hook.render`). Raises ``OSError`` or
        :class:`hook.HookError`."""
        hook.render(self.path, agent, backend, self.chain_bash_env)

    def remove_hook(self, agent: str) -> bool:
        """Remove the agent's hook files (:func:`hook.remove`); True when there were some.
        Raises ``OSError``."""
        return hook.remove(self.path, agent)
