"""Claude Code: its wrapper around each agent command, and its helper shells.

Seen in the harness's real runs (``harness/evidence/claude.json``, Claude Code 2.1.197): the
``Bash`` tool runs ``bash -c`` of ::

    source <snapshot> 2>/dev/null || true && shopt -u extglob 2>/dev/null || true
      && eval <shell-quoted command> < /dev/null && pwd -P >| /tmp/claude-XXXX-cwd

(one line). Each session also starts helper shells that are not agent commands (spec C8): an
``env`` probe and the script that writes the shell snapshot (``SNAPSHOT_FILE=...``). Those
normalize to the empty command, which never counts.
"""

from __future__ import annotations

import re
import shlex

from sidecar.backends import register_stripper

_WRAPPER = re.compile(
    r"\Asource \S+ 2>/dev/null \|\| true && shopt -u extglob 2>/dev/null \|\| true"
    r" && eval (?P<quoted>.*) < /dev/null && pwd -P >\| \S+\Z", re.S)
_HELPERS = (re.compile(r"\Aenv\Z"), re.compile(r"\ASNAPSHOT_FILE=\S+\n"))


def strip(command: str) -> str:
    """The agent's command inside Claude Code's wrapper; ``""`` for a helper shell; anything
    else unchanged. ``eval`` joins its arguments with spaces, so the quoted argument is split
    the way the shell would and joined back."""
    match = _WRAPPER.match(command)
    if match is None:
        return "" if any(h.match(command) for h in _HELPERS) else command
    try:
        return " ".join(shlex.split(match["quoted"]))
    except ValueError:  # unbalanced quotes (a cut record): keep what was recorded
        return match["quoted"]


#: Inference backends run through the Claude Code CLI (DESIGN.md "Coverage table").
for _backend in ("claude", "vllm", "llm-d", "litellm", "watsonx"):
    register_stripper(_backend, strip)
