"""Turn verdicts on real captured turns (issue 8; seed ard-0038 §1, §2).

Every file here comes from the harness (``python -m harness run``, re-run by CI before the
tests): the real agent CLIs against the stub provider on 127.0.0.1 in four ``verdict``
scenarios (harness/run.py ``VERDICT_SCENARIOS``): ``ok`` (one shell call, then text),
``empty`` (the stub's reply has no text and no tool call), ``error`` (the stub answers every
model request with the provider's documented HTTP 400 error) and ``killed`` (SIGTERM while a
shell call runs). Nothing is edited.

Two paths are checked:

- ``repeat-failure verdict`` on the stream-json transcripts of Claude Code, Codex and Gemini
  CLI, as a CI job runs it (a subprocess; exit status and stderr);
- the sidecar on each covered backend's session log: the session files copied into an agent
  home, one pass, and the ``hive_agent_turns_total`` series it exports.

What each backend's log can say is in :data:`SESSION_VERDICTS` (``None``: that turn never ends
in the log, so it is not classified; the reasons are in docs/metrics.md "Turn verdicts").
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from harness import checks
from harness.evidence import primary, versions
from repeat_failure.sidecar.app import Sidecar
from repeat_failure.backends.claude import EXITED_MID_TURN
from repeat_failure.backends.gemini import ROLLED_BACK
from repeat_failure.config import AgentSpec
from repeat_failure.sidecar.exporter import MetricsCollector
from repeat_failure.turns.verdict import AGENT_ERROR, AGENT_NO_OUTPUT, NONZERO_EXIT, OK, VERDICTS

REPO = Path(__file__).resolve().parent.parent
EVIDENCE = primary()
SCENARIOS = ("ok", "empty", "error", "killed")

#: ``repeat-failure verdict`` on each transcript: (verdict without --exit-status, with the
#: CLI's real exit status). The killed run's transcript has no terminal line: agent_error when
#: nothing else is known, nonzero_exit once the exit status says 143. Gemini CLI 0.61.0 turns an
#: empty reply into its own error ("The model returned an empty response ..."), so its empty
#: turn is agent_error, and it exits 0 when killed, so only the missing result line tells.
TRANSCRIPT_VERDICTS = {
    "claude": {"ok": (OK, OK), "empty": (AGENT_NO_OUTPUT, AGENT_NO_OUTPUT),
               "error": (AGENT_ERROR, AGENT_ERROR), "killed": (AGENT_ERROR, NONZERO_EXIT)},
    "codex": {"ok": (OK, OK), "empty": (AGENT_NO_OUTPUT, AGENT_NO_OUTPUT),
              "error": (AGENT_ERROR, AGENT_ERROR), "killed": (AGENT_ERROR, NONZERO_EXIT)},
    "gemini": {"ok": (OK, OK), "empty": (AGENT_ERROR, AGENT_ERROR),
               "error": (AGENT_ERROR, AGENT_ERROR), "killed": (AGENT_ERROR, AGENT_ERROR)},
    # Qwen Code 0.24.4 (stream-json in Claude Code's shape, read by the claude format) reports
    # an empty reply as "[API Error: Model stream ended with empty response text.]".
    "qwen": {"ok": (OK, OK), "empty": (AGENT_ERROR, AGENT_ERROR),
             "error": (AGENT_ERROR, AGENT_ERROR), "killed": (AGENT_ERROR, NONZERO_EXIT)},
}
#: Where an earlier verified release's transcript says otherwise (``(backend, version)`` ->
#: the scenarios that differ; issue 26's version captures): Claude Code up to 2.1.70 ends an
#: empty reply's run with a ``result`` of subtype ``error_during_execution`` (the CLI calls it an
#: error itself); 2.1.212 and 2.1.218 log the SIGTERM as an interrupt and end with an error
#: ``result`` line, so the error outranks the exit status; Gemini CLI 0.36.0 to 0.40.0 end an
#: empty reply's run with ``status: success`` and no error (0.44.0 on report it), and so do
#: 0.27.0 to 0.30.0.
EARLIER_TRANSCRIPT_VERDICTS = {
    **{("claude", v): {"empty": (AGENT_ERROR, AGENT_ERROR)}
       for v in ("2.0.56", "2.0.57", "2.0.77", "2.1.70")},
    **{("claude", v): {"killed": (AGENT_ERROR, AGENT_ERROR)} for v in ("2.1.212", "2.1.218")},
    **{("gemini", v): {"empty": (AGENT_NO_OUTPUT, AGENT_NO_OUTPUT)}
       for v in ("0.32.1", "0.36.0", "0.38.2", "0.39.0", "0.40.0")},
    # 0.27.0 to 0.30.0 besides exit 143 when killed (0.36.0 on: 0), so the status tells.
    **{("gemini", v): {"empty": (AGENT_NO_OUTPUT, AGENT_NO_OUTPUT),
                       "killed": (AGENT_ERROR, NONZERO_EXIT)}
       for v in ("0.27.0", "0.28.1", "0.30.0")},
}
#: Releases whose killed run's transcript still ends with its ``result`` line (the SIGTERM
#: logged as an interrupt).
KILLED_WITH_RESULT = {("claude", "2.1.212"), ("claude", "2.1.218")}
#: The format each transcript is recognised as.
FORMATS = {"claude": "claude", "codex": "codex", "gemini": "gemini", "qwen": "claude"}
EXIT_CODES = {OK: 0, AGENT_NO_OUTPUT: 3, AGENT_ERROR: 4, NONZERO_EXIT: 5}

#: The sidecar's verdict per scenario from the session log alone (the run's exit status is never
#: in a session log, so never nonzero_exit); None: the turn has no end in the log. The table is
#: harness.checks's, which ``python -m harness drift`` applies to the newest releases too.
SESSION_VERDICTS = checks.SESSION_VERDICTS
#: The terminal error's text of a killed turn, per backend whose log classifies it: Claude Code's
#: turn left with its Bash call unanswered; pi 1.6.0's aborted reply (its ``errorMessage``).
KILLED_ERROR = {"claude": EXITED_MID_TURN, "pi": "This operation was aborted"}
#: The CLI's exit status on the empty reply: most exit 0 having done nothing; Kilo 7.7.7,
#: Copilot CLI 1.0.102, Qwen Code 0.24.4 and Cline CLI 3.0.65 exit 1.
#: The terminal error's text of an empty reply, per backend whose log calls it an error.
EMPTY_ERROR = {"copilot": "No response was returned. Send your message again to retry.",
               "cline": "Model returned empty response"}
EMPTY_EXIT = {"claude": 0, "codex": 0, "gemini": 0, "pi": 0, "omp": 0, "opencode": 0, "kilo": 1,
              "copilot": 1, "qwen": 1, "cline": 1,
              "continue": 0, "droid": 0}


#: Where an earlier kept release exits otherwise on the empty reply (issue 26 item 3, real
#: captures): Copilot CLI 1.0.62 and 1.0.11 and Kilo 7.0.33 exit 0.
EARLIER_EMPTY_EXIT = {("copilot", "1.0.62"): 0, ("copilot", "1.0.11"): 0, ("kilo", "7.0.33"): 0}
#: Cline CLI 2.x (2.14.0, 2.18.0; issue 26 item 3) takes an answer without a tool call as a
#: mistake and, after three, fails the task with this error and exits 1: also after the normal
#: turn (its shell call, then three answers) and after the empty reply.
MISTAKES = ("[YOLO MODE] Task failed: Too many consecutive mistakes (3). The model may not be "
            "capable enough for this task. Consider using a more capable model.")
MISTAKES_RELEASES = {("cline", "2.18.0"), ("cline", "2.14.0")}


def releases(backends) -> list:
    """``(backend, evidence root)`` for every verified release of each backend (the pin first),
    as pytest params with the release in the id."""
    return [pytest.param(b, root, id=f"{b}-{version}") for b in sorted(backends)
            for version, root in versions(b, EVIDENCE)]


def scenario_version(backend: str, root: Path) -> str:
    """The CLI release of ``backend``'s evidence under ``root``."""
    return json.loads((root / f"{backend}.json").read_text())["version"]


#: Kept releases whose stream-json transcript the verdict reader does not judge right yet
#: (issue 26 item 3, left open): Qwen Code 0.5.0 and 0.12.0 report an HTTP 400 as assistant
#: text "[API Error: 400 ...]" with a ``result`` of subtype ``success``, and exit 0 on an empty
#: reply (0.24.2 and the pin: is_error, exit 1).
TRANSCRIPT_GAPS = {("qwen", "0.5.0"): ("error", "empty"), ("qwen", "0.12.0"): ("error", "empty")}


def known_gap(backend: str, root: Path, name: str) -> None:
    """Mark the test an expected failure when :data:`TRANSCRIPT_GAPS` lists its release and
    scenario."""
    if name in TRANSCRIPT_GAPS.get((backend, scenario_version(backend, root)), ()):
        pytest.xfail(f"{backend} {scenario_version(backend, root)} {name}: TRANSCRIPT_GAPS")


def scenario(backend: str, name: str, root: Path = EVIDENCE) -> dict:
    data = json.loads((root / f"{backend}.json").read_text())
    found = (data.get("verdict_scenarios") or {}).get(name)
    assert found, f"{backend}: no {name!r} verdict scenario in the evidence (python -m harness run)"
    return found


def cli_exit(backend: str, name: str, root: Path = EVIDENCE) -> int:
    code = scenario(backend, name, root)["cli_exit"]
    assert isinstance(code, int), f"{backend} {name}: the CLI did not exit ({code!r})"
    return code


def run_verdict(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "repeat_failure", "verdict", *args],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("backend,root", releases(SESSION_VERDICTS))
def test_the_cli_exits_0_on_an_empty_reply_and_on_a_normal_turn(backend, root):
    """The failure class the verdicts exist for: an empty reply and no tool call, and most CLIs
    still exit 0 (as they do for a turn that worked)."""
    known_gap(backend, root, "empty")
    version = scenario_version(backend, root)
    assert cli_exit(backend, "empty", root) == EARLIER_EMPTY_EXIT.get((backend, version),
                                                                     EMPTY_EXIT[backend])
    assert cli_exit(backend, "ok", root) == (1 if (backend, version) in MISTAKES_RELEASES else 0)


@pytest.mark.parametrize("name", SCENARIOS)
@pytest.mark.parametrize("backend,root", releases(TRANSCRIPT_VERDICTS))
def test_repeat_failure_verdict_on_real_transcripts(backend, root, name):
    known_gap(backend, root, name)
    path = root / backend / "verdict" / name / "transcript.jsonl"
    assert path.is_file(), f"{path} missing: python -m harness run --backend {backend}"
    alone, with_exit = {**TRANSCRIPT_VERDICTS[backend], **EARLIER_TRANSCRIPT_VERDICTS.get(
        (backend, scenario_version(backend, root)), {})}[name]
    done = run_verdict(str(path))
    assert (done.returncode, done.stderr, done.stdout) == (EXIT_CODES[alone], f"{alone}\n", "")
    status = cli_exit(backend, name, root)
    if name == "killed" and status == 0:
        # Codex 0.64.0 to 0.148.0 exit 0 after SIGTERM (0.171.0: 143): with no failing status
        # the transcript's own verdict stands.
        with_exit = alone
    done = run_verdict("--exit-status", str(status), "--json", str(path))
    assert (done.returncode, done.stderr) == (EXIT_CODES[with_exit], f"{with_exit}\n")
    report = json.loads(done.stdout)
    assert (report["verdict"], report["format"], report["exit_status"], report["exit_code"]) == \
        (with_exit, FORMATS[backend], status, EXIT_CODES[with_exit])
    assert report["complete"] is (name != "killed" or (backend, scenario_version(
        backend, root)) in KILLED_WITH_RESULT)
    assert report["unrecognised"] == 0
    if name == "ok":
        assert (report["text"], report["tools"], report["error"]) == (1, 1, "")
    if name == "error":
        assert "harness: stub refused the request" in report["error"]
    if name == "empty" and backend == "qwen":
        assert report["error"] == "[API Error: Model stream ended with empty response text.]"


def test_the_transcript_can_come_on_stdin_and_its_format_can_be_named():
    path = EVIDENCE / "codex" / "verdict" / "error" / "transcript.jsonl"
    done = subprocess.run([sys.executable, "-m", "repeat_failure", "verdict", "--format", "codex", "-"],
                          input=path.read_bytes(), capture_output=True, timeout=60)
    assert (done.returncode, done.stderr) == (4, b"agent_error\n")
    wrong = run_verdict("--format", "gemini", str(path))  # a codex stream named gemini
    assert (wrong.returncode, wrong.stdout) == (1, "")
    assert wrong.stderr == (f"repeat-failure verdict: {path}: the first JSON line is not a gemini "
                            "transcript's first line (it is a codex transcript's)\n")


@pytest.mark.parametrize("content,message", [
    (b"", "the transcript is empty"),
    (b"not json\nstill not\n", "no JSON line in the transcript"),
    (b'{"type": "something.else"}\n', "no JSON line is the start of a known transcript format"),
])
def test_a_transcript_that_cannot_be_classified_exits_1_naming_why(tmp_path, content, message):
    path = tmp_path / "t.jsonl"
    path.write_bytes(content)
    done = run_verdict(str(path))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith(f"repeat-failure verdict: {path}: ") and message in done.stderr


def test_bad_usage_exits_2(tmp_path):
    for args in (["--exit-status", "256", "x"], ["--exit-status", "-1", "x"],
                 ["--exit-status", "one", "x"], ["--format", "aider", "x"]):
        done = run_verdict(*args)
        assert done.returncode == 2, args
    missing = run_verdict(str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 1 and "cannot read" in missing.stderr


def test_junk_lines_in_a_real_transcript_are_skipped_and_counted(tmp_path):
    lines = (EVIDENCE / "claude" / "verdict" / "ok" / "transcript.jsonl").read_bytes()
    first, rest = lines.split(b"\n", 1)
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\xef\xbb\xbfnpm WARN something\n" + b'{"level": "warn"}\n' + first
                     + b"\n[1, 2]\n{broken\n" + rest)
    report = json.loads(run_verdict("--json", str(path)).stdout)
    assert (report["verdict"], report["unrecognised"], report["text"], report["tools"]) == \
        (OK, 4, 1, 1)
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + lines)
    assert json.loads(run_verdict("--json", str(bom)).stdout)["unrecognised"] == 0


def _home_with(backend: str, name: str, dest: Path, root: Path = EVIDENCE) -> Path:
    found = scenario(backend, name, root)
    src = root / backend / "verdict" / name
    home = dest / "home"
    files = found.get("session_files") or []
    # Continue CLI 1.5.47 wrote no session file for the error and killed runs (an empty home,
    # no turn: SESSION_VERDICTS says None); every other run must have kept its files.
    assert files or checks.session_verdicts(backend, scenario_version(backend, root))[name] is None, \
        f"{backend} {name}: no session file captured"
    home.mkdir(parents=True, exist_ok=True)
    for rel in files:
        target = home / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src / rel, target)
    return home


def _turn_series(sidecar: Sidecar) -> dict[str, float]:
    text = generate_latest(_registry(sidecar)).decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("hive_agent_turns_total{"):
            verdict = line.split('verdict="', 1)[1].split('"', 1)[0]
            out[verdict] = float(line.rsplit(" ", 1)[1])
    return out


def _registry(sidecar: Sidecar):
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    registry.register(MetricsCollector(sidecar))
    return registry


@pytest.mark.parametrize("name", SCENARIOS)
@pytest.mark.parametrize("backend,root", releases(SESSION_VERDICTS))
def test_the_sidecar_classifies_each_real_session(tmp_path, log_stream, backend, root, name):
    home = _home_with(backend, name, tmp_path, root)
    config = tmp_path / "config.yaml"
    config.write_text("repeat_failure:\n  enabled: true\n  collect_grace_s: 0.5\n")
    sidecar = Sidecar(tmp_path / "shared", [AgentSpec("a1", backend, str(home))], config)
    sidecar.run_once()
    expected = checks.session_verdicts(backend, scenario_version(backend, root))[name]
    series = _turn_series(sidecar)
    assert series == {v: float(v == expected) for v in VERDICTS}
    [view] = sidecar.snapshot()
    assert view.last_verdict == expected
    assert view.failed_in_a_row == (0 if expected in (None, OK) else 1)
    failed = [json.loads(line) for line in log_stream.getvalue().splitlines()
              if json.loads(line).get("event") == "turn_failed"]
    if expected in (None, OK):
        assert failed == []
    else:
        [line] = failed
        mistakes = (backend, scenario_version(backend, root)) in MISTAKES_RELEASES
        assert {k: line[k] for k in ("level", "msg", "agent", "backend", "verdict", "text",
                                     "tools", "failed_in_a_row")} == {
            "level": "warning", "msg": "agent turn failed", "agent": "a1", "backend": backend,
            "verdict": expected, "text": 3 if mistakes and name == "ok" else 0,
            "tools": int(name == "killed" or (mistakes and name == "ok")), "failed_in_a_row": 1}
        assert isinstance(line["turn_id"], str)
        if mistakes and name in ("ok", "empty"):
            assert line["error"] == MISTAKES
        elif backend == "gemini":
            assert line["error"] == ROLLED_BACK
        elif name == "killed":
            assert line["error"] == KILLED_ERROR[backend]
        elif expected == AGENT_ERROR and name == "error":
            assert "harness: stub refused the request" in line["error"]
        elif expected == AGENT_ERROR:
            assert line["error"] == EMPTY_ERROR[backend]
        else:
            assert line["error"] == ""


@pytest.mark.parametrize("content", [b"", b"\n  \n",
                                     b"Error: cannot start\n", b'{"type": "something.else"}\n'])
@pytest.mark.parametrize("status", ["1", "137"])
def test_a_non_zero_exit_is_nonzero_exit_whatever_the_transcript_holds(tmp_path, content,
                                                                        status):
    """Issue 17 (seed ard-0038 §1): an agent that crashed before writing anything, or wrote
    something no reader knows, failed its turn: nonzero_exit, exit 5, with the reason the
    transcript could not be read in --json (format null)."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(content)
    done = run_verdict("--exit-status", status, "--json", str(path))
    assert (done.returncode, done.stderr) == (5, "nonzero_exit\n")
    report = json.loads(done.stdout)
    reason = ("the transcript is empty" if not content else
              "no JSON line in the transcript" if not content.strip().startswith(b"{") else
              "no JSON line is the start of a known transcript format (known: claude, codex, "
              "gemini)")
    assert report == {"verdict": NONZERO_EXIT, "format": None, "text": 0, "tools": 0,
                      "error": "", "complete": False, "exit_status": int(status),
                      "lines": len(content.splitlines()),
                      "unrecognised": len([x for x in content.splitlines() if x.strip()]),
                      "unreadable": reason, "exit_code": 5}


def test_a_named_format_that_does_not_match_is_still_nonzero_exit_after_a_crash():
    path = EVIDENCE / "codex" / "verdict" / "error" / "transcript.jsonl"
    done = run_verdict("--format", "gemini", "--exit-status", "2", "--json", str(path))
    assert (done.returncode, done.stderr) == (5, "nonzero_exit\n")
    assert json.loads(done.stdout)["unreadable"] == (
        "the first JSON line is not a gemini transcript's first line (it is a codex "
        "transcript's)")


@pytest.mark.parametrize("content", [b"", b"\n\n"])
def test_exit_0_and_nothing_written_is_agent_no_output(tmp_path, content):
    """The CLI exited 0 and wrote nothing: zero text and zero tool calls (seed ard-0038 §1),
    agent_no_output, exit 3; without --exit-status it stays exit 1 (nothing to decide from)."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(content)
    done = run_verdict("--exit-status", "0", str(path))
    assert (done.returncode, done.stderr, done.stdout) == (3, "agent_no_output\n", "")
    assert run_verdict(str(path)).returncode == 1


def test_exit_0_and_output_in_no_known_format_stays_exit_1(tmp_path):
    """Exit status 0 and lines that are not a transcript (a CLI run without its stream-json
    flag): no verdict, exit 1 naming why."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"Here is the answer.\n")
    done = run_verdict("--exit-status", "0", str(path))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"repeat-failure verdict: {path}: no JSON line in the transcript\n"


def test_a_renamed_claude_session_is_not_classified_again(tmp_path):
    """Issue 17: a Claude Code session file renamed (a.jsonl -> b.jsonl) was read again from
    its start and its turn counted twice. The real ok session: one ok turn, before and after."""
    home = _home_with("claude", "ok", tmp_path)
    config = tmp_path / "config.yaml"
    config.write_text("repeat_failure:\n  enabled: true\n  collect_grace_s: 0.5\n")
    sidecar = Sidecar(tmp_path / "shared", [AgentSpec("a1", "claude", str(home))], config)
    sidecar.run_once()
    assert _turn_series(sidecar)[OK] == 1.0
    (session,) = (home / ".claude" / "projects").glob("*/*.jsonl")
    session.rename(session.with_name("b.jsonl"))
    sidecar.poll_sessions(rescan=True)
    sidecar.run_once()
    assert _turn_series(sidecar) == {v: float(v == OK) for v in VERDICTS}
