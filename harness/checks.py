"""What a backend's evidence must show for its route, readers and turn verdicts to be right.

The same checks judge the pinned releases' fresh evidence and the newest releases' (``python -m
harness drift``): each re-reads the captured raw records and session files with the product's
current strippers and readers, so a release whose wrapper or log a stripper or reader no longer
understands fails here, whatever the capture said at the time.

- **route**: every run's agent commands, unwrapped from the raw records (``normalize``), are the
  command the stub asked for with its exit status, once per request (``ls /nonexistent`` 2,
  ``false`` 1, ``echo harness-ok`` 0; C-AC1, C-AC4); for a backend whose session log is its
  route (omp), what its reader found; the repeated run raised the exact note.
- **readers**: the backend's session-log reader reads every captured session file without a
  reader error (a line of a type it does not know is counted, not a problem), and the repeated
  run's session gives its five failing ``ls /nonexistent`` calls with exit 2.
- **verdicts**: each turn-verdict scenario's session gives the verdict :data:`SESSION_VERDICTS`
  names for the backend, or for an earlier release what :func:`session_verdicts` says (seed
  ard-0038 §1; ``docs/requirements.md``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness import evidence as evidence_dirs
from repeat_failure.backends import SHELL_END, session_reader
from repeat_failure.backends.coverage import COVERAGE
from repeat_failure.rules.normalize import normalize
from repeat_failure.sessions.tail import SessionTail
from repeat_failure.turns.verdict import AGENT_ERROR, AGENT_NO_OUTPUT, OK, TurnTracker

#: The exit status of each command the harness's stub asks for.
EXITS = {"ls /nonexistent": 2, "false": 1, "echo harness-ok": 0}
#: The note the sidecar must raise on the repeated run (docs/metrics.md "The agent's row").
NOTE = "Repeating failure: ls /nonexistent failed 5 times in 1 min (exit 2)"
#: The verdict each backend's session log gives per verdict scenario (``None``: that turn never
#: ends in the log, so it is not classified; docs/metrics.md "Turn verdicts" says why).
SESSION_VERDICTS: dict[str, dict[str, str | None]] = {
    # Claude Code writes its exit record (2.1.332: cost-state; 2.1.197: last-prompt) as it
    # exits, also when killed: the turn ends with its Bash call unanswered.
    "claude": {"ok": OK, "empty": AGENT_NO_OUTPUT, "error": AGENT_ERROR, "killed": AGENT_ERROR},
    "codex": {"ok": OK, "empty": AGENT_NO_OUTPUT, "error": AGENT_ERROR, "killed": None},
    # Gemini CLI rolls a failed turn back (a $set of messages without its prompt).
    "gemini": {"ok": OK, "empty": AGENT_ERROR, "error": AGENT_ERROR, "killed": None},
    # pi 1.6.0 aborts the run on SIGTERM and logs the reply with stopReason "aborted".
    "pi": {"ok": OK, "empty": AGENT_NO_OUTPUT, "error": AGENT_ERROR, "killed": AGENT_ERROR},
    "omp": {"ok": OK, "empty": None, "error": AGENT_ERROR, "killed": None},
    "opencode": {"ok": OK, "empty": AGENT_NO_OUTPUT, "error": AGENT_ERROR, "killed": None},
    "kilo": {"ok": OK, "empty": AGENT_NO_OUTPUT, "error": AGENT_ERROR, "killed": None},
    # Copilot CLI calls an empty reply an error itself (session.error "No response was
    # returned"): one turn, agent_error.
    "copilot": {"ok": OK, "empty": AGENT_ERROR, "error": AGENT_ERROR, "killed": None},
    # Qwen Code 0.24.4 logs a provider error it does not retry (HTTP 400) as an api_error
    # telemetry line; an empty reply (retried, then given up) and a kill leave nothing after.
    "qwen": {"ok": OK, "empty": None, "error": AGENT_ERROR, "killed": None},
    # Cline CLI 3.0.65 logs an error reply (metadata.displayRole "error") for the provider's
    # error and for an empty reply; SIGTERM did not stop it (it exited 0 after its answer).
    "cline": {"ok": OK, "empty": AGENT_ERROR, "error": AGENT_ERROR, "killed": OK},
    # Continue CLI 1.5.47 writes only the prompt for an empty reply and no file at all for a
    # provider error or a killed run.
    "continue": {"ok": OK, "empty": None, "error": None, "killed": None},
    # Droid 0.215.0 ends every turn with agent_turn_outcome (reason model_request_rejected for
    # the provider's error); SIGTERM killed only the running command: it answered and exited 0.
    "droid": {"ok": OK, "empty": AGENT_NO_OUTPUT, "error": AGENT_ERROR, "killed": OK},
}
#: Where an earlier verified release's log says otherwise than :data:`SESSION_VERDICTS` (which
#: holds for the pin and what comes after it): ``(backend, version)`` -> the scenarios that
#: differ. pi 0.73.1, 0.31.1 and 0.27.9 wrote nothing after a killed run's running call, so that
#: turn has no end.
#: Cline 3.0.57 (to 3.0.64: 3.0.62 and 3.0.64 tried) writes no message for an API error or an
#: empty reply (3.0.65 writes a ``displayOnly`` error message): the messages file holds the
#: prompt alone, and only the session's ``<id>.json`` says ``status: "failed"``, which the
#: reader does not read.
#: Claude Code before 2.1.69 writes no exit record (no ``last-prompt``, no ``cost-state``), so
#: neither the empty reply's turn nor the killed one has an end in its log.
#: Codex before 0.100.0 writes no task_started / task_complete, so no turn ends in its rollout;
#: from 0.100.0 to 0.144.x a refused request ends the turn with a task_complete that carries no
#: error (0.145.0 adds ``error``), which reads as an empty reply (issue 26).
EARLIER_VERDICTS: dict[tuple[str, str], dict[str, str | None]] = {
    ("pi", "0.73.1"): {"killed": None},
    ("pi", "0.31.1"): {"killed": None},
    ("pi", "0.27.9"): {"killed": None},
    ("codex", "0.100.0"): {"error": AGENT_NO_OUTPUT},
    # Cline CLI 2.x (2.14.0, 2.18.0) takes an answer without a tool call as a mistake and, after three, ends
    # the task with an error ("Too many consecutive mistakes"); a killed run leaves the running
    # command and a resume_task prompt, no end.
    ("cline", "2.18.0"): {"ok": AGENT_ERROR, "killed": None},
    ("cline", "2.14.0"): {"ok": AGENT_ERROR, "killed": None},
    ("codex", "0.96.0"): {"ok": None, "empty": None, "error": None, "killed": None},
    ("codex", "0.64.0"): {"ok": None, "empty": None, "error": None, "killed": None},
    ("claude", "2.0.56"): {"empty": None, "killed": None},
    ("claude", "2.0.57"): {"empty": None, "killed": None},
    ("claude", "2.0.77"): {"empty": None, "killed": None},
    # 2.1.69 on: last-prompt as it exits ends a killed turn; 2.1.70 logs nothing of an empty
    # reply's turn (not even its prompt).
    ("claude", "2.1.70"): {"empty": None},
    # 2.1.268 to 2.1.276 write last-prompt mid-turn (so it ends nothing) and no cost-state yet.
    ("claude", "2.1.268"): {"empty": None, "killed": None},
    # Gemini CLI before 0.54.4 neither rolls a failed turn back nor logs its error: the prompt is
    # the last line of an API error's or an empty reply's turn (0.39.0 to 0.41.x log the CLI's
    # own "System: Please continue." after an empty reply, which is no new turn). So do the
    # session-*.json documents of 0.19.1 to 0.38.2.
    ("gemini", "0.27.0"): {"empty": None, "error": None},
    ("gemini", "0.28.1"): {"empty": None, "error": None},
    ("gemini", "0.30.0"): {"empty": None, "error": None},
    ("gemini", "0.32.1"): {"empty": None, "error": None},
    ("gemini", "0.36.0"): {"empty": None, "error": None},
    ("gemini", "0.38.2"): {"empty": None, "error": None},
    ("gemini", "0.39.0"): {"empty": None, "error": None},
    ("gemini", "0.40.0"): {"empty": None, "error": None},
    ("gemini", "0.44.0"): {"empty": None, "error": None},
    ("gemini", "0.45.2"): {"empty": None, "error": None},
    # Copilot CLI before 1.0.85 writes no session.error for an empty reply (and exits 0), so
    # that turn has no end; omp 17.2.15 ends it as an empty answer (18.2.3 does not end it);
    # omp 14.9.9 writes no session file when every request is refused (real captures).
    ("copilot", "1.0.62"): {"empty": None},
    ("copilot", "1.0.11"): {"empty": None},
    ("omp", "17.2.15"): {"empty": AGENT_NO_OUTPUT},
    ("omp", "14.9.9"): {"error": None},
    ("cline", "3.0.57"): {"error": None, "empty": None},
}
ASPECTS = ("route", "readers", "verdicts")
#: CLIs whose own loop guard ends the turn before a fifth identical tool call (Qwen Code 0.24.4,
#: Cline 3.0.65: their real runs): the repeated run records this many calls and, below the
#: threshold, raises no note (C-AC2).
LOOP_GUARDED = {"qwen": 4, "cline": 4}
#: Those whose session log keeps the call the guard refused, as a failure with no exit status
#: (Cline 3.0.65: "Command failed: Command was aborted"): their reader gives it after the four.
GUARD_REFUSAL_LOGGED = frozenset({"cline"})
#: Kept earlier releases whose loop guard differs from :data:`LOOP_GUARDED`'s pin: the calls the
#: repeated run records, or None when nothing stopped the five calls (Qwen Code 0.12.0's real
#: run: five calls and the answer; 0.5.0 and 0.24.4 stop at four). Gemini CLI 0.27.0 (as 0.25.0
#: and 0.27.4) made four of the five calls; 0.28.1 on make all five.
EARLIER_LOOP_GUARD: dict[tuple[str, str], int | None] = {("qwen", "0.12.0"): None,
                                                         ("cline", "2.18.0"): None,
                                                         ("cline", "2.14.0"): None,
                                                         ("gemini", "0.27.0"): 4}
#: Kept releases whose session log ends fewer of the repeated run's calls than ran: Cline CLI
#: 2.14.0 and 2.18.0 ran all five, then failed the task ("Too many consecutive mistakes") before any
#: request carried the fifth call's result, the only place its exit code is logged.
LOGGED_ENDS: dict[tuple[str, str], int] = {("cline", "2.18.0"): 4, ("cline", "2.14.0"): 4}
#: Kept releases whose repeated run raises no note in the harness's single pass of the pipeline
#: although five failures were recorded: Cline CLI 2.x's log (2.14.0, 2.18.0) shows the fifth call started and
#: never ended, so its failure awaits its output (``OUTPUT_WAIT_S``, 15 s) past that pass.
NO_NOTE: frozenset[tuple[str, str]] = frozenset({("cline", "2.18.0"), ("cline", "2.14.0")})
#: What :func:`check` raises on evidence it cannot read: missing or unreadable files
#: (``OSError``), bad JSON (``ValueError``), and JSON of the wrong shape (a field missing:
#: ``KeyError`` / ``IndexError``; a value of the wrong type: ``TypeError`` /
#: ``AttributeError``).
UNREADABLE = (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError)


def session_verdicts(backend: str, version: str) -> dict[str, str | None]:
    """The verdict per verdict scenario that ``backend``'s session log gives at ``version``:
    :data:`SESSION_VERDICTS`, with :data:`EARLIER_VERDICTS` for that release laid over it.
    Raises KeyError for a backend :data:`SESSION_VERDICTS` does not list."""
    return {**SESSION_VERDICTS[backend], **EARLIER_VERDICTS.get((backend, version), {})}


def loop_guard(backend: str, version: str) -> int | None:
    """The calls ``backend``'s own loop guard lets the repeated five-call run make at
    ``version`` (:data:`LOOP_GUARDED`, with :data:`EARLIER_LOOP_GUARD` for that release laid
    over it), or None when it does not stop them."""
    if (backend, version) in EARLIER_LOOP_GUARD:
        return EARLIER_LOOP_GUARD[(backend, version)]
    return LOOP_GUARDED.get(backend)


def check(backend: str, root: Path) -> dict[str, list[str]]:
    """The problems found in ``backend``'s evidence under ``root`` (an evidence directory:
    ``<backend>.json`` and ``<backend>/``), by aspect: ``{"route": [...], "readers": [...],
    "verdicts": [...], "notes": [...]}``; empty lists mean the aspect holds. ``notes`` are
    findings that are not failures (lines of an unknown type skipped). An aspect that does not
    apply (no session reader, no verdict expectations) is ``["n/a"]`` only in :func:`summary`,
    never here. Raises one of :data:`UNREADABLE` for missing, unreadable or misshapen
    evidence."""
    data = evidence_dirs.load(backend, root)
    out: dict[str, list[str]] = {"route": _route(backend, data), "readers": [], "verdicts": [],
                                 "notes": []}
    reader = session_reader(backend)
    if reader is not None:
        out["readers"], ignored = _readers(backend, data, root / backend)
        if ignored:
            out["notes"].append(f"{ignored} session-log line(s) of a type the reader does not "
                                "know (skipped)")
    if backend in SESSION_VERDICTS and reader is not None:
        out["verdicts"] = _verdicts(backend, data, root / backend)
    return out


def applies(backend: str) -> dict[str, bool]:
    """Which aspects :func:`check` judges for ``backend``: the route when the coverage table
    marks it covered (a row not covered may record nothing); the readers when it has a
    session-log reader; the verdicts when :data:`SESSION_VERDICTS` lists it too."""
    reader = session_reader(backend) is not None
    row = COVERAGE.get(backend)
    return {"route": row is not None and row.covered, "readers": reader,
            "verdicts": reader and backend in SESSION_VERDICTS}


def session_route(backend: str) -> bool:
    """Whether ``backend``'s session log is its record route (``<backend>_session_log`` in the
    coverage table, C3: omp), so its reader's calls, not the hook's records, are what it
    recorded."""
    row = COVERAGE.get(backend)
    return row is not None and row.route.endswith("_session_log")


def _route(backend: str, data: dict[str, Any]) -> list[str]:
    problems = []
    guard = loop_guard(backend, str(data.get("version", "")))
    row = COVERAGE.get(backend)
    # A release the coverage row names as read only: the route sees none of its commands.
    unseen = row is not None and data.get("version") in row.read_only
    for i, run in enumerate(data.get("runs", [])):
        times = 0 if unseen else min(run["repeat"], guard) if guard else run["repeat"]
        want = [(run["command"], EXITS[run["command"]])] * times
        if session_route(backend):
            # a session log may give no exit number for a success, only that it did not fail
            got = [(r["command"], 0 if r["exit"] is None and r["failed"] is False else r["exit"])
                   for r in run.get("session_records") or ()]
        else:
            got = [(c, r["exit"]) for r in run["records"]
                   if (c := normalize(r["raw"], backend))]
        if got != want:
            problems.append(f"run {i + 1} ({run['command']!r} x{run['repeat']}): recorded "
                            f"{_short(got)}, expected {_short(want)}")
        note = NOTE if times >= 5 and (backend, data.get("version")) not in NO_NOTE else ""
        if run["repeat"] > 1 and run.get("note") != note:
            problems.append(f"run {i + 1}: note {run.get('note')!r}, expected {note!r}")
    if not data.get("runs"):
        problems.append("no runs in the evidence")
    return problems


def _short(pairs: list[tuple[str, Any]]) -> str:
    text = repr(pairs)
    return text if len(text) <= 200 else text[:199] + "…"


def _poll(backend: str, home: Path):
    reader = session_reader(backend)
    return SessionTail(reader, home, backfill_s=float("inf")).poll(rescan=True)


def _homes(data: dict[str, Any], base: Path) -> list[tuple[str, Path]]:
    """Every captured agent home under ``base``: the repeated run's, each session scenario's
    and each verdict scenario's (those with files)."""
    homes = [("shell run", base)] if data.get("session_files") else []
    for name, files in (data.get("scenario_sessions") or {}).items():
        if files:
            homes.append((f"scenario {name}", base / name))
    for name, run in (data.get("verdict_scenarios") or {}).items():
        if run.get("session_files"):
            homes.append((f"verdict {name}", base / "verdict" / name))
    return homes


def _readers(backend: str, data: dict[str, Any], base: Path) -> tuple[list[str], int]:
    problems, ignored = [], 0
    homes = _homes(data, base)
    for label, home in homes:
        result = _poll(backend, home)
        ignored += result.ignored
        if result.errors:
            problems.append(f"{label}: reader errors {dict(sorted(result.errors.items()))}")
        if label == "shell run" and not session_route(backend):
            ends = [(e.command, e.exit, e.failed) for e in result.events if e.kind == SHELL_END]
            guard = loop_guard(backend, str(data.get("version", "")))
            version = str(data.get("version", ""))
            want = [("ls /nonexistent", 2, True)] * LOGGED_ENDS.get((backend, version),
                                                                    guard or 5)
            if backend in GUARD_REFUSAL_LOGGED and guard:
                want.append(("ls /nonexistent", None, True))
            got = [(normalize(c, backend), x, f) for c, x, f in ends]
            if got != want:
                problems.append(f"shell run: the reader found {_short(got)}, expected "
                                f"{_short(want)}")
    if not homes:
        problems.append("no session files captured")
    return problems, ignored


def _verdicts(backend: str, data: dict[str, Any], base: Path) -> list[str]:
    problems = []
    reader = session_reader(backend)
    for name, expected in session_verdicts(backend, str(data.get("version", ""))).items():
        run = (data.get("verdict_scenarios") or {}).get(name)
        if not run or "skipped" in run:
            problems.append(f"{name}: no verdict scenario captured")
            continue
        tracker = TurnTracker(reader.edit_tools)
        turns = [t for e in _poll(backend, base / "verdict" / name).events
                 for t in tracker.on_event(e)]
        got = turns[-1].verdict if turns else None
        if got != expected or len(turns) > 1:
            problems.append(f"{name}: {len(turns)} turn(s), verdict {got}, expected {expected}")
    return problems


def summary(backend: str, root: Path) -> dict[str, str]:
    """One line per aspect for a table: ``"ok"``, ``"n/a"``, or ``"FAIL: <first problem>"``;
    plus ``"notes"``. Never raises for evidence: unreadable or misshapen evidence
    (:data:`UNREADABLE`) is a failure of every aspect."""
    try:
        found = check(backend, root)
    except UNREADABLE as exc:
        return unreadable(exc)
    return summarize(backend, found)


def unreadable(exc: BaseException) -> dict[str, str]:
    """The :func:`summary` of evidence :func:`check` could not read (``exc``, one of
    :data:`UNREADABLE`): every aspect fails with the reason."""
    reason = f"FAIL: evidence unreadable ({exc.__class__.__name__}: {exc})"
    return {a: reason for a in ASPECTS} | {"notes": ""}


def summarize(backend: str, found: dict[str, list[str]]) -> dict[str, str]:
    """:func:`summary` of what :func:`check` found for ``backend``, without checking again."""
    scope = applies(backend)
    out = {a: ("n/a" if not scope[a] else "ok" if not found[a] else f"FAIL: {found[a][0]}")
           for a in ASPECTS}
    out["notes"] = "; ".join(found["notes"])
    return out

