"""``python -m harness run [--backend NAME ...] [--covered] [--update]``: run the pinned CLIs.

Installs each pinned CLI once into the cache (``~/.cache/repeat-failure-harness``, or
``$REPEAT_FAILURE_HARNESS_CACHE``; npm CLIs on the pinned Node), runs it against the stub provider
and writes its evidence (``<backend>.json`` and the session-file copies beside it). Without
``--update`` the evidence goes to the fresh directory outside the checkout
(``$REPEAT_FAILURE_EVIDENCE_DIR``, default ``~/.cache/repeat-failure/evidence``; it starts as a
copy of the committed evidence), which the tests read when that variable is set; with
``--update`` it rewrites the committed ``harness/evidence/``. Exit 0 when every covered backend
asked for produced a record of the failing command (a backend the coverage table marks not
covered may record nothing); 1 otherwise, the reason printed per backend.

``--release VERSION`` (with one ``--backend``) runs that release instead of the pin and
``--oldest`` adds, per backend, the oldest release its coverage row verifies (``also=``); their
evidence goes to ``versions/<backend>/<version>/`` of the same directory (issue 26: CI re-runs
the oldest and the newest verified release).

``python -m harness drift [--backend NAME ...]``: the newest release of every backend against the
pins (:mod:`harness.drift`).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

from harness import evidence as evidence_dirs
from harness.backends import BACKENDS
from harness.checks import loop_guard, session_route
from harness.install import HarnessError
from harness.runner import run_backend
from repeat_failure.backends.coverage import COVERAGE


def _failing_recorded(evidence: dict) -> bool:
    """C-AC1: the first run's command appears in a record of the backend's route with a failure
    result: the hook's records (``bash_env``), or what the session-log reader found where the
    session log is the route (``<backend>_session_log``, C3)."""
    first = evidence["runs"][0]
    if session_route(evidence["backend"]):
        return any(r["command"] == first["command"] and r["failed"]
                   for r in first.get("session_records") or ())
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
                     help="only the backends the coverage table marks covered (what CI re-runs),"
                          " except those that look up host names whatever their settings")
    run.add_argument("--release", metavar="VERSION",
                     help="run this release instead of the pin (one --backend only); its "
                          "evidence goes to versions/<backend>/<VERSION>/ of the evidence "
                          "directory")
    run.add_argument("--oldest", action="store_true",
                     help="also run the oldest release each backend's coverage row verifies "
                          "(also=...), into versions/<backend>/<version>/ (what CI re-runs "
                          "beside the pins)")
    run.add_argument("--update", action="store_true",
                     help="rewrite the committed evidence (harness/evidence/) instead of writing "
                          "the fresh directory outside the checkout")
    drift = sub.add_parser("drift", help="run the newest release of every backend against the "
                                         "pins and print what it breaks")
    drift.add_argument("--backend", action="append", choices=sorted(BACKENDS),
                       help="only this backend (repeatable); default: every registry backend")
    args = parser.parse_args(argv)
    # The pipeline's own note log lines would interleave with the progress display.
    logging.getLogger("repeat_failure").addHandler(logging.NullHandler())
    logging.getLogger("repeat_failure").propagate = False
    if args.command == "drift":
        from harness.drift import main as drift_main

        return drift_main(args.backend)
    names = args.backend or list(BACKENDS)
    if args.release is not None and len(names) != 1:
        parser.error("--release needs exactly one --backend")
    if args.covered:
        # A backend without a row in the table, or whose row is not covered, is left out.
        names = [n for n in names if n in COVERAGE and COVERAGE[n].covered]
        # The suite's runs look up no names in the machine's resolver: a CLI that does whatever
        # its settings is kept on its committed evidence here (run it by hand, or by drift).
        for name in [n for n in names if BACKENDS[n].looks_up]:
            print(f"{name}: not re-run by --covered: it looks up {BACKENDS[name].looks_up}; "
                  f"its committed evidence stands (.venv/bin/python -m harness run --backend "
                  f"{name})",
                  flush=True)
        names = [n for n in names if not BACKENDS[n].looks_up]
    if args.update:
        out = evidence_dirs.COMMITTED
    else:
        out = evidence_dirs.fresh_target()
        evidence_dirs.prepare_fresh(out)
    print(f"writing evidence to {out}", flush=True)
    # (backend, release or None for the pin): the pins, and with --oldest the oldest verified
    # release of each backend that keeps earlier ones.
    jobs: list[tuple[str, str | None]] = [(n, args.release) for n in names]
    if args.oldest:
        jobs += [(n, COVERAGE[n].also_verified[-1]) for n in names
                 if n in COVERAGE and COVERAGE[n].also_verified and args.release is None]
    failed = 0
    for index, (name, release) in enumerate(jobs, 1):
        started = time.monotonic()
        backend = BACKENDS[name] if release is None else BACKENDS[name].at_release(release)
        where_dir = out if release is None else evidence_dirs.release_dir(out, name, release)
        where_dir.mkdir(parents=True, exist_ok=True)

        def progress(text: str) -> None:
            print(f"[{index}/{len(jobs)} {time.monotonic() - started:5.1f}s] {text}", flush=True)

        row = COVERAGE.get(name)
        # A release the row names as read by the session-log reader only (``read_only``) is
        # one whose commands the route does not record: no record there is what the row says.
        read_only = row is not None and release is not None and release in row.read_only
        expected = row is not None and row.covered and not read_only
        # A real CLI on a loaded 2-core machine can time out once; a second miss of a covered
        # backend is a finding. A backend the table marks not covered is run once.
        for attempt in (1, 2):
            try:
                evidence = run_backend(backend, where_dir, progress)
            except HarnessError as exc:
                print(f"{name}: BLOCKED: {exc}", file=sys.stderr)
                evidence = None
                break
            ok = _failing_recorded(evidence)
            if ok or attempt == 2 or not expected:
                break
            progress(f"{name}: no record of the failing command; trying once more")
        if evidence is None:
            failed += 1
            continue
        note = evidence["runs"][-1].get("note", "")
        version = evidence["version_output"].splitlines()[0] if evidence["version_output"] else "?"
        where = where_dir / f"{name}.json"
        if ok:
            guard = loop_guard(name, evidence["version"])
            if not note and guard:
                note = (f"(none, as expected: its own loop guard stopped the repeated call after "
                        f"{guard} of 5)")
            print(f"{name}: recorded ({version}); note: {note or '(none)'}; wrote {where}",
                  flush=True)
        elif not expected:
            why = (f"session log read only: {row.read_only_note}" if read_only else
                   f"not covered: {row.reason if row else 'unknown backend'}")
            print(f"{name}: no record, as the coverage table says ({version}; {why}); "
                  f"wrote {where}", flush=True)
        else:
            print(f"{name}: NO RECORD of the failing command ({version}); wrote {where}",
                  flush=True)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
