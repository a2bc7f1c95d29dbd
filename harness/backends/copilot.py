"""GitHub Copilot CLI (npm ``@github/copilot``, a native binary inside) against the Chat
Completions stub.

Bring-your-own-key mode by environment only: ``COPILOT_PROVIDER_BASE_URL`` (the stub's ``/v1``),
a dummy ``COPILOT_PROVIDER_API_KEY`` and ``COPILOT_MODEL``; no GitHub login is needed.
``COPILOT_OFFLINE=true`` turns off GitHub authentication, telemetry, web tools, the GitHub MCP
server and auto-update (checked with strace: the only connection is to the stub on 127.0.0.1).
``-p`` runs one prompt non-interactively; ``--allow-all-tools`` (required there) approves the
``bash`` tool; ``--no-auto-update`` keeps the pinned version.

The ``bash`` tool runs ``/bin/bash --norc --noprofile -c <cmd>`` (no wrapper, ``$SHELL``
ignored) and removes ``BASH_ENV`` from the tool shell's environment unless BASH_ENV support is
on: ``--bash-env on`` turns it on. That flag is implemented as a settings write: the CLI stores
``"bashEnv": true`` in ``~/.copilot/settings.json`` (``copilot help config``: "Using either flag
persists the preference to config") and then uses it for the run; when that file cannot be
written (a read-only bind mount in a trial) the CLI exits 1 with no output before asking the
model anything. No environment variable turns it on. The harness writes no settings file: the
flag alone, in the fresh HOME, is the whole route set-up.

The one helper shell Copilot starts (``/bin/bash -l -c`` printing the login environment) gets no
``BASH_ENV`` even with the flag, so nothing but agent commands is recorded.

The CLI unpacks ~235 MB of its own files into ``~/.cache/copilot/pkg`` on first start; the
runner gives every run a fresh HOME, so ``COPILOT_PKG_CACHE_HOME`` points that unpacking at a
directory in the harness cache instead (program files only, no state), which cuts a run from
~9 s to ~2 s. Session log: ``~/.copilot/session-state/<uuid>/events.jsonl``
(``tool.execution_complete`` carries the command's exit code).
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path

from harness import install
from harness.install import Backend

VERSION = "1.0.102"


def _prepare(home: Path, work: Path, url: str, version: str = VERSION) -> dict[str, str]:
    pkg_cache = install.CACHE / f"copilot-{version}" / "pkg-cache"
    pkg_cache.mkdir(parents=True, exist_ok=True)
    return {
        "COPILOT_PROVIDER_BASE_URL": f"{url}/v1",
        "COPILOT_PROVIDER_API_KEY": "stub-key-not-a-secret", "COPILOT_MODEL": "stub-model",
        "COPILOT_OFFLINE": "true", "COPILOT_AUTO_UPDATE": "false",
        "COPILOT_PKG_CACHE_HOME": str(pkg_cache),
    }


def _argv(binary: str, prompt: str) -> list[str]:
    return [binary, "-p", prompt, "--allow-all-tools", "--no-auto-update", "--bash-env", "on",
            "--no-color"]


def _argv_before_pin(binary: str, prompt: str) -> list[str]:
    return [*_argv(binary, prompt)[:-1], "--allow-all-paths", "--no-color"]


def _release(backend: Backend, version: str) -> Backend:
    """Copilot ``version`` (not the pin): its own unpacked-files cache beside its install, and
    ``--allow-all-paths`` (1.0.11 denies ``ls /nonexistent`` under ``--allow-all-tools`` alone:
    "Permission denied and could not request permission from user")."""
    return replace(backend, prepare=partial(_prepare, version=version), argv=_argv_before_pin)


BACKEND = Backend(
    name="copilot", package="@github/copilot", version=VERSION, binary="copilot",
    prepare=_prepare, argv=_argv,
    session_globs=(".copilot/session-state/*/events.jsonl",), release_settings=_release,
)
