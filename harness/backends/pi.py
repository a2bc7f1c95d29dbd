"""pi (npm ``@earendil-works/pi-coding-agent``) against the OpenAI Chat Completions stub.

pi moved from ``@mariozechner/pi-coding-agent`` (which stopped at 0.73.1) to
``@earendil-works/pi-coding-agent``; 1.6.0's ``package.json`` asks for Node ≥ 22.19.0
(``engines``), which the harness's pinned Node (:data:`harness.install.NODE_VERSION`) meets.

A custom provider in ``~/.pi/agent/models.json`` (1.6.0 keeps ``piConfig.configDir`` ``.pi`` and
``PI_CODING_AGENT_DIR``, ``dist/config.js``). ``--offline`` and ``PI_OFFLINE=1`` keep it from
fetching anything at start (1.6.0 ``dist/main.js`` sets ``PI_SKIP_VERSION_CHECK`` from them too;
we set it as well), and ``PI_TELEMETRY=0`` turns its install telemetry off (1.6.0
``dist/core/telemetry.js``: the provider attribution it would add). The provider's ``baseUrl`` is
the stub on 127.0.0.1. pi runs its ``bash`` tool with a hard-coded ``/bin/bash -c`` and prints
its version on stderr.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from harness.install import Backend


def stub_models(url: str) -> dict:
    """pi's custom-provider file (``models.json``; Oh My Pi reads the same shape) for the stub."""
    return {"providers": {"stub": {
        "baseUrl": f"{url}/v1", "api": "openai-completions", "apiKey": "stub-key-not-a-secret",
        "models": [{"id": "stub-model", "name": "Stub", "reasoning": False, "input": ["text"],
                    "contextWindow": 128000, "maxTokens": 4096,
                    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}}],
    }}}


#: pi's environment switches: no start-up network operations, no version check, no install
#: telemetry (the names and values 1.6.0's ``pi --help`` lists).
QUIET = {"PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0"}


def _prepare(home: Path, work: Path, url: str) -> dict[str, str]:
    agent_dir = home / ".pi" / "agent"
    agent_dir.mkdir(parents=True, exist_ok=True)
    (agent_dir / "models.json").write_text(json.dumps(stub_models(url), indent=2))
    return dict(QUIET)


def _argv(binary: str, prompt: str) -> list[str]:
    return [binary, "--offline", "--provider", "stub", "--model", "stub-model", "-p", prompt]


#: The last release of the old package; later releases are published as
#: ``@earendil-works/pi-coding-agent`` (its first is 0.74.0).
OLD_PACKAGE, OLD_PACKAGE_LAST = "@mariozechner/pi-coding-agent", (0, 73, 1)


def _release(backend: Backend, version: str) -> Backend:
    """pi ``version`` (not the pin): from the old package ``@mariozechner/pi-coding-agent`` up to
    its last release 0.73.1; the settings are the pin's otherwise."""
    if tuple(int(part) for part in version.split(".")[:3]) <= OLD_PACKAGE_LAST:
        return replace(backend, package=OLD_PACKAGE)
    return backend


BACKEND = Backend(
    name="pi", package="@earendil-works/pi-coding-agent", version="1.6.0", binary="pi",
    prepare=_prepare, argv=_argv, session_globs=(".pi/agent/sessions/*/*.jsonl",),
    release_settings=_release,
)
