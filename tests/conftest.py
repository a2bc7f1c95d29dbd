"""Shared fixtures: a clean environment for child processes and a rendered neutral-route hook."""

from __future__ import annotations

import io
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from repeat_failure.sidecar import hook as hook_mod
from repeat_failure.jsonlog import configure_logging


def pytest_configure(config: pytest.Config) -> None:
    """Tests write record files the way the hook does: ``umask 007`` (files 0660). The collector
    refuses a record file others may read (``insecure``), so a test writing one under the usual
    umask 022 would see it refused; the tests of that refusal set the mode themselves."""
    os.umask(0o007)

#: PATH for child processes: system tools only (no pyenv shims or other per-user helpers).
CLEAN_PATH = "/usr/local/bin:/usr/bin:/bin"


@pytest.fixture
def clean_env(tmp_path: Path) -> dict[str, str]:
    """A minimal environment built from scratch, never copied from the test process (so no
    BASH_ENV or REPEAT_FAILURE_MARK leaks in from a hooked shell that started pytest). HOME is
    an empty directory, so no login profile of this machine runs."""
    home = tmp_path / "home"
    home.mkdir()
    return {"PATH": CLEAN_PATH, "HOME": str(home), "LANG": "C.UTF-8", "SHELL": "/bin/bash",
            "SHLVL": "1"}


@dataclass(frozen=True)
class RenderedHook:
    """The neutral route rendered for one agent into a shared directory."""

    shared: Path
    agent: str
    backend: str
    path: Path
    records: Path

    def env(self, base: dict[str, str]) -> dict[str, str]:
        """``base`` plus the launch environment the sidecar gives the agent (BASH_ENV, ...)."""
        return {**base, **hook_mod.launch_env(self.shared, self.agent, environ=base)}

    def lines(self) -> list[bytes]:
        """The raw record lines (each with its newline); [] when the file does not exist."""
        try:
            data = self.records.read_bytes()
        except FileNotFoundError:
            return []
        return data.splitlines(keepends=True)


def _render_hook(shared: Path, agent: str = "a1", backend: str = "bash") -> RenderedHook:
    path = hook_mod.render(shared, agent, backend)
    return RenderedHook(shared, agent, backend, path, hook_mod.records_path(shared, agent))


@pytest.fixture
def make_hook():
    """A function ``(shared_dir, agent="a1", backend="bash") -> RenderedHook`` that renders the
    hook with :func:`repeat_failure.sidecar.hook.render`."""
    return _render_hook


@pytest.fixture
def rendered_hook(tmp_path: Path) -> RenderedHook:
    """The hook for agent ``a1`` (backend ``bash``), rendered into ``tmp_path/shared``."""
    return _render_hook(tmp_path / "shared")


@pytest.fixture
def log_stream():
    """The sidecar's JSON log lines, captured; the handler is removed afterwards."""
    stream = io.StringIO()
    configure_logging(stream)
    yield stream
    logging.getLogger("repeat_failure").handlers.clear()
