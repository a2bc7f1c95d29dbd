"""Drive one backend's CLI against the stub provider: the scenarios, their snapshots and kills.

Each scenario runs in a fresh HOME, work directory (a git repository) and shared dir with the
rendered hook (:func:`_workspace`), with its own :class:`harness.stub.StubServer` and the launch
environment the product documents (:func:`_env`): the shell runs (:data:`SCENARIOS`,
:func:`_run_scenario`), the session scenarios (:data:`SESSION_SCENARIOS`,
:func:`_run_session_scenario`, snapshotted while a command runs) and the turn-verdict scenarios
(:data:`VERDICT_SCENARIOS`, :func:`run_verdicts`, a killed one signalled by
:func:`_kill_when_running`). What each leaves behind is captured by :mod:`harness.capture`;
:func:`harness.runner.run_backend` runs them all and writes the evidence.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, NamedTuple

from harness.capture import (AGENT, _copy_sessions, _mentions_command, _pipeline_note, _records,
                             _session_records, scrub_json)
from harness.install import Backend, node_runtime
from harness.stub import Script, Step, StubServer
from repeat_failure.sidecar import hook
from repeat_failure.rules.scrub import scrub

PROMPT = "Run the shell command the tool call asks for."
#: (command, times the stub asks for it): C-AC1's failing commands, a success, and the repeat
#: that must raise a note in the sidecar pipeline.
SCENARIOS = (("ls /nonexistent", 1), ("false", 1), ("echo harness-ok", 1), ("ls /nonexistent", 5))
#: The file the "read" scenario's file-tool call reads (created in the work dir): name, content.
NOTES = ("notes.txt", "harness notes: the file tool read this line\n")
#: The file the running command creates first; the snapshot is taken once it exists.
MARKER = ".harness-running"
#: How long after the marker appears the session files are snapshotted (the CLI's time to log
#: the call it is running); the command keeps running well past it.
SNAPSHOT_DELAY_S = 1.5
RUNNING_COMMAND = "touch {marker} && sleep 8"
#: The session scenarios: name -> the steps the stub asks for, in order, as ``(kind, argument)``
#: (:class:`harness.stub.Step`); ``{notes}`` and ``{marker}`` stand for the absolute paths of the
#: NOTES and MARKER files in the work dir. A scenario whose command makes the marker is
#: snapshotted while that command runs; the others are copied after the CLI exits.
SESSION_SCENARIOS = {
    "read": (("file", "{notes}"),),
    "running": (("shell", RUNNING_COMMAND),),
    "midturn": (("shell", "ls /nonexistent"), ("shell", RUNNING_COMMAND)),
}
FILE_PROMPT = "Read the file the tool call asks for."


class Verdict(NamedTuple):
    """A turn-verdict scenario: the ``steps`` the stub asks for (as in SESSION_SCENARIOS), its
    ``reply`` mode (:data:`harness.stub.REPLIES`), and whether the harness sends SIGTERM to the
    CLI's process group SNAPSHOT_DELAY_S after the MARKER appears (``kill``)."""

    steps: tuple[tuple[str, str], ...]
    reply: str = "text"
    kill: bool = False


#: The turn-verdict scenarios (issue 8): a turn that ends well, one whose model reply is empty,
#: one whose every model request gets an API error, and one whose CLI is killed mid-command.
VERDICT_SCENARIOS = {
    "ok": Verdict((("shell", "echo harness-ok"),)),
    "empty": Verdict((), reply="empty"),
    "error": Verdict((), reply="error"),
    "killed": Verdict((("shell", RUNNING_COMMAND),), kill=True),
}
#: How long a killed CLI gets to exit after SIGTERM before its process group gets SIGKILL.
KILL_GRACE_S = 20.0
#: Environment every CLI run gets: no telemetry, no update checks, no colour.
QUIET_ENV = {
    "DO_NOT_TRACK": "1", "DISABLE_TELEMETRY": "1", "NO_UPDATE_NOTIFIER": "1",
    "NPM_CONFIG_UPDATE_NOTIFIER": "false", "NO_COLOR": "1", "CI": "1", "TERM": "dumb",
}


def _base_env(binary: Path, home: Path, node_version: str = "") -> dict[str, str]:
    """A CLI's base environment: its own bin directory and the pinned Node first on PATH (an npm
    CLI's ``#!/usr/bin/env node`` finds that one, never the machine's), then the system's."""
    paths = [str(binary.parent), str(node_runtime(version=node_version))] + [
        "/usr/local/bin", "/usr/bin", "/bin"]
    return {"PATH": ":".join(dict.fromkeys(paths)), "HOME": str(home), "LANG": "C.UTF-8",
            "USER": "root", **QUIET_ENV}


def run_verdicts(backend: Backend, binary: Path, root: Path, dest: Path,
                 progress: Callable[[str], None] = lambda s: None) -> dict[str, dict]:
    """Run every turn-verdict scenario for ``backend`` side by side (each under
    ``root/<name>``), copying its session files (and transcript) to ``dest/<name>``; returns
    the ``"verdict_scenarios"`` evidence, ``{name: evidence}``. A backend without session files
    gets ``{"skipped": ...}`` for each."""
    if not backend.session_globs:
        return {name: {"skipped": f"{backend.name} keeps no session log"}
                for name in VERDICT_SCENARIOS}
    with ThreadPoolExecutor(len(VERDICT_SCENARIOS)) as pool:
        futures = {name: pool.submit(_run_verdict_scenario, backend, binary, root / name,
                                     scenario, dest / name)
                   for name, scenario in VERDICT_SCENARIOS.items()}
    out = {}
    for name, future in futures.items():
        out[name] = future.result()
        progress(f"{backend.name}: verdict scenario {name!r}: {_verdict_summary(out[name])}")
    return out


def _verdict_summary(run: dict) -> str:
    """One line on a verdict scenario's evidence, for the progress display."""
    if "skipped" in run:
        return f"skipped ({run['skipped']})"
    posts = sum(1 for p in run["stub_requests"] if p.startswith("POST "))
    text = (f"exit {run['cli_exit']}" + (f" (signal {run['cli_signal']})" if run["cli_signal"]
                                         else "")
            + f" after {run['seconds']} s, {posts} model request(s), "
            f"{len(run['session_files'])} session file(s)")
    if "transcript" in run:
        text += f", transcript {run['transcript']['lines']} line(s)"
    if "kill" in run:
        text += f"; kill: {run['kill']}"
    return text


def _exit_status(code: int | None) -> tuple[int | None, int | None]:
    """A Popen return code as a shell reports it, and the signal that ended the process:
    ``-N`` (killed by signal N) is ``(128 + N, N)``; ``None`` (still running) is ``(None,
    None)``."""
    if code is not None and code < 0:
        return 128 - code, -code
    return code, None


def _run_verdict_scenario(backend: Backend, binary: Path, root: Path, scenario: Verdict,
                          dest: Path) -> dict:
    """Run one turn-verdict scenario and copy the CLI's session files (after it exits) to
    ``dest``; returns its evidence.

    The CLI runs in its own session (``start_new_session``: its own process group, which a
    killed scenario signals). Evidence: ``"steps"``, ``"reply"``, the ``"tool_calls"`` the stub
    asked for, ``"cli_exit"`` (the exit status in the shell's convention: a CLI ended by signal N
    is ``128 + N``, and then ``"cli_signal"`` is N, else null; null exit: it did not end within
    the backend's timeout, ``"timed_out"``), ``"seconds"``, ``"stub_requests"`` (every request's
    method and path, in order), the hook's ``"records"``, ``"cli_output_tail"`` (the scrubbed
    end of its output: stderr only when stdout is the transcript), ``"session_files"`` (paths
    under HOME, copied under ``dest``) and, with a ``transcript_argv``, ``"transcript"``
    (``{"file": "transcript.jsonl", "lines", "last_line"}``, scrubbed). A killed scenario's
    ``"kill"`` says when SIGTERM was sent (``"sigterm_at_s"``, seconds after the start; the CLI
    was still running), how long the CLI took to exit after it (``"exited_after_s"``) and
    whether SIGKILL was needed after KILL_GRACE_S (``"sigkill_sent"``); ``{"skipped": ...}``
    there when the marker never appeared or the CLI had already exited."""
    home, work, shared = _workspace(backend, root)
    marker = work / MARKER
    script = Script(tuple(Step(kind, arg.format(marker=marker)) for kind, arg in scenario.steps),
                    scenario.reply)
    transcript = backend.transcript_argv is not None
    argv = (backend.transcript_argv or backend.argv)(str(binary), PROMPT)
    run: dict[str, Any] = {"steps": [{"kind": s.kind, "arg": s.arg} for s in script.steps],
                           "reply": scenario.reply, "argv_tail": argv[1:]}
    stdout_path, stderr_path = root / "cli-stdout.txt", root / "cli-stderr.txt"
    with StubServer(script) as stub, open(stdout_path, "wb") as out, \
            open(stderr_path, "wb") as err:
        started = time.time()
        deadline = started + backend.timeout_s
        proc = subprocess.Popen(argv, cwd=work, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err if transcript else subprocess.STDOUT,
                                env=_env(backend, binary, home, work, shared, stub.url),
                                start_new_session=True)
        if scenario.kill:
            run["kill"] = _kill_when_running(proc, marker, started, deadline)
        try:
            code: int | None = proc.wait(timeout=max(1.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # not reaped yet: the group is still ours
            proc.wait()
            code = None
            run["timed_out"] = True
        seconds = round(time.time() - started, 1)
        requests, calls = stub.requests, stub.calls
    cli_exit, cli_signal = _exit_status(code)
    tail = (stderr_path if transcript else stdout_path).read_bytes()[-1500:]
    run.update({
        "tool_calls": [{"name": c["name"], "input": c["input"]} for c in calls],
        "cli_exit": cli_exit, "cli_signal": cli_signal, "seconds": seconds,
        "stub_requests": [r["path"] for r in requests],
        "records": _records(hook.records_path(shared, AGENT)),
        "cli_output_tail": scrub(tail.decode("utf-8", "replace").strip()),
        "session_files": _copy_sessions(backend, home, dest),
    })
    if transcript:
        text = scrub_json(stdout_path.read_bytes().decode("utf-8", "replace"))
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "transcript.jsonl").write_text(text)
        lines = text.splitlines()
        run["transcript"] = {"file": "transcript.jsonl", "lines": len(lines),
                             "last_line": lines[-1] if lines else None}
    return run


def _kill_when_running(proc: subprocess.Popen, marker: Path, started: float,
                       deadline: float) -> dict[str, Any]:
    """Wait for ``marker`` (the shell call is running), then SNAPSHOT_DELAY_S more, then send
    SIGTERM to ``proc``'s process group; SIGKILL to it when the CLI has not exited KILL_GRACE_S
    later. Returns what happened (the ``"kill"`` evidence). The group is only signalled while
    ``proc`` is not reaped, so its id cannot have been reused."""
    while proc.poll() is None and not marker.exists() and time.time() < deadline:
        time.sleep(0.1)
    if not marker.exists():
        return {"skipped": "the marker never appeared: the CLI did not run the command"}
    time.sleep(SNAPSHOT_DELAY_S)
    if proc.poll() is not None:
        return {"skipped": f"the CLI had exited {SNAPSHOT_DELAY_S} s after the marker appeared"}
    sent = time.time()
    os.killpg(proc.pid, signal.SIGTERM)
    kill: dict[str, Any] = {"sigterm_at_s": round(sent - started, 1), "sigkill_sent": False}
    try:
        proc.wait(timeout=KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        kill["sigkill_sent"] = True
        proc.wait()
    kill["exited_after_s"] = round(time.time() - sent, 1)
    return kill


def _summary(run: dict) -> str:
    """One line on a session scenario's evidence, for the progress display."""
    if "skipped" in run:
        return f"skipped ({run['skipped']})"
    tools = ", ".join(dict.fromkeys(c["name"] for c in run["tool_calls"])) or "no tool call"
    snapshot = run.get("snapshot")
    if snapshot is None:
        return (f"{tools}; file content returned to the model: {run['file_in_requests']}; "
                f"file changed: {run['file_after'] != NOTES[1]}")
    if "skipped" in snapshot:
        return f"{tools}; no snapshot ({snapshot['skipped']})"
    return (f"{tools}; snapshot at {snapshot['seconds']} s: running call logged: "
            f"{snapshot['running_command_logged']}, CLI still running: {snapshot['cli_running']}")


def _workspace(backend: Backend, root: Path) -> tuple[Path, Path, Path]:
    """A fresh HOME, work directory (a git repository) and shared dir with the rendered hook,
    under ``root``."""
    home, work, shared = root / "home", root / "work", root / "shared"
    for d in (home, work):
        d.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(work)], check=False)
    hook.render(shared, AGENT, backend.name)
    return home, work, shared


def _env(backend: Backend, binary: Path, home: Path, work: Path, shared: Path,
         url: str) -> dict[str, str]:
    """The CLI's environment: the base, the backend's own settings, the launch environment."""
    return {**_base_env(binary, home, backend.node_version), **backend.prepare(home, work, url),
            **hook.launch_env(shared, AGENT, {})}


def _run_scenario(backend: Backend, binary: Path, root: Path, command: str, repeat: int) -> dict:
    home, work, shared = _workspace(backend, root)
    with StubServer(Script.shell(*[command] * repeat)) as stub:
        env = _env(backend, binary, home, work, shared, stub.url)
        started = time.time()
        # The pseudo-backend `bash` is "a program that runs each command with bash -c": its
        # invocation is the command itself, run `repeat` times; every other CLI gets the prompt.
        invocations = ([backend.argv(str(binary), command)] * repeat if backend.direct
                       else [backend.argv(str(binary), PROMPT)])
        out = err = ""
        exit_code: int | None = None
        for argv in invocations:
            try:
                done = subprocess.run(argv, cwd=work, env=env, stdin=subprocess.DEVNULL,
                                      capture_output=True, text=True, timeout=backend.timeout_s)
                exit_code, out, err = done.returncode, out + done.stdout, err + done.stderr
            except subprocess.TimeoutExpired as exc:
                exit_code, out, err = None, str(exc.stdout or ""), str(exc.stderr or "")
        requests = stub.requests
    records = _records(hook.records_path(shared, AGENT))
    run: dict[str, Any] = {
        "command": command, "repeat": repeat, "cli_exit": exit_code,
        "seconds": round(time.time() - started, 1),
        "stub_requests": [r["path"] for r in requests],
        "records": records,
        "cli_output_tail": scrub((out + "\n" + err).strip()[-1500:]),
    }
    session_records = _session_records(backend.name, home)
    if session_records is not None:
        run["session_records"] = session_records
    if repeat > 1:
        run["note"] = _pipeline_note(shared, backend.name, home)
    return run


def _run_session_scenario(backend: Backend, binary: Path, root: Path,
                          steps: tuple[tuple[str, str], ...], dest: Path) -> tuple[dict, list[str]]:
    """Run one session scenario and copy the CLI's session files to ``dest``; returns its
    evidence and the files copied (paths under HOME, none when the scenario could not run).

    A scenario whose command makes the MARKER file is snapshotted SNAPSHOT_DELAY_S after the
    marker appears, while that command still runs; its evidence's ``"snapshot"`` says when
    (``"seconds"`` after the CLI started), whether the CLI was still running (the turn open) and
    whether the copies mention the running command (``"running_command_logged"``: false means the
    CLI had not logged the call it was running, said in a ``"finding"``).
    A file-tool scenario is copied after the CLI exits; its evidence says whether the file's
    content came back to the stub (``"file_in_requests"``: the tool result reached the model) and
    what the file holds afterwards, or ``"skipped"`` when the CLI offered no file tool."""
    home, work, shared = _workspace(backend, root)
    notes, marker = work / NOTES[0], work / MARKER
    notes.write_text(NOTES[1])
    script = Script(tuple(Step(kind, arg.format(notes=notes, marker=marker))
                          for kind, arg in steps))
    reads = any(step.kind == "file" for step in script.steps)
    argv = backend.argv(str(binary), FILE_PROMPT if reads else PROMPT)
    if reads:
        argv += backend.file_tool_args
    watch = any("{marker}" in arg for _, arg in steps)
    run: dict[str, Any] = {"steps": [{"kind": s.kind, "arg": s.arg} for s in script.steps]}
    files: list[str] = []
    output = root / "cli-output.txt"
    with StubServer(script) as stub, open(output, "w+", encoding="utf-8", errors="replace") as out:
        started = time.time()
        proc = subprocess.Popen(argv, cwd=work, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT,
                                env=_env(backend, binary, home, work, shared, stub.url))
        if watch:
            while proc.poll() is None and not marker.exists() \
                    and time.time() < started + backend.timeout_s:
                time.sleep(0.1)
            if marker.exists():
                time.sleep(SNAPSHOT_DELAY_S)
                running = proc.poll() is None
                files = _copy_sessions(backend, home, dest)
                logged = _mentions_command(dest, marker)
                run["snapshot"] = {"seconds": round(time.time() - started, 1),
                                   "cli_running": running, "running_command_logged": logged}
                if not logged:
                    run["snapshot"]["finding"] = (
                        f"{SNAPSHOT_DELAY_S} s after the command started, the session files "
                        "did not mention it: a session-log reader cannot see this CLI's command "
                        "while it runs")
            else:
                run["snapshot"] = {"skipped": "the marker never appeared: the CLI did not run "
                                              "the command"}
        try:
            exit_code: int | None = proc.wait(timeout=max(1.0, started + backend.timeout_s
                                                          - time.time()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            exit_code = None
        requests, calls, offered = stub.requests, stub.calls, stub.offered
        out.seek(0)
        tail = out.read()[-1500:]
    run.update({
        "tool_calls": [{"name": c["name"], "input": c["input"]} for c in calls],
        "cli_exit": exit_code, "seconds": round(time.time() - started, 1),
        "stub_requests": [r["path"] for r in requests],
        "records": _records(hook.records_path(shared, AGENT)),
        "cli_output_tail": scrub(tail.strip()),
    })
    if reads and not calls:
        run["skipped"] = (f"{backend.name} offered no file tool the stub knows; tools offered: "
                          f"{', '.join(sorted(offered)) or '(none)'}")
    elif reads:
        run["file_in_requests"] = any(NOTES[1].strip() in json.dumps(r["body"])
                                      for r in requests if r["t"] > calls[0]["t"])
        run["file_after"] = notes.read_text()
        files = _copy_sessions(backend, home, dest)
    return run, files
