"""Codex CLI (``codex``): what its shells look like to the neutral route, and how to undo it.

Seen with Codex 0.171.0 under the harness (``harness/evidence/codex.json``); every shell Codex
starts is ``/bin/bash`` whatever ``$SHELL`` says. Per session:

* a *snapshot writer*, ``/bin/bash -lc`` of a fixed script (``if [ -z "${BASH_ENV-}" ] ...``,
  ``echo '# Snapshot file'``, a ``__codex_snapshot_command`` function, ``declare -f``,
  ``compgen -e`` ...) that prints the shell state into ``$CODEX_HOME/shell_snapshots/``;
* a *snapshot check*, ``/bin/bash -c 'set -e; . "<CODEX_HOME>/shell_snapshots/<id>.tmp-<n>"'``.

Neither is an agent command: both normalize to ``""`` so they never reach the detector (a
failing snapshot check would otherwise look like the same failing command in every session).

An agent command (the ``exec_command`` tool's ``cmd``) runs either as plain
``/bin/bash -lc <cmd>`` (snapshot not ready yet, or snapshots off), or as ``/bin/bash -c`` of a
wrapper of about 38,000 characters: ``__CODEX_SNAPSHOT_OVERRIDE_*`` / ``__CODEX_SNAPSHOT_PROXY_*``
assignments, ``if . '<snapshot>.<n>.sh' >/dev/null 2>&1; then :; fi``, restore blocks, a
``PATH`` line, a blank line and finally ``exec '/bin/bash' -c '<cmd>'`` with ``<cmd>`` single-quoted
(each ``'`` written ``'"'"'``). The ``exec`` keeps the PID, so the wrapper's EXIT trap never fires
and the exec'd shell records ``<cmd>`` itself: in both cases the record holds the bare command,
which this stripper returns unchanged.

Should the wrapper text itself ever reach a record, the command is taken back out of its
``exec`` line; a wrapper cut to fit a record (the hook keeps the first ~4 KB, which never reach
the ``exec`` line) gives ``""`` rather than the wrapper's head, which is the same for every
command and would merge them all into one "repeating" command.
"""

from __future__ import annotations

import re

from sidecar.backends import register_stripper

# The snapshot writer: two lines no agent command carries together.
_WRITER_MARKS = ("echo '# Snapshot file'", "__codex_snapshot_command")
# The snapshot check: `set -e; . "<dir>/shell_snapshots/<file>"`.
_CHECK = re.compile(r'\s*set -e; \. "[^"\n]*/shell_snapshots/[^"/\n]+"\s*')
# The head of the tool wrapper: its first assignment, or (no override variables) the line that
# sources the snapshot.
_WRAPPER_HEAD = re.compile(
    r"\s*(?:__CODEX_SNAPSHOT_[A-Z_]*\d*=|if \. '[^'\n]*/shell_snapshots/[^'\n]*' )")
# The wrapper's last line starts `exec '<shell>' -c ` at the start of a line; the single-quoted
# command after it cannot contain that text unescaped (its quotes become '"'"').
_EXEC = re.compile(r"(?:^|\n)exec '/[^'\n]*' -c ")
# One shell word made of single-quoted parts and quoted single quotes ("'" or \').
_WORD = re.compile(r"(?:'[^']*'|\"'\"|\\')+")
_PART = re.compile(r"'([^']*)'|\"'\"|\\'")


def _unquote(word: str) -> str:
    return "".join(m.group(1) if m.group(1) is not None else "'" for m in _PART.finditer(word))


def _from_wrapper(text: str) -> str:
    """The command in a tool wrapper's ``exec`` line, or ``""`` when there is none (cut)."""
    for match in _EXEC.finditer(text):
        rest = text[match.end():].rstrip()
        if _WORD.fullmatch(rest):
            return _unquote(rest)
    last = None
    for last in _EXEC.finditer(text):
        pass
    if last is None:
        return ""
    # An exec line whose word does not parse (altered text): best effort, still per command.
    rest = text[last.end():].rstrip()
    if rest.startswith("'"):
        rest = rest[1:]
    if rest.endswith("'"):
        rest = rest[:-1]
    return rest.replace("'\"'\"'", "'")


def strip(command: str) -> str:
    """The agent's command in ``command`` as the neutral route recorded it under Codex.

    Codex's own helper shells give ``""``; the tool wrapper gives the command from its ``exec``
    line; anything else (the usual case: the bare command) is returned unchanged. Never raises.
    """
    try:
        if all(mark in command for mark in _WRITER_MARKS):
            return ""
        if _CHECK.fullmatch(command):
            return ""
        if _WRAPPER_HEAD.match(command):
            return _from_wrapper(command)
    except Exception:  # noqa: BLE001 - a stripper must never raise
        return command
    return command


register_stripper("codex", strip)
