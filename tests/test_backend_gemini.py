"""Gemini CLI's wrapper (spec C7, C8, C-AC4), on the harness's real records.

The wrapper form used for the round trips is cut out of a real record of ``harness/evidence/
gemini.json`` (everything before and after ``ls /nonexistent``), not written by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sidecar.backends import wrapper_stripper
from sidecar.normalize import normalize

EVIDENCE = json.loads((Path(__file__).resolve().parent.parent / "harness" / "evidence"
                       / "gemini.json").read_text())
RECORDS = [r for run in EVIDENCE["runs"] for r in run["records"]]
EXITS = {"ls /nonexistent": 2, "false": 1, "echo harness-ok": 0}
GUARD = "shopt -u promptvars nullglob extglob nocaseglob dotglob; "


def _wrapper() -> tuple[str, str]:
    """(text before, text after) the command in the first run's real record."""
    raw = EVIDENCE["runs"][0]["records"][0]["raw"]
    before, sep, after = raw.partition("\nls /nonexistent\n")
    assert sep, raw
    return before + "\n", "\n" + after


BEFORE, AFTER = _wrapper()


def wrap(command: str) -> str:
    """``command`` in the exact wrapper Gemini CLI 0.61.0 ran it in (the CLI trims the command and
    adds a space after a trailing backslash)."""
    command = command.strip()
    if command.endswith("\\"):
        command += " "
    return BEFORE + command + AFTER


def test_evidence_wrapper_form() -> None:
    """The real records carry the wrapper the CLI notes describe: a `shopt -u` guard, a temporary
    `_bgpids_file` variable, the command in a `( trap ... EXIT` subshell, then `exit` with its
    status."""
    assert EVIDENCE["version"] == "0.61.0" and EVIDENCE["version_output"] == "0.61.0"
    assert BEFORE.startswith(GUARD + "_bgpids_file=/tmp/gemini-shell-")
    assert BEFORE.endswith("/bgpids.tmp\n(\n  trap 'jobs -p > \"$_bgpids_file\"' EXIT\n")
    assert AFTER == "\n)\n__code=$?\nexit $__code"
    for record in RECORDS:
        assert record["raw"].startswith(GUARD + "_bgpids_file=") and record["raw"].endswith(AFTER)
        assert not record["cut"]


def test_wrapped_ls_compares_equal_to_bare_command() -> None:
    """C-AC4: Gemini's wrapped form of `ls /nonexistent` normalizes to exactly the bare command,
    with the command's own exit status."""
    (record,) = EVIDENCE["runs"][0]["records"]
    assert record["raw"] != "ls /nonexistent"
    assert normalize(record["raw"], "gemini") == "ls /nonexistent"
    assert record["exit"] == 2


def test_wrapped_false() -> None:
    """`false` comes back as `false`, exit 1."""
    run = EVIDENCE["runs"][1]
    assert run["command"] == "false"
    (record,) = run["records"]
    assert normalize(record["raw"], "gemini") == "false"
    assert record["exit"] == 1


def test_every_real_agent_command_unwraps() -> None:
    """Every run recorded exactly the commands the stub asked for, each unwrapped, with its exit."""
    for run in EVIDENCE["runs"]:
        got = [(normalize(r["raw"], "gemini"), r["exit"]) for r in run["records"]
               if normalize(r["raw"], "gemini")]
        assert got == [(run["command"], EXITS[run["command"]])] * run["repeat"]


def test_helper_shells_never_reach_the_detector() -> None:
    """C8: any record that is not one of the agent's commands normalizes to "". Gemini CLI 0.61.0
    started no helper bash shells in the real runs (every record is a wrapped tool command); the
    guard with nothing after it, what an empty command would leave, is "" too."""
    for run in EVIDENCE["runs"]:
        for record in run["records"]:
            assert normalize(record["raw"], "gemini") in (run["command"], "")
    assert normalize(GUARD, "gemini") == ""
    assert normalize(GUARD.rstrip(), "gemini") == ""


def test_repeat_raised_the_note() -> None:
    """The five repeated failures went through the real pipeline and raised the note."""
    assert EVIDENCE["runs"][-1]["note"] == (
        "Repeating failure: ls /nonexistent failed 5 times in 1 min (exit 2)")


@pytest.mark.parametrize("command", [
    "ls /nonexistent",
    "false",
    'echo "double" \'single\' "it\'s"',
    "make && make test || echo failed",
    "printf 'a\\nb'\necho second line\n\necho after a blank line",
    "cat <<'EOF'\nheredoc $HOME ) ( \"q\"\nEOF",
    "cat <<EOF > out.txt\n)\n__code=$?\nexit $__code\nEOF",
    "(cd sub && make) ; echo done",
    "trap 'echo bye' EXIT; ls",
    "echo a  b\ttab",
    "echo continued \\",
    "shopt -u extglob; ls",
])
def test_stripper_round_trips(command: str) -> None:
    """C-AC4 for quotes, &&, newlines and heredocs (also ones holding the wrapper's own tail):
    the wrapper comes off and the command comes back unchanged."""
    strip = wrapper_stripper("gemini")
    assert strip is not None
    assert strip(wrap(command)) == command
    assert normalize(wrap(command), "gemini") == normalize(command, "bash")


@pytest.mark.parametrize("path", [
    "'/tmp/my tmp/gemini-shell-AbC123/bgpids.tmp'",                 # shell-quote: '...'
    "\"/tmp/it's here/gemini-shell-AbC123/bgpids.tmp\"",            # shell-quote: "..."
    "/tmp/a\\(b\\)/gemini-shell-AbC123/bgpids.tmp",                 # shell-quote: bare, escaped
])
def test_quoted_temp_file(path: str) -> None:
    """A TMPDIR with spaces or quotes: the `_bgpids_file` value is quoted the way the CLI's
    shell-quote does; the wrapper still comes off."""
    head = BEFORE.split("_bgpids_file=", 1)[0] + "_bgpids_file=" + path + "\n" \
        + BEFORE.split("\n", 1)[1]
    assert wrapper_stripper("gemini")(head + "git push" + AFTER) == "git push"


def test_cut_record_keeps_the_command_start() -> None:
    """A record cut to fit its line lost the wrapper's tail: the command's start remains."""
    assert wrapper_stripper("gemini")(BEFORE + "echo " + "x" * 50) == "echo " + "x" * 50


def test_other_bash_forms_of_the_cli() -> None:
    """From the CLI's 0.61.0 source, not the harness runs: the guard alone (custom-command `!{}`
    injections) and the interactive `!` shell mode's `{ ... }` + `pwd` wrapper."""
    strip = wrapper_stripper("gemini")
    assert strip(GUARD + "git status") == "git status"
    def interactive(command: str) -> str:
        return (GUARD + "{\n" + command + "\n}\n__code=$?; "
                "pwd > /tmp/gemini-shell-AbC123/pwd.tmp; exit $__code")

    assert strip(interactive("ls /nonexistent")) == "ls /nonexistent"
    assert strip(interactive("echo a &&\n  echo }")) == "echo a &&\n  echo }"
    assert strip(interactive("echo continued \\ ")) == "echo continued \\"


@pytest.mark.parametrize("text", [
    "ls /nonexistent", "", "shopt -s extglob; ls", "_bgpids_file=x\nls", "(\nls\n)",
])
def test_unrecognised_text_is_unchanged(text: str) -> None:
    """Text in none of the CLI's forms comes back as it was."""
    assert wrapper_stripper("gemini")(text) == text
