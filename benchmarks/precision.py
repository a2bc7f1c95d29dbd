"""Precision and recall of the check's notes on real agent sessions (issue 26 item 5).

``python -m benchmarks --only precision`` replays real, public agent sessions: the small
redistributable subset (``REPEAT_FAILURE_SUBSET=DIR``, else ``shared/real-sessions`` beside
the checkout) and, with ``--corpus DIR`` (or ``REPEAT_FAILURE_CORPUS=DIR``), a local full corpus
laid out the same way (``DIR/<source>/...``: each folder a home or a tree of trajectories).
Neither is in this repository (public data fetched from GitHub is not committed here);
``tests/data/real_sessions/PROVENANCE.md`` says where each file came from, at which commit,
under which license, and the labels are committed beside it. Every session is judged with:

* the product (:func:`repeat_failure.replay.run.replay_session`, the sidecar's own
  readers, scrub, normalize, exclusions and detector) at thresholds 3 and 5, window 600 s,
  with "the same result" as the same exit and output (``match_output``, the default) and as
  the same exit alone (``match_output: false``, the rule before issue 26);
* OpenHands' stuck detector, its rules re-implemented here (:func:`openhands_flags`);
* Roo Code's tool repetition detector, likewise (:func:`roo_flags`).

Every note or flag is keyed by (session file id, command as exported, index of its first
failure or repeated call) and looked up in the labels file
(``tests/data/real_sessions/labels.json``): ``loop`` (a real loop: the agent repeats the same thing and gets the same result,
making no progress), ``iteration`` (test-fix-retest or exploring: the agent changes something
between runs, or the output changes) or ``waiting`` (polling something that is expected to
change on its own). Each label was given by reading the calls around it in the session.

Precision of a setting: loops / its notes. Recall: the real loops it caught / every real loop
any method caught at any setting (a loop is counted once per session and span of calls:
loop notes on overlapping or touching calls of one session are one loop). A note without a
label is counted ``unlabelled``, printed, and left out of precision.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from repeat_failure.backends import SHELL_END, SessionEvent
from repeat_failure.rules.exclude import Exclusions
from repeat_failure.rules.normalize import command_label
from repeat_failure.rules.pipeline import record_command, session_record
from repeat_failure.replay.run import AGENT, replay_session
from repeat_failure.replay.report import MATCHES, Setting
from repeat_failure.replay.sources import Source, find_sources, read_events
from repeat_failure.config import DEFAULT_EXCLUDE

#: The labels file and the sessions' provenance (committed; the sessions themselves are not:
#: see PROVENANCE.md there).
LABELS_DIR = Path(__file__).resolve().parent.parent / "tests" / "data" / "real_sessions"
#: The environment variable naming the small redistributable subset of real sessions.
SUBSET_ENV = "REPEAT_FAILURE_SUBSET"
#: Where the subset is looked for without it: ``shared/real-sessions`` beside the checkout
#: (the steering repo's ``shared/``, which developers and CI get beside their clone).
SUBSET_DEFAULT = Path(__file__).resolve().parent.parent.parent / "shared" / "real-sessions"
#: The environment variable naming a local full corpus (laid out as the subset).
CORPUS_ENV = "REPEAT_FAILURE_CORPUS"
#: The thresholds judged (the default, 5, and the lowest one operators are told to try).
THRESHOLDS = (3, 5)
#: The window judged, seconds (the default).
WINDOW_S = 600.0
#: A fixed key for the cut marks and output digests, so a cut command's label is the same in
#: every run (the replay CLI draws a random one per run; the labels need a stable key).
KEY = b"precision-bench-"
#: Labels a note can have.
LABELS = ("loop", "iteration", "waiting")
#: Roo Code's default limit of identical consecutive tool calls (``ToolRepetitionDetector``'s
#: constructor default, ``limit: number = 3``; RooCodeInc/Roo-Code src/core/tools/).
ROO_LIMIT = 3


@dataclass(frozen=True)
class Call:
    """One tool call of a session, in log order: ``index`` from 0 over every tool call (shell
    or not), ``shell`` whether it is the shell tool, ``command`` the command as exported
    (scrubbed, normalized, :func:`~repeat_failure.rules.normalize.command_label`; ``""`` for
    another tool), ``same`` an opaque key equal for two calls whose raw command is identical
    (the raw text itself is not kept), ``exit`` its exit status (``None`` when unknown),
    ``failed`` whether it failed, ``ts`` its time (epoch seconds)."""

    index: int
    shell: bool
    command: str
    same: int
    exit: int | None
    failed: bool
    ts: float


@dataclass(frozen=True)
class Flag:
    """A note or flag of one method on one session: ``method`` (a :func:`setting_names` name),
    ``file`` (session file id: its path under the corpus root), ``command`` (as exported),
    ``first`` (index of the first counted failure or repeated call) and ``last`` (index of the
    last call it covers: the note's last failure, the end of the repeated run, the refused
    call), the span used to tell one loop from another."""

    method: str
    file: str
    command: str
    first: int
    last: int

    @property
    def key(self) -> tuple[str, str, int]:
        """The labels file's key: (file, command, first)."""
        return (self.file, self.command, self.first)


def _unique_times(events: Iterable[SessionEvent]) -> list[SessionEvent]:
    """``events`` with each finished shell call's time made unique by moving a tie 1 ms on
    (trajectories and some logs give several calls one time; a note's ``first_ts`` then names
    one call). 1 ms changes no window of 600 s."""
    seen: set[float] = set()
    out = []
    for e in events:
        if e.kind == SHELL_END and e.ts is not None and math.isfinite(e.ts):
            ts = e.ts
            while ts in seen:
                ts += 0.001
            seen.add(ts)
            if ts != e.ts:
                e = dataclasses.replace(e, ts=ts)
        out.append(e)
    return out


def session_calls(source: Source, exclusions: Exclusions) -> tuple[list[SessionEvent], list[Call]]:
    """The events of ``source`` (times made unique, :func:`_unique_times`) and its tool calls as
    :class:`Call` s: finished shell calls as the replay takes them (each call id once, calls
    without a result left out; excluded commands kept, the other methods have no exclusions)
    and every other tool call (``tool`` events). Raises what
    :func:`~repeat_failure.replay.sources.read_events` raises."""
    events = _unique_times(read_events(source, Counter()))
    calls: list[Call] = []
    delivered: set[str] = set()
    wall = 1e12
    now = -math.inf
    for e in events:
        if e.kind == "tool":
            calls.append(Call(len(calls), False, "", hash(("tool", len(calls))), None, False,
                              float(e.ts or now)))
            continue
        if e.kind != SHELL_END or not e.command:
            continue
        if e.call_id:
            if e.call_id in delivered:
                continue
            delivered.add(e.call_id)
        if e.failed is None and e.exit is None:
            continue
        record = session_record(e, AGENT, source.backend, wall)
        if record is None:
            continue
        now = max(now, record.ts)
        command = record_command(record, now, KEY)
        if not command:
            continue
        calls.append(Call(len(calls), True, command_label(command), hash(e.command),
                          record.exit, record.failed, record.ts))
    return events, calls


def product_settings() -> list[tuple[str, Setting]]:
    """(name, setting) for every product setting judged: each of :data:`THRESHOLDS` at
    :data:`WINDOW_S` for each way of matching "the same result"
    (:data:`~repeat_failure.replay.report.MATCHES`: exit and output, exit alone),
    named ``t3-output``, ``t5-exit``, …"""
    return [(f"t{t}-{match}", Setting(t, WINDOW_S, match)) for match in MATCHES
            for t in THRESHOLDS]


def setting_names() -> list[str]:
    """Every method's name, in the order the benchmark prints them."""
    return [n for n, _ in product_settings()] + ["openhands", "roo"]


def product_flags(file: str, source: Source, events: Sequence[SessionEvent], calls: list[Call],
                  exclusions: Exclusions) -> list[Flag]:
    """The product's notes on one session for every :func:`product_settings` setting, each
    placed on the calls: ``first`` is the failing call of the same command at the note's
    ``first_ts`` (its oldest failure still counted when the session ends or the note clears),
    ``last`` the one at its ``last_ts``."""
    settings = product_settings()
    result = replay_session(source, events, [s for _, s in settings], exclusions, KEY)
    by_ts = {(c.command, c.ts): c.index for c in calls if c.shell}
    out = []
    for name, setting in settings:
        for note in result.notes[setting]:
            first = by_ts.get((note.command, note.first_ts))
            if first is None:
                raise LookupError(f"{file}: note on {note.command!r} at {note.first_ts} "
                                  "matches no call")
            last = by_ts.get((note.command, note.last_ts), first)
            out.append(Flag(name, file, note.command, first, max(first, last)))
    return out


def openhands_flags(file: str, calls: list[Call]) -> list[Flag]:
    """OpenHands' stuck detector (OpenHands/OpenHands ``openhands/controller/stuck.py``,
    ``StuckDetector.is_stuck``, headless mode: all history; read at commit 331a1a43) on the
    session's tool calls, its rules as they apply to shell commands:

    * scenario 1, "same action, same observation": the last 4 actions are equal and the last
      4 observations are equal, where two command observations are equal when their command
      and exit code are (``_eq_no_pid``; the output is not compared);
    * scenario 4, "action, observation pattern": the last 6 steps alternate between two
      (action, observation) pairs (0 = 2 = 4 and 1 = 3 = 5).

    Scenario 2 needs ``ErrorObservation`` s (a failed command is a command observation with an
    exit code in OpenHands, not an error), 3, 5 and 6 need messages, condensations and empty
    replies: none applies to shell calls. Two actions are equal when they are the same tool
    with the same raw command; another tool's calls never equal anything (their arguments are
    not read). The detector is asked after every call, as OpenHands asks each step; a run
    that stays stuck is one flag, raised at the call where it first was (OpenHands stops the
    agent there: the replay goes on to find the next) and spanning the whole run."""
    out: list[Flag] = []
    obs = [(c.same, c.exit if c.exit is not None else c.failed) if c.shell else (None, c.index)
           for c in calls]
    stuck_since: int | None = None
    for i in range(len(calls)):
        hit: tuple[int, str] | None = None
        if i >= 3 and calls[i].shell and all(obs[j] == obs[i] for j in range(i - 3, i)):
            start = i - 3
            while start > 0 and obs[start - 1] == obs[i]:
                start -= 1
            hit = (start, calls[i].command)
        elif (i >= 5 and calls[i].shell and calls[i - 1].shell
              and obs[i] == obs[i - 2] == obs[i - 4] and obs[i - 1] == obs[i - 3] == obs[i - 5]):
            start = i - 5
            while start > 0 and obs[start - 1] == obs[start + 1]:
                start -= 1
            a, b = calls[start].command, calls[start + 1].command
            hit = (start, f"{a} <> {b}")
        if hit is None:
            stuck_since = None
            continue
        if stuck_since != hit[0]:
            stuck_since = hit[0]
            out.append(Flag("openhands", file, hit[1], hit[0], i))
        elif out:
            out[-1] = dataclasses.replace(out[-1], last=i)
    return out


def roo_flags(file: str, calls: list[Call], limit: int = ROO_LIMIT) -> list[Flag]:
    """Roo Code's ``ToolRepetitionDetector.check`` (RooCodeInc/Roo-Code
    ``src/core/tools/ToolRepetitionDetector.ts`` at commit 37479466, and its spec's "block on
    the 4th call for limit 3 (default)") on the session's tool calls: a call whose
    tool and parameters serialize the same as the previous call's adds one to a count, any
    other call sets the count to 0; when the count reaches ``limit`` (default 3, so the 4th
    identical call in a row) the call is refused ("mistake_limit_reached") and the count and
    the previous call are reset. Results are not looked at. Here the parameters are the raw
    command (another tool's calls never repeat: their arguments are not read). A flag is
    placed on the first call of the identical run. A ``limit`` of 0 or less never refuses,
    as there."""
    out: list[Flag] = []
    if limit <= 0:
        return out
    previous: int | None = None
    count = 0
    run_start = 0
    for c in calls:
        key = c.same if c.shell else None
        if key is not None and key == previous:
            count += 1
        else:
            count = 0
            previous = key
            run_start = c.index
        if count >= limit:
            out.append(Flag("roo", file, c.command, run_start, c.index))
            count, previous = 0, None
    return out


def load_labels(path: Path) -> dict[tuple[str, str, int], dict[str, str]]:
    """The labels file (a JSON list of ``{"file", "command", "first", "label", "reason"}``)
    keyed by (file, command, first). Raises ``ValueError`` naming the entry for a missing key
    field, a label that is not one of :data:`LABELS`, a missing reason or a key given twice."""
    out: dict[tuple[str, str, int], dict[str, str]] = {}
    for i, entry in enumerate(orjson.loads(path.read_bytes())):
        try:
            key = (str(entry["file"]), str(entry["command"]), int(entry["first"]))
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{path}: entry {i}: needs file, command and first (an index)") \
                from None
        if entry.get("label") not in LABELS or not entry.get("reason"):
            raise ValueError(f"{path}: entry {i} {key}: label must be one of "
                             f"{', '.join(LABELS)}, with a reason")
        if key in out:
            raise ValueError(f"{path}: entry {i}: {key} is labelled twice")
        out[key] = entry
    return out


def corpus_flags(root: Path) -> tuple[int, int, list[Flag]]:
    """Every method's flags on every session under ``root`` (each folder in it searched as
    ``repeat-failure replay`` searches a home or a tree of trajectories), with the number of
    sessions and of shell calls read. File ids are paths relative to ``root``."""
    exclusions = Exclusions(DEFAULT_EXCLUDE)
    sessions = shell_calls = 0
    flags: list[Flag] = []
    homes = sorted(d for d in root.iterdir() if d.is_dir())
    for source in find_sources([str(d) for d in homes]):
        file = os.path.relpath(source.path, root)
        events, calls = session_calls(source, exclusions)
        if not calls:
            continue
        sessions += 1
        shell_calls += sum(c.shell for c in calls)
        flags += product_flags(file, source, events, calls, exclusions)
        flags += openhands_flags(file, calls)
        flags += roo_flags(file, calls)
    return sessions, shell_calls, flags


def _loops(flags: list[Flag], labels: dict) -> list[list[Flag]]:
    """The real loops: loop-labelled flags grouped by session file and overlapping or
    touching spans of calls (Roo Code's flags on one long run come every 4 calls)."""
    groups: list[list[Flag]] = []
    for f in sorted((f for f in flags if labels.get(f.key, {}).get("label") == "loop"),
                    key=lambda f: (f.file, f.first, f.last)):
        if groups and groups[-1][0].file == f.file and f.first <= max(g.last for g in groups[-1]) + 1:
            groups[-1].append(f)
        else:
            groups.append([f])
    return groups


def score(flags: list[Flag], labels: dict) -> dict[str, dict[str, Any]]:
    """Per method (:func:`setting_names`): notes, loops, iterations, waiting, unlabelled,
    precision (loops / labelled notes; ``None`` without notes) and recall (real loops caught /
    real loops, :func:`_loops`; ``None`` when there are none)."""
    loops = _loops(flags, labels)
    out = {}
    for name in setting_names():
        mine = [f for f in flags if f.method == name]
        got = Counter(labels.get(f.key, {}).get("label", "unlabelled") for f in mine)
        labelled = len(mine) - got["unlabelled"]
        caught = sum(any(f.method == name for f in group) for group in loops)
        out[name] = {"notes": len(mine), "loops": got["loop"], "iterations": got["iteration"],
                     "waiting": got["waiting"], "unlabelled": got["unlabelled"],
                     "precision": got["loop"] / labelled if labelled else None,
                     "recall": caught / len(loops) if loops else None,
                     "real_loops": len(loops)}
    return out


def unlabelled(flags: list[Flag], labels: dict) -> list[Flag]:
    """The flags the labels file has no entry for, each key once."""
    seen: set = set()
    out = []
    for f in flags:
        if f.key not in labels and f.key not in seen:
            seen.add(f.key)
            out.append(f)
    return out


def table(name: str, sessions: int, shell_calls: int, scores: dict) -> str:
    """The benchmark's printed table for one corpus."""
    lines = [f"{name}: {sessions} sessions, {shell_calls} shell calls, "
             f"{next(iter(scores.values()))['real_loops']} real loops (found by any method)",
             f"  {'setting':12} {'notes':>5} {'loops':>5} {'iter':>5} {'wait':>5} {'unlab':>5} "
             f"{'precision':>9} {'recall':>6}"]
    for method, s in scores.items():
        p = "-" if s["precision"] is None else f"{s['precision']:.0%}"
        r = "-" if s["recall"] is None else f"{s['recall']:.0%}"
        lines.append(f"  {method:12} {s['notes']:5} {s['loops']:5} {s['iterations']:5} "
                     f"{s['waiting']:5} {s['unlabelled']:5} {p:>9} {r:>6}")
    return "\n".join(lines)


def subset_root() -> Path | None:
    """The subset's folder: :data:`SUBSET_ENV` when set (``FileNotFoundError`` when it is not
    a folder), else :data:`SUBSET_DEFAULT` when it exists, else ``None``."""
    if os.environ.get(SUBSET_ENV):
        root = Path(os.environ[SUBSET_ENV])
        if not root.is_dir():
            raise FileNotFoundError(f"{SUBSET_ENV}={root}: no such directory")
        return root
    return SUBSET_DEFAULT if SUBSET_DEFAULT.is_dir() else None


def bench_precision(corpus: Path | None = None) -> dict:
    """The benchmark: the subset (:func:`subset_root`) when there is one, and ``corpus`` when
    given (else :data:`CORPUS_ENV`). Prints a table per corpus; returns flat figures
    (``subset_t5-exit_precision``, …), or only ``sessions: "none found"`` (and says where
    to put them) when neither is there, so a full ``python -m benchmarks`` run goes on.
    Raises ``FileNotFoundError`` for a folder named that does not exist."""
    roots = []
    subset = subset_root()
    if subset is not None:
        roots.append(("subset", subset))
    corpus = corpus or (Path(os.environ[CORPUS_ENV]) if os.environ.get(CORPUS_ENV) else None)
    if corpus is not None:
        if not corpus.is_dir():
            raise FileNotFoundError(f"{CORPUS_ENV}/--corpus {corpus}: no such directory")
        roots.append(("corpus", corpus))
    if not roots:
        print(f"precision: no real sessions to judge: set {SUBSET_ENV} or {CORPUS_ENV} (or "
              f"--corpus), or put the subset in {SUBSET_DEFAULT}; "
              f"{LABELS_DIR / 'PROVENANCE.md'} says where they come from")
        return {"sessions": "none found"}
    labels = load_labels(LABELS_DIR / "labels.json")
    figures: dict[str, Any] = {}
    for name, root in roots:
        sessions, shell_calls, flags = corpus_flags(root)
        scores = score(flags, labels)
        print(table(name, sessions, shell_calls, scores))
        for f in unlabelled(flags, labels):
            print(f"  unlabelled: {f.method} {f.file} [{f.first}..{f.last}] {f.command[:80]}")
        figures[f"{name}_sessions"] = sessions
        figures[f"{name}_shell_calls"] = shell_calls
        for method, s in scores.items():
            for k in ("notes", "loops", "precision", "recall"):
                figures[f"{name}_{method}_{k}"] = s[k] if s[k] is not None else "-"
    return figures
