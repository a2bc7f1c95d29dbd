"""The fresh evidence says what the committed evidence says (issue 15, item 6).

``./scripts/test`` re-runs the pinned CLIs (spec C4) into a directory outside the checkout
(``$REPEAT_FAILURE_EVIDENCE_DIR``) and the suite reads that fresh evidence; the committed
evidence is rewritten only by ``python -m harness run --update``. These tests hold the fresh
runs to the committed ones: per backend, the same commands recorded with the same exits, the
same session-log findings, note, tool calls and verdict-scenario outcomes
(:func:`harness.evidence.expectations`), and every check of :mod:`harness.checks`.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from harness import checks
from harness import evidence as evidence_dirs

FRESH = os.environ.get(evidence_dirs.FRESH_ENV)
COMMITTED = evidence_dirs.COMMITTED
BACKENDS = sorted(p.stem for p in COMMITTED.glob("*.json"))


@pytest.mark.skipif(not FRESH, reason="no fresh harness run: REPEAT_FAILURE_EVIDENCE_DIR unset "
                                      "(./scripts/test sets it after python -m harness run)")
@pytest.mark.parametrize("backend", BACKENDS)
def test_fresh_evidence_matches_the_committed_expectations(backend: str) -> None:
    fresh = evidence_dirs.load(backend, Path(FRESH))
    committed = evidence_dirs.load(backend, COMMITTED)
    assert evidence_dirs.expectations(fresh) == evidence_dirs.expectations(committed)


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_check_holds_on_the_evidence_read(backend: str) -> None:
    """harness.checks on the evidence the suite reads (fresh when set, else committed): what
    ``python -m harness drift`` asks of a newest release, the pins pass."""
    found = checks.check(backend, evidence_dirs.primary())
    scope = checks.applies(backend)
    assert {a: found[a] for a in checks.ASPECTS if scope[a]} == \
        {a: [] for a in checks.ASPECTS if scope[a]}


def test_expectations_ignore_what_differs_every_run() -> None:
    """Ids, times, helper shells and the stored ``normalized`` text are not expectations; the
    commands, exits and note are."""
    data = evidence_dirs.load("claude", COMMITTED)
    base = evidence_dirs.expectations(data)
    changed = json.loads(json.dumps(data))
    changed["ran_at"] = "2030-01-01T00:00:00Z"
    for run in changed["runs"]:
        for record in run["records"]:
            record["ts"] += 1000
            record["normalized"] = "stale"
    assert evidence_dirs.expectations(changed) == base
    changed["runs"][3]["records"].pop()
    assert evidence_dirs.expectations(changed) != base
    changed = json.loads(json.dumps(data))
    changed["runs"][3]["note"] = "Repeating failure: ls /nonexistent failed 4 times in 1 min (exit 2)"
    assert evidence_dirs.expectations(changed) != base


def test_a_plain_harness_run_never_writes_the_committed_evidence(tmp_path, monkeypatch) -> None:
    """Only ``--update`` targets harness/evidence/; a fresh directory inside it is refused, and
    the fresh directory starts as a copy of the committed tree, the earlier releases' captures
    included (``run --oldest`` replaces the oldest one's there)."""
    monkeypatch.setenv(evidence_dirs.FRESH_ENV, str(COMMITTED / "sub"))
    with pytest.raises(ValueError, match="outside"):
        evidence_dirs.fresh_target()
    monkeypatch.setenv(evidence_dirs.FRESH_ENV, str(tmp_path / "fresh"))
    target = evidence_dirs.fresh_target()
    evidence_dirs.prepare_fresh(target)
    assert sorted(p.name for p in target.glob("*.json")) == sorted(f"{b}.json" for b in BACKENDS)
    assert sorted(p.relative_to(target).as_posix() for p in (target / "versions").glob("*/*")) \
        == sorted(p.relative_to(COMMITTED).as_posix() for p in (COMMITTED / "versions").glob("*/*"))
    assert evidence_dirs.primary() == target
    monkeypatch.setenv(evidence_dirs.FRESH_ENV, str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="no such evidence directory"):
        evidence_dirs.primary()


@pytest.mark.parametrize("where", ["checkout", "harness", "relative", "trailing slash",
                                   "symlink"])
def test_the_fresh_directory_never_is_or_holds_the_checkout(tmp_path, monkeypatch,
                                                            where: str) -> None:
    """A fresh directory that is the checkout or holds it is refused before anything is
    written (:func:`harness.evidence.prepare_fresh` starts by deleting what is there): the
    checkout, ``harness/`` (the committed evidence's parent), ``.`` from the checkout, the same
    with a trailing slash, and a symlink elsewhere pointing at the checkout."""
    repo = COMMITTED.parent.parent
    named = {"checkout": str(repo), "harness": str(COMMITTED.parent), "relative": ".",
             "trailing slash": f"{repo}/", "symlink": str(tmp_path / "link")}[where]
    (tmp_path / "link").symlink_to(repo)
    monkeypatch.chdir(repo)
    monkeypatch.setenv(evidence_dirs.FRESH_ENV, named)
    with pytest.raises(ValueError, match="outside the checkout"):
        evidence_dirs.fresh_target()


def test_a_directory_that_is_not_fresh_evidence_is_never_replaced(tmp_path) -> None:
    """A mistyped directory with files of its own (a home, a project) is left as it is, with
    an error naming what it holds; an empty one, or one a previous run made, is replaced."""
    target = tmp_path / "mine"
    target.mkdir()
    (target / "notes.txt").write_text("keep me")
    with pytest.raises(ValueError, match=r"mine: holds files that are not harness evidence "
                                         r"\(notes.txt\)"):
        evidence_dirs.prepare_fresh(target)
    assert (target / "notes.txt").read_text() == "keep me"
    empty = tmp_path / "empty"
    empty.mkdir()
    evidence_dirs.prepare_fresh(empty)
    (empty / "claude.json").write_text("{}")  # a run rewrote one backend
    evidence_dirs.prepare_fresh(empty)  # the next run replaces its own directory
    assert (empty / "claude.json").read_text() == (COMMITTED / "claude.json").read_text()
    assert (empty / evidence_dirs.FRESH_MARK).is_file()


def test_the_test_command_leaves_the_checkout_clean() -> None:
    """After the suite's own harness run (and everything else it did so far), git sees no
    change under harness/evidence/: the fresh evidence went outside the checkout."""
    done = subprocess.run(["git", "status", "--porcelain", "--", "harness/evidence"],
                          cwd=COMMITTED.parent.parent, capture_output=True, text=True,
                          timeout=60)
    if done.returncode != 0:
        pytest.skip(f"not a git checkout: {done.stderr.strip()}")
    assert done.stdout == ""
