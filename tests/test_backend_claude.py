"""Claude Code's wrapper and helper shells (spec C7, C8, C-AC4), on the harness's real records;
and its session-log reader (issue 5), on the harness's real session files.

The session files are found through ``harness/evidence/claude.json`` (``session_files``, and
``scenario_sessions`` when the harness kept them), never named here: a harness re-run replaces
them with new ids and times, and every id and time a test expects is read from the file itself.
The checks every JSON Lines reader passes come from ``tests/sessionlogs.py``
(:class:`TestSessionLog`); the tests below are Claude Code's own. Error handling and the cases
the run did not write are tested on real lines changed on purpose (each test says how).
"""

from __future__ import annotations

import copy
import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from repeat_failure.backends import (
    EVENT_KINDS,
    SHELL_END,
    SHELL_START,
    TEXT,
    TOOL,
    TURN_END,
    TURN_START,
    session_reader,
)
from repeat_failure.backends import UnusedLine
from repeat_failure.backends.claude import EXITED_MID_TURN, ClaudeSessionReader
from repeat_failure.sessions.tail import SessionTail
from repeat_failure.rules.normalize import normalize

from sessionlogs import (
    SessionLog,
    SessionLogChecks,
    assert_reader_error,
    drop_path,
    iso_ts,
    set_path,
    version_params,
)



class ClaudeLog(SessionLog):
    """Claude Code's captures, without the warmup subagents' files: releases up to 2.1.0 (real
    files of 2.0.56 and 2.1.0) start warmup subagents with each session, each writing its own
    ``agent-<id>.jsonl`` beside the session file (every line ``isSidechain``, the prompt
    ``Warmup``); their lines give no events (:func:`test_warmup_subagent_files_give_nothing`).
    The session file and the scenario files are the CLI's own session."""

    def warmup_files(self) -> list[Path]:
        """The warmup subagents' files of the shell run's session."""
        return [self.home / rel for rel in self.evidence()["session_files"]
                if Path(rel).name.startswith("agent-")]

    def session_files(self) -> list[Path]:
        return [p for p in super().session_files() if not p.name.startswith("agent-")]

    def _scenario_paths(self, name: str) -> list[Path]:
        return [p for p in super()._scenario_paths(name) if not p.name.startswith("agent-")]

    def scenario_run(self, name: str) -> dict[str, Any]:
        """The scenario's evidence, its ``tool_calls`` without those the warmup subagents'
        replies asked for (the stub answers their requests too; the tool_use blocks of their
        files, each taken out once by name and input)."""
        run = copy.deepcopy(super().scenario_run(name))
        for path in super()._scenario_paths(name):
            if path.name.startswith("agent-"):
                for line in self.lines(path):
                    for block in _blocks(line, "tool_use"):
                        run["tool_calls"].remove({"name": block["name"], "input": block["input"]})
        return run


class Release(NamedTuple):
    """What one verified release's real captures show: its ``wrapper`` around a command
    (``{snapshot}``: the shell snapshot's path, ``{command}``: the quoted command, ``{cwd}``:
    the ``/tmp/claude-XXXX-cwd`` file), the ``helpers`` a session's helper shells start with,
    the ``exit_record`` line type its killed run's session ends with (``None``: the release
    writes none, so the killed turn has no end in the log), whether it writes warmup
    subagent files and whether its prompt lines carry a ``promptId`` (from 2.1.73 on; before,
    the reader takes the prompt line's ``uuid`` as the turn)."""

    wrapper: str
    helpers: frozenset[str]
    exit_record: str | None
    warmups: bool
    prompt_id: bool = True


_SETOPT = "{{ shopt -u extglob || setopt NO_EXTENDED_GLOB; }} 2>/dev/null || true && "
_BUILTIN = ("\\builtin shopt -u extglob 2>/dev/null || true && "
            "{{ \\builtin unalias -- 'which'; \\builtin unset -f -- 'which'; }} >/dev/null 2>&1 "
            "|| true && {{ \\builtin unalias -- 'unsetenv'; \\builtin unset -f -- 'unsetenv'; }} "
            ">/dev/null 2>&1 || true && ")
#: Each verified release (issue 26 item 3: the oldest release of the last 12 months that
#: installs, each release where the wrapper or the session log changed, found by bisecting the
#: installable releases, and the pin), as its real captures show it.
RELEASES = {
    "2.1.332": Release("source {snapshot} 2>/dev/null || true && " + _BUILTIN
                       + "eval {command} < /dev/null && pwd -P >| {cwd}",
                       frozenset({"env", "SNAPSHOT_FILE"}), "cost-state", False),
    "2.1.197": Release("source {snapshot} 2>/dev/null || true && shopt -u extglob 2>/dev/null "
                       "|| true && eval {command} < /dev/null && pwd -P >| {cwd}",
                       frozenset({"env", "SNAPSHOT_FILE"}), "last-prompt", False),
    "2.1.314": Release("source {snapshot} 2>/dev/null || true && shopt -u extglob 2>/dev/null "
                       "|| true && {{ \\builtin unalias -- 'which'; \\builtin unset -f -- "
                       "'which'; }} >/dev/null 2>&1 || true && {{ \\builtin unalias -- "
                       "'unsetenv'; \\builtin unset -f -- 'unsetenv'; }} >/dev/null 2>&1 || true "
                       "&& eval {command} < /dev/null && pwd -P >| {cwd}",
                       frozenset({"env", "SNAPSHOT_FILE"}), "cost-state", False),
    "2.1.277": Release("source {snapshot} 2>/dev/null || true && shopt -u extglob 2>/dev/null "
                       "|| true && {{ \\builtin unalias -- 'unsetenv'; \\builtin unset -f -- "
                       "'unsetenv'; }} >/dev/null 2>&1 || true && eval {command} < /dev/null && "
                       "pwd -P >| {cwd}", frozenset({"env", "SNAPSHOT_FILE"}), "cost-state",
                       False),
    "2.1.268": Release("source {snapshot} 2>/dev/null || true && shopt -u extglob 2>/dev/null "
                       "|| true && {{ \\builtin unalias -- 'unsetenv'; \\builtin unset -f -- "
                       "'unsetenv'; }} >/dev/null 2>&1 || true && eval {command} < /dev/null && "
                       "pwd -P >| {cwd}", frozenset({"env", "SNAPSHOT_FILE"}), None, False),
    "2.1.218": Release("source {snapshot} 2>/dev/null || true && shopt -u extglob 2>/dev/null "
                       "|| true && {{ \\builtin unalias -- 'unsetenv'; \\builtin unset -f -- "
                       "'unsetenv'; }} >/dev/null 2>&1 || true && eval {command} < /dev/null && "
                       "pwd -P >| {cwd}", frozenset({"env", "SNAPSHOT_FILE"}), "last-prompt",
                       False),
    "2.1.212": Release("source {snapshot} 2>/dev/null || true && shopt -u extglob 2>/dev/null "
                       "|| true && eval {command} < /dev/null && pwd -P >| {cwd}",
                       frozenset({"env", "SNAPSHOT_FILE"}), "last-prompt", False),
    "2.1.89": Release("source {snapshot} 2>/dev/null || true && shopt -u extglob 2>/dev/null "
                      "|| true && eval {command} < /dev/null && pwd -P >| {cwd}",
                      frozenset({"SNAPSHOT_FILE"}), "last-prompt", False),
    "2.1.86": Release("source {snapshot} 2>/dev/null || true && shopt -u extglob 2>/dev/null "
                      "|| true && eval {command} \\< /dev/null && pwd -P >| {cwd}",
                      frozenset({"SNAPSHOT_FILE"}), "last-prompt", False),
    "2.1.70": Release("source {snapshot} && shopt -u extglob 2>/dev/null || true && "
                      "eval {command} \\< /dev/null && pwd -P >| {cwd}",
                      frozenset({"SNAPSHOT_FILE"}), "last-prompt", False, False),
    "2.0.77": Release("source {snapshot} && shopt -u extglob 2>/dev/null || true && "
                      "eval {command} \\< /dev/null && pwd -P >| {cwd}",
                      frozenset({"SNAPSHOT_FILE"}), None, True, False),
    "2.0.57": Release("source {snapshot} && " + _SETOPT
                      + "eval {command} \\< /dev/null && pwd -P >| {cwd}",
                      frozenset({"SNAPSHOT_FILE"}), None, True, False),
    "2.0.56": Release("source {snapshot} && eval {command} \\< /dev/null && pwd -P >| {cwd}",
                      frozenset({"SNAPSHOT_FILE"}), None, True, False),
}


#: Verified releases that write ``last-prompt`` mid-turn but no ``cost-state`` yet (2.1.268 to
#: 2.1.276): their exit record is none the reader can take.
LAST_PROMPT_MID_TURN = frozenset({"2.1.268"})


@pytest.fixture(params=version_params("claude"))
def log(request: pytest.FixtureRequest) -> ClaudeLog:
    """Claude Code's real captures of one verified release (the pin, then the earlier ones)."""
    return ClaudeLog("claude", request.param)


def test_every_verified_release_has_its_facts() -> None:
    """:data:`RELEASES` states the facts of exactly the releases whose captures are kept."""
    assert sorted(RELEASES) == sorted(p.id.removeprefix("claude-")
                                      for p in version_params("claude"))


def test_the_real_wrapper_is_the_releases_form(log: ClaudeLog) -> None:
    """Each release's recorded ``ls /nonexistent`` is exactly its :data:`RELEASES` form (the
    snapshot path and the cwd file filled in from the record itself), and unwraps to the
    command."""
    (record,) = [r for r in log.evidence()["runs"][0]["records"]
                 if r["raw"].startswith("source ")]
    raw = record["raw"]
    snapshot = raw.split(" ", 2)[1]
    cwd = raw.rsplit(" ", 1)[1]
    assert raw == RELEASES[log.version].wrapper.format(
        snapshot=snapshot, command="'ls /nonexistent'", cwd=cwd)
    assert snapshot.endswith(".sh") and cwd.startswith("/tmp/claude-") and cwd.endswith("-cwd")
    assert normalize(raw, "claude") == "ls /nonexistent"


def test_warmup_subagent_files_give_nothing(log: ClaudeLog) -> None:
    """Releases that start warmup subagents (:data:`RELEASES`) wrote their files in the real
    shell run; every line of them is a subagent's (``isSidechain``). They give no shell, tool
    or turn event: 2.0.56's hold only the reply (its text, no turn), later ones start with the
    ``Warmup`` prompt, after which nothing is read (a warmup's tool calls never run)."""
    files = log.warmup_files()
    assert bool(files) is RELEASES[log.version].warmups
    for path in files:
        lines = log.lines(path)
        assert all(line["isSidechain"] is True for line in lines)
        events = log.read(lines)
        if lines[0]["type"] == "user":
            assert lines[0]["message"]["content"] == "Warmup" and events == []
        else:
            assert [(e.kind, e.turn_id) for e in events] == [(TEXT, "")] * len(lines)


def _records(log: SessionLog) -> list[dict[str, Any]]:
    return [r for run in log.evidence()["runs"] for r in run["records"]]


def _wrapped(log: SessionLog) -> list[dict[str, Any]]:
    return [r for r in _records(log) if r["raw"].startswith("source ")]


def wrap(command: str, snapshot: str = "/root/.claude/shell-snapshots/snapshot-bash-1-x.sh") -> str:
    """Claude Code's wrapper as the real runs show it, around ``command`` (quoted the way its
    single-word commands and `'...'` forms in the evidence are)."""
    return (f"source {snapshot} 2>/dev/null || true && shopt -u extglob 2>/dev/null || true"
            f" && eval {shlex.quote(command)} < /dev/null && pwd -P >| /tmp/claude-1a2b-cwd")


def test_evidence_has_wrapped_commands_and_helpers(log: SessionLog) -> None:
    """The real run recorded wrapped agent commands and the release's helper shells (the
    snapshot writer, and from some release on an env probe: :data:`RELEASES`)."""
    assert len(_wrapped(log)) == 8  # 1 + 1 + 1 + 5 agent commands
    helpers = [r for r in _records(log) if not r["raw"].startswith("source ")]
    assert {r["raw"].split("\n", 1)[0].split("=", 1)[0] for r in helpers} == \
        RELEASES[log.version].helpers


def test_wrapped_ls_compares_equal_to_bare_command(log: SessionLog) -> None:
    """C-AC4: Claude Code's wrapped form of `ls /nonexistent` normalizes to the bare command."""
    first = log.evidence()["runs"][0]
    (record,) = [r for r in first["records"] if r["raw"].startswith("source ")]
    assert normalize(record["raw"], "claude") == "ls /nonexistent"
    assert record["exit"] == 2


def test_every_real_agent_command_unwraps(log: SessionLog) -> None:
    """Every wrapped record of every real run unwraps to the command the stub asked for."""
    for run in log.evidence()["runs"]:
        got = [(normalize(r["raw"], "claude"), r["exit"]) for r in run["records"]
               if r["raw"].startswith("source ")]
        expected_exit = {"ls /nonexistent": 2, "false": 1, "echo harness-ok": 0}[run["command"]]
        assert got == [(run["command"], expected_exit)] * run["repeat"]


def test_helper_shells_never_reach_the_detector(log: SessionLog) -> None:
    """C8: the env probe and the snapshot writer normalize to the empty command."""
    for record in _records(log):
        if not record["raw"].startswith("source "):
            assert normalize(record["raw"], "claude") == ""


def real_wrap(log: SessionLog, command: str) -> str:
    """The release's real wrapper (its recorded ``ls /nonexistent``) around ``command``, quoted
    the way Claude Code quotes a command for ``eval``."""
    (record,) = [r for r in log.evidence()["runs"][0]["records"]
                 if r["raw"].startswith("source ")]
    head, tail = record["raw"].split(" eval 'ls /nonexistent' ")
    return f"{head} eval {shlex.quote(command)} {tail}"


ROUND_TRIPS = [
    "ls /nonexistent", "false", 'echo "double" \'single\'', "make && make test || echo failed",
    "printf 'a\\nb'\necho second line", "cat <<'EOF'\nheredoc $HOME\nEOF", "it's", "a  b",
    # the wrapper's own words inside the command
    "true || true && eval 'x' < /dev/null && pwd -P >| /tmp/claude-9-cwd",
    "{ \\builtin unalias -- 'which'; } >/dev/null 2>&1 || true && ls",
]


@pytest.mark.parametrize("command", ROUND_TRIPS)
def test_stripper_round_trips(command: str) -> None:
    """C-AC4 for quotes, &&, newlines and heredocs: the wrapper comes off exactly (then the
    usual normalization applies: whitespace collapses)."""
    assert normalize(wrap(command), "claude") == normalize(command, "bash")


@pytest.mark.parametrize("command", ROUND_TRIPS)
def test_stripper_round_trips_in_every_real_wrapper(log: SessionLog, command: str) -> None:
    """The same round trips inside each verified release's real wrapper (2.1.332 adds
    ``\\builtin`` prefixes and ``unalias`` blocks before the ``eval``), including commands
    that hold the wrapper's own words."""
    wrapped = real_wrap(log, command)
    assert wrapped.count(" eval ") >= 1 and wrapped.endswith("-cwd")
    assert normalize(wrapped, "claude") == normalize(command, "bash")


def test_the_2_1_332_wrapper_is_not_the_2_1_197_one() -> None:
    """The two releases' real wrappers differ (what the version matrix guards): 2.1.332's has
    the ``\\builtin unalias`` blocks; the stripper anchored on the head and tail takes both,
    and a wrapper missing its tail is left as it is."""
    forms = {}
    for param in version_params("claude"):
        log = SessionLog("claude", param.values[0])
        forms[log.version] = real_wrap(log, "ls /nonexistent")
    assert {"2.1.332", "2.1.197"} <= forms.keys()
    assert "\\builtin unalias -- 'which'" in forms["2.1.332"]
    assert "unalias" not in forms["2.1.197"]
    for form in forms.values():
        assert normalize(form, "claude") == "ls /nonexistent"
        cut = form.rsplit(" && pwd -P", 1)[0]
        assert normalize(cut, "claude") == normalize(cut, "bash")


def test_a_cut_wrapper_of_a_long_or_true_chain_is_left_as_it_is(log: SessionLog) -> None:
    """A record that starts like the wrapper but lost its tail (cut at the record limit) and
    holds an agent command chaining ``|| true &&`` 300 times (about 4 KB) comes back as it is,
    and the same command in the whole wrapper comes off. The stripper once backtracked
    exponentially on such a record (a ``(?:[^\\n]*? || true && )*?`` regex group: 20 links
    took 7 s, 300 would never end), stalling the sidecar's pipeline. Run in a child process
    so that a regression fails here (killed after 60 s) instead of hanging the suite; the
    linear stripper needs milliseconds."""
    command = " || true && ".join(f"rm -f /tmp/f{i}" for i in range(300))
    cut = real_wrap(log, command).rsplit("< /dev/null", 1)[0]
    assert len(cut) > 4000
    code = ("import json, sys\nfrom repeat_failure.backends.claude import strip\n"
            "cut, whole = json.load(sys.stdin)\nprint(json.dumps([strip(cut), strip(whole)]))")
    done = subprocess.run([sys.executable, "-c", code], input=json.dumps(
        [cut, real_wrap(log, command)]), capture_output=True, text=True, timeout=60,
        cwd=Path(__file__).resolve().parent.parent, check=True)
    assert json.loads(done.stdout) == [cut, command]


@pytest.mark.parametrize("backend", ["vllm", "llm-d", "litellm", "watsonx"])
def test_inference_backends_use_the_claude_stripper(backend: str) -> None:
    """Inference backends run through the Claude Code CLI: same wrapper, same result."""
    assert normalize(wrap("ls /nonexistent"), backend) == "ls /nonexistent"


# -- the session-log reader ---------------------------------------------------------------------

READER = SessionLog("claude").reader


class TestSessionLog(SessionLogChecks):
    """The checks every JSON Lines reader passes, on the real files of every verified release
    (2.1.332, 2.1.197): queue operations, attachments, 2.1.332's request bookkeeping and (but
    for 2.1.197's exit) the last-prompt line are known types and add nothing; the answer's
    ``end_turn`` ends the turn."""

    log = ClaudeLog("claude")
    reader_class = ClaudeSessionReader
    line_kinds_in_every_file = frozenset({"user", "assistant"})


def _blocks(line: Any, kind: str) -> list[dict[str, Any]]:
    content = (line.get("message") or {}).get("content")
    return [b for b in content if b.get("type") == kind] if isinstance(content, list) else []


def _indexes(lines: list[Any], what: str) -> list[int]:
    """Indexes of the lines that are ``prompt`` (a user line with string content), ``call`` (an
    assistant line with a tool_use), ``result`` (a user line with a tool_result) or ``answer``
    (an assistant line without a tool_use)."""
    tests = {
        "prompt": lambda ln: ln["type"] == "user" and isinstance(ln["message"]["content"], str),
        "call": lambda ln: ln["type"] == "assistant" and _blocks(ln, "tool_use"),
        "result": lambda ln: ln["type"] == "user" and _blocks(ln, "tool_result"),
        "answer": lambda ln: ln["type"] == "assistant" and not _blocks(ln, "tool_use"),
    }
    return [i for i, line in enumerate(lines) if tests[what](line)]


def test_reader_serves_the_inference_backends_too() -> None:
    """Claude Code's reader is also the reader of the inference backends that run through the
    Claude Code CLI, and its coverage text names where 2.1.197 writes the sessions."""
    for backend in ("vllm", "llm-d", "litellm", "watsonx"):
        assert session_reader(backend) is READER
    assert READER.env_defaults == {"CLAUDE_CONFIG_DIR": ".claude"}
    assert READER.signal.startswith("~/.claude/projects/*/*.jsonl: ")


def test_shell_calls_carry_id_command_exit_and_turn(log: SessionLog) -> None:
    """Each ``shell_end`` pairs with its ``shell_start`` by the file's tool_use id, has the
    command (kept from the call), exit 2 from the result's leading ``Exit code 2`` and the
    prompt's ``promptId`` as its turn."""
    lines = log.session_lines()
    call_ids = [b["id"] for i in _indexes(lines, "call") for b in _blocks(lines[i], "tool_use")]
    assert len(call_ids) == 5 and len(set(call_ids)) == 5
    (prompt,) = _indexes(lines, "prompt")
    # before 2.1.73 no promptId: the prompt line's uuid is the turn
    turn = lines[prompt].get("promptId", lines[prompt]["uuid"])
    assert ("promptId" in lines[prompt]) is RELEASES[log.version].prompt_id
    events = log.read(lines)
    starts = [(e.call_id, e.command, e.tool) for e in events if e.kind == SHELL_START]
    ends = [(e.call_id, e.command, e.exit, e.failed, e.tool) for e in events
            if e.kind == SHELL_END]
    assert starts == [(c, "ls /nonexistent", "Bash") for c in call_ids]
    assert ends == [(c, "ls /nonexistent", 2, True, "Bash") for c in call_ids]
    assert {e.turn_id for e in events} == {turn}


def test_timestamps_are_the_lines_own(log: SessionLog) -> None:
    """Every event's ``ts`` is its own line's ``timestamp``; the turn starts at the prompt line
    and ends at the answer line."""
    lines = log.session_lines()
    read = log.read_indexed(lines)
    for i, event in read:
        assert event.ts == iso_ts(lines[i]["timestamp"])
    by_kind = {kind: [i for i, e in read if e.kind == kind] for kind in EVENT_KINDS}
    assert by_kind[TURN_START] == _indexes(lines, "prompt")
    assert by_kind[TURN_END] == _indexes(lines, "answer")
    assert by_kind[SHELL_START] == _indexes(lines, "call")
    assert by_kind[SHELL_END] == _indexes(lines, "result")


def test_result_without_its_call_still_ends_a_shell_call(log: SessionLog) -> None:
    """After a sidecar restart the state is fresh: the real tool_result line alone reads as a
    Bash result (``Exit code 2``) and gives a ``shell_end`` with its exit and an empty command."""
    lines = log.session_lines()
    line = lines[_indexes(lines, "result")[0]]
    (event,) = READER.parse_line(line, READER.new_file_state())
    assert (event.kind, event.call_id, event.command, event.exit, event.failed, event.tool) == \
        (SHELL_END, _blocks(line, "tool_result")[0]["tool_use_id"], "", 2, True, "Bash")


def _line(log: SessionLog, what: str, n: int = 0) -> dict[str, Any]:
    lines = log.session_lines()
    return copy.deepcopy(lines[_indexes(lines, what)[n]])


def _first_type(log: SessionLog, kind: str) -> dict[str, Any]:
    return copy.deepcopy(next(line for line in log.session_lines() if line["type"] == kind))


def _result_text(line: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    block = _blocks(line, "tool_result")[0]
    block["content"] = block["content"].replace(old, new)
    return line


@pytest.mark.parametrize(("how", "broken", "reason"), [
    ("the real prompt line inside a list", lambda log: [_line(log, "prompt")], "not_object"),
    ("the real queue-operation line without its type",
     lambda log: drop_path(_first_type(log, "queue-operation"), ("type",)), "no_type"),
    ("the real prompt line with a list as message",
     lambda log: set_path(_line(log, "prompt"), ("message",), []), "unknown_shape"),
    ("the real prompt line with a number as content",
     lambda log: set_path(_line(log, "prompt"), ("message", "content"), 7), "unknown_shape"),
    ("the real call line with a number as stop_reason",
     lambda log: set_path(_line(log, "call"), ("message", "stop_reason"), 1), "unknown_shape"),
    ("the real call line with a number as the tool_use id",
     lambda log: set_path(_line(log, "call"), ("message", "content", 0, "id"), 11), "unknown_shape"),
    ("the real result line with a string as is_error",
     lambda log: set_path(_line(log, "result"), ("message", "content", 0, "is_error"), "yes"),
     "unknown_shape"),
    ("the real result line with a number as tool_use_id",
     lambda log: set_path(_line(log, "result"), ("message", "content", 0, "tool_use_id"), 11),
     "unknown_shape"),
    ("the real result line's 'Exit code 2' with a word for the code",
     lambda log: _result_text(_line(log, "result"), "Exit code 2", "Exit code two"), "bad_exit"),
    ("the real result line with a timestamp that is not a time",
     lambda log: set_path(_line(log, "result"), ("timestamp",), "soon"), "bad_ts"),
])
def test_broken_real_lines_raise_reader_format_error(log: SessionLog, how: str, broken: Any,
                                                      reason: str) -> None:
    """A real line broken as described raises ReaderFormatError with a fixed reason label that
    never quotes the line."""
    assert_reader_error(READER, broken(log), reason)


def _kinds(*lines: dict[str, Any]) -> list[str]:
    state = READER.new_file_state()
    return [e.kind for line in lines for e in READER.parse_line(line, state)]


def test_one_turn_end_per_reply_and_only_with_a_final_stop_reason(log: SessionLog) -> None:
    """Claude Code writes each block of a reply as its own line with the same message id: the
    real answer line twice ends the turn once. The answer line with stop_reason ``tool_use``
    (a text block before a call) or ``null`` (written before the reply's stop was known) does
    not end it."""
    answer = _line(log, "answer")
    assert _kinds(answer, copy.deepcopy(answer)) == [TEXT, TURN_END, TEXT]
    assert _kinds(set_path(_line(log, "answer"), ("message", "stop_reason"), "tool_use")) == [TEXT]
    assert _kinds(set_path(_line(log, "answer"), ("message", "stop_reason"), None)) == [TEXT]


def test_user_lines_that_are_not_prompts(log: SessionLog) -> None:
    """The real prompt line changed to what Claude Code writes for an interrupt ends the turn;
    changed to a command echo (a leading tag), or marked isMeta or isSidechain, starts none."""
    interrupted = set_path(_line(log, "prompt"), ("message", "content"),
                           "[Request interrupted by user]")
    assert _kinds(interrupted) == [TURN_END]
    echo = set_path(_line(log, "prompt"), ("message", "content"), "<command-name>/clear</command-name>")
    assert _kinds(echo) == []
    assert _kinds(set_path(_line(log, "prompt"), ("isMeta",), True)) == []
    assert _kinds(set_path(_line(log, "prompt"), ("isSidechain",), True)) == []


def test_subagent_lines_give_shell_activity_but_no_turn(log: SessionLog) -> None:
    """The real call, result and answer lines marked isSidechain (a subagent's) still give the
    shell call, but the subagent's answer does not end the user's turn."""
    lines = [set_path(_line(log, what), ("isSidechain",), True) for what in ("call", "result", "answer")]
    assert _kinds(*lines) == [SHELL_START, SHELL_END, TEXT]


def test_other_tools_are_tool_events_not_shell(log: SessionLog) -> None:
    """The real call line with its tool renamed Read is a ``tool`` event; the real result line
    of that call gives nothing (even with its ``Exit code`` text): it is no shell call."""
    call = set_path(_line(log, "call"), ("message", "content", 0, "name"), "Read")
    state = READER.new_file_state()
    (event,) = READER.parse_line(call, state)
    assert (event.kind, event.tool) == (TOOL, "Read")
    assert READER.parse_line(_line(log, "result"), state) == []


def test_background_command_stays_running(log: SessionLog) -> None:
    """A Bash call run with ``run_in_background`` is answered at once, and the command goes on:
    the real call and result lines, the result turned into Claude Code 2.1.197's background
    answer (``toolUseResult.backgroundTaskId``, as its binary writes it), give the call's start
    and no end, so a long background build never starts the C12 timer."""
    def result(background: bool) -> dict[str, Any]:
        line = set_path(_line(log, "result"), ("message", "content", 0, "is_error"), False)
        if background:
            line["toolUseResult"] = {"stdout": "", "stderr": "", "interrupted": False,
                                     "backgroundTaskId": "b7k2q"}
        return line

    assert _kinds(_line(log, "call"), result(False))[-1] == SHELL_END
    foreground = _kinds(_line(log, "call"), result(False))
    assert _kinds(_line(log, "call"), result(True)) == foreground[:-1]
    assert SHELL_START in foreground[:-1]


# -- the end of a turn across releases (issue 15) -------------------------------------------------

def _verdict_lines(log: SessionLog, name: str) -> list[dict[str, Any]]:
    (rel,) = [rel for rel in log.evidence()["verdict_scenarios"][name]["session_files"]
              if not Path(rel).name.startswith("agent-")]  # not a warmup subagent's file
    return SessionLog.lines(log.home / "verdict" / name / rel)


def test_the_exit_record_ends_the_killed_turn_on_every_release(log: SessionLog) -> None:
    """The killed run's session ends with the CLI's exit record (:data:`RELEASES`:
    ``cost-state`` on 2.1.332, ``last-prompt`` on 2.1.197). That line, and no earlier one,
    gives the turn's error (:data:`EXITED_MID_TURN`: the Bash call never got its result) and
    its end. A release that writes no exit record leaves the killed turn open: no end, no
    error (its verdict is none rather than a wrong one)."""
    lines = _verdict_lines(log, "killed")
    exit_type = RELEASES[log.version].exit_record
    read = log.read_indexed(lines)
    ends = [i for i, e in read if e.kind == TURN_END]
    errors = [(e.kind, e.detail) for _, e in read if e.kind == "error"]
    if exit_type is None:
        # no exit record at all (before 2.1.69), or last-prompt written mid-turn and no
        # cost-state yet (2.1.268 to 2.1.276): the turn has no end in the log
        types = {line["type"] for line in lines}
        assert "cost-state" not in types
        assert ("last-prompt" in types) is (log.version in LAST_PROMPT_MID_TURN)
        assert (ends, errors) == ([], [])
        return
    assert ends == [max(i for i, line in enumerate(lines) if line["type"] == exit_type)]
    assert errors == [("error", EXITED_MID_TURN)]


def test_2_1_332_writes_last_prompt_mid_turn_and_it_ends_nothing() -> None:
    """2.1.332's real ok turn has ``last-prompt`` lines between its prompt and its answer
    (where exactly varies from run to run: after the prompt, after the tool call or its
    result), and another after the answer; none of them is an end: the answer's ``end_turn`` is
    the one end, and ``cost-state`` after it adds nothing."""
    (root,) = [p.values[0] for p in version_params("claude") if p.id == "claude-2.1.332"]
    log = SessionLog("claude", root)
    lines = _verdict_lines(log, "ok")
    types = [line["type"] for line in lines]
    (prompt,), (answer,) = _indexes(lines, "prompt"), _indexes(lines, "answer")
    mid = [i for i in range(prompt, answer) if types[i] == "last-prompt"]
    assert mid and types[-1] == "cost-state"
    read = log.read_indexed(lines)
    assert [i for i, e in read if e.kind == TURN_END] == [answer]
    state = READER.new_file_state()
    for line in lines[:mid[0] + 1]:  # up to the first mid-turn last-prompt
        READER.parse_line(line, state)
    assert state["open"] is True and state["version"] == "2.1.332"


@pytest.mark.parametrize("version,ends", [("2.1.197", True), ("2.1.100", True),
                                          ("2.1.267", True), ("2.1.268", False),
                                          ("2.1.332", False),
                                          ("2.2", False), (None, True)])
def test_last_prompt_is_the_exit_only_for_releases_that_write_it_at_exit(log: SessionLog,
                                                                         version, ends) -> None:
    """The real prompt line of each release, its ``version`` set as given, then a
    ``last-prompt`` line: an end (the empty reply's only end) for a release up to 2.1.267 or a
    line naming none; nothing for a later or unparsable release, whose exit record is
    ``cost-state``; ``cost-state`` ends the open turn whatever the release."""
    prompt = _line(log, "prompt")
    if version is None:
        prompt.pop("version", None)
    else:
        prompt["version"] = version
    last = {"type": "last-prompt", "lastPrompt": "x", "sessionId": "s"}
    assert _kinds(prompt, last) == ([TURN_START, TURN_END] if ends else [TURN_START])
    assert _kinds(prompt, {"type": "cost-state", "sessionId": "s"}) == [TURN_START, TURN_END]


def test_a_line_type_never_seen_is_skipped_and_counted_apart(log: SessionLog,
                                                             tmp_path: Path) -> None:
    """Issue 15: the real queue-operation line with a type no release wrote is
    :class:`~repeat_failure.backends.UnusedLine` (no error); through the sidecar's tail it is counted
    in ``ignored``, not in ``errors``, and the session's events are unchanged."""
    line = set_path(_first_type(log, "queue-operation"), ("type",), "queue-operation-v2")
    with pytest.raises(UnusedLine):
        READER.parse_line(line, READER.new_file_state())
    session = log.session()
    home = tmp_path / "home"
    target = home / session.relative_to(log.home)
    target.parent.mkdir(parents=True)
    data = session.read_bytes()
    target.write_bytes(data + json.dumps(line).encode() + b"\n")
    result = SessionTail(READER, home, backfill_s=float("inf")).poll(rescan=True)
    assert (result.ignored, dict(result.errors)) == (1, {})
    assert [e.kind for e in result.events] == [e.kind for e in log.read(log.session_lines())]
