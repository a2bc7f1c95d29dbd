"""Where the harness's evidence lives, committed and fresh, and which CLI versions it covers.

Three places (issue 15: the test command leaves the checkout clean; a version matrix):

- **Committed** (:data:`COMMITTED`, ``harness/evidence/``): ``<backend>.json`` and the session-file
  copies under ``<backend>/``, from the pinned release. Only ``python -m harness run --update``
  rewrites it.
- **Earlier verified releases** (:func:`versions`): the same layout, one directory per release,
  under ``harness/evidence/versions/<backend>/<version>/`` (``<backend>.json`` and
  ``<backend>/``). They are real captures of the release that was pinned before, kept when a pin
  moves, so that the strippers and readers keep handling what users still run.
- **Fresh** (``$REPEAT_FAILURE_EVIDENCE_DIR``, default ``~/.cache/repeat-failure/evidence`` when
  the harness writes it): what a plain ``python -m harness run`` (CI, ``./scripts/test``) writes,
  outside the checkout. It starts as a copy of the committed tree (:func:`prepare_fresh`), so the
  backends a run did not re-run keep their committed evidence, and the tests read it through
  :func:`primary` when the variable is set. ``tests/test_evidence_fresh.py`` checks that the
  fresh evidence says what the committed evidence says (:func:`expectations`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
COMMITTED = REPO / "harness" / "evidence"
#: Environment variable naming the fresh evidence directory the tests read instead of
#: :data:`COMMITTED` (set by ``./scripts/test`` after the harness re-ran the pinned CLIs).
FRESH_ENV = "REPEAT_FAILURE_EVIDENCE_DIR"
#: Where a plain ``python -m harness run`` writes when the variable is not set.
DEFAULT_FRESH = Path.home() / ".cache" / "repeat-failure" / "evidence"
#: The earlier releases' evidence, ``versions/<backend>/<version>/``, under :data:`COMMITTED`.
VERSIONS = "versions"


def primary() -> Path:
    """The evidence directory the tests read for the pinned releases: ``$REPEAT_FAILURE_EVIDENCE_DIR``
    when set (a fresh harness run outside the checkout), else :data:`COMMITTED`. Raises
    :class:`FileNotFoundError` when the variable names a directory that does not exist (a
    mistyped path must not silently test the committed files instead)."""
    named = os.environ.get(FRESH_ENV)
    if not named:
        return COMMITTED
    path = Path(named)
    if not path.is_dir():
        raise FileNotFoundError(f"{FRESH_ENV}={named}: no such evidence directory "
                                "(run python -m harness run first, or unset it)")
    return path


#: The file :func:`prepare_fresh` leaves in a fresh directory: the mark that the directory is
#: one it made, so a later run may replace it.
FRESH_MARK = ".repeat-failure-fresh-evidence"


def fresh_target() -> Path:
    """Where ``python -m harness run`` (without ``--update``) writes: ``$REPEAT_FAILURE_EVIDENCE_DIR``
    (a relative path is taken from the working directory; symlinks are resolved) or
    :data:`DEFAULT_FRESH`. Raises :class:`ValueError` when that is the checkout, a directory
    inside it (the run would change files git tracks, issue 15 item 6) or one holding it
    (:func:`prepare_fresh` would delete the checkout)."""
    target = Path(os.environ.get(FRESH_ENV) or DEFAULT_FRESH).resolve()
    repo = REPO.resolve()
    if target == repo or repo in target.parents or target in repo.parents:
        raise ValueError(f"{FRESH_ENV}={target}: the fresh evidence must live outside the "
                         f"checkout {repo} and not hold it (use --update to rewrite the "
                         "committed evidence)")
    return target


def prepare_fresh(target: Path) -> None:
    """Make ``target`` a copy of the committed evidence (replacing what a previous run left
    there), so a run that re-creates some backends leaves the others as committed. An existing
    ``target`` is replaced only when it is empty or a fresh evidence directory: one holding
    :data:`FRESH_MARK`, or (left by a run before the mark) only names the committed evidence
    has. Anything else raises :class:`ValueError` naming it and is left as it is (a mistyped
    ``$REPEAT_FAILURE_EVIDENCE_DIR`` must not delete someone's directory)."""
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise ValueError(f"{target}: not a directory; the fresh evidence needs one of its own")
    if target.exists():
        names = {p.name for p in target.iterdir()}
        committed = {p.name for p in COMMITTED.iterdir()} | {FRESH_MARK}
        if FRESH_MARK not in names and not names <= committed:
            others = ", ".join(sorted(names - committed)[:5])
            raise ValueError(f"{target}: holds files that are not harness evidence ({others}); "
                             f"refusing to replace it: name an empty or new directory in "
                             f"{FRESH_ENV}")
        shutil.rmtree(target)
    shutil.copytree(COMMITTED, target)
    (target / FRESH_MARK).write_text("written by python -m harness run; replaced by the next\n")


def load(backend: str, root: Path | None = None) -> dict[str, Any]:
    """The evidence JSON of ``backend`` under ``root`` (default :func:`primary`), read now."""
    return json.loads(((root or primary()) / f"{backend}.json").read_text())


def versions(backend: str, root: Path | None = None) -> list[tuple[str, Path]]:
    """Every verified release of ``backend`` with its evidence root: ``(version, root)``, the pin
    first (``root`` or :func:`primary`, when it has ``<backend>.json``), then the earlier
    releases kept under ``versions/<backend>/`` of ``root`` when it has one (a fresh run that
    re-ran them, ``python -m harness run --oldest``), else of :data:`COMMITTED`, newest first.
    Each root holds
    ``<backend>.json`` and ``<backend>/`` (the layout :func:`load` and the tests read)."""
    out = []
    pinned = root or primary()
    if (pinned / f"{backend}.json").is_file():
        out.append((load(backend, pinned)["version"], pinned))
    older = COMMITTED / VERSIONS / backend
    if (pinned / VERSIONS / backend).is_dir():  # a fresh run re-ran the oldest (run --oldest)
        older = pinned / VERSIONS / backend
    if older.is_dir():
        found = [(load(backend, d)["version"], d) for d in older.iterdir()
                 if (d / f"{backend}.json").is_file()]
        out += sorted(found, key=lambda vr: _version_key(vr[0]), reverse=True)
    return out


def _version_key(version: str) -> tuple:
    """A release's sort key: its dotted numbers (``1.6.0`` > ``0.73.1``), text parts after."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in version.split("."))


def keep_as_previous(backend: str) -> Path | None:
    """Copy the committed evidence of ``backend`` (its pinned release) to
    ``harness/evidence/versions/<backend>/<version>/`` before a pin moves; returns that directory,
    or None when there is no committed evidence. An existing copy of the same release is
    replaced."""
    source = COMMITTED / f"{backend}.json"
    if not source.is_file():
        return None
    version = load(backend, COMMITTED)["version"]
    dest = COMMITTED / VERSIONS / backend / version
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    shutil.copy2(source, dest / source.name)
    if (COMMITTED / backend).is_dir():
        shutil.copytree(COMMITTED / backend, dest / backend)
    return dest


def release_dir(out: Path, backend: str, version: str) -> Path:
    """Where a run of ``backend`` at a release other than its pin writes its evidence under the
    evidence directory ``out``: ``out/versions/<backend>/<version>/`` (the layout
    :func:`versions` reads). Raises :class:`ValueError` for a version that is not a plain
    release name (letters, digits, ``.``, ``-``, ``+``), which must never name a path."""
    if not re.fullmatch(r"[0-9A-Za-z][0-9A-Za-z.+-]{0,63}", version) or ".." in version:
        raise ValueError(f"release {version!r}: not a release name (letters, digits, . - +)")
    return out / VERSIONS / backend / version


def expectations(evidence: dict[str, Any]) -> dict[str, Any]:
    """What a run of one backend must show again on a re-run, without what differs every run
    (ids, times, paths, the helper shells' count): per shell run its command, repeat, the agent
    commands recorded (normalized, non-empty, with their exits, in order), what the session-log
    reader found and the note; per session and verdict scenario the tool calls the CLI made and,
    for a verdict scenario, its exit status (for the killed one only whether the kill happened:
    a CLI's status after SIGTERM is a race) and whether its transcript has lines. Records are
    unwrapped again with the product's current stripper (the evidence's own ``normalized`` is
    what the stripper of the day of the capture said).

    Shapes: ``{"backend", "version", "runs": [...], "scenarios": {...}, "verdicts": {...}}``.
    """
    from repeat_failure.rules.normalize import normalize  # the product's stripper, as it is now

    runs = []
    for run in evidence.get("runs", []):
        recorded = [(normalize(r["raw"], evidence["backend"]), r["exit"]) for r in run["records"]]
        runs.append({
            "command": run["command"], "repeat": run["repeat"],
            "records": [pair for pair in recorded if pair[0]],
            "session_records": None if run.get("session_records") is None else
            [(r["command"], r["exit"], r["failed"]) for r in run["session_records"]],
            "note": run.get("note"),
        })
    scenarios = {}
    for name, run in (evidence.get("scenarios") or {}).items():
        scenarios[name] = "skipped" if "skipped" in run else \
            [c["name"] for c in run.get("tool_calls", [])]
    verdicts = {}
    for name, run in (evidence.get("verdict_scenarios") or {}).items():
        if "skipped" in run:
            verdicts[name] = "skipped"
            continue
        killed = "kill" in run
        verdicts[name] = {"cli_exit": "killed" if killed else run["cli_exit"],
                          "kill": None if not killed else "skipped" in run["kill"],
                          "tool_calls": [c["name"] for c in run.get("tool_calls", [])],
                          "transcript": None if "transcript" not in run else
                          bool(run["transcript"]["lines"])}
    return {"backend": evidence["backend"], "version": evidence["version"], "runs": runs,
            "scenarios": scenarios, "verdicts": verdicts}
