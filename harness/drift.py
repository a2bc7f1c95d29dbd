"""``python -m harness drift``: does the newest release of each agent CLI still work with the product?

Users run the CLIs' current releases, not our pins (issue 15). For every backend the harness
installs from a registry (npm, PyPI), this looks up the newest release, installs it into the
harness cache, runs the harness's scenarios against the stub provider (evidence written under
``~/.cache/repeat-failure/drift/<backend>-<version>/``, never into the checkout's committed
evidence), and judges the capture with :mod:`harness.checks` (route, readers, verdicts) using the
product's current strippers and readers. It prints a table::

    backend  pinned   newest   installs?  route ok?  readers ok?  verdicts ok?

with a progress line per step, writes ``harness/drift.json`` (dated; the rows and every
problem), and exits 1 when a newest release that installs breaks something (a route, a reader or
a verdict), 0 otherwise. A newest release that does not install is reported with the registry's
own error and does not fail the run (the pin stays; the coverage row's note says why). CI stays
on the pins; this is run by hand or on a schedule, and ``docs/backend-support.md`` says how to
bump a pin from its output.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

from harness import checks
from harness.backends import BACKENDS
from harness.install import Backend, HarnessError, npm
from harness.runner import run_backend
from repeat_failure.rules.scrub import scrub

REPO = Path(__file__).resolve().parent.parent
#: Where the table is written (committed when a drift run is the reason for a pin change).
DRIFT_JSON = REPO / "harness" / "drift.json"
#: Where the newest releases' evidence goes (outside the checkout).
DRIFT_DIR = Path.home() / ".cache" / "repeat-failure" / "drift"
#: What a lookup or a run may raise besides :class:`HarnessError`: the harness's npm and pip
#: calls time out (``subprocess.run(timeout=...)``) or cannot start a tool (``OSError``).
RUN_ERRORS = (HarnessError, subprocess.TimeoutExpired, subprocess.CalledProcessError, OSError)
COLUMNS = ("backend", "pinned", "newest", "installs?", "route ok?", "readers ok?",
           "verdicts ok?")


def newest_release(backend: Backend) -> str:
    """The newest release of ``backend``'s package on its registry (npm: ``npm view <package>
    version``, the ``latest`` dist-tag; PyPI: ``pip index versions``, the first listed).
    Raises :class:`HarnessError` with the registry's message when the lookup fails, and for a
    backend that is not installed from a registry (``system``)."""
    if backend.registry == "npm":
        done = npm(["view", backend.package, "version"], timeout=120)
        found = done.stdout.strip().splitlines()[-1:] if done.returncode == 0 else []
        if not found:
            raise HarnessError(f"npm view {backend.package} version failed: "
                               f"{(done.stderr or done.stdout).strip()[-400:]}")
        return found[0].strip()
    if backend.registry == "pypi":
        done = subprocess.run([sys.executable, "-m", "pip", "index", "versions", backend.package],
                              capture_output=True, text=True, timeout=120)
        match = re.search(rf"^{re.escape(backend.package)} \(([^)]+)\)", done.stdout, re.M)
        if done.returncode or match is None:
            raise HarnessError(f"pip index versions {backend.package} failed: "
                               f"{(done.stderr or done.stdout).strip()[-400:]}")
        return match.group(1)
    raise HarnessError(f"{backend.name} is not installed from a registry ({backend.registry})")


def run_newest(backend: Backend, version: str, progress: Callable[[str], None]) -> Path:
    """Run the harness's scenarios with ``version`` of ``backend`` (same package and settings as
    the pin) and return the evidence directory it wrote. Raises :class:`HarnessError` when the
    release cannot be installed or run (the install's own message)."""
    target = dataclasses.replace(backend, version=version)
    out = DRIFT_DIR / f"{backend.name}-{version}"
    run_backend(target, out, progress)
    return out


def drift_row(backend: Backend, progress: Callable[[str], None],
              lookup: Callable[[Backend], str] = newest_release,
              run: Callable[[Backend, str, Callable[[str], None]], Path] = run_newest
              ) -> dict[str, Any]:
    """One row of the table for ``backend``: ``{"backend", "pinned", "newest", "installs",
    "route", "readers", "verdicts", "notes", "problems", "broken"}``. ``route`` /
    ``readers`` / ``verdicts`` are ``"ok"``, ``"n/a"`` or ``"FAIL: ..."``
    (:func:`harness.checks.summary`); ``broken`` is True when a release that installed fails one
    of them; ``problems`` lists every problem :func:`harness.checks.check` found. ``lookup`` and
    ``run`` are the registry lookup and the harness run (tests pass their own); one raising
    :data:`RUN_ERRORS` gives a row with that error as its note. Every text in the row is
    scrubbed (:func:`repeat_failure.rules.scrub.scrub`): a registry's error can echo a token from the user's
    ``.npmrc``, and the row is printed and written to ``drift.json``."""
    return _scrubbed(_row(backend, progress, lookup, run))


def _scrubbed(value: Any) -> Any:
    """``value`` with every string in it (keys kept) scrubbed."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {k: _scrubbed(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_scrubbed(v) for v in value]
    return value


def _row(backend: Backend, progress: Callable[[str], None],
         lookup: Callable[[Backend], str],
         run: Callable[[Backend, str, Callable[[str], None]], Path]) -> dict[str, Any]:
    """:func:`drift_row` before scrubbing."""
    row: dict[str, Any] = {"backend": backend.name, "pinned": backend.version, "newest": None,
                           "installs": None, "route": "-", "readers": "-", "verdicts": "-",
                           "notes": "", "problems": {}, "broken": False}
    try:
        row["newest"] = lookup(backend)
    except RUN_ERRORS as exc:
        row["notes"] = str(exc)
        return row
    progress(f"{backend.name}: pinned {backend.version}, newest {row['newest']}")
    try:
        root = run(backend, row["newest"], progress)
    except RUN_ERRORS as exc:
        row["installs"] = False
        row["notes"] = str(exc)
        return row
    row["installs"] = True
    try:
        found = checks.check(backend.name, root)
    except checks.UNREADABLE as exc:
        row.update(checks.unreadable(exc))
    else:
        row.update(checks.summarize(backend.name, found))
        row["problems"] = {k: v for k, v in found.items() if v}
    row["broken"] = any(str(row[a]).startswith("FAIL") for a in checks.ASPECTS)
    return row


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as an aligned text table (:data:`COLUMNS`), a failure's reason cut to 60
    characters; the full problems are in ``drift.json``."""
    def cell(row: dict[str, Any], column: str) -> str:
        if column == "installs?":
            return {None: "-", True: "yes", False: "NO"}[row["installs"]]
        value = str(row[{"route ok?": "route", "readers ok?": "readers",
                         "verdicts ok?": "verdicts"}.get(column, column)] or "-")
        return value if len(value) <= 60 else value[:59] + "…"

    cells = [list(COLUMNS)] + [[cell(r, c) for c in COLUMNS] for r in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(line, widths)).rstrip()
                     for line in cells)


def _earlier_rows(path: Path, replaced: set[str]) -> list[dict[str, Any]]:
    """The rows of an earlier ``drift.json`` at ``path`` for backends not in ``replaced`` (a
    row without its own ``checked`` date gets the file's); ``[]`` when there is none or it
    cannot be read."""
    try:
        data = json.loads(path.read_text())
        rows = [r for r in data["rows"] if isinstance(r, dict) and r.get("backend") not in replaced]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    return [{**r, "checked": r.get("checked") or data.get("date")} for r in rows]


def main(names: list[str] | None = None, out: Path = DRIFT_JSON,
         lookup: Callable[[Backend], str] = newest_release,
         run: Callable[[Backend, str, Callable[[str], None]], Path] = run_newest,
         stream: Any = None) -> int:
    """Check the newest release of each backend (``names``, default every backend installed
    from a registry), print the table and notes, and update ``out`` (``{"date", "rows"}``, each
    row with its own ``checked`` date): the rows of the backends checked now replace theirs,
    the others stay as an earlier run left them (``--backend NAME`` never drops the rest). A
    named backend that is not installed from a registry is said and skipped. Returns 1 when a
    newest release that installs breaks a route, a reader or a verdict, else 0."""
    stream = stream or sys.stdout
    for name in names or ():
        if BACKENDS[name].registry not in ("npm", "pypi"):
            print(f"{name}: not installed from a registry ({BACKENDS[name].registry}): it runs "
                  "the machine's own program, so there is no newer release to check",
                  file=stream)
    chosen = [BACKENDS[n] for n in (names or BACKENDS)
              if BACKENDS[n].registry in ("npm", "pypi")]
    rows = []
    today = time.strftime("%Y-%m-%d", time.gmtime())
    started = time.monotonic()
    for index, backend in enumerate(chosen, 1):
        def progress(text: str, index: int = index) -> None:
            print(f"[{index}/{len(chosen)} {time.monotonic() - started:6.1f}s] {text}",
                  file=stream, flush=True)

        row = {**drift_row(backend, progress, lookup, run), "checked": today}
        verdict = "BROKEN" if row["broken"] else "ok" if row["installs"] else "not run"
        progress(f"{backend.name}: {verdict}")
        rows.append(row)
    print(table(rows), file=stream)
    for row in rows:
        if row["notes"]:
            print(f"{row['backend']}: {row['notes']}", file=stream)
    if rows:
        kept = _earlier_rows(out, {r["backend"] for r in rows})
        order = {name: i for i, name in enumerate(BACKENDS)}
        merged = sorted(kept + rows, key=lambda r: order.get(r.get("backend"), len(order)))
        out.write_text(json.dumps({"date": today, "rows": merged}, indent=2) + "\n")
        print(f"wrote {out}", file=stream)
    return 1 if any(r["broken"] for r in rows) else 0

