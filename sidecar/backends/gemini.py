"""Gemini CLI: strip the wrapper its ``run_shell_command`` tool puts around a command.

Gemini CLI 0.61.0 runs each tool command as ``bash -c <wrapper>`` (``harness/evidence/gemini.json``
holds the exact strings the neutral route recorded)::

    shopt -u promptvars nullglob extglob nocaseglob dotglob; _bgpids_file=/tmp/gemini-shell-AbC123/bgpids.tmp
    (
      trap 'jobs -p > "$_bgpids_file"' EXIT
    <command>
    )
    __code=$?
    exit $__code

The ``shopt -u`` guard is prepended to every bash command the CLI runs; the ``_bgpids_file`` value
is the temporary file quoted the way the ``shell-quote`` package quotes (bare when it has no
special characters, else in single or double quotes); the command is the agent's, trimmed of
surrounding whitespace, with one space added after a trailing backslash (which is taken off again
here). The CLI's other bash forms are stripped too: the guard alone (``!{...}`` injections of
custom commands) and the interactive ``!`` shell mode's ``{ <command> }`` + ``pwd`` wrapper.

Gemini CLI starts no helper bash shells of its own (no records besides the tool commands in the
harness runs); a guard with no command after it, which is what an empty command would leave, is
``""``. Text in none of these forms is returned unchanged.
"""

from __future__ import annotations

import re

from sidecar.backends import register_stripper

# ``shopt -u promptvars nullglob extglob nocaseglob dotglob;`` and the one space after it (the
# options after promptvars are matched loosely, so a version that guards one more still strips).
_GUARD = re.compile(r"shopt -u promptvars(?: [a-z_]+)*;(?: |\Z)")
# The value shell-quote's quote() gives a path: '...', "..." with backslash escapes, or bare with
# backslash escapes.
_QUOTED = r"""(?:'[^'\n]*'|"(?:[^"\\]|\\.)*"|(?:[^\s'"\\]|\\.)+)"""
_BG_HEAD = re.compile(
    r"_bgpids_file=" + _QUOTED + r"\n\(\n  trap 'jobs -p > \"\$_bgpids_file\"' EXIT\n", re.S)
_BG_TAIL = "\n)\n__code=$?\nexit $__code"
# Interactive shell mode (``!`` in the prompt): ``{\n<command>\n}\n__code=$?; pwd > <file>; exit
# $__code`` (the file is ``gemini-shell-*/pwd.tmp`` in the temporary directory).
_PWD_TAIL = re.compile(r"\n\}\n__code=\$\?; pwd > " + _QUOTED + r"; exit \$__code\Z", re.S)


def _drop_added_space(command: str) -> str:
    # The CLI trims the command, then adds a space after a trailing backslash.
    return command[:-1] if command.endswith("\\ ") else command


def _strip_bgpids(text: str) -> str | None:
    head = _BG_HEAD.match(text)
    if head is None:
        return None
    inner = text[head.end():]
    if inner.endswith(_BG_TAIL):
        inner = inner[: -len(_BG_TAIL)]
    # else: a record cut to fit its line lost the tail; the command's start is still the command.
    return _drop_added_space(inner)


def _strip_pwd(text: str) -> str | None:
    if not text.startswith("{\n"):
        return None
    tail = _PWD_TAIL.search(text, 2)
    if tail is None:
        return None
    return _drop_added_space(text[2:tail.start()])


def strip(command: str) -> str:
    """The command Gemini CLI's agent (or user) asked for, from the recorded ``bash -c`` text."""
    try:
        guard = _GUARD.match(command)
        rest = command[guard.end():] if guard else command
        for form in (_strip_bgpids, _strip_pwd):
            inner = form(rest)
            if inner is not None:
                return inner
        return rest
    except Exception:  # noqa: BLE001 - a stripper must never raise
        return command


register_stripper("gemini", strip)
