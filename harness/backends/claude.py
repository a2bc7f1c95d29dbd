"""Claude Code (npm ``@anthropic-ai/claude-code``) against the Anthropic Messages stub.

``ANTHROPIC_BASE_URL`` points it at the stub with a dummy key; as root,
``--dangerously-skip-permissions`` needs ``IS_SANDBOX=1``. Telemetry, error reporting, the
auto-updater and other non-essential traffic are off by environment. The verdict scenarios run
with ``--output-format stream-json --verbose`` (the transcript, one JSON event a line, on stdout).

Earlier releases (``--release V``, issue 26) run with the same settings; what was seen
bisecting 2.0.56 (the oldest release of the last 12 months the registry serves) to the pin:

- 2.0.56 to 2.1.0 start warmup subagents with each session; their requests reach the stub too,
  so their files (``agent-<id>.jsonl``) are copied with the session's.
- 2.1.69 does not run under the harness: the stub answered its first model request with the
  closing text (which it does when a request offers no shell tool it knows), so the turn ran
  no command (two tries); 2.1.70 runs.
- 2.1.64 to 2.1.70 look up ``raw.githubusercontent.com`` (plugin security messages) and
  ``api.anthropic.com`` (fast-mode status) whatever the settings above (their debug logs:
  ``getaddrinfo ENOTFOUND``); with no internet that fails and the run goes on.
"""

from __future__ import annotations

from pathlib import Path

from harness.install import Backend


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
