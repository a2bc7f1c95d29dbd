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
from dataclasses import replace
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


def _prepare_old(home: Path, work: Path, url: str) -> dict[str, str]:
    """:func:`_prepare` for releases without ``FACTORY_AIRGAP_ENABLED`` (0.105.1, 0.117.0 have
    no such switch in their binary): OTEL off (``FACTORY_OTEL_ENABLED``), no dynamic config
    (``FACTORY_DISABLE_DYNAMIC_CONFIG``), and Factory's API and app URLs pointed at the stub, so
    what they still fetch goes to the loopback. Nothing guarantees they send nothing else: such a
    release is run only inside a network namespace that has nothing but a loopback
    (``unshare -n``; docs/backend-support.md)."""
    env = _prepare(home, work, url)
    return {**env, "FACTORY_OTEL_ENABLED": "false", "FACTORY_DISABLE_DYNAMIC_CONFIG": "true",
            "FACTORY_API_BASE_URL": url, "FACTORY_APP_BASE_URL": url}


def _release(backend: Backend, version: str) -> Backend:
    """Droid ``version`` (not the pin): releases before 0.215.0 with :func:`_prepare_old`."""
    return replace(backend, prepare=_prepare_old)


BACKEND = Backend(
    name="droid", package="droid", version="0.215.0", binary="droid",
    prepare=_prepare, argv=_argv, release_settings=_release,
    session_globs=(".factory/sessions/*/*.jsonl",),
)
