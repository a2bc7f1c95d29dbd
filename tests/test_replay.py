"""``repeat-failure replay`` (issue 19): the harness's real session logs of every backend whose
log the sidecar reads, the trajectory fixtures (mini-swe-agent 1 and 1.1, SWE-agent), sweeps,
``--json``, bad files, and the progress display.

The real captures are found through ``harness/evidence/<backend>.json`` (``session_files``),
never named here: a harness re-run gives them new names and times, so the expected times are
read from the files with the sidecar's own tail (:class:`repeat_failure.sessions.tail.SessionTail`), not
with the replay's code.
"""

from __future__ import annotations

import io
import json
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest

from harness.checks import GUARD_REFUSAL_LOGGED, LOOP_GUARDED
from sessionlogs import EVIDENCE_DIR, evidence_of
from repeat_failure.backends import SHELL_END, session_reader
from repeat_failure.cli import main
from repeat_failure.backends.coverage import COVERAGE
from repeat_failure.replay.report import Progress
from repeat_failure.replay.sources import formats
from repeat_failure.sessions.tail import SessionTail, discover, expand_globs

FIXTURES = Path(__file__).parent / "fixtures" / "trajectories"
HEADER = ("threshold  window_s   match  sessions  commands  failures  sessions_with_note  notes  "
          "same  changing  unknown")
#: Every backend whose session log the sidecar reads (the inference backends share Claude
#: Code's reader and its captures).
BACKENDS = sorted(b for b in formats() if b != "mini-swe-agent")
#: Those whose real run has the five failures (a CLI's own loop guard stops the others short).
FIVE = [b for b in BACKENDS if b not in LOOP_GUARDED]


def when(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["replay", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def home_of(backend: str, tmp_path: Path) -> tuple[Path, str]:
    """A home holding a copy of the backend's real five-failure session (every file the
    harness kept of it) and the relative path of the one session file its reader's globs
    find (Cline keeps metadata beside its messages, Continue an index of its sessions)."""
    home = tmp_path / backend
    for rel in evidence_of(backend)["session_files"]:
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        for suffix in ("", "-wal", "-shm"):
            src = Path(f"{EVIDENCE_DIR / backend / rel}{suffix}")
            if src.exists():
                shutil.copy(src, f"{home / rel}{suffix}")
    ((path, _),) = discover(expand_globs(session_reader(backend), home, env={}), home)
    return home, path.relative_to(home).as_posix()


def shell_end_times(backend: str, home: Path) -> list[float]:
    """The times of the session's finished shell calls as the sidecar's tail reads them; a log
    without times (Continue CLI's) gets its file's modification time, as replay says."""
    ((path, st),) = discover(expand_globs(session_reader(backend), home, env={}), home)
    tail = SessionTail(session_reader(backend), home, env={}, backfill_s=1e12,
                       clock=lambda: st.st_mtime)
    return [e.ts for e in tail.poll(rescan=True).events if e.kind == SHELL_END and e.command]


def test_every_covered_backend_with_a_session_log_is_replayed() -> None:
    """The formats replay reads are every covered backend's session-log reader (by the
    reader's own name) and mini-swe-agent: a new reader is replayed (and tested below) too."""
    readers = {session_reader(b).backend for b, row in COVERAGE.items()
               if row.covered and session_reader(b) is not None}
    assert BACKENDS == sorted(readers) == ["claude", "cline", "codex", "continue", "copilot",
                                            "droid", "gemini", "kilo", "omp", "opencode", "pi",
                                            "qwen"]


@pytest.mark.parametrize("backend", FIVE)
def test_real_capture_gives_the_note_and_table(backend: str, tmp_path: Path, capsys) -> None:
    """The harness's real run (the stub asks for `ls /nonexistent` five times in one turn),
    replayed from the agent's home: five commands, five failures, one note raised at the fifth
    failure's own time, the same output each time (after normalization: Gemini's PGID line
    and Copilot's shell id are the tool's, not the command's)."""
    home, rel = home_of(backend, tmp_path)
    times = shell_end_times(backend, home)
    assert len(times) == 5
    code, out, err = run(capsys, str(home))
    assert (code, err) == (0, "")
    assert out == (
        f"{home}/{rel} ({backend}): 5 commands, 5 failures\n"
        f"  note: ls /nonexistent (exit 2): 5 failures in 1 min, output same, raised "
        f"{when(times[4])}\n"
        "\n"
        f"{HEADER}\n"
        "        5       600  output         1         5         5                   1      1     1"
        "         0        0\n")


@pytest.mark.parametrize("backend", sorted(set(BACKENDS) & set(LOOP_GUARDED)))
def test_loop_guarded_capture_has_no_note(backend: str, tmp_path: Path, capsys) -> None:
    """A CLI whose own loop guard stopped the run at the fifth identical call (Qwen Code 0.24.4,
    Cline CLI 3.0.65: four calls ran): the four failures are read, under the threshold, so no
    note (C-AC2). Cline's log keeps the fifth call, refused, as a failure with no exit status:
    a different result from exit 2, so it does not add up with them."""
    home, rel = home_of(backend, tmp_path)
    calls = LOOP_GUARDED[backend] + (backend in GUARD_REFUSAL_LOGGED)
    assert len(shell_end_times(backend, home)) == calls == (5 if backend == "cline" else 4)
    code, out, err = run(capsys, str(home))
    assert (code, err) == (0, "")
    assert out == (
        f"{HEADER}\n"
        f"        5       600  output         1         {calls}         {calls}                   0"
        "      0     0         0        0\n")


@pytest.mark.parametrize("backend", FIVE)
def test_real_capture_as_json(backend: str, tmp_path: Path, capsys) -> None:
    """--json gives the same as one document: the session, its note (times from the file),
    the summary row."""
    home, rel = home_of(backend, tmp_path)
    times = shell_end_times(backend, home)
    code, out, _ = run(capsys, "--json", "--backend", backend, str(home / rel))
    assert code == 0
    assert json.loads(out) == {
        "settings": [{"threshold": 5, "window_s": 600.0, "match": "output"}],
        "sessions": [{"path": str(home / rel), "backend": backend, "commands": 5,
                      "failures": 5, "excluded": 0, "no_result": 0, "no_result_calls": [],
                      "unrecognized": None, "skipped": {},
                      "notes": [{"threshold": 5, "window_s": 600.0, "match": "output",
                                 "command": "ls /nonexistent", "exit": 2, "count": 5,
                                 "minutes": 1, "first_ts": times[0], "last_ts": times[4],
                                 "raised_ts": times[4], "output": "same", "cleared": ""}]}],
        "bad_files": [], "no_result": 0, "unrecognized": 0,
        "summary": [{"threshold": 5, "window_s": 600.0, "match": "output", "sessions": 1,
                     "commands": 5,
                     "failures": 5, "sessions_with_note": 1, "notes": 1,
                     "output": {"same": 1, "changing": 0, "unknown": 0}}]}


def test_sweep_on_a_real_capture(tmp_path: Path, capsys) -> None:
    """Several --threshold / --window values: one row per combination, sorted; 6 failures are
    never reached, and the five calls (each took milliseconds) never fit in 1 ms."""
    home, rel = home_of("codex", tmp_path)
    times = shell_end_times("codex", home)
    assert times[4] - times[0] > 0.001
    code, out, _ = run(capsys, "--threshold", "6,5", "--window", "600", "--window", "0.001",
                       str(home))
    assert code == 0
    assert out.split("\n\n")[1] == (
        f"{HEADER}\n"
        "        5     0.001  output         1         5         5                   0      0     0"
        "         0        0\n"
        "        5       600  output         1         5         5                   1      1     1"
        "         0        0\n"
        "        6     0.001  output         1         5         5                   0      0     0"
        "         0        0\n"
        "        6       600  output         1         5         5                   0      0     0"
        "         0        0\n")
    assert out.split("\n\n")[0] == (
        f"{home}/{rel} (codex): 5 commands, 5 failures\n"
        "  threshold 5, window 0.001 s: 0 notes\n"
        "  threshold 5, window 600 s: 1 note\n"
        f"    note: ls /nonexistent (exit 2): 5 failures in 1 min, output same, raised "
        f"{when(times[4])}\n"
        "  threshold 6, window 0.001 s: 0 notes\n"
        "  threshold 6, window 600 s: 0 notes")


def test_config_gives_threshold_window_and_exclusions(tmp_path: Path, capsys) -> None:
    """--config: its threshold, window_s and exclude apply (here `ls` is excluded: the five
    calls are not counted, as the sidecar would not count them)."""
    home, _ = home_of("pi", tmp_path)
    config = tmp_path / "config.yaml"
    config.write_text("repeat_failure:\n  threshold: 3\n  window_s: 60\n  exclude: [ls]\n")
    code, out, _ = run(capsys, "--config", str(config), str(home))
    assert code == 0
    assert out == (f"{HEADER}\n"
                   "        3        60  output         1         0         0                   0      0"
                   "     0         0        0\n")


def trajectories(tmp_path: Path) -> Path:
    """The fixtures in a private directory, the SWE-agent file (no times in it) dated."""
    dest = tmp_path / "runs"
    shutil.copytree(FIXTURES, dest)
    os.utime(dest / "sweagent__repro-3.traj", (1796090000, 1796090000))
    return dest


def test_trajectory_fixtures(tmp_path: Path, capsys) -> None:
    """mini-swe-agent 1 (a test re-run unchanged: the same output, durations and a module
    address aside), mini-swe-agent 1.1 (test-fix-retest: the output changes, so with output
    matching, issue 26, no result adds up; by exit alone a `changing` note that clears on the
    passing run; a timed-out call has no result), SWE-agent (return codes in its observations,
    no times: the file's), and a cut file reported by name and skipped (exit 1). A reply with
    two bash blocks runs nothing (mini-swe-agent answers with a format error)."""
    runs = trajectories(tmp_path)
    code, out, err = run(capsys, str(runs))
    assert (code, err) == (1, "")
    skipped = (f"skipped {runs}/broken__cut-4.traj.json: not a mini-swe-agent file: not_json: "
               "not a JSON document\n")
    stuck = (f"{runs}/stuck__dates-1.traj.json (mini-swe-agent): 8 commands, 6 failures\n"
             "  note: cd /testbed && python -m pytest tests/test_dates.py -x (exit 1): 6 failures "
             "in 3 min, output same, raised 2026-12-01 04:42:00Z\n"
             f"{runs}/sweagent__repro-3.traj (mini-swe-agent): 5 commands, 5 failures\n"
             "  note: python reproduce.py (exit 1): 5 failures in 1 min, output same, raised "
             "2026-12-01 01:53:20Z\n")
    no_result = (f"{runs}/iterating__total-2.traj.json (mini-swe-agent): 1 call without a "
                 "result (the log gives no exit status): not judged\n"
                 "  no result: python -m http.server 8000\n")
    total = "calls without a result: 1 in 1 session (not judged)\n"
    assert out == (
        skipped + no_result + stuck + total + "\n"
        f"{HEADER}\n"
        "        5       600  output         3        24        16                   2      2     2"
        "         0        0\n")
    code, out, err = run(capsys, "--match", "exit", str(runs))
    assert (code, err) == (1, "")
    assert out == (
        skipped + no_result +
        f"{runs}/iterating__total-2.traj.json (mini-swe-agent): 11 commands, 5 failures, 1 "
        "without a result\n"
        "  note: pytest -q tests/test_total.py (exit 1): 5 failures in 3 min, output changing, "
        "raised 2026-12-01 05:42:41Z, cleared (success)\n" + stuck + total + "\n"
        f"{HEADER.replace('   match', '  match')}\n"
        "        5       600   exit         3        24        16                   3      3     2"
        "         1        0\n")


def test_trajectory_sweep(tmp_path: Path, capsys) -> None:
    """A sweep over the fixtures: threshold 6 leaves only the six-failure loop; a 100 s
    window leaves none of the test loops (30 s and 40 s apart: 5 span 120 s and 160 s) but the
    SWE-agent run, whose failures share one time; by exit alone the test-fix-retest run adds a
    `changing` note at threshold 5 and window 600 s (issue 26)."""
    runs = trajectories(tmp_path)
    code, out, _ = run(capsys, "--json", "--threshold", "5,6", "--window", "100,600",
                       "--match", "output,exit", str(runs))
    assert code == 1
    summary = [(r["threshold"], r["window_s"], r["match"], r["sessions_with_note"], r["notes"],
                r["output"]["same"], r["output"]["changing"])
               for r in json.loads(out)["summary"]]
    assert summary == [(5, 100.0, "exit", 1, 1, 1, 0), (5, 100.0, "output", 1, 1, 1, 0),
                       (5, 600.0, "exit", 3, 3, 2, 1), (5, 600.0, "output", 2, 2, 2, 0),
                       (6, 100.0, "exit", 0, 0, 0, 0), (6, 100.0, "output", 0, 0, 0, 0),
                       (6, 600.0, "exit", 1, 1, 1, 0), (6, 600.0, "output", 1, 1, 1, 0)]
    with pytest.raises(SystemExit) as exc:
        main(["replay", "--match", "output,line", str(runs)])
    assert exc.value.code == 2
    assert "'line': a match must be one of output, exit" in capsys.readouterr().err


def test_bad_files_are_reported_and_skipped(tmp_path: Path, capsys) -> None:
    """Nothing stops a replay: a missing path, a file whose format cannot be told, a session
    file of nothing but junk, and a JSON document that is not a trajectory are each reported by
    name (exit 1) while the good file is replayed."""
    home, rel = home_of("claude", tmp_path)
    junk = tmp_path / "other" / ".claude" / "projects" / "p" / "junk.jsonl"
    junk.parent.mkdir(parents=True)
    junk.write_bytes(b"not json\n[1, 2]\n")
    odd = tmp_path / "notes.txt"
    odd.write_text("hello\n")
    listed = tmp_path / "list.traj"
    listed.write_text("[1, 2, 3]")
    code, out, _ = run(capsys, str(tmp_path / "missing"), str(odd), str(junk), str(listed),
                       str(home / rel))
    assert code == 1
    assert out.splitlines()[:4] == [
        f"skipped {tmp_path}/missing: no such file or directory",
        f"skipped {odd}: cannot tell which agent wrote it (its path is not where a known CLI "
        "keeps its session log); pass --backend NAME",
        f"skipped {junk}: not a claude session log (not_json 1, not_object 1)",
        f"skipped {listed}: not a mini-swe-agent file: unknown_shape: not a JSON object"]
    assert out.splitlines()[-1].split() == ["5", "600", "output", "1", "5", "5", "1", "1", "1",
                                            "0", "0"]


def test_unknown_backend_is_a_usage_error(capsys) -> None:
    """--backend names a known format (argparse: exit 2)."""
    with pytest.raises(SystemExit) as exc:
        main(["replay", "--backend", "aider", "x"])
    assert exc.value.code == 2
    assert "invalid choice: 'aider'" in capsys.readouterr().err


@pytest.mark.parametrize("args", [["--threshold", "0"], ["--window", "0"],
                                  ["--threshold", "5,x"], ["--window", "700000"]])
def test_out_of_range_settings_are_usage_errors(args: list[str], capsys) -> None:
    """--threshold and --window take the config's ranges (threshold 1-10,000, window above 0
    and at most 7 days)."""
    with pytest.raises(SystemExit) as exc:
        main(["replay", *args, "x"])
    assert exc.value.code == 2


def test_commands_and_paths_are_shown_scrubbed(tmp_path: Path, capsys) -> None:
    """A token in a failing command (and in a file name) is never shown: the command is shown
    as exported, scrubbed; control characters are escaped."""
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "t"}]
    for i in range(5):
        msgs += [{"role": "assistant",
                  "content": f"```bash\ncurl -H 'Authorization: token {token}' x\x1b[31m\n```",
                  "extra": {"response": {"created": 1796100000 + i}}},
                 {"role": "user", "content": "<returncode>22</returncode>\n<output>\n</output>"}]
    path = tmp_path / f"{token}.traj.json"
    path.write_text(json.dumps({"messages": msgs, "trajectory_format": "mini-swe-agent-1"}))
    code, out, _ = run(capsys, str(path))
    assert code == 0 and token not in out and "\x1b" not in out
    assert "note: curl -H 'Authorization: token [REDACTED]' x\\u001b[31m (exit 22): 5 failures" \
        in out


def test_progress_shows_on_a_terminal_only() -> None:
    """The progress bar (tqdm) is off when stderr is not a terminal (a pipe, a CI log) and on,
    counting bytes, when it is one."""
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    pipe = io.StringIO()
    bar = Progress(2_000_000, stream=pipe)
    bar(1_000_000)
    bar.close()
    assert pipe.getvalue() == ""
    tty = Tty()
    bar = Progress(2_000_000, stream=tty)
    bar._bar.delay = 0  # shown at once (a real replay waits half a second before showing it)
    bar(1_000_000)
    bar._bar.refresh()
    bar.close()
    assert "replay:  50%" in tty.getvalue() and "1.00M/2.00M" in tty.getvalue()


def test_the_documented_table_is_what_the_real_captures_give(tmp_path: Path, capsys) -> None:
    """docs/operations.md "Replay before enabling" shows the table of a replay of the committed
    harness/evidence/ (the twelve backends' real runs and the older releases kept, found home
    by home): it is exactly what the replay prints for them."""
    doc = (Path(__file__).resolve().parent.parent / "docs" / "operations.md").read_text()
    section = doc.split("## Replay before enabling\n", 1)[1].split("\n## ", 1)[0]
    table = section.split("  ```\n  threshold", 1)[1].split("  ```", 1)[0]
    documented = ["threshold" + table.splitlines()[0]] + [
        line[2:] for line in table.splitlines()[1:] if line.strip()]
    code, out, _ = run(capsys, str(Path(__file__).resolve().parent.parent / "harness" /
                                   "evidence"))
    assert code == 0
    assert out.split("\n\n")[-1].splitlines() == documented


def test_nothing_found_says_so(tmp_path: Path, capsys) -> None:
    """A directory with no session file and no trajectory: an empty table, a line on stderr
    saying where files are looked for, exit 1."""
    (tmp_path / "empty").mkdir()
    code, out, err = run(capsys, str(tmp_path / "empty"))
    assert code == 1
    assert out == (f"{HEADER}\n"
                   "        5       600  output         0         0         0                   0      0"
                   "     0         0        0\n")
    assert err == ("repeat-failure replay: no session file or trajectory found under the paths "
                   "given (a directory is searched as an agent's home, or for homes up to 4 "
                   "levels below it: docs/operations.md)\n")
