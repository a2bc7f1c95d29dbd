"""Claude Code (npm ``@anthropic-ai/claude-code``) against the Anthropic Messages stub.

``ANTHROPIC_BASE_URL`` points it at the stub with a dummy key; as root,
``--dangerously-skip-permissions`` needs ``IS_SANDBOX=1``. Telemetry, error reporting, the
auto-updater and other non-essential traffic are off by environment. The verdict scenarios run
with ``--output-format stream-json --verbose`` (the transcript, one JSON event a line, on stdout).
"""

from __future__ import annotations

from pathlib import Path

from harness.runner import Backend


def _prepare(home: Path, work: Path, url: str) -> dict[str, str]:
    return {
        "ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "stub-key-not-a-secret",
        "IS_SANDBOX": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1", "DISABLE_TELEMETRY": "1",
        "CLAUDE_CODE_ENABLE_TELEMETRY": "0", "DISABLE_COST_WARNINGS": "1",
    }


def _argv(binary: str, prompt: str, output: str = "text") -> list[str]:
    return [binary, "-p", prompt, "--dangerously-skip-permissions", "--model", "claude-stub",
            "--output-format", output]


def _transcript_argv(binary: str, prompt: str) -> list[str]:
    # stream-json in print mode needs --verbose.
    return [*_argv(binary, prompt, "stream-json"), "--verbose"]


BACKEND = Backend(
    name="claude", package="@anthropic-ai/claude-code", version="2.1.332", binary="claude",
    prepare=_prepare, argv=_argv, session_globs=(".claude/projects/*/*.jsonl",),
    transcript_argv=_transcript_argv,
)
