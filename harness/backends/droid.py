"""Factory Droid CLI (npm ``droid``; not a Hive backend) against the OpenAI Chat Completions stub.

The npm package's ``postinstall`` links the compiled binary of the platform package
``@factory/cli-linux-x64`` (an optional dependency served by the registry): nothing is downloaded
at install or first run. No Factory login: a BYOK custom model in ``~/.factory/settings.json``
(``customModels``, provider ``generic-chat-completion-api``: Factory's BYOK docs) points it at the
stub's ``/v1`` with a dummy key, chosen with ``-m custom:<model>``. ``FACTORY_AIRGAP_ENABLED=true``
skips its telemetry (OTEL) init, org-settings and feature-flag fetches (its log says so) and
``FACTORY_DROID_AUTO_UPDATE_ENABLED=false`` its updater; with both, 0.215.0 sent nothing off the
loopback (strace). ``droid exec --skip-permissions-unsafe`` runs one turn with every tool allowed.

Its shell tool ``Execute`` (``command``) runs ``bash -c '<supervisor script>'
factory-execute-supervisor <owner pid> /bin/bash <cmd>``: a fixed script that watches its owner
and runs ``"$command_shell" -c "$command$quoted_args"``. The command is an argument, never in
the outer shell's ``BASH_EXECUTION_STRING``, and the inner ``/bin/bash -c <cmd>`` is nested
(silent), so the hook's exit path records that shell's ``$command$quoted_args`` with the status
the script exits with (``hooks/bash_env.slow.bash``). Session log, read by
``repeat_failure/backends/droid.py``: ``~/.factory/sessions/<cwd-slug>/<uuid>.jsonl``.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.install import Backend

MODEL = "stub-model"


def _prepare(home: Path, work: Path, url: str) -> dict[str, str]:
    factory = home / ".factory"
    factory.mkdir(parents=True, exist_ok=True)
    settings = {"customModels": [{
        "model": MODEL, "displayName": "Stub", "baseUrl": f"{url}/v1",
        "apiKey": "stub-key-not-a-secret", "provider": "generic-chat-completion-api",
        "maxOutputTokens": 4096,
    }]}
    (factory / "settings.json").write_text(json.dumps(settings, indent=2))
    return {"FACTORY_AIRGAP_ENABLED": "true", "FACTORY_DROID_AUTO_UPDATE_ENABLED": "false"}


def _argv(binary: str, prompt: str) -> list[str]:
    return [binary, "exec", "--skip-permissions-unsafe", "-m", f"custom:{MODEL}", prompt]


BACKEND = Backend(
    name="droid", package="droid", version="0.215.0", binary="droid",
    prepare=_prepare, argv=_argv,
    session_globs=(".factory/sessions/*/*.jsonl",),
)
