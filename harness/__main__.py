"""``python -m harness run [--backend NAME ...] [--covered]``: re-create the evidence files.

Installs each pinned CLI once into the cache (``~/.cache/repeat-failure-harness``, or
``$REPEAT_FAILURE_HARNESS_CACHE``), runs it against the stub provider and writes
``harness/evidence/<backend>.json``. Exit 0 when every backend asked for produced records of the
failing commands, 1 otherwise (the reason is printed per backend).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

from harness.backends import BACKENDS
from harness.runner import HarnessError, run_backend


def _failing_recorded(evidence: dict) -> bool:
    """C-AC1: the first run's command appears in a record with a failure result."""
    first = evidence["runs"][0]
    return any(r["normalized"] == first["command"] and r["exit"] not in (0, None)
               for r in first["records"])


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m harness", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the real CLIs and write the evidence files")
    run.add_argument("--backend", action="append", choices=sorted(BACKENDS),
                     help="only this backend (repeatable); default: all")
    run.add_argument("--covered", action="store_true",
                     help="only the backends the coverage table marks covered (what CI re-runs)")
    args = parser.parse_args(argv)
    # The pipeline's own note log lines would interleave with the progress display.
    logging.getLogger("repeat_failure").addHandler(logging.NullHandler())
    logging.getLogger("repeat_failure").propagate = False
    names = args.backend or list(BACKENDS)
    if args.covered:
        from sidecar.coverage import COVERAGE

        names = [n for n in names if COVERAGE[n].covered]
    failed = 0
    for index, name in enumerate(names, 1):
        started = time.monotonic()

        def progress(text: str) -> None:
            print(f"[{index}/{len(names)} {time.monotonic() - started:5.1f}s] {text}", flush=True)

        # A real CLI on a loaded 2-core machine can time out once; a second miss is a finding.
        for attempt in (1, 2):
            try:
                evidence = run_backend(BACKENDS[name], progress)
            except HarnessError as exc:
                print(f"{name}: BLOCKED: {exc}", file=sys.stderr)
                evidence = None
                break
            ok = _failing_recorded(evidence)
            if ok or attempt == 2:
                break
            progress(f"{name}: no record of the failing command; trying once more")
        if evidence is None:
            failed += 1
            continue
        note = evidence["runs"][-1].get("note", "")
        print(f"{name}: {'recorded' if ok else 'NO RECORD of the failing command'}; "
              f"{evidence['version_output'].splitlines()[0] if evidence['version_output'] else '?'}"
              f"; note: {note or '(none)'}", flush=True)
        failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
