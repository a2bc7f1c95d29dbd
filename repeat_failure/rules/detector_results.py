"""When failures of one result qualify for a note (spec C6; "the same result", issue 26): the
rules :class:`repeat_failure.rules.detector.Detector` applies to a command's store
(:class:`~repeat_failure.rules.detector_store.CommandState`), as functions of the ``rule`` in
force (anything with ``threshold``, ``window_s`` and ``match_output``: the detector itself).

* :func:`run`: ``threshold`` consecutive failure times spanning less than the window;
* :func:`qualifies_at`: the result of one failure, when its failures of that result make a run;
* :func:`qualifying`: every result of a command that makes a run;
* :func:`in_mode`: qualified results carried across a change of ``match_output`` (a reload, a
  state saved by another version).
"""

from __future__ import annotations

import bisect
from typing import Any, Protocol

from repeat_failure.rules.detector_store import (PENDING, CommandState, ExitKey, Result,
                                                   Times)


class Rule(Protocol):
    """The settings the rules read: N (``threshold``), the window in seconds (``window_s``),
    and whether the output is part of a result (``match_output``)."""

    threshold: int
    window_s: float
    match_output: bool


def run(rule: Rule, times: Any, first: int = 0, last: int | None = None) -> bool:
    """Whether ``threshold`` consecutive ``times`` (sorted) starting between index ``first``
    and ``last`` (default: any) span less than the window."""
    n = rule.threshold
    last = len(times) - n if last is None else min(last, len(times) - n)
    return any(times[start + n - 1] - times[start] < rule.window_s
               for start in range(max(0, first), last + 1))


def qualifies_at(rule: Rule, key: ExitKey, times: Times, pos: int) -> Result | None:
    """The result of the failure at ``pos`` (``-1``: dropped, nothing qualifies) when some
    run of ``threshold`` failures of that result including it spans less than the window;
    else ``None``. An awaited failure qualifies nothing."""
    if pos < 0:
        return None
    n = rule.threshold
    if not rule.match_output or times.outs is None:
        ok = run(rule, times, pos - n + 1, pos)
        return (key, None if not rule.match_output else 0) if ok else None
    digest = times.digest(pos)
    if digest == PENDING:
        return None
    ts = times[pos]
    lo = bisect.bisect_left(times, ts - rule.window_s)
    hi = bisect.bisect_right(times, ts + rule.window_s)
    outs = times.outs
    same = [times[i] for i in range(lo, hi) if outs[i] == digest]
    return (key, digest) if run(rule, same) else None


def qualifying(rule: Rule, state: CommandState) -> set[Result]:
    """Every result of ``state`` with some run of ``threshold`` failures spanning less than
    the window."""
    found: set[Result] = set()
    for key, times in state.items():
        if not rule.match_output or times.outs is None:
            if run(rule, times):
                found.add((key, None if not rule.match_output else 0))
            continue
        groups: dict[int, list[float]] = {}
        for t, digest in zip(times, times.outs):
            if digest != PENDING:
                groups.setdefault(digest, []).append(t)
        found.update((key, d) for d, held in groups.items() if run(rule, held))
    return found


def in_mode(rule: Rule, state: CommandState, results: set[Result]) -> set[Result] | None:
    """``results`` (qualified under the other ``match_output``, or saved by an older
    version) in ``rule``'s form: by exit alone the digest goes; with output matching
    an exit-only result becomes the one result its failures had (the same output each
    time, or unknown each time), else the results that qualify by output (none when the
    output changed: test-fix-retest, which output matching never counts as one result;
    before, the note stayed as "failed 1 times", output `same`)."""
    out: set[Result] = set()
    by_output: set[Result] | None = None
    for key, digest in results:
        times = state.get(key)
        if not times:
            continue
        if not rule.match_output:
            out.add((key, None))
        elif digest is None:
            known = set(times.digests(0)) - {PENDING}
            if len(known) == 1:
                out.add((key, known.pop()))
                continue
            if by_output is None:
                by_output = qualifying(rule, state)
            out.update(r for r in by_output if r[0] == key)
        else:
            out.add((key, digest))
    return out or None
