"""pi (npm ``@mariozechner/pi-coding-agent``) against the OpenAI Chat Completions stub.

A custom provider in ``~/.pi/agent/models.json``; ``--offline`` keeps it from fetching anything.
pi runs its ``bash`` tool with a hard-coded ``/bin/bash -c`` and prints its version on stderr.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.runner import Backend


def stub_models(url: str) -> dict:
    """pi's custom-provider file (``models.json``; Oh My Pi reads the same shape) for the stub."""
    return {"providers": {"stub": {
        "baseUrl": f"{url}/v1", "api": "openai-completions", "apiKey": "stub-key-not-a-secret",
        "models": [{"id": "stub-model", "name": "Stub", "reasoning": False, "input": ["text"],
                    "contextWindow": 128000, "maxTokens": 4096,
                    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}}],
    }}}


def _prepare(home: Path, work: Path, url: str) -> dict[str, str]:
    agent_dir = home / ".pi" / "agent"
    agent_dir.mkdir(parents=True, exist_ok=True)
    (agent_dir / "models.json").write_text(json.dumps(stub_models(url), indent=2))
    return {"PI_OFFLINE": "1"}


def _argv(binary: str, prompt: str) -> list[str]:
    return [binary, "--offline", "--provider", "stub", "--model", "stub-model", "-p", prompt]


BACKEND = Backend(
    name="pi", package="@mariozechner/pi-coding-agent", version="0.73.1", binary="pi",
    prepare=_prepare, argv=_argv, session_globs=(".pi/agent/sessions/*/*.jsonl",),
)
