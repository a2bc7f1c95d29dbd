"""Gemini CLI's wrapper (spec C7, C8, C-AC4), on the harness's real records.

The wrapper form used for the round trips is cut out of a real record of ``harness/evidence/
gemini.json`` (everything before and after ``ls /nonexistent``), not written by hand.
"""

from __future__ import annotations

import copy
import json
import os
import re
import time

import pytest

from harness import checks
from repeat_failure.backends import (SHELL_END, SHELL_START, TEXT, TOOL, TURN_END, TURN_START,
                              ReaderFormatError, SessionEvent, wrapper_stripper)
from repeat_failure.backends.gemini import GeminiReader
from repeat_failure.sessions.tail import SessionTail, expand_globs
from repeat_failure.rules.normalize import normalize

from sessionlogs import (SCENARIO_NAMES, SessionLog, SessionLogChecks, assert_reader_error,
                         check_event, evidence_of, iso_ts, junk_variants, version_params)

EVIDENCE = evidence_of("gemini")
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


# -- every verified release (issue 26 item 3) -----------------------------------------------------

_PGREP = "__code=$?; pgrep -g 0 >{tmp} 2>&1; exit $__code;"
_BGPIDS = ("_bgpids_file={tmp}\n(\n  trap 'jobs -p > \"$_bgpids_file\"' EXIT\n{command}\n)\n"
           "__code=$?\nexit $__code")
#: Each verified release's wrapper around a command, as its real records show it (``{tmp}``: the
#: temporary file the wrapper writes, ``{command}``: the command). 0.38.2 is the last release that
#: writes its chat as one ``session-*.json`` document (0.39.0 is the first JSON Lines release),
#: 0.36.0 the last with the ``{ <command>; }`` form; 0.40.0 moved the ``pgrep`` to its own line and
#: quotes its file; 0.44.0 added ``trap '' HUP;`` before the guard and the ``_bgpids_file``
#: subshell (0.45.2 dropped the ``trap`` again); 0.54.4 is the first to roll a failed turn back
#: (its session log, not its wrapper, changed).
RELEASES = {
    "0.61.0": GUARD + _BGPIDS,
    "0.54.4": GUARD + _BGPIDS,
    "0.45.2": GUARD + _BGPIDS,
    "0.44.0": "trap '' HUP; " + GUARD + _BGPIDS,
    "0.40.0": GUARD + "(\n{command}\n)\n" + _PGREP,
    "0.39.0": GUARD + "(\n{command}\n); " + _PGREP,
    "0.38.2": GUARD + "(\n{command}\n); " + _PGREP,
    "0.36.0": GUARD + "{{ {command} }}; " + _PGREP,
    "0.32.1": GUARD + "{{ {command} }}; " + _PGREP,
    "0.30.0": GUARD + "{{ {command} }}; " + _PGREP,
    "0.28.1": GUARD + "{{ {command} }}; " + _PGREP,
    "0.27.0": GUARD + "{{ {command} }}; " + _PGREP,
}


def _braced(version: str) -> bool:
    """Whether ``version`` puts the command in ``{ ...; }`` (0.19.1 to 0.36.0)."""
    return "{{ {command} }}" in RELEASES[version]


def _as_the_cli_puts_it(version: str, command: str) -> str:
    """``command`` as ``version`` puts it in its wrapper (already trimmed): the ``{ }`` form adds
    ``;`` unless it ends with ``&`` (0.36.0's ``tools/shell.js``), the later forms add a space
    after a trailing backslash."""
    if _braced(version):
        return command if command.endswith("&") else command + ";"
    return command + " " if command.endswith("\\") else command


def _form(version: str) -> re.Pattern[str]:
    """:data:`RELEASES`' form of ``version`` as a pattern with the command a group (without the
    ``;`` the ``{ }`` form adds) and the temporary file any non-blank text."""
    parts = re.split(r"(\{tmp\}|\{command\})", RELEASES[version])
    command = "(.*);" if _braced(version) else "(.*)"
    return re.compile("".join(
        r"\S+" if part == "{tmp}" else command if part == "{command}"
        else re.escape(part.replace("{{", "{").replace("}}", "}")) for part in parts), re.S)


def test_every_verified_release_has_its_facts() -> None:
    """:data:`RELEASES` states the wrapper of exactly the releases whose captures are kept."""
    assert sorted(RELEASES) == sorted(p.id.removeprefix("gemini-")
                                      for p in version_params("gemini"))


@pytest.mark.parametrize("root", version_params("gemini"))
def test_every_release_records_its_wrapper_and_unwraps(root) -> None:
    """On each verified release every record of every run is the release's wrapper around the
    command the stub asked for, which unwraps with the command's own exit status; the repeated
    failure raised the note (0.27.0 made four of the five calls: no note)."""
    evidence = evidence_of("gemini", root)
    form = _form(evidence["version"])
    calls = checks.loop_guard("gemini", evidence["version"]) or 5  # 0.27.0 made four of five
    for run in evidence["runs"]:
        times = min(run["repeat"], calls)
        assert [(form.fullmatch(r["raw"])[1], r["exit"]) for r in run["records"]] == \
            [(run["command"], EXITS[run["command"]])] * times
        assert [(normalize(r["raw"], "gemini"), r["exit"]) for r in run["records"]] == \
            [(run["command"], EXITS[run["command"]])] * times
    assert evidence["runs"][-1]["note"] == (
        "Repeating failure: ls /nonexistent failed 5 times in 1 min (exit 2)" if calls == 5
        else "")


@pytest.mark.parametrize("version", sorted(RELEASES))
@pytest.mark.parametrize("command", ["ls /nonexistent", "make && make test || echo failed",
                                     "printf 'a\\nb'\necho second line", "echo continued \\",
                                     "(cd sub && make) ; echo done", "sleep 5 &"])
def test_stripper_round_trips_in_every_releases_form(version: str, command: str) -> None:
    """C-AC4 in each release's form (:data:`RELEASES`, the CLI trimming the command and adding a
    space after a trailing backslash; 0.19.1 to 0.36.0's ``{ ...; }`` form put ``;`` after it)."""
    wrapped = RELEASES[version].format(tmp="/tmp/gemini-shell-AbC123/x.tmp",
                                       command=_as_the_cli_puts_it(version, command))
    assert wrapper_stripper("gemini")(wrapped) == command


def test_the_oldest_brace_form() -> None:
    """0.19.1 to 0.36.0 (their real records; 0.36.0's are kept): ``{ <command>; }`` then the
    ``pgrep`` tail, no ``;`` added after a command that ends with ``&``."""
    tail = "; __code=$?; pgrep -g 0 >/tmp/shell_pgrep_43efc7bacfed.tmp 2>&1; exit $__code;"
    strip = wrapper_stripper("gemini")
    assert strip(GUARD + "{ ls /nonexistent; }" + tail) == "ls /nonexistent"
    assert strip(GUARD + "{ sleep 5 & }" + tail) == "sleep 5 &"
    assert strip(GUARD + "{ echo a\necho }; }" + tail) == "echo a\necho }"


def test_the_cli_asking_the_model_to_go_on_is_no_new_turn() -> None:
    """Gemini CLI 0.39.0 to 0.41.x answer an empty reply by sending "System: Please continue."
    in the same turn, logged as a ``user`` message (their real empty-reply session): it starts
    no turn, so the turn whose reply never came has no end (no verdict) instead of a second
    turn. The pin's real prompt line changed to either of the CLI's texts gives nothing."""
    (root,) = [p.values[0] for p in version_params("gemini") if p.id == "gemini-0.39.0"]
    log = SessionLog("gemini", root)
    (rel,) = log.evidence()["verdict_scenarios"]["empty"]["session_files"]
    lines = SessionLog.lines(log.home / "verdict" / "empty" / rel)
    users = [o for o in lines if o.get("type") == "user"]
    assert [u["content"] for u in users][-1] == [{"text": "System: Please continue."}]
    assert [e.kind for e in log.read(lines)] == [TURN_START]
    prompt = next(o for o in LOG.session_lines() if o.get("type") == "user")
    for text in ("System: Please continue.", "Please continue."):
        changed = {**copy.deepcopy(prompt), "content": [{"text": text}]}
        assert READER.parse_line(changed, READER.new_file_state()) == []


# -- the session-log reader ------------------------------------------------------------------------
#
# Every test below reads the real chat file(s) the harness kept (``session_files`` of
# ``harness/evidence/gemini.json``, Gemini CLI 0.61.0, the session of the last run: the stub asked
# for ``ls /nonexistent`` five times in one turn). Ids, times and exits come from the files; a test
# of error handling takes a real line and breaks it (says how in its docstring). The checks every
# JSON Lines reader passes come from ``tests/sessionlogs.py`` (:class:`TestSessionLog`).

LOG = SessionLog("gemini")
READER = LOG.reader


def _writes_json_lines(root) -> bool:
    """Whether the release whose evidence is under ``root`` keeps JSON Lines chat files (0.39.0
    on), not ``session-*.json`` documents (0.19.1 to 0.38.2)."""
    return all(rel.endswith(".jsonl") for rel in evidence_of("gemini", root)["session_files"])


#: The verified releases that write JSON Lines chats, and those that write one JSON document.
JSONL_RELEASES = [p for p in version_params("gemini") if _writes_json_lines(p.values[0])]
DOCUMENT_RELEASES = [p for p in version_params("gemini") if not _writes_json_lines(p.values[0])]


class TestSessionLog(SessionLogChecks):
    """The checks every JSON Lines reader passes, on the real chat files of each release that
    writes JSON Lines (0.39.0 on; the documents of earlier ones: the tests after this class):
    the line kinds in them (header, `$set`, user and gemini messages) are the ones the reader
    knows."""

    log = LOG
    reader_class = GeminiReader
    known_line_kinds = frozenset({"header", "$set", "user", "gemini"})

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """Only the JSON Lines releases (:data:`JSONL_RELEASES`)."""
        if "evidence_root" in metafunc.fixturenames:
            metafunc.parametrize("evidence_root", JSONL_RELEASES)

    @staticmethod
    def line_kind(line: dict) -> str:
        """A ``$set`` line, a message's ``type``, or ``header`` for the line without one."""
        return "$set" if "$set" in line else line.get("type", "header")


def _shell_calls(lines: list) -> dict[str, tuple[dict, dict]]:
    """call id → (the first message line carrying the call, the call) for run_shell_command."""
    calls: dict[str, tuple[dict, dict]] = {}
    for obj in lines:
        for call in obj.get("toolCalls") or []:
            if call["name"] == "run_shell_command":
                calls.setdefault(call["id"], (obj, call))
    return calls


def _first_call_line(lines: list) -> dict:
    return copy.deepcopy(next(o for o in lines if o.get("toolCalls")))


def _response(line: dict) -> dict:
    """The ``functionResponse.response`` of a line's first tool call (changed in place)."""
    return line["toolCalls"][0]["result"][0]["functionResponse"]["response"]


def test_reader_glob_and_signal() -> None:
    """The gemini reader reads the chat files (JSON Lines, and the documents of 0.19.1 to
    0.38.2), and does not make records (the
    neutral route records Gemini's commands); its coverage text names the shell tool and its
    exit line."""
    assert READER.globs == (".gemini/tmp/*/chats/session-*.jsonl",
                            ".gemini/tmp/*/chats/session-*.json")
    assert READER.route_records is False
    assert "run_shell_command" in READER.signal and "Exit Code" in READER.signal


def test_rewritten_messages_give_each_call_once() -> None:
    """The file writes a model message twice under one id (first without, then with its finished
    toolCalls); each call id still gives exactly one start and one end, and feeding a rewritten
    line again gives nothing."""
    lines = LOG.session_lines()
    ids = [o["id"] for o in lines if o.get("type") == "gemini"]
    assert len(ids) > len(set(ids))
    events = LOG.read(lines)
    for call_id in _shell_calls(lines):
        assert [e.kind for e in events if e.call_id == call_id] == [SHELL_START, SHELL_END]
    state = READER.new_file_state()
    line = _first_call_line(lines)
    assert [e.kind for e in READER.parse_line(line, state)] == [SHELL_START, SHELL_END]
    assert READER.parse_line(line, state) == []


def test_shell_calls_have_the_files_ids_commands_exits_and_times() -> None:
    """Start: the message's time and the call's `args.command`; end: the call's own time (when
    it was recorded as finished) and the exit from its `Exit Code: N` result line (2, failed)."""
    lines = LOG.session_lines()
    turn = next(o["id"] for o in lines if o.get("type") == "user")
    expected = []
    for call_id, (obj, call) in _shell_calls(lines).items():
        text = call["result"][0]["functionResponse"]["response"]["output"]
        (code,) = re.findall(r"^Exit Code: (\d+)$", text, re.M)
        expected += [
            SessionEvent(SHELL_START, iso_ts(obj["timestamp"]), call_id=call_id,
                         command=call["args"]["command"], tool="run_shell_command", turn_id=turn),
            SessionEvent(SHELL_END, iso_ts(call["timestamp"]), call_id=call_id,
                         command=call["args"]["command"], exit=int(code), failed=True,
                         tool="run_shell_command", turn_id=turn,
                         output="ls: cannot access '/nonexistent': No such file or directory")]
        # The output (issue 19) is the command's alone: not the tool's "Output:" label, tags
        # and trailing lines, whose "Process Group PGID: N" differs at every call.
        assert "Process Group PGID: " in text
    assert [e for e in LOG.read(lines) if e.kind in (SHELL_START, SHELL_END)] == expected


def test_turn_bounds_and_text() -> None:
    """turn_start is the text prompt (its time, its id), not the tool results sent back as user
    messages nor the `$set` setup message; the final model message (text, no tool calls) gives
    the text and the end, at its time."""
    lines = LOG.session_lines()
    prompts = [o for o in lines if o.get("type") == "user"
               and not any("functionResponse" in p for p in o["content"])]
    (prompt,) = prompts
    final = [o for o in lines if o.get("type") == "gemini" and o["content"]
             and not o.get("toolCalls")][-1]
    events = LOG.read(lines)
    assert events[0] == SessionEvent(TURN_START, iso_ts(prompt["timestamp"]),
                                     turn_id=prompt["id"])
    assert events[-2:] == [
        SessionEvent(TEXT, iso_ts(final["timestamp"]), turn_id=prompt["id"]),
        SessionEvent(TURN_END, iso_ts(final["timestamp"]), turn_id=prompt["id"])]


def test_success_result_without_exit_line_is_exit_0() -> None:
    """A real finished call whose `Exit Code: 2` result line was deleted — the form Gemini CLI
    0.61.0 writes for exit 0 (its shell tool adds the line only when non-zero) — ends with exit
    0, not failed."""
    line = _first_call_line(LOG.session_lines())
    response = _response(line)
    response["output"] = re.sub(r"\nExit Code: \d+", "", response["output"])
    end = READER.parse_line(line, READER.new_file_state())[-1]
    assert (end.kind, end.exit, end.failed) == (SHELL_END, 0, False)


@pytest.mark.parametrize("status", ["error", "cancelled"])
def test_failed_tool_status_without_exit(status: str) -> None:
    """A real finished call with its result text's exit line deleted and its `status` changed to
    a failing one: no exit number, failed."""
    line = _first_call_line(LOG.session_lines())
    response = _response(line)
    response["output"] = re.sub(r"\nExit Code: \d+", "", response["output"])
    line["toolCalls"][0]["status"] = status
    end = READER.parse_line(line, READER.new_file_state())[-1]
    assert (end.kind, end.exit, end.failed) == (SHELL_END, None, True)


def test_exit_in_the_commands_own_output_is_not_read() -> None:
    """A real result whose command output was replaced by a line `Exit Code: 7` and whose real
    exit line was deleted: the exit comes from the trailing lines only (0 here), not from the
    output."""
    line = _first_call_line(LOG.session_lines())
    response = _response(line)
    text = re.sub(r"\nExit Code: \d+", "", response["output"])
    response["output"] = re.sub(r"Output: [^\n]*", "Output: x\nExit Code: 7\ny", text)
    end = READER.parse_line(line, READER.new_file_state())[-1]
    assert (end.exit, end.failed) == (0, False)


def test_exit_line_that_is_not_a_number() -> None:
    """A real result whose `Exit Code: 2` became `Exit Code: two`: bad_exit."""
    line = _first_call_line(LOG.session_lines())
    response = _response(line)
    response["output"] = re.sub(r"Exit Code: \d+", "Exit Code: two", response["output"])
    assert_reader_error(READER, line, "bad_exit")


def test_broken_real_lines_raise_format_errors() -> None:
    """Real lines broken on purpose: a list (not_object), the header without `sessionId`
    (no_type), a message without `type` (no_type), `toolCalls` made an object (unknown_shape),
    a call without `id` (unknown_shape), `$set` made a string (unknown_shape), a timestamp made a
    number (bad_ts)."""
    lines = LOG.session_lines()
    header = copy.deepcopy(lines[0])
    del header["sessionId"]
    untyped = _first_call_line(lines)
    del untyped["type"]
    calls_obj = _first_call_line(lines)
    calls_obj["toolCalls"] = calls_obj["toolCalls"][0]
    no_id = _first_call_line(lines)
    del no_id["toolCalls"][0]["id"]
    bad_set = copy.deepcopy(next(o for o in lines if "$set" in o))
    bad_set["$set"] = "x"
    bad_ts = _first_call_line(lines)
    bad_ts["timestamp"] = 1764500000
    for reason, obj in [("not_object", [lines[0]]), ("no_type", header), ("no_type", untyped),
                        ("unknown_shape", calls_obj), ("unknown_shape", no_id),
                        ("unknown_shape", bad_set), ("bad_ts", bad_ts)]:
        assert_reader_error(READER, obj, reason)


def test_other_tools_are_not_shell_activity() -> None:
    """A real finished call renamed to `read_file`: one tool event, no shell events."""
    line = _first_call_line(LOG.session_lines())
    line["toolCalls"][0]["name"] = "read_file"
    (event,) = READER.parse_line(line, READER.new_file_state())
    assert (event.kind, event.tool, event.call_id) == (TOOL, "read_file",
                                                       line["toolCalls"][0]["id"])


@pytest.mark.parametrize("name", [n for n in SCENARIO_NAMES if n != "read"])
def test_running_command_is_not_in_the_log(name: str) -> None:
    """Gemini CLI 0.61.0 records a tool call only once it has finished
    (``recordCompletedToolCalls``), so a running command is not in the file; the harness agrees
    for both snapshots taken while a command ran (``running_command_logged`` is false), so the
    scenario checks expect no shell event of the running command."""
    LOG.scenario_files(name)  # skips until the harness has kept the scenario
    assert LOG.snapshot(name).get("running_command_logged") is False


# -- the session-*.json documents of 0.19.1 to 0.38.2 (issue 26 item 3) ---------------------------
#
# Every test below reads the real documents the harness kept for each verified release that
# writes them (:data:`DOCUMENT_RELEASES`); ids, times and exits come from the files. "As the CLI
# had written it earlier" is the real document with only its first messages (the CLI appends
# messages and writes the whole file again).

def _document_paths(root) -> list:
    """(home, path) of every session document the harness kept under ``root``: the repeated
    run's, the session scenarios' and the verdict runs'."""
    evidence = evidence_of("gemini", root)
    home = root / "gemini"
    out = [(home, home / rel) for rel in evidence["session_files"]]
    for name, rels in evidence["scenario_sessions"].items():
        out += [(home / name, home / name / rel) for rel in rels]
    for name, run in evidence["verdict_scenarios"].items():
        out += [(home / "verdict" / name, home / "verdict" / name / rel)
                for rel in run["session_files"]]
    return out


def _shell_document(root) -> dict:
    """The repeated run's real document (``ls /nonexistent`` five times in one turn)."""
    (rel,) = evidence_of("gemini", root)["session_files"]
    return json.loads((root / "gemini" / rel).read_text())


def _read_document(doc, state=None) -> list:
    return READER.parse_document(doc, READER.new_file_state() if state is None else state)


def test_releases_of_both_forms_are_verified() -> None:
    """The kept captures hold releases of both forms: 0.38.2, 0.36.0, 0.32.1, 0.30.0, 0.28.1 and
    0.27.0 write documents, 0.39.0 JSON Lines."""
    assert [p.id for p in DOCUMENT_RELEASES] == ["gemini-0.38.2", "gemini-0.36.0",
                                                 "gemini-0.32.1", "gemini-0.30.0",
                                                 "gemini-0.28.1",
                                                 "gemini-0.27.0"]
    assert "gemini-0.39.0" in [p.id for p in JSONL_RELEASES]


@pytest.mark.parametrize("root", DOCUMENT_RELEASES)
def test_documents_are_found_and_read_whole(root) -> None:
    """Every kept document is found by the reader's globs as the sidecar expands them and is
    read as a JSON document (:meth:`GeminiReader.file_kind`); a ``.jsonl`` chat file is still
    read as JSON Lines."""
    paths = _document_paths(root)
    assert len(paths) == 8  # the shell run, 3 session scenarios, 4 verdict runs
    for home, path in paths:
        found = {p for base, pattern in expand_globs(READER, home, env={})
                 for p in base.glob(pattern)}
        assert found == {path}
        assert READER.file_kind(path) == "json"
    assert READER.file_kind(LOG.session()) == "jsonl"


#: The document releases that made all five calls of the repeated run (0.27.0 made four).
FIVE_CALL_RELEASES = [p for p in DOCUMENT_RELEASES
                      if checks.loop_guard("gemini", p.id.removeprefix("gemini-")) is None]


def test_four_calls_and_no_answer_in_0_27_0() -> None:
    """0.27.0 (as 0.25.0) stopped the repeated run after four calls, all in one model message,
    without an answer: the reader gives the turn's start and four failed calls (exit 2), and
    no end of the turn."""
    (root,) = [p.values[0] for p in DOCUMENT_RELEASES if p.id == "gemini-0.27.0"]
    doc = _shell_document(root)
    events = _read_document(doc)
    assert [e.kind for e in events] == [TURN_START] + [SHELL_START, SHELL_END] * 4
    assert [(e.command, e.exit, e.failed) for e in events if e.kind == SHELL_END] == \
        [("ls /nonexistent", 2, True)] * 4


@pytest.mark.parametrize("root", FIVE_CALL_RELEASES)
def test_document_shell_run_gives_the_exact_events(root) -> None:
    """The repeated run's document: the prompt starts the turn (its id and time); each of the
    five model messages carries one finished ``run_shell_command`` call (0.30.0: one message
    carries all five: 0.28.1 and 0.30.0), which starts at the message's time and ends at the call's own time with exit 2 (its ``Exit Code: 2`` line),
    failed, and the command's output alone; the closing text ends the turn."""
    doc = _shell_document(root)
    messages = doc["messages"]
    prompt, *steps, final = messages
    assert prompt["type"] == "user" and final["content"] == "Done: the command ran."
    # one message per call, or (0.30.0) one message holding all five calls
    calls = [(message, call) for message in steps for call in message["toolCalls"]]
    assert len(calls) == 5
    turn = prompt["id"]
    expected = [SessionEvent(TURN_START, iso_ts(prompt["timestamp"]), turn_id=turn)]
    for message, call in calls:
        assert call["args"] == {"command": "ls /nonexistent"} and call["status"] == "success"
        expected += [
            SessionEvent(SHELL_START, iso_ts(message["timestamp"]), call_id=call["id"],
                         command="ls /nonexistent", tool="run_shell_command", turn_id=turn),
            SessionEvent(SHELL_END, iso_ts(call["timestamp"]), call_id=call["id"],
                         command="ls /nonexistent", exit=2, failed=True,
                         tool="run_shell_command", turn_id=turn,
                         output="ls: cannot access '/nonexistent': No such file or directory")]
    expected += [SessionEvent(TEXT, iso_ts(final["timestamp"]), turn_id=turn),
                 SessionEvent(TURN_END, iso_ts(final["timestamp"]), turn_id=turn)]
    assert _read_document(doc) == expected


@pytest.mark.parametrize("root", DOCUMENT_RELEASES)
def test_each_rewrite_gives_only_what_is_new(root) -> None:
    """The document read as the CLI wrote it, one message more each time, with one state: the
    events are exactly those of the whole document read once, and reading the last version
    again gives nothing."""
    doc = _shell_document(root)
    state = READER.new_file_state()
    got = []
    for count in range(1, len(doc["messages"]) + 1):
        got += _read_document({**doc, "messages": doc["messages"][:count]}, state)
    assert got == _read_document(doc)
    assert _read_document(doc, state) == []


@pytest.mark.parametrize("root", DOCUMENT_RELEASES)
def test_document_verdict_runs(root) -> None:
    """The verdict runs' documents: the normal turn's ``echo harness-ok`` ends with exit 0, not
    failed, and the turn ends; the API error's, the empty reply's and the killed run's hold
    the prompt alone (the CLI wrote nothing more), so their turns start and never end."""
    home = root / "gemini" / "verdict"
    runs = evidence_of("gemini", root)["verdict_scenarios"]

    def events(name):
        (rel,) = runs[name]["session_files"]
        return _read_document(json.loads((home / name / rel).read_text()))

    ok = events("ok")
    assert [e.kind for e in ok] == [TURN_START, SHELL_START, SHELL_END, TEXT, TURN_END]
    assert (ok[2].command, ok[2].exit, ok[2].failed) == ("echo harness-ok", 0, False)
    for name in ("empty", "error", "killed"):
        assert [e.kind for e in events(name)] == [TURN_START]


@pytest.mark.parametrize("root", DOCUMENT_RELEASES)
def test_broken_real_documents_raise_format_errors(root) -> None:
    """The real document broken on purpose: a list (not_object), ``messages`` dropped or made
    an object (unknown_shape), a message made a string (not_object), a message without
    ``type`` (no_type), a call's ``toolCalls`` made an object (unknown_shape), a call's time a
    number (bad_ts), its ``Exit Code: 2`` made ``Exit Code: two`` (bad_exit)."""
    doc = _shell_document(root)

    def broken(change):
        copied = copy.deepcopy(doc)
        change(copied)
        return copied

    def call(d):
        return d["messages"][1]["toolCalls"][0]

    def response(d):
        return call(d)["result"][0]["functionResponse"]["response"]

    cases = [
        ("not_object", [doc]),
        ("unknown_shape", broken(lambda d: d.pop("messages"))),
        ("unknown_shape", broken(lambda d: d.update(messages={"0": d["messages"][0]}))),
        ("not_object", broken(lambda d: d["messages"].__setitem__(0, "x"))),
        ("no_type", broken(lambda d: d["messages"][1].pop("type"))),
        ("unknown_shape", broken(lambda d: d["messages"][1].update(toolCalls=call(d)))),
        ("bad_ts", broken(lambda d: call(d).update(timestamp=1764500000))),
        ("bad_exit", broken(lambda d: response(d).update(
            output=response(d)["output"].replace("Exit Code: 2", "Exit Code: two")))),
    ]
    for reason, bad in cases:
        with pytest.raises(ReaderFormatError) as caught:
            _read_document(bad)
        assert caught.value.reason == reason, reason
        assert "nonexistent" not in str(caught.value)


@pytest.mark.parametrize("root", DOCUMENT_RELEASES)
def test_junk_in_any_field_of_a_real_document_raises_only_format_errors(root) -> None:
    """Every field of the repeated run's document (its second message kept: one call) deleted
    or replaced by junk, in turn: the reader gives well-formed events or raises
    :class:`ReaderFormatError`, never anything else."""
    doc = _shell_document(root)
    doc["messages"] = doc["messages"][:2]
    variants = 0
    for variant in junk_variants(doc):
        variants += 1
        try:
            events = _read_document(variant)
        except ReaderFormatError:
            continue
        for event in events:
            check_event(event)
    assert variants > 100


#: The document releases whose repeated run has one call per model message (0.32.1 on; 0.27.0 to
#: 0.31.0 keep the turn's calls in one message).
ONE_CALL_RELEASES = [p for p in DOCUMENT_RELEASES
                     if all(len(m.get("toolCalls") or []) <= 1
                            for m in _shell_document(p.values[0])["messages"])]


def test_one_call_per_message_releases() -> None:
    assert [p.id for p in ONE_CALL_RELEASES] == ["gemini-0.38.2", "gemini-0.36.0",
                                                 "gemini-0.32.1"]


@pytest.mark.parametrize("root", ONE_CALL_RELEASES)
def test_the_tail_follows_a_rewritten_document(root, tmp_path) -> None:
    """The sidecar's tail on a home holding the repeated run's document as the CLI first wrote
    it (the prompt and the first call), then rewritten whole with everything: the first poll
    gives the turn's start and the first call, the second only the rest, no errors; a tail
    resumed from the saved state gives nothing again."""
    doc = _shell_document(root)
    (rel,) = evidence_of("gemini", root)["session_files"]
    path = tmp_path / rel
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({**doc, "messages": doc["messages"][:2]}))
    tail = SessionTail(READER, tmp_path, backfill_s=1e12)
    first = tail.poll()
    assert first.errors == {} and [e.kind for e in first.events] == [
        TURN_START, SHELL_START, SHELL_END]
    path.write_text(json.dumps(doc, indent=2))
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    second = tail.poll()
    assert second.errors == {}
    assert [e.kind for e in second.events] == [SHELL_START, SHELL_END] * 4 + [TEXT, TURN_END]
    ends = [e for e in first.events + second.events if e.kind == SHELL_END]
    (source,) = {e.source for e in ends}
    assert [e.call_id for e in ends] == \
        [f"{source}:{m['toolCalls'][0]['id']}" for m in doc["messages"][1:6]]
    saved = tail.to_dict()
    (entry,) = saved.values()
    assert isinstance(entry["db"], dict)
    resumed = SessionTail(READER, tmp_path, backfill_s=1e12)
    resumed.load_dict(json.loads(json.dumps(saved)))
    again = resumed.poll()
    assert again.errors == {} and again.events == []
