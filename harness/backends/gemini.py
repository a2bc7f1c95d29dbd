"""Gemini CLI (npm ``@google/gemini-cli``) against the Gemini ``generateContent`` stub.

``GOOGLE_GEMINI_BASE_URL`` points it at the stub with a dummy ``GEMINI_API_KEY``;
``~/.gemini/settings.json`` selects API-key auth and turns telemetry, usage statistics and update
checks off; ``~/.gemini/trustedFolders.json`` trusts the work directory (an untrusted folder makes
a headless run exit). ``--approval-mode yolo`` approves the ``run_shell_command`` calls without
asking. No ``--model``: the CLI first asks a router model (``generateContent`` with a JSON
response schema) which model to use, as it does by default; the stub answers with JSON that fits
the schema.

Loop detection is off (``model.disableLoopDetection``): by default the CLI itself refuses the
fifth identical ``run_shell_command`` call in a row (it tells the model "Potential loop detected"
instead of running it), which would keep the 5-repeat scenario below the sidecar's threshold.

Each tool shell is ``bash -c`` of a wrapper around the command (a ``shopt -u`` guard, a temporary
``_bgpids_file`` variable, the command inside a ``( trap ... EXIT`` subshell, then ``exit`` with
its status); ``repeat_failure/backends/gemini.py`` strips it.

The session log (``~/.gemini/tmp/<project>/chats/session-*.jsonl``) gets a tool call only once it
has completed: the CLI appends the model's message when the reply arrives and rewrites it with its
``toolCalls`` (arguments, result, status) from ``recordCompletedToolCalls``, "called ... when tool
calls complete" (0.61.0 bundle). So the session scenarios' snapshots, taken while the command
runs, show the model message with no tool call: a session-log reader cannot see a running command.

The verdict scenarios run with ``--output-format stream-json`` (``-o``; choices ``text``, ``json``,
``stream-json``): the transcript, one JSON event a line, on stdout.

Earlier releases (``--release V``, issue 26) run with the same settings. 0.19.1 to 0.38.2 write
their chat as one ``session-*.json`` document (rewritten whole), which the session-log reader
reads as a JSON document (``GeminiReader.parse_document``; 0.39.0 is the first JSON Lines
release). 0.19.1 also
rejects most tool calls under the harness ("Command rejected because it could not be parsed
safely"): its shell tool starts loading its bash parser (tree-sitter WebAssembly) when it is
created and refuses a command that arrives before the parser is ready, which the stub's instant
replies do on a loaded machine (4 of 5 calls in one run).
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.install import Backend


def _prepare(home: Path, work: Path, url: str) -> dict[str, str]:
    gemini_dir = home / ".gemini"
    gemini_dir.mkdir(parents=True, exist_ok=True)
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"},
                     "folderTrust": {"enabled": True}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        "ui": {"hideBanner": True, "hideTips": True},
        # Gemini's own loop detector refuses the 5th identical tool call in a row; the scenario
        # that repeats ``ls /nonexistent`` 5 times needs all five to run.
        "model": {"disableLoopDetection": True},
    }
    (gemini_dir / "settings.json").write_text(json.dumps(settings, indent=2))
    trusted = {str(work): "TRUST_FOLDER", str(work.resolve()): "TRUST_FOLDER"}
    (gemini_dir / "trustedFolders.json").write_text(json.dumps(trusted, indent=2))
    return {
        "GOOGLE_GEMINI_BASE_URL": url, "GEMINI_API_KEY": "stub-key-not-a-secret",
        "GEMINI_TELEMETRY_ENABLED": "false",
    }


def _argv(binary: str, prompt: str, output: str = "text") -> list[str]:
    return [binary, "--approval-mode", "yolo", "--output-format", output, "-p", prompt]


def _transcript_argv(binary: str, prompt: str) -> list[str]:
    return _argv(binary, prompt, "stream-json")


BACKEND = Backend(
    name="gemini", package="@google/gemini-cli", version="0.61.0", binary="gemini",
    prepare=_prepare, argv=_argv,
    session_globs=(".gemini/tmp/*/chats/session-*.json", ".gemini/tmp/*/chats/session-*.jsonl"),
    transcript_argv=_transcript_argv,
)
