"""Run one backend's real CLI against the stub provider with the neutral route installed.

For each scenario (a command and how many times the stub asks for it), in a fresh HOME and work
directory: render the hook (``sidecar.hook.render``) into a temporary shared dir, start the stub,
run the CLI non-interactively with the launch environment the product documents, then read the
records the route wrote. Evidence (``harness/evidence/<backend>.json``) keeps the CLI's own
``--version`` output, every record (scrubbed raw command and its normalized form), the session
files the CLI wrote (copied, scrubbed, under ``harness/evidence/<backend>/``), and the note the
sidecar pipeline raised on the repeated failure. Hand-written data never enters it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from harness.stub import Script, StubServer
from sidecar import hook
from sidecar.app import Sidecar
from sidecar.config import AgentSpec
from sidecar.normalize import normalize
from sidecar.scrub import scrub

REPO = Path(__file__).resolve().parent.parent
EVIDENCE_DIR = REPO / "harness" / "evidence"
CACHE = Path(os.environ.get("REPEAT_FAILURE_HARNESS_CACHE",
                            Path.home() / ".cache" / "repeat-failure-harness"))
AGENT = "harness"
PROMPT = "Run the shell command the tool call asks for."
#: (command, times the stub asks for it): C-AC1's failing commands, a success, and the repeat
#: that must raise a note in the sidecar pipeline.
SCENARIOS = (("ls /nonexistent", 1), ("false", 1), ("echo harness-ok", 1), ("ls /nonexistent", 5))
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


def install(backend: Backend, progress: Callable[[str], None] = lambda s: None) -> Path:
    """Install the pinned package into the cache (once) and return the CLI's executable;
    ``progress`` hears about an install actually happening (a cache hit is silent)."""
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
            done = subprocess.run(
                ["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
                 "--loglevel=error", f"{backend.package}@{backend.version}",
                 *backend.extra_packages],
                capture_output=True, text=True, timeout=900)
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


def _base_env(binary: Path, home: Path) -> dict[str, str]:
    node_bin = shutil.which("node")
    paths = [str(binary.parent)] + ([str(Path(node_bin).parent)] if node_bin else []) + \
        ["/usr/local/bin", "/usr/bin", "/bin"]
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
                    "exit": rec["exit"], "cut": rec.get("cut", False)})
    return out


def _sqlite_rows(path: Path) -> str:
    """Every row of every table of the SQLite database at ``path`` (with its WAL), one JSON
    object per line: the session store of CLIs such as opencode, in a form a test can read."""
    import sqlite3

    with tempfile.TemporaryDirectory() as tmp:
        # Copy the database and its WAL so reading (which may checkpoint) never touches the
        # CLI's own files.
        for suffix in ("", "-wal", "-shm"):
            src = Path(f"{path}{suffix}")
            if src.exists():
                shutil.copy(src, Path(tmp) / f"db{suffix}")
        conn = sqlite3.connect(Path(tmp) / "db")
        try:
            lines = []
            tables = [r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
            for table in tables:
                cursor = conn.execute(f'SELECT * FROM "{table}"')
                names = [d[0] for d in cursor.description]
                for row in cursor:
                    values = {n: (v.decode("utf-8", "replace") if isinstance(v, bytes) else v)
                              for n, v in zip(names, row)}
                    lines.append(json.dumps({"table": table, "row": values}, default=str))
            return "\n".join(lines) + "\n"
        finally:
            conn.close()


def _copy_sessions(backend: Backend, home: Path, dest: Path) -> list[str]:
    """Copy the session files the CLI wrote under ``home`` to ``dest``, scrubbed. Text files
    are copied as text; a SQLite database becomes ``<name>.jsonl`` (one JSON line per row)."""
    found = []
    if dest.exists():
        shutil.rmtree(dest)
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
                text = _sqlite_rows(path)
                target = target.with_name(target.name + ".jsonl")
            else:
                text = path.read_text(encoding="utf-8", errors="replace")
            target.write_text(scrub(text))
    return found


def run_backend(backend: Backend, progress: Callable[[str], None] = lambda s: None) -> dict:
    """Run every scenario for ``backend`` and write its evidence file; returns the evidence.

    Raises :class:`HarnessError` when the CLI cannot be installed or run."""
    binary = install(backend, progress)
    evidence: dict[str, Any] = {
        "backend": backend.name, "package": backend.package, "version": backend.version,
        "ran_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "runs": [],
    }
    with tempfile.TemporaryDirectory(prefix=f"harness-{backend.name}-") as tmp:
        root = Path(tmp)
        home = root / "home"
        home.mkdir()
        version = subprocess.run([str(binary), *backend.version_args], capture_output=True,
                                 text=True, timeout=120, env=_base_env(binary, home))
        evidence["version_output"] = (version.stdout + version.stderr).strip()
        first_line = evidence["version_output"].splitlines()[:1] or ["?"]
        progress(f"{backend.name}: {first_line[0]}")
        for i, (command, repeat) in enumerate(SCENARIOS):
            progress(f"{backend.name}: run {i + 1}/{len(SCENARIOS)}: {command!r} x{repeat}")
            evidence["runs"].append(_run_scenario(backend, binary, root / f"run{i}", command,
                                                  repeat))
        last = root / f"run{len(SCENARIOS) - 1}"
        evidence["session_files"] = _copy_sessions(backend, last / "home",
                                                   EVIDENCE_DIR / backend.name)
    EVIDENCE_DIR.mkdir(parents=True, exist_ok=True)
    (EVIDENCE_DIR / f"{backend.name}.json").write_text(json.dumps(evidence, indent=2) + "\n")
    return evidence


def _run_scenario(backend: Backend, binary: Path, root: Path, command: str, repeat: int) -> dict:
    home, work, shared = root / "home", root / "work", root / "shared"
    for d in (home, work):
        d.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(work)], check=False)
    hook.render(shared, AGENT, backend.name)
    with StubServer(Script(command, repeat)) as stub:
        env = {**_base_env(binary, home), **backend.prepare(home, work, stub.url),
               **hook.launch_env(shared, AGENT, {})}
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
    if repeat > 1:
        run["note"] = _pipeline_note(shared, backend.name, records)
    return run


def _pipeline_note(shared: Path, backend: str, records: list[dict]) -> str:
    """Feed the run's raw record file through the real sidecar pipeline; the row message."""
    config = shared.parent / "config.yaml"
    config.write_text("repeat_failure:\n  enabled: true\n  collect_grace_s: 0.5\n")
    # The records were read for the evidence but not collected: collect them now.
    sidecar = Sidecar(shared, [AgentSpec(AGENT, backend)], config)
    sidecar.run_once()
    rows = sidecar.rows()
    return rows[0].message if rows else ""
