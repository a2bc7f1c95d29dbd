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
from pathlib import Path

from harness.install import Backend

MODEL = "stub-model"
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


BACKEND = Backend(
    name="cline", package="cline", version="3.0.65", binary="cline",
    prepare=_prepare, argv=_argv,
    session_globs=(".cline/data/sessions/*/*.json", ".cline/data/db/sessions.db"),
    looks_up="data.cline.bot (its feature flags; no setting turns it off)",
)
