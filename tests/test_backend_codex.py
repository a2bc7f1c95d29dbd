"""Codex CLI's shells (spec C7, C8, C-AC4), on the harness's real records.

What reaches the records (``harness/evidence/codex.json``, Codex 0.171.0): per session two
helper shells (the snapshot writer and the snapshot check), and each agent command *bare*: Codex
runs it either as ``/bin/bash -lc <cmd>`` or as a long snapshot wrapper ending in
``exec '/bin/bash' -c '<cmd>'``, whose exec'd shell (same PID) records ``<cmd>`` itself. The
wrapper text never reaches a record then, but the stripper still takes a command back out of it;
:func:`wrap` builds it exactly as Codex 0.171.0 does, with the snapshot path taken from the
evidence (for every command in ``CASES`` it was checked byte for byte against the script a real
Codex 0.171.0 run handed to bash, captured with a BASH_ENV that saved $BASH_EXECUTION_STRING).
"""

from __future__ import annotations

import copy
import json
import re

import pytest

from harness.evidence import primary
from repeat_failure.backends import SHELL_END, SHELL_START, TEXT, TOOL, TURN_END, TURN_START, SessionEvent
from repeat_failure.backends.codex import CodexReader, strip
from repeat_failure.rules.normalize import normalize
from repeat_failure.rules.scrub import scrub

from harness import evidence as evidence_dirs
from repeat_failure.backends import ERROR
from repeat_failure.backends.coverage import COVERAGE
from sessionlogs import (SHELL_COMMAND, SHELL_REPEAT, SessionLog, SessionLogChecks,
                         assert_reader_error, iso_ts, version_params)

EVIDENCE = json.loads((primary()
                       / "codex.json").read_text())
RECORDS = [r for run in EVIDENCE["runs"] for r in run["records"]]
COMMANDS = {run["command"] for run in EVIDENCE["runs"]}
HELPERS = [r for r in RECORDS if r["raw"] not in COMMANDS]
EXITS = {"ls /nonexistent": 2, "false": 1, "echo harness-ok": 0}
_CHECK = re.compile(r'set -e; \. "(?P<dir>[^"]*/shell_snapshots)/(?P<id>[^"/]+)\.tmp-(?P<n>\d+)"')

# The variables Codex 0.171.0 saves before sourcing the snapshot and restores after it (in this
# order), as its wrapper lists them.
_OVERRIDES = ("CODEX_APPLY_PATCH_PRESERVE_LINE_ENDINGS", "CODEX_PERMISSION_PROFILE",
              "CODEX_PLUGIN_METRICS_OUTPUT", "CODEX_SESSION_ID", "CODEX_THREAD_ID",
              "CODEX_TOOL_CALL_ID", "CODEX_VERSION")
_PROXY = (
    "ALL_PROXY", "BUNDLE_HTTPS_PROXY", "BUNDLE_HTTP_PROXY", "BUNDLE_NO_PROXY",
    "BUNDLE_SSL_CA_CERT", "CARGO_HTTP_CAINFO", "CODEX_CA_CERTIFICATE",
    "CODEX_NETWORK_ALLOW_LOCAL_BINDING", "CODEX_NETWORK_PROXY_ACTIVE",
    "CODEX_NETWORK_PROXY_ATTRIBUTION", "CODEX_NETWORK_PROXY_BROKERED_CREDENTIALS",
    "CODEX_NETWORK_PROXY_CREDENTIAL_BROKER_ACTIVE", "CURL_CA_BUNDLE", "DOCKER_HTTPS_PROXY",
    "DOCKER_HTTP_PROXY", "ELECTRON_GET_USE_PROXY", "FTP_PROXY", "GIT_SSL_CAINFO", "HTTPS_PROXY",
    "HTTP_PROXY", "NODE_EXTRA_CA_CERTS", "NODE_USE_ENV_PROXY", "NO_PROXY", "NPM_CONFIG_CAFILE",
    "NPM_CONFIG_HTTPS_PROXY", "NPM_CONFIG_HTTP_PROXY", "NPM_CONFIG_NOPROXY", "NPM_CONFIG_PROXY",
    "PIP_CERT", "PIP_PROXY", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "WSS_PROXY", "WS_PROXY",
    "YARN_HTTPS_PROXY", "YARN_HTTP_PROXY", "YARN_NO_PROXY", "all_proxy", "ftp_proxy",
    "http_proxy", "https_proxy", "no_proxy", "npm_config_cafile", "npm_config_http_proxy",
    "npm_config_https_proxy", "npm_config_noproxy", "npm_config_proxy", "ws_proxy", "wss_proxy")
CODEX_PATH = ("/root/.cache/repeat-failure-harness/codex-0.171.0/node_modules/@openai/"
              "codex-linux-x64/vendor/x86_64-unknown-linux-musl/codex-path")


def _quote(text: str) -> str:
    """Codex's quoting: always single quotes, each ``'`` written ``'"'"'``."""
    return "'" + text.replace("'", "'\"'\"'") + "'"


def _saves(prefix: str, names: tuple[str, ...]) -> list[str]:
    return [line for i, name in enumerate(names)
            for line in (f'__CODEX_SNAPSHOT_{prefix}_SET_{i}="${{{name}+x}}"',
                         f'__CODEX_SNAPSHOT_{prefix}_{i}="${{{name}-}}"')]


def _restores(prefix: str, names: tuple[str, ...]) -> list[str]:
    out = []
    for i, name in enumerate(names):
        flag, value = f"__CODEX_SNAPSHOT_{prefix}_SET_{i}", f"__CODEX_SNAPSHOT_{prefix}_{i}"
        out += [f'if [ -n "${{{flag}}}" ]; then',
                f'  if [ -z "${{{name}+x}}" ] || [ "${{{name}-}}" != "${{{value}}}" ]; then '
                f'export {name}="${{{value}}}"; else export {name}; fi',
                f"else builtin unset {name} 2>/dev/null || command unset {name}; fi",
                f"builtin unset {flag} {value} 2>/dev/null || command unset {flag} {value}"]
    return out


def snapshot_path() -> str:
    """The snapshot a tool wrapper sources, from the evidence's snapshot-check record: the check
    reads ``<dir>/<id>.tmp-<n>``, which Codex then renames to ``<dir>/<id>.<n>.sh``."""
    match = next(m for m in (_CHECK.fullmatch(r["raw"]) for r in RECORDS) if m)
    return f"{match['dir']}/{match['id']}.{match['n']}.sh"


def wrap(command: str, snapshot: str | None = None, codex_path: str = CODEX_PATH) -> str:
    """The ``bash -c`` script Codex 0.171.0 runs for ``exec_command`` once a shell snapshot
    exists (about 38,000 characters for a short command)."""
    snapshot = snapshot or snapshot_path()
    lines = [*_saves("OVERRIDE", _OVERRIDES), *_saves("PROXY_OVERRIDE", _PROXY),
             '__CODEX_SNAPSHOT_PROXY_ENV_SET="${CODEX_NETWORK_PROXY_ACTIVE+x}"', "",
             f"if . {_quote(snapshot)} >/dev/null 2>&1; then :; fi", "",
             *_restores("OVERRIDE", _OVERRIDES),
             'if [ -n "$__CODEX_SNAPSHOT_PROXY_ENV_SET" ] || '
             '[ -n "${CODEX_NETWORK_PROXY_ACTIVE+x}" ]; then',
             *_restores("PROXY_OVERRIDE", _PROXY), "fi",
             f'if [ -n "${{PATH:-}}" ]; then export PATH={_quote(codex_path)}:"$PATH"; '
             f"else export PATH={_quote(codex_path)}; fi", "",
             f"exec '/bin/bash' -c {_quote(command)}"]
    return "\n".join(lines)


# -- the real records ------------------------------------------------------------------------------

def test_every_failing_command_is_recorded_once_per_request() -> None:
    """C-AC1: each run's command appears as a record whose normalized form is the bare command,
    once per time the stub asked for it, with the command's real exit status."""
    for run in EVIDENCE["runs"]:
        got = [(normalize(r["raw"], "codex"), r["exit"]) for r in run["records"]
               if normalize(r["raw"], "codex")]
        assert got == [(run["command"], EXITS[run["command"]])] * run["repeat"], run["command"]


def test_failing_runs_show_exit_2_and_1() -> None:
    """The two failing scenarios: `ls /nonexistent` exit 2, `false` exit 1, raw text bare."""
    first, second = EVIDENCE["runs"][0], EVIDENCE["runs"][1]
    assert [(r["raw"], r["exit"]) for r in first["records"] if r["raw"] in COMMANDS] == \
        [("ls /nonexistent", 2)]
    assert [(r["raw"], r["exit"]) for r in second["records"] if r["raw"] in COMMANDS] == \
        [("false", 1)]


def test_repeat_raised_the_note() -> None:
    """The five repeats of `ls /nonexistent` raised the note in the real sidecar pipeline."""
    assert EVIDENCE["runs"][-1]["note"] == \
        "Repeating failure: ls /nonexistent failed 5 times in 1 min (exit 2)"


def test_helper_shells_never_reach_the_detector() -> None:
    """C8: every session's snapshot writer and snapshot check normalize to the empty command."""
    kinds = {"writer" if "__codex_snapshot_command" in r["raw"] else
             "check" if _CHECK.fullmatch(r["raw"]) else r["raw"] for r in HELPERS}
    assert kinds == {"writer", "check"}
    assert len(HELPERS) == 2 * len(EVIDENCE["runs"])
    for record in HELPERS:
        assert normalize(record["raw"], "codex") == ""


# -- the wrapper -----------------------------------------------------------------------------------

CASES = [
    "ls /nonexistent",
    "false",
    "",
    """echo 'it'"'"'s' "double \\"q\\"" && ls /nonexistent""",
    "make && make test || echo 'failed: it'\\''s over'",
    "printf 'a\\nb\\n' && echo \"x\"\necho second line; false",
    "cat <<'EOF'\nhello 'world' \"q\" $HOME\nEOF\nls /nonexistent",
    "cat > /work/f.txt <<EOF\n  indented 'x'\n\nEOF",
    "echo \"exec '/bin/bash' -c 'x'\"\n\nexec '/bin/bash' -c 'ls /nonexistent'",
    "printf '%s\\n' \\\\ '\\t' \"tab\there\"",
    "'''",
]


@pytest.mark.parametrize("command", CASES)
def test_stripper_returns_the_command_from_the_wrapper(command: str) -> None:
    """C-AC4 for quotes, &&, newlines and heredocs: the exact command comes back out of the
    wrapper (byte for byte, before whitespace collapses)."""
    assert strip(wrap(command)) == command
    assert normalize(wrap(command), "codex") == normalize(command, "bash")
    # The pipeline scrubs before it normalizes (the wrapper has an `export ...CREDENTIALS=`).
    assert normalize(scrub(wrap(command)), "codex") == normalize(scrub(command), "bash")


def test_wrapper_size_and_tail() -> None:
    """The wrapper is far longer than a record (4096 bytes), and ends in the exec line."""
    wrapped = wrap("ls /nonexistent")
    assert len(wrapped) > 30000
    assert wrapped.endswith("\n\nexec '/bin/bash' -c 'ls /nonexistent'")


@pytest.mark.parametrize("keep", [4000, 100, 20000])
def test_cut_wrapper_is_no_command(keep: int) -> None:
    """A wrapper the hook had to cut (its head is the same for every command) is not counted as
    a command: it would merge every command into one."""
    assert normalize(wrap("ls /nonexistent")[:keep], "codex") == ""


def test_bare_commands_unchanged() -> None:
    """What really reaches the records: the bare command, unchanged, whatever it contains."""
    for command in CASES + ["set -e; make", "echo '# Snapshot file'", "bash -lc 'x'"]:
        assert strip(command) == command


def test_helpers_without_evidence_paths() -> None:
    """The snapshot check under another CODEX_HOME is still a helper."""
    assert strip('set -e; . "/home/agent/.codex/shell_snapshots/019-abc.tmp-17"') == ""


# -- the session-log reader ------------------------------------------------------------------------
#
# Every test below reads the real rollout file(s) the harness kept (``session_files`` of
# ``harness/evidence/codex.json``, Codex 0.171.0, the session of the last run: the stub asked for
# ``ls /nonexistent`` five times in one turn). Ids, times and exits come from the files; a test of
# error handling takes a real line and breaks it (says how in its docstring). The checks every
# JSON Lines reader passes come from ``tests/sessionlogs.py`` (:class:`TestSessionLog`).

LOG = SessionLog("codex")
READER = LOG.reader


#: What each verified release's real rollouts show (issue 26: the first release of each
#: session-log format since December 2025, found by bisecting the installable releases):
#: ``tool`` the shell function the harness's model got; ``end`` the line that ends a shell call
#: (``item_completed`` CommandExecution, or the call's ``function_call_output``); ``turn_end``
#: whether task_started / task_complete bound the turn (else the prompt starts it and nothing
#: ends it); ``error`` whether a refused request leaves its error in the rollout.
FACTS = {
    "0.171.0": {"tool": "exec_command", "end": "item_completed", "turn_end": True, "error": True},
    "0.148.0": {"tool": "exec_command", "end": "item_completed", "turn_end": True, "error": True},
    "0.145.0": {"tool": "exec_command", "end": "function_call_output", "turn_end": True,
                "error": True},
    "0.100.0": {"tool": "exec_command", "end": "function_call_output", "turn_end": True,
                "error": False},
    "0.96.0": {"tool": "exec_command", "end": "function_call_output", "turn_end": False,
               "error": False},
    "0.64.0": {"tool": "shell_command", "end": "function_call_output", "turn_end": False,
               "error": False},
}
#: The real rollouts of every verified release, the pin first.
VERSIONS = [SessionLog("codex", param.values[0]) for param in version_params("codex")]
LS_OUTPUT = "ls: cannot access '/nonexistent': No such file or directory\n"


def by_version(test):
    """Parametrize ``test``'s ``log`` argument over every verified release (``codex-<v>``)."""
    return pytest.mark.parametrize("log", VERSIONS,
                                   ids=[p.id for p in version_params("codex")])(test)


class TestSessionLog(SessionLogChecks):
    """The checks every JSON Lines reader passes, on the real rollouts of every verified
    release: every line type in them is one the reader knows (listed here, so a new kind in a
    later run shows up). The turn is task_started ... task_complete from 0.100.0; before, the
    prompt (user_message) starts it and no line ends it."""

    log = LOG
    reader_class = CodexReader
    known_line_kinds = frozenset({"session_meta", "event_msg", "response_item", "turn_context",
                                  "world_state", "token_usage_record"})

    def test_shell_session_gives_the_exact_events(self) -> None:
        """The stub asked for ``ls /nonexistent`` 5 times in one turn: the turn starts, each
        call starts and ends, the final answer is text, and (from 0.100.0) the turn ends;
        nothing else, in time order; an empty dict as the state gives the same events."""
        lines = self.log.session_lines()
        events = self.log.read(lines)
        tail = [TURN_END] if FACTS[self.log.version]["turn_end"] else []
        assert [e.kind for e in events] == \
            [TURN_START, *[SHELL_START, SHELL_END] * SHELL_REPEAT, TEXT, *tail]
        times = [e.ts for e in events]
        assert None not in times and times == sorted(times)
        assert self.log.read(lines, {}) == events


def test_the_verified_releases_are_the_format_boundaries() -> None:
    """The versions matrix is the pin and the first release of each earlier format, newest
    first, each the real run of its own release; the coverage row lists the same."""
    assert [log.version for log in VERSIONS] == list(FACTS)
    assert [log.version for log in VERSIONS[1:]] == list(COVERAGE["codex"].also_verified)
    assert VERSIONS[0].root == evidence_dirs.primary()
    for log in VERSIONS:
        evidence = log.evidence()
        assert evidence["version"] == log.version
        assert evidence["version_output"].splitlines()[0] == f"codex-cli {log.version}"


@by_version
def test_each_release_gives_the_exact_shell_calls(log: SessionLog) -> None:
    """Every release's repeated run: five calls of the release's shell function, each started
    by its function_call (command from its arguments) and ended by the release's end line
    with exit 2, failed, and the command's own output; the ids pair up, the files' ids."""
    facts = FACTS[log.version]
    lines = log.session_lines()
    calls = [p for _, p in _payloads(lines, "response_item", "function_call")]
    ends = ([p["item"]["id"] for _, p in _payloads(lines, "event_msg", "item_completed")
             if p["item"]["type"] == "CommandExecution"] if facts["end"] == "item_completed"
            else [p["call_id"] for _, p in _payloads(lines, "response_item",
                                                     "function_call_output")])
    events = log.read(lines)
    starts = [e for e in events if e.kind == SHELL_START]
    assert [(e.call_id, e.command, e.tool) for e in starts] == \
        [(p["call_id"], SHELL_COMMAND, facts["tool"]) for p in calls]
    assert [(e.call_id, e.command, e.exit, e.failed, e.tool, e.output)
            for e in events if e.kind == SHELL_END] == \
        [(call_id, SHELL_COMMAND, 2, True, facts["tool"], LS_OUTPUT) for call_id in ends]
    assert len(ends) == SHELL_REPEAT


@by_version
def test_each_release_reads_the_ok_and_error_turns(log: SessionLog) -> None:
    """The ``ok`` verdict capture: ``echo harness-ok`` ends with exit 0, not failed, output
    ``harness-ok``, then the text. The ``error`` capture (the stub refused the request): an
    ``error`` event with the provider's body where the release logs it (0.145.0 on), none
    before; the turn starts in both."""
    facts = FACTS[log.version]
    root = log.home / "verdict"
    (ok_file,) = root.glob("ok/.codex/sessions/*/*/*/rollout-*.jsonl")
    events = log.read(log.lines(ok_file))
    assert [(e.command, e.exit, e.failed, e.tool, e.output) for e in events
            if e.kind == SHELL_END] == [("echo harness-ok", 0, False, facts["tool"],
                                         "harness-ok\n")]
    assert [e.kind for e in events] == [TURN_START, SHELL_START, SHELL_END, TEXT] + \
        ([TURN_END] if facts["turn_end"] else [])
    (error_file,) = root.glob("error/.codex/sessions/*/*/*/rollout-*.jsonl")
    events = log.read(log.lines(error_file))
    errors = [e.detail for e in events if e.kind == ERROR]
    assert events[0].kind == TURN_START
    if facts["error"]:
        (detail,) = errors
        assert "harness: stub refused the request" in detail
    else:
        assert errors == []


@by_version
def test_each_releases_records_strip_to_the_commands(log: SessionLog) -> None:
    """C7/C8 on every release's real records: each run's command is recorded bare once per
    request with its real exit, and every other record (the snapshot writer and check, which
    0.99.0 on start per session) normalizes to ``""``."""
    evidence = log.evidence()
    commands = {run["command"] for run in evidence["runs"]}
    helpers = 0
    for run in evidence["runs"]:
        got = [(normalize(r["raw"], "codex"), r["exit"]) for r in run["records"]]
        assert [g for g in got if g[0]] == [(run["command"], EXITS[run["command"]])] * \
            run["repeat"], run["command"]
        helpers += sum(1 for r in run["records"] if r["raw"] not in commands)
    # 0.64.0 and 0.96.0 take no shell snapshot; later releases write and check one per run.
    assert helpers == (0 if log.version in ("0.64.0", "0.96.0") else 2 * len(evidence["runs"]))


def _payloads(lines: list, kind: str, sub: str) -> list[tuple[dict, dict]]:
    return [(o, o["payload"]) for o in lines if o["type"] == kind and o["payload"]["type"] == sub]


def _first(lines: list, kind: str, sub: str, pred=lambda p: True) -> dict:
    return copy.deepcopy(next(o for o, p in _payloads(lines, kind, sub) if pred(p)))


def _first_completed(lines: list) -> dict:
    """The first real ``item_completed`` line of a CommandExecution."""
    return _first(lines, "event_msg", "item_completed",
                  lambda p: p["item"]["type"] == "CommandExecution")


def test_reader_globs_and_signal() -> None:
    """The codex reader reads rollouts under $CODEX_HOME (default ~/.codex), does not make
    records (the neutral route records Codex's commands), and its coverage text names the
    call's start and end."""
    assert READER.globs == ("$CODEX_HOME/sessions/*/*/*/rollout-*.jsonl",)
    assert READER.env_defaults == {"CODEX_HOME": ".codex"}
    assert READER.route_records is False
    assert "exec_command" in READER.signal and "exit_code" in READER.signal


def test_shell_calls_have_the_files_ids_commands_exits_and_times() -> None:
    """Each call pairs its function_call (start: time of that line, command from its `cmd`) with
    its item_completed CommandExecution (end: time of that line, exit_code 2, failed), in file
    order."""
    lines = LOG.session_lines()
    run = LOG.shell_run()
    starts = [(o, p) for o, p in _payloads(lines, "response_item", "function_call")
              if p["name"] == "exec_command"]
    ends = [(o, p) for o, p in _payloads(lines, "event_msg", "item_completed")
            if p["item"]["type"] == "CommandExecution"]
    turn = _payloads(lines, "event_msg", "task_started")[0][1]["turn_id"]
    events = LOG.read(lines)
    assert [e for e in events if e.kind == SHELL_START] == [
        SessionEvent(SHELL_START, iso_ts(o["timestamp"]), call_id=p["call_id"],
                     command=json.loads(p["arguments"])["cmd"], tool="exec_command", turn_id=turn)
        for o, p in starts]
    assert [e for e in events if e.kind == SHELL_END] == [
        SessionEvent(SHELL_END, iso_ts(o["timestamp"]), call_id=p["item"]["id"],
                     command=run["command"], exit=p["item"]["exit_code"], failed=True,
                     tool="exec_command", turn_id=turn, output=p["item"]["aggregated_output"])
        for o, p in ends]
    # The output is the command's own (issue 19: its digest tells same from changing output).
    assert {e.output for e in events if e.kind == SHELL_END} == {
        "ls: cannot access '/nonexistent': No such file or directory\n"}


def test_turn_bounds_and_text_come_from_task_events() -> None:
    """turn_start is task_started, turn_end task_complete (their times and turn id); the text
    is the assistant message; the turn starts before every call and ends after every call."""
    lines = LOG.session_lines()
    (started_line, started), = _payloads(lines, "event_msg", "task_started")
    (complete_line, complete), = _payloads(lines, "event_msg", "task_complete")
    (message_line, _), = [(o, p) for o, p in _payloads(lines, "response_item", "message")
                          if p["role"] == "assistant"]
    events = LOG.read(lines)
    assert events[0] == SessionEvent(TURN_START, iso_ts(started_line["timestamp"]),
                                     turn_id=started["turn_id"])
    assert events[-1] == SessionEvent(TURN_END, iso_ts(complete_line["timestamp"]),
                                      turn_id=complete["turn_id"])
    assert events[-2] == SessionEvent(TEXT, iso_ts(message_line["timestamp"]),
                                      turn_id=started["turn_id"])
    assert {e.turn_id for e in events} == {started["turn_id"]}


def test_end_without_its_start_takes_the_command_from_the_argv() -> None:
    """After a sidecar restart (fresh state) an item_completed line still gives the command:
    the item's argv is ["/bin/bash", "-lc", <cmd>]."""
    obj = _first_completed(LOG.session_lines())
    (event,) = READER.parse_line(obj, READER.new_file_state())
    assert (event.kind, event.call_id, event.command, event.exit, event.failed) == \
        (SHELL_END, obj["payload"]["item"]["id"], "ls /nonexistent", 2, True)


def test_state_forgets_finished_calls() -> None:
    """Once the file is read, no call is left open in the state (JSON-serialisable)."""
    state = READER.new_file_state()
    LOG.read(LOG.session_lines(), state)
    assert state["calls"] == {}
    json.dumps(state)


def test_no_exit_code_falls_back_to_status() -> None:
    """A real CommandExecution line with `exit_code` set to null (a call Codex ended without a
    number): no exit, failed from `status` ("failed"); with status "completed": not failed."""
    obj = _first_completed(LOG.session_lines())
    obj["payload"]["item"]["exit_code"] = None
    (event,) = READER.parse_line(obj, READER.new_file_state())
    assert (event.exit, event.failed) == (None, True)
    obj["payload"]["item"]["status"] = "completed"
    (event,) = READER.parse_line(obj, READER.new_file_state())
    assert (event.exit, event.failed) == (None, False)


@pytest.mark.parametrize("value", ["2", [2], 2.5, True, {}])
def test_exit_code_that_is_not_a_number(value) -> None:
    """A real CommandExecution line whose `exit_code` was changed to a non-number: bad_exit."""
    obj = _first_completed(LOG.session_lines())
    obj["payload"]["item"]["exit_code"] = value
    assert_reader_error(READER, obj, "bad_exit")


def test_broken_real_lines_raise_format_errors() -> None:
    """Real lines broken on purpose: a line that is a list (not_object), the `type` key deleted
    (no_type), the `payload` replaced by a string (unknown_shape), a function_call whose
    `arguments` became a list (unknown_shape), a timestamp that is a number (bad_ts); a line
    that is null, a number, a string or bytes (not_object)."""
    call = _first(LOG.session_lines(), "response_item", "function_call")
    no_type = copy.deepcopy(call)
    del no_type["type"]
    bad_payload = copy.deepcopy(call)
    bad_payload["payload"] = "x"
    bad_args = copy.deepcopy(call)
    bad_args["payload"]["arguments"] = ["ls"]
    bad_ts = copy.deepcopy(call)
    bad_ts["timestamp"] = 1764500000
    for reason, obj in [("not_object", [call]), ("no_type", no_type),
                        ("unknown_shape", bad_payload), ("unknown_shape", bad_args),
                        ("bad_ts", bad_ts), *(("not_object", o) for o in (None, 3, "text", b"x"))]:
        assert_reader_error(READER, obj, reason)


def test_unparseable_exec_arguments_are_no_shell_call() -> None:
    """A real exec_command line whose `arguments` string was cut (not JSON): Codex does not run
    such a call, so it is a tool event, not a shell start that would never end."""
    obj = _first(LOG.session_lines(), "response_item", "function_call")
    obj["payload"]["arguments"] = obj["payload"]["arguments"][:-3]
    (event,) = READER.parse_line(obj, READER.new_file_state())
    assert (event.kind, event.tool) == (TOOL, "exec_command")


def test_other_tools_and_unknown_kinds() -> None:
    """A real function_call renamed to `apply_patch` is a tool (an edit), not shell activity; a
    real line whose top-level type was renamed to a kind the reader does not know still has the
    rollout shape and gives nothing."""
    lines = LOG.session_lines()
    call = _first(lines, "response_item", "function_call")
    call["payload"]["name"] = "apply_patch"
    (event,) = READER.parse_line(call, READER.new_file_state())
    assert (event.kind, event.tool, event.call_id) == (TOOL, "apply_patch",
                                                       call["payload"]["call_id"])
    other = copy.deepcopy(lines[0])
    other["type"] = "some_future_kind"
    assert READER.parse_line(other, READER.new_file_state()) == []


# -- the function_call_output formats, on real lines changed on purpose ---------------------------

OLD = {log.version: log for log in VERSIONS}


def _call_and_output(version: str) -> tuple[dict, dict]:
    """A copy of the first shell function_call line and of its function_call_output line of
    ``version``'s repeated run."""
    lines = OLD[version].session_lines()
    call = _first(lines, "response_item", "function_call")
    output = _first(lines, "response_item", "function_call_output",
                    lambda p: p["call_id"] == call["payload"]["call_id"])
    return call, output


def test_a_command_still_running_ends_through_its_write_stdin_poll() -> None:
    """0.100.0's real exec_command call whose output was changed to Codex's yield text
    (``Process running with session ID 7``): the call stays open; a write_stdin call (the real
    call line renamed, arguments ``{"session_id": 7}``, a new call id) is a tool; its output
    (the real output line under the new call id) ends the first call with exit 2."""
    call, output = _call_and_output("0.100.0")
    call_id = call["payload"]["call_id"]
    running = copy.deepcopy(output)
    running["payload"]["output"] = ("Chunk ID: 1\nWall time: 10.0 seconds\n"
                                    "Process running with session ID 7\nOriginal token count: 0"
                                    "\nOutput:\n")
    poll = copy.deepcopy(call)
    poll["payload"].update(name="write_stdin", call_id="poll-1",
                           arguments=json.dumps({"session_id": 7, "chars": ""}))
    polled = copy.deepcopy(output)
    polled["payload"]["call_id"] = "poll-1"
    state = READER.new_file_state()
    (start,) = READER.parse_line(call, state)
    assert READER.parse_line(running, state) == []
    (tool,) = READER.parse_line(poll, state)
    assert (tool.kind, tool.tool) == (TOOL, "write_stdin")
    (end,) = READER.parse_line(polled, state)
    assert (end.kind, end.call_id, end.command, end.exit, end.failed, end.output) == \
        (SHELL_END, call_id, "ls /nonexistent", 2, True, LS_OUTPUT)
    assert state["calls"] == {} and state["sessions"] == {} and state["polls"] == {}
    json.dumps(state)


def test_an_output_without_an_exit_line_ends_the_call_failed() -> None:
    """0.96.0's real output line with Codex's spawn-failure text instead (no exit line): the
    call ends with no exit, failed, the text as its output."""
    call, output = _call_and_output("0.96.0")
    output["payload"]["output"] = "execution error: Io(No such file or directory)"
    state = READER.new_file_state()
    READER.parse_line(call, state)
    (end,) = READER.parse_line(output, state)
    assert (end.kind, end.exit, end.failed, end.output) == \
        (SHELL_END, None, True, "execution error: Io(No such file or directory)")


def test_only_the_header_states_the_exit() -> None:
    """0.64.0's real ``Exit code: 2`` output with a line ``Exit code: 0`` appended to the
    command's output, and 0.96.0's with ``Process exited with code 0``: the header's 2 holds."""
    for version, fake in (("0.64.0", "Exit code: 0\n"), ("0.96.0", "Process exited with code 0\n")):
        call, output = _call_and_output(version)
        output["payload"]["output"] += fake
        state = READER.new_file_state()
        READER.parse_line(call, state)
        (end,) = READER.parse_line(output, state)
        assert (end.exit, end.failed, end.output) == (2, True, LS_OUTPUT + fake)


@pytest.mark.parametrize("version,text", [("0.64.0", "Exit code: two\nOutput:\n"),
                                          ("0.96.0", "Process exited with code 2.5\nOutput:\n")])
def test_an_exit_line_without_a_number_is_bad_exit(version: str, text: str) -> None:
    """A real output line whose exit line's number was replaced by a non-integer: bad_exit."""
    call, output = _call_and_output(version)
    output["payload"]["output"] = text
    state = READER.new_file_state()
    READER.parse_line(call, state)
    assert_reader_error(READER, output, "bad_exit", state)


def test_the_generic_shell_tool_of_other_models() -> None:
    """Before 0.96.0 a model without a built-in entry (0.64.0 under the stub's own model name,
    seen by hand) gets ``shell``: arguments ``{"command": ["bash", "-lc", <cmd>]}`` and a JSON
    result ``{"output": ..., "metadata": {"exit_code": N, "duration_seconds": S}}``. 0.64.0's
    real shell_command lines changed to that shape: the call starts and ends as the others; an
    argv without ``-lc`` is joined as a shell reads it."""
    call, output = _call_and_output("0.64.0")
    call["payload"].update(name="shell", arguments=json.dumps(
        {"command": ["bash", "-lc", "ls /nonexistent"]}))
    output["payload"]["output"] = json.dumps(
        {"output": LS_OUTPUT, "metadata": {"exit_code": 2, "duration_seconds": 0.0}})
    state = READER.new_file_state()
    (start,) = READER.parse_line(call, state)
    (end,) = READER.parse_line(output, state)
    assert (start.kind, start.command, start.tool) == (SHELL_START, "ls /nonexistent", "shell")
    assert (end.kind, end.command, end.exit, end.failed, end.tool, end.output) == \
        (SHELL_END, "ls /nonexistent", 2, True, "shell", LS_OUTPUT)
    call["payload"]["arguments"] = json.dumps({"command": ["ls", "-l", "/no such"]})
    (start,) = READER.parse_line(call, READER.new_file_state())
    assert start.command == "ls -l '/no such'"


def test_an_output_of_a_call_already_ended_or_never_seen_is_nothing() -> None:
    """0.148.0's real function_call_output after its item_completed, and 0.96.0's read with a
    fresh state (its call never seen): no event (no second end, no end without a command)."""
    lines = OLD["0.148.0"].session_lines()
    state = READER.new_file_state()
    outputs = []
    for line in lines:
        events = READER.parse_line(line, state)
        if line["type"] == "response_item" and line["payload"]["type"] == "function_call_output":
            outputs.append(events)
    assert outputs == [[]] * SHELL_REPEAT
    _, output = _call_and_output("0.96.0")
    assert READER.parse_line(output, READER.new_file_state()) == []
