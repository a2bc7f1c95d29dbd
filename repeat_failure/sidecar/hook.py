"""The neutral route's files on the shared volume: render, remove, and the launch environment.

``hooks/bash_env.sh`` (the hook), ``hooks/bash_env.slow.bash`` (its exit path, which writes the
record) and, for a chained original ``BASH_ENV``, ``hooks/bash_env.chain.bash`` and
``hooks/bash_env.trap.bash`` are templates. The sidecar renders them into
``<shared-dir>/hook/<agent>.sh``, ``hook/<agent>.slow.bash`` and ``hook/<agent>.trap.bash`` with the
record path, agent, backend and (optionally) the agent's original ``BASH_ENV`` baked in, so the
agent's shells need only ``BASH_ENV`` in their environment. The files stay when the sidecar exits
and are removed only when the check is turned off (spec C14): a hook file left behind after that
does nothing because it no longer exists.
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
import shutil
import time
from collections.abc import Mapping
from pathlib import Path

import orjson

from repeat_failure.config import AGENT_NAME_RE, BACKEND_NAME_RE

ROUTE = "bash_env"
HOOK_DIR = "hook"
RECORDS_DIR = "records"
STATE_DIR = "state"
#: records/ is shared by the agent's user and the sidecar only: setgid so new files take the
#: directory's group; the hook creates record files 0660 (umask 007 inside its EXIT trap).
RECORDS_DIR_MODE = 0o2770

# Rendered paths are baked unquoted into the trap string, which is itself single-quoted; a
# path with characters the shell would interpret is refused rather than escaped.
_SAFE_PATH = re.compile(r"^/[A-Za-z0-9._/@+-]*$")


#: The rendered unchained hook: one line, `{ if TEST; then COMMANDS; fi; } 2>/dev/null || :`.
_MAIN = re.compile(r"\{ if (?P<test>\[\[ .* \]\]); then (?P<then>.*); fi; \} 2>/dev/null \|\| :\n")


#: The exit path's first lines (hooks/bash_env.slow.bash), and what they are when an original is
#: chained; put in front of its `return`s then (:func:`render_text`).
_UNCHAINED_START = "builtin trap '' DEBUG RETURN ERR XFSZ\nbuiltin set +ex\n"
_CHAINED_START = "builtin trap '' DEBUG RETURN XFSZ\n"
_CHAIN_RESTORE = "builtin trap - DEBUG RETURN XFSZ; "


class HookError(ValueError):
    """The hook cannot be rendered for these names or paths; the message says which."""


def _template_dir() -> Path:
    """Where the hook templates are: ``hooks/`` in a source checkout, ``repeat_failure.hooks`` when
    installed (pyproject maps the top-level ``hooks/`` folder to that package)."""
    checkout = Path(__file__).resolve().parents[2] / "hooks"
    if (checkout / "bash_env.sh").is_file():
        return checkout
    from importlib.resources import files

    return Path(str(files("repeat_failure.hooks")))


def _code(template: Path) -> str:
    """The text of ``template`` without its comment lines (notes, lint directives) and blank
    lines: bash parses every byte it reaches, comments included (several hundred instructions a
    byte, counted with callgrind), so the rendered files hold only code. The templates hold no
    multi-line string or here-document, so a line whose first non-blank character is ``#`` is a
    comment."""
    return "".join(line for line in template.read_text(encoding="utf-8").splitlines(keepends=True)
                   if line.strip() and not line.lstrip().startswith("#"))


def hook_path(shared_dir: str | os.PathLike[str], agent: str) -> Path:
    """``<shared-dir>/hook/<agent>.sh``: the file ``BASH_ENV`` names."""
    return Path(shared_dir) / HOOK_DIR / f"{agent}.sh"


def slow_path(shared_dir: str | os.PathLike[str], agent: str) -> Path:
    """``<shared-dir>/hook/<agent>.slow.bash``: the hook's rarely used slow path."""
    return Path(shared_dir) / HOOK_DIR / f"{agent}.slow.bash"


def trap_path(shared_dir: str | os.PathLike[str], agent: str) -> Path:
    """``<shared-dir>/hook/<agent>.trap.bash``: what a chained hook's ``trap`` function sources
    while the original ``BASH_ENV`` runs (written only when a chain is rendered)."""
    return Path(shared_dir) / HOOK_DIR / f"{agent}.trap.bash"


def records_path(shared_dir: str | os.PathLike[str], agent: str) -> Path:
    """``<shared-dir>/records/<agent>.jsonl``: where the hook appends raw records."""
    return Path(shared_dir) / RECORDS_DIR / f"{agent}.jsonl"


def check_names(shared_dir: str | os.PathLike[str], agent: str, backend: str,
                chain: str | None = None) -> None:
    """Raise :class:`HookError` unless the hook can be rendered for these names and paths: the
    agent and backend names match their patterns, and the shared dir and the chained
    ``BASH_ENV`` (if any) are absolute paths of letters, digits and ``._/@+-``, the chained one
    outside the shared dir's ``hook/`` folder (a hook chained to itself recurses in every shell). What
    :func:`render_text` checks first; the sidecar calls it at start, so a bad path is an exit
    2, not a pass failing every time."""
    _check(Path(shared_dir), agent, backend, chain)


def _check(shared_dir: Path, agent: str, backend: str, chain: str | None) -> None:
    if not AGENT_NAME_RE.fullmatch(agent):
        raise HookError(f"agent name {agent!r} is not allowed (must match {AGENT_NAME_RE.pattern})")
    if not BACKEND_NAME_RE.fullmatch(backend):
        raise HookError(f"backend name {backend!r} is not allowed (must match {BACKEND_NAME_RE.pattern})")
    if not _SAFE_PATH.fullmatch(str(shared_dir)):
        raise HookError(f"shared dir {str(shared_dir)!r} must be an absolute path of letters, "
                        "digits and ._/@+- only")
    if chain is not None and not _SAFE_PATH.fullmatch(chain):
        raise HookError(f"chained BASH_ENV {chain!r} must be an absolute path of letters, "
                        "digits and ._/@+- only")
    if chain is not None:
        # Every agent's hook sources the same original: one of the hook's own files there would
        # make each shell source itself until bash runs out of stack (issue 28 item 8). The
        # injector never chains the hook it sets; `run` refuses it here (exit 2).
        # A symlink (or another spelling) that resolves there is refused too, where the path
        # exists here; whatever gets past this (a hard link, a file that sources the hook, a
        # link made later) is stopped in the shell: the chain sources the original only when it
        # is not already inside it (hooks/bash_env.chain.bash, ``__rf_s``).
        own = posixpath.normpath(str(shared_dir / HOOK_DIR))
        own_real = os.path.realpath(own)
        if posixpath.normpath(chain).startswith(own + "/") \
                or os.path.realpath(chain).startswith(own_real + "/"):
            raise HookError(f"chained BASH_ENV {chain!r} is one of the hook's own files (under "
                            f"{own}/): it would source itself in every shell")


def render_text(shared_dir: str | os.PathLike[str], agent: str, backend: str,
                chain: str | None = None) -> tuple[str, str]:
    """Return the text of (hook file, slow-path file) for one agent.

    ``chain`` is the agent's original ``BASH_ENV`` (a path inside the agent's container); the
    rendered hook sources it in every shell, after installing its own EXIT trap, so the original
    keeps its effect and an error in it (say, an unset variable under ``set -u``) never stops the
    record; an EXIT trap the original sets still runs, after the hook's and with the command's
    ``$?`` (C-AC16). The chain forks nothing: while the original is sourced, ``trap`` is a
    function that sets the common ``trap ACTION EXIT`` as "the hook's; ACTION" itself and sends
    every other form to the trap helper (:func:`trap_path`), which lets the builtin do it and then
    puts the hook's trap in front; only when ``trap`` was a function already or the original
    turned on POSIX mode is the EXIT trap read back with ``$(trap -p EXIT)``, a fork
    (docs/neutral-route.md, "Chaining an existing BASH_ENV"). An original that sets its EXIT trap
    with ``builtin trap`` or ``command trap`` bypasses the function, so that shell's command is
    not recorded (the "not receiving data" state, C12, shows a route that records nothing). The
    rendered files hold no comment line (:func:`_code`). Raises :class:`HookError` for names or
    paths that cannot be baked in safely.
    """
    shared = Path(shared_dir)
    _check(shared, agent, backend, chain)
    templates = _template_dir()
    prefix = orjson.dumps({"agent": agent, "backend": backend, "route": ROUTE}).decode()[1:-1]
    hook = _code(templates / "bash_env.sh")
    hook = hook.replace("@AGENT@", agent).replace("@SLOW@", str(slow_path(shared, agent)))
    if chain is not None:
        # Chained, the exit path is sourced without `command`: `.` run by `command` keeps
        # errexit on inside the file, so its `return` of a failed command's status would end the
        # shell before the original's EXIT trap ran (POSIX mode's fatal missing file is the
        # lesser evil: docs/neutral-route.md, "Known limits").
        hook = _without_command(hook)
        # The chained hook is its own template around the unchained hook's test and commands.
        main = _MAIN.fullmatch(hook)
        if main is None:  # the template is ours; this only fires if someone breaks it
            raise HookError("hooks/bash_env.sh is not one `{ if TEST; then COMMANDS; fi; }` line")
        ours = _exit_trap(hook)
        fill = {"IF": main["test"], "THEN": main["then"], "CHAIN": shlex.quote(chain),
                "TRAPF": str(trap_path(shared, agent)), "OURS": shlex.quote(ours)}
        # One pass, so a path holding an @NAME@ of its own is never filled in again.
        hook = re.sub(r"@(IF|THEN|CHAIN|TRAPF|OURS)@", lambda m: fill[m[1]],
                      _code(templates / "bash_env.chain.bash"))
    slow = _code(templates / "bash_env.slow.bash")
    # The prefix sits once in single quotes, once in a double-quoted string (quotes escaped).
    slow = (slow.replace("@PREFIX_SQ@", prefix)  # names and ROUTE hold no quote (_check)
                .replace("@PREFIX@", prefix.replace('"', '\\"'))
                .replace("@RECORDS@", str(records_path(shared, agent))))
    if chain is not None:
        # The original's EXIT trap runs next: leave the command's ERR trap, errexit and xtrace
        # alone (`.` sourced on the left of `&&` ignores the first two; a chained hook's steps
        # are traced, a documented limit) and give back the defaults the exit path put aside for
        # its own steps (DEBUG, RETURN, SIGXFSZ).
        slow = slow.replace(_UNCHAINED_START, _CHAINED_START, 1)
        slow = slow.replace('builtin return "$__rf_x"', _CHAIN_RESTORE + 'builtin return "$__rf_x"')
    return hook, slow


def render_trap_text(shared_dir: str | os.PathLike[str], agent: str) -> str:
    """The text of a chained hook's ``trap`` helper (:func:`trap_path`), from
    ``hooks/bash_env.trap.bash`` with the hook's own EXIT trap string baked in (``@OURS@``,
    :func:`_exit_trap`): the helper compares the EXIT trap with it and puts it in front of the
    original's. Raises :class:`HookError` as :func:`render_text` does."""
    hook, _ = render_text(shared_dir, agent, "bash")
    return (_code(_template_dir() / "bash_env.trap.bash")
            .replace("@OURS@", shlex.quote(_exit_trap(_without_command(hook)))))


def _without_command(hook: str) -> str:
    """The unchained hook's text with its EXIT trap as a chained hook sets it (:func:`render_text`):
    the exit path sourced without ``command``."""
    return hook.replace("builtin command . ", "builtin . ")


def _exit_trap(hook: str) -> str:
    """The EXIT trap a hook (its text) sets, OURS: ``{ builtin command . SLOW "$?" && builtin :; }
    &>/dev/null`` alone, or, chained, ``{ builtin . SLOW "$?" && builtin :; } &>/dev/null`` as
    OURS in "OURS; ORIG" in front of the original's EXIT trap ORIG. The exit-path file is given
    the command's status and returns it, so ORIG sees that
    ``$?`` without a fork (``(exit N)`` forks); it is sourced on the left of ``&&``, where errexit
    cannot fire (``command``, which keeps a file removed meanwhile from being fatal in POSIX mode,
    issue 28 item 7, loses that: the unchained exit path turns errexit off and ignores ERR
    itself), and ``builtin :`` runs inside the group, hidden from xtrace. Raises
    :class:`HookError` if the template lost it (only a broken template)."""
    ours = re.search(r"builtin trap '(\{ builtin (?:command )?\. [^ ']+ \"\$\?\" && builtin :; \} "
                     r"&>/dev/null)' EXIT;", hook)
    if ours is None:
        raise HookError("hooks/bash_env.sh has no EXIT trap to chain after")
    return ours.group(1)


def write_atomic(path: Path, data: bytes | bytearray, mode: int) -> None:
    """Replace ``path`` with ``data`` (file mode ``mode``) through a temporary file and a rename,
    so a reader sees the old file or the new one, never a part. Raises ``OSError`` (a full disk,
    say) after removing the temporary file; the old file is then untouched."""
    tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                     mode)
        with os.fdopen(fd, "wb") as f:  # a buffered file retries short writes, raises ENOSPC
            f.write(data)
            os.fchmod(f.fileno(), mode)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


#: The shared directory's folders and their modes (:func:`prepare_shared_dir`).
LAYOUT_MODES = {HOOK_DIR: 0o755, RECORDS_DIR: RECORDS_DIR_MODE, STATE_DIR: 0o700}


def prepare_shared_dir(shared_dir: str | os.PathLike[str]) -> list[str]:
    """Create ``hook/`` (0755), ``records/`` (2770) and ``state/`` (0700) under ``shared_dir``.

    Something else in their place (a symlink planted by an agent, a file) is removed, never
    followed, and replaced by the directory. A directory that belongs to another user, or whose
    mode cannot be set (an agent renamed ours away and made its own: the shared volume's root is
    writable by the agent), is moved aside to ``.<name>.foreign.<ns>`` and replaced by one of
    ours. Returns the names moved aside. Raises ``OSError`` if any of that fails.
    """
    shared = Path(shared_dir)
    shared.mkdir(parents=True, exist_ok=True)
    moved = []
    for name, mode in LAYOUT_MODES.items():
        path = shared / name
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            path.unlink()
        path.mkdir(exist_ok=True)
        try:
            if path.lstat().st_uid != os.geteuid():
                raise PermissionError(f"{path} belongs to another user")
            os.chmod(path, mode, follow_symlinks=False)
        except PermissionError:
            aside = f".{name}.foreign.{time.time_ns()}"
            os.rename(path, shared / aside)
            path.mkdir()
            os.chmod(path, mode, follow_symlinks=False)
            moved.append(aside)
    return moved


def _files(shared_dir: str | os.PathLike[str], agent: str) -> tuple[Path, Path, Path]:
    return hook_path(shared_dir, agent), slow_path(shared_dir, agent), trap_path(shared_dir, agent)


def render(shared_dir: str | os.PathLike[str], agent: str, backend: str,
           chain: str | None = None) -> Path:
    """Write the agent's hook and slow-path files, and with ``chain`` the trap helper
    (:func:`trap_path`), atomically, mode 0644; return the hook path.

    Creates the shared directory's folders as :func:`prepare_shared_dir` does. Raises
    :class:`HookError` as :func:`render_text` does, ``OSError`` when the files cannot be written
    (a directory planted at the hook path is removed first).
    """
    hook_text, slow_text = render_text(shared_dir, agent, backend, chain)
    prepare_shared_dir(shared_dir)
    for path in _files(shared_dir, agent):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
    write_atomic(slow_path(shared_dir, agent), slow_text.encode("utf-8"), 0o644)
    if chain is not None:  # before the hook that sources it
        write_atomic(trap_path(shared_dir, agent),
                     render_trap_text(shared_dir, agent).encode("utf-8"), 0o644)
    else:
        trap_path(shared_dir, agent).unlink(missing_ok=True)
    path = hook_path(shared_dir, agent)
    write_atomic(path, hook_text.encode("utf-8"), 0o644)
    return path


def remove(shared_dir: str | os.PathLike[str], agent: str) -> bool:
    """Remove the agent's hook files; True if a hook file was there. Never raises for a missing
    file (the check being off is the normal case)."""
    removed = False
    for path in _files(shared_dir, agent):
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)  # not ours, but it must not stand where a hook was
            else:
                path.unlink()
            removed = removed or path.suffix == ".sh"
        except FileNotFoundError:
            pass
    return removed


def launch_env(shared_dir: str | os.PathLike[str], agent: str,
               environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables an agent process needs so its shells load the hook.

    ``BASH_ENV`` (the agent's rendered hook), ``SHELL=/bin/bash`` (backends that pick their shell
    from ``$SHELL`` get bash, C2), and ``SHLVL=1`` unless ``environ`` already has it >= 1: bash
    reads bashrc instead of ``BASH_ENV`` for ``bash -c`` when stdin is a socket and the shell
    level is below 2 (docs/neutral-route.md, "Bash facts the hook relies on"; seen with Claude
    Code).
    """
    environ = os.environ if environ is None else environ
    env = {"BASH_ENV": str(hook_path(shared_dir, agent)), "SHELL": "/bin/bash"}
    try:
        level = int(environ.get("SHLVL", "0"))
    except ValueError:
        level = 0
    if level < 1:
        env["SHLVL"] = "1"
    return env
