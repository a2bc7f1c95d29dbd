"""Qwen Code (npm ``@qwen-code/qwen-code``, a Gemini CLI fork) against the OpenAI Chat Completions
stub, for the turn-verdict transcripts only.

Not a backend of the coverage table (``sidecar/coverage.py`` has no row for it): the harness runs
it for its ``--output-format stream-json`` transcripts (the verdict scenarios). Its shell runs and
session scenarios run as for any other backend, and their records are evidence of nothing the
table claims.

``--auth-type openai`` with ``OPENAI_BASE_URL`` (the stub's ``/v1``), a dummy ``OPENAI_API_KEY``
and ``--model stub-model``; ``--approval-mode yolo`` runs its ``run_shell_command`` tool without
asking. ``~/.qwen/settings.json`` turns usage statistics, telemetry, auto-update and the update
nag off. The package's ``engines`` asks for Node >= 22, but 0.24.4 runs on the machine's Node 20
(nothing here needed more). Session log (chat recording):
``~/.qwen/projects/<cwd-slug>/chats/<session-id>.jsonl``.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.runner import Backend

MODEL = "stub-model"


def _prepare(home: Path, work: Path, url: str) -> dict[str, str]:
    qwen_dir = home / ".qwen"
    qwen_dir.mkdir(parents=True, exist_ok=True)
    settings = {
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
    }
    (qwen_dir / "settings.json").write_text(json.dumps(settings, indent=2))
    return {
        "OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": "stub-key-not-a-secret",
        "OPENAI_MODEL": MODEL, "QWEN_TELEMETRY_ENABLED": "false",
        "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1",
    }


def _argv(binary: str, prompt: str, output: str = "text") -> list[str]:
    return [binary, "--auth-type", "openai", "--model", MODEL, "--approval-mode", "yolo",
            "--output-format", output, prompt]


def _transcript_argv(binary: str, prompt: str) -> list[str]:
    return _argv(binary, prompt, "stream-json")


BACKEND = Backend(
    name="qwen", package="@qwen-code/qwen-code", version="0.24.4", binary="qwen",
    prepare=_prepare, argv=_argv, session_globs=(".qwen/projects/*/chats/*.jsonl",),
    transcript_argv=_transcript_argv,
)
