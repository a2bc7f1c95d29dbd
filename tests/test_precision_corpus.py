"""The precision benchmark (:mod:`benchmarks.precision`, issue 26 item 5): the re-implemented
OpenHands and Roo Code rules on call sequences built here (built by hand to pin the rules; not
sessions), the labels file, the scoring, and the exact figures on real sessions: the subset
(``REPEAT_FAILURE_SUBSET`` or ``shared/real-sessions`` beside the checkout) and the full local
corpus (``REPEAT_FAILURE_CORPUS``), when they are there (``tests/data/real_sessions/PROVENANCE.md``
says what they hold and where each file came from; they are not in this repository)."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import orjson
import pytest

from benchmarks import precision as P


def _calls(spec: list[tuple[str, int | None]]) -> list[P.Call]:
    """Calls from (command, exit) pairs; a command ``TOOL`` is another tool's call."""
    out = []
    for i, (cmd, exit_) in enumerate(spec):
        if cmd == "TOOL":
            out.append(P.Call(i, False, "", hash(("tool", i)), None, False, float(i)))
        else:
            out.append(P.Call(i, True, cmd, hash(cmd), exit_, bool(exit_), float(i)))
    return out


def test_roo_refuses_the_fourth_identical_call_in_a_row_and_starts_over():
    calls = _calls([("ls", 1)] * 3 + [("TOOL", None)] + [("make", 0)] * 8 + [("ls", 1)])
    flags = P.roo_flags("f", calls)
    # 3 x ls (no flag), a read breaks the run, 8 x make: refused at the 4th (index 7), the
    # count restarts at the 5th (index 8, a new run) and refuses the 8th (index 11).
    assert [(f.command, f.first, f.last) for f in flags] == [("make", 4, 7), ("make", 8, 11)]


def test_roo_limit_zero_never_refuses():
    assert P.roo_flags("f", _calls([("ls", 1)] * 10), limit=0) == []


def test_roo_compares_calls_not_results():
    calls = _calls([("pytest", 1), ("pytest", 0), ("pytest", 2), ("pytest", 1)])
    assert [(f.first, f.last) for f in P.roo_flags("f", calls)] == [(0, 3)]


def test_openhands_needs_four_equal_actions_with_equal_exit_codes():
    same_exit = _calls([("pytest", 1)] * 4)
    assert [(f.command, f.first, f.last) for f in P.openhands_flags("f", same_exit)] == [
        ("pytest", 0, 3)]
    other_exit = _calls([("pytest", 1)] * 3 + [("pytest", 2)])
    assert P.openhands_flags("f", other_exit) == []
    # a run that stays stuck is one flag spanning the run; a new run after a break is another
    long = _calls([("git status", 128)] * 7 + [("TOOL", None)] + [("git status", 128)] * 4)
    assert [(f.first, f.last) for f in P.openhands_flags("f", long)] == [(0, 6), (8, 11)]


def test_openhands_alternating_pattern_of_six():
    calls = _calls([("make", 2), ("cat log", 0)] * 3)
    flags = P.openhands_flags("f", calls)
    assert [(f.command, f.first, f.last) for f in flags] == [("make <> cat log", 0, 5)]
    broken = _calls([("make", 2), ("cat log", 0), ("make", 2), ("cat log", 1), ("make", 2),
                     ("cat log", 0)])
    assert P.openhands_flags("f", broken) == []


def test_score_counts_one_loop_per_overlapping_span_and_recall_over_all_methods():
    flags = [P.Flag("t3-exit", "a", "x", 2, 9), P.Flag("roo", "a", "y", 4, 7),
             P.Flag("t5-exit", "a", "x", 2, 12), P.Flag("t3-exit", "b", "z", 0, 5),
             P.Flag("openhands", "c", "w", 1, 4), P.Flag("roo", "c", "q", 30, 33)]
    labels = {("a", "x", 2): {"label": "loop"}, ("a", "y", 4): {"label": "loop"},
              ("b", "z", 0): {"label": "iteration"}, ("c", "w", 1): {"label": "waiting"},
              ("c", "q", 30): {"label": "loop"}}
    scores = P.score(flags, labels)
    # real loops: a[2..12] (three flags on overlapping calls) and c[30..33]
    assert scores["t3-exit"]["real_loops"] == 2
    assert {k: scores["t3-exit"][k] for k in ("notes", "loops", "iterations", "precision",
                                             "recall")} == {
        "notes": 2, "loops": 1, "iterations": 1, "precision": 0.5, "recall": 0.5}
    assert scores["roo"]["recall"] == 1.0 and scores["roo"]["precision"] == 1.0
    assert scores["openhands"]["waiting"] == 1 and scores["openhands"]["precision"] == 0.0


def test_labels_file_is_valid_and_every_reason_is_given():
    labels = P.load_labels(P.LABELS_DIR / "labels.json")
    assert len(labels) == 83
    assert Counter(e["label"] for e in labels.values()) == {"loop": 22, "iteration": 60,
                                                            "waiting": 1}
    assert all(len(e["reason"]) > 20 for e in labels.values())


def test_labels_file_errors_name_the_entry(tmp_path):
    bad = tmp_path / "labels.json"
    bad.write_bytes(orjson.dumps([{"file": "f", "command": "c", "first": 1, "label": "stuck",
                                   "reason": "r"}]))
    with pytest.raises(ValueError, match=r"entry 0 \('f', 'c', 1\): label must be one of"):
        P.load_labels(bad)


def test_without_sessions_the_benchmark_says_where_to_put_them(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv(P.CORPUS_ENV, raising=False)
    monkeypatch.delenv(P.SUBSET_ENV, raising=False)
    monkeypatch.setattr(P, "SUBSET_DEFAULT", tmp_path / "absent")
    assert P.bench_precision() == {"sessions": "none found"}
    assert f"set {P.SUBSET_ENV} or {P.CORPUS_ENV}" in capsys.readouterr().out
    monkeypatch.setenv(P.SUBSET_ENV, str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError, match="REPEAT_FAILURE_SUBSET=.*nope: no such directory"):
        P.bench_precision()


@pytest.mark.skipif(P.subset_root() is None,
                    reason=f"no subset of real sessions ({P.SUBSET_ENV}, {P.SUBSET_DEFAULT})")
def test_figures_on_the_subset():
    sessions, shell_calls, flags = P.corpus_flags(P.subset_root())
    labels = P.load_labels(P.LABELS_DIR / "labels.json")
    assert P.unlabelled(flags, labels) == []
    scores = P.score(flags, labels)
    assert (sessions, shell_calls) == (4, 225)
    got = {m: (s["notes"], s["loops"], s["iterations"]) for m, s in scores.items()}
    # the approval-refusal loop (swift build) and the no-op-sed loop (sympy-15976), two
    # test-fix-retest sessions (astropy-13236, pytest-7236)
    assert got["t3-output"] == (3, 2, 1) and got["t5-output"] == (1, 1, 0)
    assert got["t3-exit"] == (4, 2, 2) and got["t5-exit"] == (2, 1, 1)
    assert got["openhands"] == (3, 3, 0) and got["roo"] == (21, 21, 0)
    assert scores["t3-exit"]["real_loops"] == 2
    assert scores["t3-output"]["recall"] == 1.0 and scores["t5-output"]["recall"] == 0.5
    assert scores["t3-exit"]["recall"] == 1.0 and scores["t5-exit"]["recall"] == 0.5


@pytest.mark.skipif(not os.environ.get(P.CORPUS_ENV),
                    reason=f"{P.CORPUS_ENV} names no local corpus of real sessions")
def test_figures_on_the_local_corpus():
    sessions, shell_calls, flags = P.corpus_flags(Path(os.environ[P.CORPUS_ENV]))
    labels = P.load_labels(P.LABELS_DIR / "labels.json")
    assert P.unlabelled(flags, labels) == []
    scores = P.score(flags, labels)
    assert (sessions, shell_calls) == (639, 24305)
    got = {m: (s["notes"], s["loops"], s["waiting"]) for m, s in scores.items()}
    # with output matching: the approval loop (both thresholds), the no-op-sed loop (3 only),
    # a health poll, a push refused while the agent redacts, two same-output debugging runs,
    # and SymPy's runner run 3 times on purpose (the same failures once its random seed and
    # PYTHONHASHSEED lines are normalized)
    assert got["t3-output"] == (7, 2, 1) and got["t5-output"] == (1, 1, 0)
    assert got["t3-exit"] == (62, 2, 1) and got["t5-exit"] == (16, 1, 0)
    assert got["openhands"] == (3, 3, 0) and got["roo"] == (21, 21, 0)
    assert scores["t3-exit"]["real_loops"] == 2
    assert scores["t3-exit"]["recall"] == 1.0 and scores["t5-exit"]["recall"] == 0.5
