"""Qwen Code (npm ``@qwen-code/qwen-code``, a Gemini CLI fork) against the OpenAI Chat Completions
stub, for the turn-verdict transcripts only.

Beyond Hive's list: its coverage row (``repeat_failure/backends/coverage.py``, ``hive=False``; issue 15 item 7)
is covered on these shell runs' records. The harness also runs it for its ``--output-format
stream-json`` transcripts (the verdict scenarios). Its always-on loop guard ends a turn at the
fifth identical tool call in a row, so the five-times run records four failures.

``--auth-type openai`` with ``OPENAI_BASE_URL`` (the stub's ``/v1``), a dummy ``OPENAI_API_KEY``
and ``--model stub-model``; ``--approval-mode yolo`` runs its ``run_shell_command`` tool without
asking. ``~/.qwen/settings.json`` turns usage statistics, telemetry, auto-update and the update
nag off. The package's ``engines`` asks for Node >= 22, but 0.24.4 runs on the machine's Node 20
(nothing here needed more). Session log (chat recording):
``~/.qwen/projects/<cwd-slug>/chats/<session-id>.jsonl``.

Earlier releases (``--release V``; issue 26 item 3, ``docs/backend-support.md``) run with the
same settings: 0.5.0 to 0.24.3 were tried. 0.5.0 to 0.10.1 refuse a ``run_shell_command`` call
without its required ``is_background`` ("params must have required property
'is_background'"); the stub passes a tool's required booleans as ``false``
(``harness.stub.pick_tool``), so nothing here depends on the release.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.install import Backend

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
