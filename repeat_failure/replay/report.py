"""What ``repeat-failure replay`` (:mod:`repeat_failure.replay.run`) found, and how it is
shown: the settings judged (:class:`Setting`), the notes per session (:class:`ReplayNote`,
:class:`SessionResult`), the files skipped (:class:`BadFile`), the whole result with its
summary (:class:`ReplayResult`, :class:`SummaryRow`; ``to_json`` gives ``--json``'s document),
the text report (:func:`format_text`) and the progress bar on stderr (:class:`Progress`).

Every text here is already scrubbed and normalized where it was made; :func:`format_text`
escapes control characters (:func:`repeat_failure.rules.terminal.label_value`).
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from repeat_failure.rules.normalize import CHANGING, SAME, UNKNOWN
from repeat_failure.rules.terminal import label_value

#: Commands of calls without a result kept and printed per session (the count is exact).
MAX_NO_RESULT_SHOWN = 5
#: What each reason of an unrecognised session log means, as the report says it.
UNRECOGNIZED_TEXT = {
    "unread_call": "its shell-tool calls are written in a way the reader does not read",
    "no_end": "its shell calls start and never end",
}


@dataclass(frozen=True, order=True)
class Setting:
    """One (threshold, window, match) combination a replay judges: ``threshold`` failures (N, 1
    to 10,000 as in the config), ``window_s`` seconds (> 0, at most 7 days), ``match``
    :data:`MATCH_OUTPUT` (the same result is the same exit and output, the config's default,
    issue 26) or :data:`MATCH_EXIT` (the exit alone, ``match_output: false``)."""

    threshold: int
    window_s: float
    match: str = "output"

    @property
    def match_output(self) -> bool:
        """Whether a failure's output is part of its result (the detector's ``match_output``)."""
        return self.match == MATCH_OUTPUT


#: :attr:`Setting.match` values: output matching (the default) and exit-only matching.
MATCH_OUTPUT, MATCH_EXIT = "output", "exit"
MATCHES = (MATCH_OUTPUT, MATCH_EXIT)


@dataclass
class ReplayNote:
    """A note the sidecar would have raised: ``command`` as exported (scrubbed, normalized,
    cut to 200 characters), ``exit`` (a number or ``"failed"``), ``count`` failures in the
    window and ``minutes`` (first to last, rounded up, at least 1) at its last failure before
    it cleared (or at the end of the session), ``first_ts`` / ``last_ts`` (epoch seconds) of
    those failures, ``raised_ts`` when it was raised, ``output`` ``same`` / ``changing`` /
    ``unknown`` over those failures, ``cleared`` (``success``, ``expired``, ``evicted``, or
    ``""`` when still raised at the end)."""

    command: str
    exit: int | str
    count: int
    minutes: int
    first_ts: float
    last_ts: float
    raised_ts: float
    output: str
    cleared: str = ""

    def to_json(self) -> dict[str, Any]:
        """The note as ``--json`` gives it."""
        return {"command": self.command, "exit": self.exit, "count": self.count,
                "minutes": self.minutes, "first_ts": self.first_ts, "last_ts": self.last_ts,
                "raised_ts": self.raised_ts, "output": self.output, "cleared": self.cleared}


@dataclass
class SessionResult:
    """One session file replayed: its ``path`` (as given or found, scrubbed), ``backend``
    (the reader's name, or ``mini-swe-agent``), ``commands`` (shell calls with a result that
    reached the detector), ``failures`` among them, ``excluded`` (empty or excluded by C9:
    not counted), ``no_result`` (calls whose log gives no result: not counted) and the first
    :data:`MAX_NO_RESULT_SHOWN` of their commands as exported (``no_result_calls``),
    ``skipped`` (lines or rows the reader could not use, by reason), ``notes`` per setting,
    and ``unrecognized``: why the shell tool is called in it but no shell call was recognised
    (``unread_call`` or ``no_end``, :mod:`repeat_failure.sessions.unrecognized`; ``""`` when
    its calls were read)."""

    path: str
    backend: str
    commands: int = 0
    failures: int = 0
    excluded: int = 0
    no_result: int = 0
    skipped: Counter = field(default_factory=Counter)
    notes: dict[Setting, list[ReplayNote]] = field(default_factory=dict)
    no_result_calls: list[str] = field(default_factory=list)
    unrecognized: str = ""

    def to_json(self) -> dict[str, Any]:
        """The session as ``--json`` gives it (notes flattened, each with its setting)."""
        return {"path": self.path, "backend": self.backend, "commands": self.commands,
                "failures": self.failures, "excluded": self.excluded,
                "no_result": self.no_result, "no_result_calls": list(self.no_result_calls),
                "unrecognized": self.unrecognized or None,
                "skipped": dict(sorted(self.skipped.items())),
                "notes": [{"threshold": s.threshold, "window_s": s.window_s, "match": s.match,
                           **n.to_json()}
                          for s in sorted(self.notes) for n in self.notes[s]]}


@dataclass(frozen=True)
class BadFile:
    """A file reported and skipped: its ``path`` (scrubbed) and what was wrong."""

    path: str
    reason: str


@dataclass
class SummaryRow:
    """The summary of one setting over all sessions: ``sessions``, ``commands``,
    ``failures``, ``sessions_with_note``, ``notes``, and the notes by output."""

    setting: Setting
    sessions: int = 0
    commands: int = 0
    failures: int = 0
    sessions_with_note: int = 0
    notes: int = 0
    same: int = 0
    changing: int = 0
    unknown: int = 0

    def to_json(self) -> dict[str, Any]:
        """The row as ``--json`` gives it."""
        return {"threshold": self.setting.threshold, "window_s": self.setting.window_s,
                "match": self.setting.match, "sessions": self.sessions, "commands": self.commands,
                "failures": self.failures, "sessions_with_note": self.sessions_with_note,
                "notes": self.notes, "output": {SAME: self.same, CHANGING: self.changing,
                                                UNKNOWN: self.unknown}}


@dataclass
class ReplayResult:
    """A whole replay: the ``settings`` judged, the ``sessions`` read (in the order found) and
    the ``bad`` files skipped."""

    settings: list[Setting]
    sessions: list[SessionResult] = field(default_factory=list)
    bad: list[BadFile] = field(default_factory=list)

    def summary(self) -> list[SummaryRow]:
        """One row per setting, in the order given."""
        rows = []
        for setting in self.settings:
            row = SummaryRow(setting, sessions=len(self.sessions))
            for session in self.sessions:
                row.commands += session.commands
                row.failures += session.failures
                notes = session.notes.get(setting, [])
                row.sessions_with_note += bool(notes)
                row.notes += len(notes)
                for note in notes:
                    setattr(row, note.output, getattr(row, note.output) + 1)
            rows.append(row)
        return rows

    @property
    def no_result(self) -> tuple[int, int]:
        """``(calls, sessions)``: calls without a result over all sessions, and the sessions
        that had any."""
        return (sum(s.no_result for s in self.sessions),
                sum(1 for s in self.sessions if s.no_result))

    @property
    def unrecognized(self) -> list[SessionResult]:
        """The sessions whose shell calls were not recognised, in the order read."""
        return [s for s in self.sessions if s.unrecognized]

    def to_json(self) -> dict[str, Any]:
        """The one JSON document ``--json`` prints."""
        return {"settings": [{"threshold": s.threshold, "window_s": s.window_s,
                              "match": s.match} for s in self.settings],
                "sessions": [s.to_json() for s in self.sessions],
                "bad_files": [{"path": b.path, "reason": b.reason} for b in self.bad],
                "no_result": self.no_result[0],
                "unrecognized": len(self.unrecognized),
                "summary": [r.to_json() for r in self.summary()]}


def _when(ts: float) -> str:
    try:
        return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return f"{ts:.0f}"


def _setting_text(s: Setting) -> str:
    return (f"threshold {s.threshold}, window {s.window_s:g} s"
            + (", by exit alone" if s.match == MATCH_EXIT else ""))


def format_text(result: ReplayResult) -> str:
    """The replay as text: each bad file; each session log whose shell calls were not
    recognised (``unrecognized <path> (<backend>): …``, issue 26); each session with calls
    without a result (their count and the first :data:`MAX_NO_RESULT_SHOWN` commands); each
    session with a note (its counts, then per note the command as exported, exit, count,
    minutes, output and when it was raised; under each setting when there are several); the
    totals of those calls and sessions when there are any; then the summary table, one row
    per setting (always the last lines)."""
    lines: list[str] = []
    many = len(result.settings) > 1
    for b in result.bad:
        lines.append(f"skipped {b.path}: {b.reason}")
    for s in result.unrecognized:
        why = UNRECOGNIZED_TEXT.get(s.unrecognized, s.unrecognized)
        lines.append(f"unrecognized {s.path} ({s.backend}): the shell tool is called but no "
                     f"shell call was recognised ({why}): its commands are not judged; a CLI "
                     "release whose session log this version does not read?")
    for s in result.sessions:
        if not s.no_result:
            continue
        lines.append(f"{s.path} ({s.backend}): {s.no_result} "
                     f"call{'' if s.no_result == 1 else 's'} without a result (the log gives no "
                     "exit status): not judged")
        lines += [f"  no result: {label_value(c)}" for c in s.no_result_calls]
        if s.no_result > len(s.no_result_calls):
            lines.append(f"  … and {s.no_result - len(s.no_result_calls)} more")
    for s in result.sessions:
        if not any(s.notes.values()):
            continue
        extra = "".join(f", {n} {what}" for n, what in ((s.excluded, "excluded"),
                                                        (s.no_result, "without a result"))
                        if n)
        if s.skipped:
            extra += ", skipped " + ", ".join(f"{r} {n}" for r, n in sorted(s.skipped.items()))
        lines.append(f"{s.path} ({s.backend}): {s.commands} commands, {s.failures} failures"
                     f"{extra}")
        for setting in result.settings:
            notes = s.notes.get(setting, [])
            if many:
                lines.append(f"  {_setting_text(setting)}: {len(notes)} "
                             f"note{'' if len(notes) == 1 else 's'}")
            for n in notes:
                result_text = "(failed)" if n.exit == "failed" else f"(exit {n.exit})"
                lines.append(f"{'    ' if many else '  '}note: {label_value(n.command)} "
                             f"{result_text}: {n.count} failures in {n.minutes} min, output "
                             f"{n.output}, raised {_when(n.raised_ts)}"
                             + (f", cleared ({n.cleared})" if n.cleared else ""))
    calls, sessions = result.no_result
    if calls:
        lines.append(f"calls without a result: {calls} in {sessions} "
                     f"session{'' if sessions == 1 else 's'} (not judged)")
    if result.unrecognized:
        n = len(result.unrecognized)  # type: ignore[assignment]
        lines.append(f"session logs not recognised: {n} (their commands are not judged)")
    if lines:
        lines.append("")
    header = ("threshold", "window_s", "match", "sessions", "commands", "failures",
              "sessions_with_note", "notes", "same", "changing", "unknown")
    rows = [header] + [(str(r.setting.threshold), f"{r.setting.window_s:g}", r.setting.match,
                        str(r.sessions),
                        str(r.commands), str(r.failures), str(r.sessions_with_note),
                        str(r.notes), str(r.same), str(r.changing), str(r.unknown))
                       for r in result.summary()]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        lines.append("  ".join(cell.rjust(w) for cell, w in zip(row, widths)).rstrip())
    return "\n".join(lines) + "\n"


class Progress:
    """Progress over the bytes to replay, on stderr: a tqdm bar that shows only when stderr is
    a terminal (tqdm's ``disable=None``) and the replay takes over half a second (``delay``),
    so a short replay, a pipe or a CI log never gets one. Issue 19 chose tqdm (one pure-Python
    wheel of 80 KB, no dependency on Linux; 24 ms to import after the sidecar's own modules,
    about 0.3 µs per update; see the closing note of issue 19)."""

    def __init__(self, total: int, stream=None) -> None:
        from tqdm import tqdm

        self._bar = tqdm(total=total, unit="B", unit_scale=True, delay=0.5, leave=False,
                         disable=None, file=stream or sys.stderr, desc="replay")

    def __call__(self, n: int) -> None:
        self._bar.update(n)

    def close(self) -> None:
        """Remove the bar."""
        self._bar.close()
