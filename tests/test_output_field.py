"""The note's ``output`` field (issue 19) and "the same result" (issue 26) end to end on the
harness's real captures: failures count per exit and output where a route knows the output, so
a repeating failure with the same output every time (the agent repeats itself) raises a note
(`same`) and one whose output changes (it is iterating) raises none, unless ``match_output:
false`` (then a `changing` note); in ``/status``, the ``output`` label of
``hive_repeat_failure_note`` and the ``note_raised`` log line.

- Claude Code (the neutral route records the commands; the session log, read beside it, gives
  the outputs): the hook's real records of the five-failure run plus the real session file of
  that run, read in either order (records first: they await their outputs, and the note is
  raised once, with them); the session file changed on purpose for a changing output; no home
  (hook only) for ``unknown``; a home whose log never shows the calls: ``unknown`` once the
  15 s wait is over.
- omp (its session log is the route, C3): the real session alone; changed for ``changing``;
  and with neutral records of the same calls counted first, dedup keeps the session record's
  output (the session records are duplicates, their digests attach to the counted failures).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import orjson
import pytest
from prometheus_client import generate_latest

from harness.evidence import primary
from repeat_failure.sidecar import hook
from repeat_failure.sidecar.app import Sidecar
from repeat_failure.config import AgentSpec
from repeat_failure.sidecar.exporter import MetricsCollector, status_json

EVIDENCE = primary()
LS = "ls /nonexistent"
MESSAGE = "Repeating failure: ls /nonexistent failed 5 times in 1 min (exit 2)"
CHANGED = b"Permission denied"


def evidence(backend: str) -> dict:
    return json.loads((EVIDENCE / f"{backend}.json").read_text())


def session_copy(backend: str, home: Path, change_third: bool = False) -> Path:
    """The backend's real five-failure session file, copied into ``home``; with
    ``change_third`` the third failure's output says "Permission denied" instead of "No such
    file or directory" (a real line changed on purpose: the agent changed something)."""
    (rel,) = evidence(backend)["session_files"]
    data = (EVIDENCE / backend / rel).read_bytes()
    if change_third:
        lines = data.split(b"\n")
        hits = [i for i, line in enumerate(lines) if b"No such file or directory" in line
                and (b'"tool_result"' in line or b'"toolResult"' in line)]
        assert len(hits) == 5, len(hits)
        lines[hits[2]] = lines[hits[2]].replace(b"No such file or directory", CHANGED)
        data = b"\n".join(lines)
    (home / rel).parent.mkdir(parents=True, exist_ok=True)
    (home / rel).write_bytes(data)
    return home / rel


def write_records(shared: Path, records: list[dict], backend: str) -> None:
    """Raw records (C1 lines, as the hook writes them) for agent ``a1``."""
    with open(hook.records_path(shared, "a1"), "ab") as f:
        for r in records:
            line = {"v": 1, "ts": r["ts"], "agent": "a1", "backend": backend,
                    "route": "bash_env", "exit": r["exit"], "cmd": r["raw"]}
            if r.get("cut"):
                line["cut"] = True
            f.write(orjson.dumps(line) + b"\n")


def sidecar(tmp_path: Path, backend: str, home: Path | None, now: float | list[float],
            match_output: bool = True) -> Sidecar:
    """A sidecar for agent ``a1``; ``now`` is its clock (a one-item list: a clock the test
    moves)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    config = tmp_path / "config.yaml"
    config.write_text("repeat_failure:\n  enabled: true\n"
                      + ("" if match_output else "  match_output: false\n"))
    clock = (lambda: now[0]) if isinstance(now, list) else (lambda: now)
    sc = Sidecar(tmp_path / "shared", [AgentSpec("a1", backend, str(home) if home else None)],
                 config, clock=clock, monotonic=itertools.count(0, 10).__next__)
    sc.registry.register(MetricsCollector(sc))
    return sc


def shown(sc: Sidecar, backend: str) -> tuple[str, str, list[str]]:
    """(the /status note's output, its message, the note series)."""
    (row,) = json.loads(status_json(sc))["rows"]
    (note,) = row["notes"]
    series = [line for line in generate_latest(sc.registry).decode().splitlines()
              if line.startswith("hive_repeat_failure_note{")]
    return note["output"], note["message"], series


def series_line(backend: str, output: str) -> str:
    return (f'hive_repeat_failure_note{{agent="a1",backend="{backend}",command="{LS}",exit="2",'
            f'output="{output}"}} 5.0')


def raised_outputs(log_stream) -> list[str]:
    return [json.loads(line)["output"] for line in log_stream.getvalue().splitlines()
            if '"note_raised"' in line]


def claude_run() -> list[dict]:
    (run,) = [r for r in evidence("claude")["runs"] if r["repeat"] == 5]
    assert [r["normalized"] for r in run["records"] if r["normalized"]] == [LS] * 5
    return run["records"]


def notes_of(sc: Sidecar) -> list:
    (row,) = json.loads(status_json(sc))["rows"]
    return row["notes"]


@pytest.mark.parametrize("session_first", [True, False])
def test_hook_records_get_the_session_logs_output(tmp_path: Path, log_stream,
                                                  session_first: bool) -> None:
    """Claude Code: the hook's five records and the session log's results of the same calls,
    whichever is read first, raise one note, `same`. Records first: they await their outputs
    (no note yet), and the note is raised when the log is read, once, already `same` (issue
    26: never an `unknown` note first)."""
    records = claude_run()
    home = tmp_path / "home"
    session_copy("claude", home)
    sc = sidecar(tmp_path, "claude", home, max(r["ts"] for r in records) + 1)
    write_records(sc.shared_dir, records, "claude")
    if session_first:
        sc.poll_sessions(rescan=True)
        sc.run_once(sessions=False)
    else:
        sc.run_once(sessions=False)
        assert notes_of(sc) == [] and sc.agents["a1"].detector.awaited_count == 5
        sc.poll_sessions(rescan=True)
    assert shown(sc, "claude") == ("same", MESSAGE, [series_line("claude", "same")])
    assert raised_outputs(log_stream) == ["same"]
    assert sc.agents["a1"].detector.awaited_count == 0
    # The CLI's own helper commands (its environment, its shell snapshot) are empty once
    # normalized: not counted.
    assert dict(sc.agents["a1"].records) == {("claude", "bash_env", "excluded"): 2,
                                             ("claude", "bash_env", "failure"): 5}


@pytest.mark.parametrize("session_first", [True, False])
def test_a_changing_output_is_iteration_not_a_loop(tmp_path: Path, log_stream,
                                                   session_first: bool) -> None:
    """One of the five outputs changed: four and one of two results, under the threshold of
    five, so no note (issue 26); with `match_output: false` a `changing` note, as before."""
    records = claude_run()
    for match_output in (True, False):
        home = tmp_path / f"home-{match_output}"
        session_copy("claude", home, change_third=True)
        sc = sidecar(tmp_path / str(match_output), "claude", home,
                     max(r["ts"] for r in records) + 1, match_output=match_output)
        write_records(sc.shared_dir, records, "claude")
        steps = [lambda: sc.poll_sessions(rescan=True), lambda: sc.run_once(sessions=False)]
        for step in steps if session_first else steps[::-1]:
            step()
        if match_output:
            assert notes_of(sc) == []
            assert sc.agents["a1"].detector.failures(sc.clock(), 5) == [(LS, 2, 5)]
        else:
            assert shown(sc, "claude") == ("changing", MESSAGE,
                                           [series_line("claude", "changing")])
    assert raised_outputs(log_stream) == ["changing" if session_first else "unknown"]


def test_records_whose_output_never_comes_count_after_the_wait(tmp_path: Path,
                                                               log_stream) -> None:
    """The home is read but its log never shows the calls: the records wait 15 s
    (OUTPUT_WAIT_S) for an output, then count with it unknown, and the note comes then."""
    records = claude_run()
    home = tmp_path / "home"
    home.mkdir()
    last = max(r["ts"] for r in records)
    clock = [last + 1]
    sc = sidecar(tmp_path, "claude", home, clock)
    write_records(sc.shared_dir, records, "claude")
    sc.run_once()
    assert notes_of(sc) == []
    clock[0] = last + 1 + 14.9
    sc.expire()
    assert notes_of(sc) == []
    clock[0] = last + 1 + 15.0
    sc.expire()
    assert shown(sc, "claude") == ("unknown", MESSAGE, [series_line("claude", "unknown")])
    assert raised_outputs(log_stream) == ["unknown"]


def test_hook_only_output_is_unknown(tmp_path: Path, log_stream) -> None:
    """No home (the session log is not read): the neutral route gives no output."""
    records = claude_run()
    sc = sidecar(tmp_path, "claude", None, max(r["ts"] for r in records) + 1)
    write_records(sc.shared_dir, records, "claude")
    sc.run_once()
    assert shown(sc, "claude") == ("unknown", MESSAGE, [series_line("claude", "unknown")])
    assert raised_outputs(log_stream) == ["unknown"]


def omp_now() -> float:
    return max(r["ts"] for r in evidence("omp")["runs"][-1]["session_records"]) + 1


@pytest.mark.parametrize("changed", [False, True])
def test_session_route_output(tmp_path: Path, log_stream, changed: bool) -> None:
    """omp: its session log is the route; the real run's five failures had the same output
    (a `same` note); one changed on purpose: no note (issue 26), a `changing` one by exit
    alone."""
    home = tmp_path / "home"
    session_copy("omp", home, change_third=changed)
    sc = sidecar(tmp_path, "omp", home, omp_now())
    sc.run_once()
    if changed:
        assert notes_of(sc) == []
        by_exit = sidecar(tmp_path / "exit", "omp", home, omp_now(), match_output=False)
        by_exit.run_once()
        assert shown(by_exit, "omp") == ("changing", MESSAGE, [series_line("omp", "changing")])
        assert raised_outputs(log_stream) == ["changing"]
    else:
        assert shown(sc, "omp") == ("same", MESSAGE, [series_line("omp", "same")])
        assert raised_outputs(log_stream) == ["same"]


def test_dedup_keeps_the_session_records_output(tmp_path: Path, log_stream) -> None:
    """Both routes see omp's five calls (neutral records of the same calls, 50 ms before the
    log's): the neutral ones are counted first and await their outputs (no note yet), the
    session ones are duplicates, and their outputs attach to the counted failures: the note
    is raised then, once, `same`."""
    home = tmp_path / "home"
    session_copy("omp", home)
    calls = evidence("omp")["runs"][-1]["session_records"]
    assert [(c["command"], c["exit"]) for c in calls] == [(LS, 2)] * 5
    sc = sidecar(tmp_path, "omp", home, omp_now())
    write_records(sc.shared_dir, [{"ts": c["ts"] - 0.05, "exit": 2, "raw": LS} for c in calls],
                  "omp")
    sc.run_once(sessions=False)
    assert notes_of(sc) == []
    sc.poll_sessions(rescan=True)
    assert shown(sc, "omp") == ("same", MESSAGE, [series_line("omp", "same")])
    assert dict(sc.agents["a1"].records) == {("omp", "bash_env", "failure"): 5,
                                             ("omp", "omp_session_log", "duplicate"): 5}
    assert raised_outputs(log_stream) == ["same"]


@pytest.mark.parametrize("changed", [False, True])
def test_a_restart_while_failures_await_their_output(tmp_path: Path, log_stream,
                                                     changed: bool) -> None:
    """The sidecar restarts while the hook's five records await their outputs, and the
    session log's lines come after the restart: the records await them again and count with
    them. Same outputs: the `same` note, once. Changed outputs (test-fix-retest): no note,
    neither when the wait is over nor at a config reload (before, a restart saved them as five
    failures of output unknown, and the next reload raised an `unknown` note for them)."""
    records = claude_run()
    home = tmp_path / "home"
    home.mkdir()
    now = max(r["ts"] for r in records) + 1
    sc = sidecar(tmp_path, "claude", home, now)
    write_records(sc.shared_dir, records, "claude")
    sc.run_once(sessions=False)
    assert notes_of(sc) == [] and sc.agents["a1"].detector.awaited_count == 5
    clock = [now + 2]
    again = sidecar(tmp_path, "claude", home, clock)  # the restart: the same shared dir
    assert again.agents["a1"].detector.awaited_count == 5 and notes_of(again) == []
    session_copy("claude", home, change_third=changed)  # the CLI writes its lines now
    again.poll_sessions(rescan=True)
    again.run_once(sessions=False)
    assert again.agents["a1"].detector.awaited_count == 0
    clock[0] = now + 30
    again.expire()
    again.config_path.write_text("repeat_failure:\n  enabled: true\n  collect_interval_s: 3\n")
    again.reload_config(force=True)
    if changed:
        assert notes_of(again) == [] and raised_outputs(log_stream) == []
    else:
        assert shown(again, "claude") == ("same", MESSAGE, [series_line("claude", "same")])
        assert raised_outputs(log_stream) == ["same"]
