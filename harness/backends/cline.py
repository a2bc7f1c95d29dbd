"""Cline CLI (npm ``cline``; not a Hive backend) against the OpenAI Chat Completions stub.

The npm package is a Node launcher for a compiled binary (Bun embedded) from the platform
package ``@cline/cli-linux-x64``, an optional dependency served by the registry: nothing is
downloaded at install or first run, and it runs on the machine's Node 20. No Cline account: the
``openai-compatible`` provider in ``~/.cline/data/settings/providers.json`` (the file ``cline auth
-p openai-compatible -k KEY -b URL -m MODEL`` writes, seen with 3.0.65) points it at the stub's
``/v1`` with a dummy key; the entry needs its ``updatedAt`` (without it 3.0.65 ignores the
provider and fails after 65 s with "Cannot connect to API"). ``~/.cline/data/settings/global-settings.json`` opts out of telemetry
and auto-update (``telemetryOptOut``, ``autoUpdateEnabled``: the keys of its global-settings
schema). ``CLINE_SESSION_BACKEND_MODE=local`` keeps the session in the CLI's process: by
default it starts a hub daemon (``cline --cline-hub-daemon``) that detaches and outlives the run.

With a prompt argument it runs one turn in "act" mode with every tool auto-approved
(``--auto-approve true``, the default, said explicitly); ``--json`` prints its events as JSON
lines. Its shell tool ``run_commands`` takes a
list of whole commands (``commands``) and runs each with ``/bin/bash -c <cmd>``, no wrapper, also
when ``SHELL=/bin/sh`` (seen with 3.0.65). It still looks up ``data.cline.bot`` (PostHog feature
flags) at start whatever the opt-out says; the lookup fails on the harness machine and the run
goes on. Session files: ``~/.cline/data/sessions/<id>/<id>.json`` and ``<id>.messages.json``,
plus a SQLite index ``~/.cline/data/db/sessions.db``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from harness.install import Backend

MODEL = "stub-model"
#: The Node Cline CLI 1.0.x runs on: its bundled ``better-sqlite3`` is built for Node 20
#: (``NODE_MODULE_VERSION 115``); on the pinned Node 22 its ``cline-core`` stops at start.
NODE_1 = "20.20.2"
#: The model's name for Cline CLI 2.x (:func:`_prepare_2`); the stub answers any name.
MODEL_2 = "gpt-oss-stub"
PROVIDER = "openai-compatible"


def _prepare(home: Path, work: Path, url: str) -> dict[str, str]:
    settings = home / ".cline" / "data" / "settings"
    settings.mkdir(parents=True, exist_ok=True)
    providers = {
        "version": 1, "lastUsedProvider": PROVIDER, "modes": {},
        "providers": {PROVIDER: {
            "settings": {"provider": PROVIDER, "apiKey": "stub-key-not-a-secret",
                         "model": MODEL, "baseUrl": f"{url}/v1"},
            "updatedAt": "2026-01-01T00:00:00.000Z", "tokenSource": "manual",
        }},
    }
    (settings / "providers.json").write_text(json.dumps(providers, indent=2))
    (settings / "global-settings.json").write_text(json.dumps(
        {"telemetryOptOut": True, "autoUpdateEnabled": False}, indent=2))
    return {"CLINE_SESSION_BACKEND_MODE": "local"}


def _argv(binary: str, prompt: str) -> list[str]:
    return [binary, "--json", "--auto-approve", "true", prompt]


#: Where Cline CLI 1.x and 2.x keep a task: ``~/.cline/data/tasks/<id>/`` (the VS Code
#: extension's layout), ``ui_messages.json`` and ``api_conversation_history.json`` among others.
TASK_GLOBS = (".cline/data/tasks/*/*.json",)


def _prepare_2(home: Path, work: Path, url: str) -> dict[str, str]:
    """Cline CLI 2.x's settings (what ``cline auth -p openai -k KEY -b URL -m MODEL`` writes,
    seen with 2.18.0): ``~/.cline/data/globalState.json`` names the ``openai`` provider (an
    OpenAI-compatible base URL, the stub's ``/v1``) for act and plan mode and turns telemetry
    off (``telemetrySetting: "disabled"``); the dummy key is in ``secrets.json``.
    The model's name says ``gpt-oss``: for an OpenAI-compatible provider 2.18.0 offers its
    tools through the API's native tool calls only to model families it knows (``gpt-oss``,
    ``gpt-5``, ...; for any other name it asks for tool calls written as XML in the reply's
    text, which the stub does not write: "Too many consecutive mistakes").
    ``CLINE_NO_AUTO_UPDATE=1``: without it 2.18.0 starts a detached ``npm install -g
    cline@latest`` after it checks the registry for a newer release."""
    data = home / ".cline" / "data"
    data.mkdir(parents=True, exist_ok=True)
    (data / "globalState.json").write_text(json.dumps({
        "actModeApiProvider": "openai", "planModeApiProvider": "openai",
        "actModeOpenAiModelId": MODEL_2, "planModeOpenAiModelId": MODEL_2,
        "openAiBaseUrl": f"{url}/v1", "welcomeViewCompleted": True,
        "telemetrySetting": "disabled", "mode": "act"}, indent=2))
    (data / "secrets.json").write_text(json.dumps({"openAiApiKey": "stub-key-not-a-secret"}))
    return {"CLINE_NO_AUTO_UPDATE": "1"}


def _argv_2(binary: str, prompt: str) -> list[str]:
    return [binary, "--yolo", "--act", "--json", prompt]


def _prepare_1(home: Path, work: Path, url: str) -> dict[str, str]:
    """Cline CLI 1.0.x's settings: the 2.x files (its ``cline-core``, the same engine, keeps the
    same ``~/.cline/data``), and ``NO_AUTO_UPDATE=1`` for its Go front end's updater (which
    otherwise runs ``npm install -g cline``)."""
    return {**_prepare_2(home, work, url), "NO_AUTO_UPDATE": "1"}


def _argv_1(binary: str, prompt: str) -> list[str]:
    return [binary, "--no-interactive", "--mode", "act", "--output-format", "json", prompt]


def _release(backend: Backend, version: str) -> Backend:
    """Cline CLI ``version`` (not the pin): 1.0.x is a Go front end (``--no-interactive``) that
    starts the extension's engine (``cline-core``) and talks to it over gRPC on localhost; 2.x
    is another program (a Node CLI: ``--yolo``
    instead of ``--auto-approve``, settings in ``globalState.json``, tasks under
    ``~/.cline/data/tasks/``); 3.x runs with the pin's settings."""
    if int(version.split(".")[0]) == 1:
        return replace(backend, prepare=_prepare_1, argv=_argv_1, session_globs=TASK_GLOBS,
                       node_version=NODE_1)
    if int(version.split(".")[0]) == 2:
        return replace(backend, prepare=_prepare_2, argv=_argv_2, session_globs=TASK_GLOBS)
    return backend


BACKEND = Backend(
    name="cline", package="cline", version="3.0.65", binary="cline",
    prepare=_prepare, argv=_argv, release_settings=_release,
    session_globs=(".cline/data/sessions/*/*.json", ".cline/data/db/sessions.db"),
    looks_up="data.cline.bot (its feature flags; no setting turns it off)",
)
