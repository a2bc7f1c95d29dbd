"""opencode (npm ``opencode-ai``) against the OpenAI Chat Completions stub.

A custom OpenAI-compatible provider (``@ai-sdk/openai-compatible``, bundled in the binary) in
``~/.config/opencode/opencode.json`` points it at the stub with a dummy key. The models.dev list
fetch, auto-update, sharing, default (npm-installed) plugins, LSP downloads and Claude Code
compatibility are off by config and environment; the config's ``permission`` allows every tool so
``opencode run`` never stops to ask. XDG directories sit under the run's fresh HOME.

opencode's ``bash`` tool runs ``$SHELL -c <cmd>`` (the runner sets ``SHELL=/bin/bash``). Its
session store is SQLite (``~/.local/share/opencode/opencode.db``, table ``part``, bash result
``state.metadata.exit``) in WAL mode: the rows are still in ``opencode.db-wal`` when it exits.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from harness.install import Backend

MODEL = "stub/stub-model"


def xdg_dirs(home: Path) -> dict[str, Path]:
    """The four XDG base directories, created under the run's fresh HOME."""
    xdg = {"XDG_CONFIG_HOME": home / ".config", "XDG_DATA_HOME": home / ".local" / "share",
           "XDG_STATE_HOME": home / ".local" / "state", "XDG_CACHE_HOME": home / ".cache"}
    for path in xdg.values():
        path.mkdir(parents=True, exist_ok=True)
    return xdg


def stub_config(url: str) -> dict:
    """opencode's config (Kilo Code CLI, a fork, reads the same shape): the stub as the only
    provider through the bundled OpenAI-compatible SDK, every tool allowed, no autoupdate,
    sharing, LSP or formatters."""
    return {
        "autoupdate": False,
        "share": "disabled",
        "model": MODEL,
        "small_model": MODEL,
        "enabled_providers": ["stub"],
        "provider": {"stub": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Stub",
            "options": {"baseURL": f"{url}/v1", "apiKey": "stub-key-not-a-secret"},
            "models": {"stub-model": {"name": "Stub", "tool_call": True, "reasoning": False,
                                      "limit": {"context": 128000, "output": 4096}}},
        }},
        "permission": {"*": "allow", "bash": "allow", "edit": "allow",
                       "external_directory": "allow"},
        "lsp": False,
        "formatter": False,
    }


def _prepare(home: Path, work: Path, url: str) -> dict[str, str]:
    xdg = xdg_dirs(home)
    config_dir = xdg["XDG_CONFIG_HOME"] / "opencode"
    config_dir.mkdir(parents=True, exist_ok=True)
    config = {"$schema": "https://opencode.ai/config.json", **stub_config(url)}
    (config_dir / "opencode.json").write_text(json.dumps(config, indent=2))
    # opencode npm-installs @opencode-ai/plugin into every config dir in the background unless
    # node_modules exists and package-lock.json already lists it: say it is there (no plugin
    # or custom tool here needs it), and send any npm fetch that still happens to the stub.
    (config_dir / "node_modules").mkdir(exist_ok=True)
    (config_dir / "package-lock.json").write_text(json.dumps(
        {"lockfileVersion": 3, "packages": {"": {"dependencies": {"@opencode-ai/plugin": "*"}}}}))
    return {
        "npm_config_registry": f"{url}/npm/",
        **{k: str(v) for k, v in xdg.items()},
        "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_CLAUDE_CODE": "1",
        "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1", "OPENCODE_DISABLE_TERMINAL_TITLE": "1",
    }


def _argv(binary: str, prompt: str) -> list[str]:
    return [binary, "run", "--pure", "--model", MODEL, prompt]


def _argv_without_pure(binary: str, prompt: str) -> list[str]:
    return [binary, "run", "--model", MODEL, prompt]


#: Where opencode before 1.2 keeps its sessions: one JSON file per session, message and part
#: under ``~/.local/share/opencode/storage/`` (``session/<project>/<id>.json``,
#: ``message/<session>/<id>.json``, ``part/<message>/<id>.json``), no SQLite database.
STORAGE_GLOBS = (".local/share/opencode/storage/session/*/*.json",
                 ".local/share/opencode/storage/message/*/*.json",
                 ".local/share/opencode/storage/part/*/*.json")


def _release(backend: Backend, version: str) -> Backend:
    """opencode ``version`` (not the pin): without ``--pure`` (1.2.1's ``run`` has no such
    option and prints its help instead of running; no plugin is configured here either way, and
    ``OPENCODE_DISABLE_DEFAULT_PLUGINS`` stays set). Releases before 1.2 keep their sessions as
    JSON files (:data:`STORAGE_GLOBS`), which are copied instead of the database."""
    major, minor = (int(x) for x in version.split(".")[:2])
    if (major, minor) < (1, 1):
        return replace(backend, argv=_argv_without_pure, session_globs=STORAGE_GLOBS,
                       prepare=_prepare_1_0)
    if (major, minor) < (1, 2):
        return replace(backend, argv=_argv_without_pure, session_globs=STORAGE_GLOBS)
    return replace(backend, argv=_argv_without_pure)


def _prepare_1_0(home: Path, work: Path, url: str) -> dict[str, str]:
    """:func:`_prepare` for opencode 1.0.x, whose config schema rejects ``lsp: false``,
    ``formatter: false`` ("expected record") and ``enabled_providers`` ("Unrecognized key",
    seen with 1.0.0): LSP and formatters get empty records (no servers of the config's own;
    ``OPENCODE_DISABLE_LSP_DOWNLOAD`` still stops downloads) and the provider list is left out
    (the model names the stub provider, and the models.dev fetch stays off)."""
    env = _prepare(home, work, url)
    path = Path(env["XDG_CONFIG_HOME"]) / "opencode" / "opencode.json"
    config = json.loads(path.read_text())
    config.pop("enabled_providers")
    config["lsp"], config["formatter"] = {}, {}
    path.write_text(json.dumps(config, indent=2))
    return env


BACKEND = Backend(
    name="opencode", package="opencode-ai", version="1.18.33", binary="opencode",
    prepare=_prepare, argv=_argv, release_settings=_release,
    # Everything a run writes is still in the write-ahead log when opencode exits (the main file
    # stays a 4 KiB header), so the log is listed with the database.
    session_globs=(".local/share/opencode/opencode.db",),  # read with its WAL by the runner
)
