"""Kilo Code CLI (npm ``@kilocode/cli``, an opencode fork; a native binary from the platform
package ``@kilocode/cli-linux-x64``) against the OpenAI Chat Completions stub.

Version: the newest on the registry is 7.8.1, but its platform packages at 7.8.1 are not on the
registry mirror here (its postinstall fails: ``No matching version found for
@kilocode/cli-linux-x64-baseline-musl@7.8.1`` ... "Failed to setup kilo binary"); 7.7.7 is the
newest ``@kilocode/cli`` whose ``@kilocode/cli-linux-x64`` exists, and it installs.

A custom OpenAI-compatible provider (``@ai-sdk/openai-compatible``, bundled in the binary) in
``~/.config/kilo/kilo.json`` points it at the stub with a dummy key; ``enabled_providers`` limits
it to that provider. ``kilo run --pure --auto`` runs one turn non-interactively, without external
plugins, auto-approving permissions (the config's ``permission`` also allows every tool). The
models list fetch, auto-update, sharing, session ingest, default plugins, LSP downloads, Claude
Code compatibility and the background daemon are off by environment; PostHog telemetry is off
with ``KILO_TELEMETRY_LEVEL`` (anything but ``all``) and OpenTelemetry in the config. Checked with
``strace -f -e trace=connect,sendto``: the only connection is to the stub on 127.0.0.1 (the
netlink traffic left is the bundled ``bwrap`` probing whether it can sandbox; it does not wrap
the shell tool by default). XDG directories sit under the run's fresh HOME.

Kilo's ``bash`` tool runs ``$SHELL -c <cmd>`` (``/bin/bash -c 'ls /nonexistent'``, the runner sets
``SHELL=/bin/bash``) with the agent's command as is. Its session store is SQLite
(``~/.local/share/kilo/kilo.db``, table ``part``, bash result ``state.metadata.exit``) in WAL mode;
the runner reads it with its write-ahead log and keeps its rows as JSON lines.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from harness.backends.opencode import MODEL, stub_config, xdg_dirs
from harness.install import Backend



def _prepare(home: Path, work: Path, url: str) -> dict[str, str]:
    xdg = xdg_dirs(home)
    config_dir = xdg["XDG_CONFIG_HOME"] / "kilo"
    config_dir.mkdir(parents=True, exist_ok=True)
    config = {**stub_config(url), "experimental": {"openTelemetry": False}}
    (config_dir / "kilo.json").write_text(json.dumps(config, indent=2))
    return {
        **{k: str(v) for k, v in xdg.items()},
        "KILO_TELEMETRY_LEVEL": "off", "KILO_NO_DAEMON": "1",
        "KILO_DISABLE_AUTOUPDATE": "1", "KILO_DISABLE_MODELS_FETCH": "1",
        "KILO_DISABLE_SHARE": "1", "KILO_DISABLE_SESSION_INGEST": "1",
        "KILO_DISABLE_DEFAULT_PLUGINS": "1", "KILO_DISABLE_LSP_DOWNLOAD": "1",
        "KILO_DISABLE_CLAUDE_CODE": "1", "KILO_DISABLE_EXTERNAL_SKILLS": "1",
        "KILO_DISABLE_TERMINAL_TITLE": "1",
    }


def _argv(binary: str, prompt: str) -> list[str]:
    return [binary, "run", "--pure", "--auto", "--model", MODEL, prompt]


def _argv_without_pure(binary: str, prompt: str) -> list[str]:
    return [binary, "run", "--auto", "--model", MODEL, prompt]


def _release(backend: Backend, version: str) -> Backend:
    """Kilo ``version`` (not the pin): without ``--pure`` (7.0.33's ``run`` has no such option
    and prints its help instead of running; no plugin is configured here either way, and
    ``KILO_DISABLE_DEFAULT_PLUGINS`` stays set)."""
    return replace(backend, argv=_argv_without_pure)


BACKEND = Backend(
    name="kilo", package="@kilocode/cli", version="7.7.7", binary="kilo",
    prepare=_prepare, argv=_argv, release_settings=_release,
    session_globs=(".local/share/kilo/kilo.db",),  # read with its WAL by the runner
)
