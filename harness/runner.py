"""Run one backend's real CLI against the stub provider with the neutral route installed.

For each scenario (a command and how many times the stub asks for it), in a fresh HOME and work
directory: render the hook (``repeat_failure.sidecar.hook.render``) into a temporary shared dir,
start the stub, run the CLI non-interactively with the launch environment the product documents,
then read the records the route wrote. Evidence (``harness/evidence/<backend>.json``) keeps the
CLI's own ``--version`` output, every record (scrubbed raw command and its normalized form), the
session files the CLI wrote (copied, scrubbed, under ``harness/evidence/<backend>/``), and the note
the sidecar pipeline raised on the repeated failure. Hand-written data never enters it.

Then the session scenarios (:data:`harness.run.SESSION_SCENARIOS`, for the session-log readers of
the "not receiving data" safeguard): a file-tool call, and a shell call still running (alone, or
after a finished failing call) when the harness snapshots the session files. Their evidence is kept
apart from the shell runs: ``"scenarios"`` (what ran) and ``"scenario_sessions"`` (the files
copied, under ``harness/evidence/<backend>/<scenario>/``).

Then the turn-verdict scenarios (:data:`harness.run.VERDICT_SCENARIOS`, issue 8: how a turn that
ended well, got an empty reply, got an API error, or was killed shows in the session log and
transcript), side by side, each in a fresh HOME and work dir: ``"ok"`` (one shell call, then the
closing text), ``"empty"`` (the model's reply has no text and no tool call: the stub's ``"empty"``
reply), ``"error"`` (every model request answered with the provider's HTTP 400 error: the stub's
``"error"`` reply) and ``"killed"`` (SIGTERM to the CLI's process group while its shell call runs).
Evidence: ``"verdict_scenarios"`` in the JSON, and the session files copied after the CLI exits
under ``harness/evidence/<backend>/verdict/<scenario>/``. A backend with a ``transcript_argv`` (a
stream-JSON invocation) runs them with it; its stdout is kept, scrubbed, as ``transcript.jsonl``
beside the session files, and its stderr is the output tail.

The work is split by concern: :mod:`harness.install` (the pinned Node and CLI releases, the cache,
:class:`~harness.install.Backend`), :mod:`harness.run` (driving the CLI against the stub: the
scenarios, snapshots and kills) and :mod:`harness.capture` (session copies, records, the pipeline's
note); this module runs them in order and writes the evidence.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from harness.capture import _copy_sessions
from harness.install import Backend, HarnessError, install
from harness.run import (SCENARIOS, SESSION_SCENARIOS, _base_env, _run_scenario,
                         _run_session_scenario, _summary, run_verdicts)

__all__ = ["HarnessError", "run_backend"]


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
