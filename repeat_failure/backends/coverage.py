"""Coverage table (spec C4, C5, C12, C13): which backends the check covers, and how.

A backend is covered only when its real CLI produced a correct record in the committed,
re-runnable harness (C4); the row then names its route, the shell-activity signal the
"not receiving data" safeguard uses (or "safeguard unavailable"), the evidence file and the CLI
version. Every other backend is listed as not covered with the reason and the follow-up issue,
and its agent rows say "repeat-failure check not available for this backend" (C5, C-AC9).

Hive's backends (docs/backend-support.md "The table") have ``hive=True``; agent CLIs platform teams run
beyond Hive's list (issue 15, item 7: Qwen Code, Cline, Continue, Factory Droid, Crush) have
``hive=False`` and their own table (:func:`table_rows` with ``hive=False``), under the same rules.

``docs/backend-support.md`` carries the same tables for people; ``tests/test_coverage.py`` fails
when a backend is missing here or the tables differ (C-AC11).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from repeat_failure.backends import session_reader

SAFEGUARD_UNAVAILABLE = "safeguard unavailable"


@dataclass(frozen=True)
class CoverageRow:
    """One backend's row. ``kind`` is ``cli``, ``inference`` (runs through the Claude Code
    route) or ``pseudo`` (``bash``: any program that runs commands with ``bash -c``).

    Covered rows carry ``route``, ``shell_activity`` and ``evidence`` (a path under
    ``harness/evidence/``, or the test module for ``bash``), ``version`` (the pinned release)
    and ``also_verified``: the earlier releases whose real captures the tests still run on
    (``harness/evidence/versions/<backend>/<version>/``, issue 15's version matrix; users upgrade
    at different times); ``also_verified[-1]`` is the oldest release the route is verified on
    (CI re-runs it: ``python -m harness run --covered --oldest``). ``read_only`` names still older
    releases (newest first) whose real captures are kept and read by the backend's session-log
    reader, but whose commands the route does not record, and ``read_only_note`` says why (issue
    26 item 3: every session-log format users run is read). Rows not covered carry ``reason``
    and ``follow_up`` (an issue reference). ``hive`` is False for a backend beyond Hive's list (docs/backend-support.md
    "Beyond Hive's list").
    """

    backend: str
    name: str
    kind: str
    covered: bool
    route: str = ""
    shell_activity: str = ""
    evidence: str = ""
    version: str = ""
    also_verified: tuple[str, ...] = ()
    read_only: tuple[str, ...] = ()
    read_only_note: str = ""
    #: Why the pin is not the newest release, when it is not: the registry's own error for a
    #: newest release that does not install (``python -m harness drift``).
    pin_note: str = ""
    reason: str = ""
    follow_up: str = ""
    hive: bool = True

    @property
    def status(self) -> str:
        """``covered`` or ``not covered``, as the docs table writes it."""
        return "covered" if self.covered else "not covered"


_NO_EVIDENCE = "no real-run evidence yet: the real-CLI harness has not produced a record"
_HARNESS_ISSUE = "#4 (real-CLI harness)"
_NOT_INSTALLABLE = "CLI not installable from a package registry on the harness machine"


def _not_covered(backend: str, name: str, kind: str = "cli", reason: str = _NO_EVIDENCE,
                 follow_up: str = _HARNESS_ISSUE, hive: bool = True) -> CoverageRow:
    return CoverageRow(backend, name, kind, False, reason=reason, follow_up=follow_up, hive=hive)


def shell_activity_signal(backend: str) -> str:
    """The shell-activity signal the C12 safeguard uses for ``backend``: its session-log
    reader's :attr:`~repeat_failure.backends.SessionLogReader.signal`, or "safeguard unavailable" with
    the reason (no reader; or the session log is the backend's route, so no independent
    signal)."""
    reader = session_reader(backend)
    if reader is None:
        return f"{SAFEGUARD_UNAVAILABLE} (no session log with shell calls to read)"
    if reader.route_records:
        return (f"{SAFEGUARD_UNAVAILABLE} (the session log is this backend's route, so it is "
                f"no independent signal); route: {reader.signal}")
    return reader.signal


def _covered(backend: str, name: str, version: str, kind: str = "cli",
             evidence_of: str | None = None, route: str = "bash_env",
             also: tuple[str, ...] = (), shell_activity: str | None = None,
             hive: bool = True, pin_note: str = "", read_only: tuple[str, ...] = (),
             read_only_note: str = "") -> CoverageRow:
    """A covered row; ``evidence_of`` names the backend whose harness run is the evidence (an
    inference backend runs through the Claude Code CLI, so Claude Code's run covers it);
    ``also`` the earlier releases verified on their kept captures, newest first;
    ``shell_activity`` replaces :func:`shell_activity_signal`'s text (a backend whose session log
    has shell calls but no reader yet); ``pin_note`` says why the pin is not the newest;
    ``read_only`` the older releases only the session-log reader is verified on, and
    ``read_only_note`` why the route records nothing there."""
    return CoverageRow(backend, name, kind, True, route=route,
                       shell_activity=shell_activity or shell_activity_signal(backend),
                       evidence=f"harness/evidence/{evidence_of or backend}.json", version=version,
                       also_verified=also, hive=hive, pin_note=pin_note, read_only=read_only,
                       read_only_note=read_only_note)


#: The earlier Claude Code releases verified on their kept captures, newest first (issue 26 item 3:
#: the oldest release of the last 12 months, 2.0.56, and each release where the wrapper or the
#: session log changed, found by bisecting the installable releases; docs/backend-support.md
#: "Versions"). The inference backends run through the same CLI, so their rows name them too.
CLAUDE_ALSO = ("2.1.314", "2.1.277", "2.1.268", "2.1.218", "2.1.212", "2.1.197", "2.1.89",
               "2.1.86", "2.1.70", "2.0.77", "2.0.57", "2.0.56")
#: The same for Gemini CLI: 0.39.0 is its first release with a JSON Lines chat file; 0.19.1 to
#: 0.38.2 write one JSON document (read as a document, GeminiReader.file_kind): 0.38.2 is the last
#: of them, 0.36.0 the last with the ``{ <cmd>; }`` wrapper (0.25.0 is the first whose shell
#: tool no longer refuses a command before its parser has loaded, but its CLI made 4 of the 5
#: calls of the repeated run; bisected in the 0.26-0.35 gap: 0.28.1 is the first to make all
#: five (0.29.0 to 0.31.0 run alike, the turn's calls in one message), 0.32.1 the first to
#: write one message per call (as 0.33.0 and 0.36.0); 0.27.0 and 0.27.4 still make 4 of the 5
#: calls, read exactly; 0.27.0 is the oldest kept).
GEMINI_ALSO = ("0.54.4", "0.45.2", "0.44.0", "0.40.0", "0.39.0", "0.38.2",
               "0.36.0", "0.32.1", "0.30.0", "0.28.1", "0.27.0")


_ROWS = (
    _covered("bash", "bash -c (pseudo-backend: any program that runs commands with bash -c)",
             "5.2.15", kind="pseudo"),
    _covered("claude", "Claude Code", "2.1.332", also=CLAUDE_ALSO),
    # Codex: the first release of each session-log format since December 2025 (issue 26;
    # repeat_failure/backends/codex.py CodexReader), newest first; 0.64.0 is the oldest.
    _covered("codex", "OpenAI Codex CLI", "0.171.0",
             also=("0.148.0", "0.145.0", "0.100.0", "0.96.0", "0.64.0")),
    _covered("gemini", "Gemini CLI", "0.61.0", also=GEMINI_ALSO),
    _covered("copilot", "GitHub Copilot CLI", "1.0.102", also=("1.0.85", "1.0.62"),
             read_only=("1.0.11",), read_only_note=(
                 "1.0.11 to 1.0.61 run each command in a pseudo-terminal shell session, which "
                 "BASH_ENV never sees (the route starts at 1.0.62); older releases cannot run "
                 "against the stub (no custom-provider settings)")),
    # opencode: 1.2.1 is the oldest release with the SQLite store; 1.1.65 and 1.0.152 keep their
    # sessions as JSON files under storage/ (repeat_failure/backends/opencode_storage.py).
    _covered("opencode", "opencode", "1.18.33", also=("1.2.1", "1.1.65", "1.0.152")),
    _covered("pi", "pi", "1.6.0", also=("0.73.1", "0.31.1"), read_only=("0.27.9",),
             read_only_note=(
                 "0.27.9 to 0.30.2 run the bash tool as sh -c (0.31.1 runs /bin/bash), which never "
                 "loads BASH_ENV; 0.13.2, the one older release of the last 12 months that "
                 "installs here, writes no session file with -p")),
    _covered("omp", "Oh My Pi", "18.2.3", route="omp_session_log", also=("17.2.15", "14.9.9"),
             pin_note=(
        "newest 18.3.4 does not install: npm error code ETARGET, No matching version found for "
        "@oh-my-pi/omp-stats@18.3.4")),
    _covered("kilo", "Kilo Code CLI", "7.7.7", also=("7.0.33",), pin_note=(
        "newest 7.8.1 does not install: npm error code ETARGET, No matching version found for "
        "@kilocode/cli-linux-x64-baseline-musl@7.8.1")),
    _not_covered("aider", "aider", reason=(
        "aider 0.86.2 runs a suggested command only when a person answers yes (--yes-always "
        "declines), then through /bin/sh -c (no tty) or $SHELL -i -c (a tty); neither loads "
        "BASH_ENV, and aider keeps no exit status anywhere"),
        follow_up="new issue: a guarded ~/.bashrc route for aider's interactive shell "
                  "(tty case), exit status from the shell itself"),
    _not_covered("goose", "Block Goose", reason=_NOT_INSTALLABLE),
    _not_covered("agy", "Google Antigravity CLI", reason=_NOT_INSTALLABLE),
    _not_covered("bob", "IBM Bob shell", reason=_NOT_INSTALLABLE),
    _not_covered("muse", "Meta Muse Code", reason="CLI not public"),
    _covered("vllm", "vLLM (through the Claude Code route)", "2.1.332", kind="inference",
             evidence_of="claude", also=CLAUDE_ALSO),
    _covered("llm-d", "llm-d (through the Claude Code route)", "2.1.332", kind="inference",
             evidence_of="claude", also=CLAUDE_ALSO),
    _covered("litellm", "LiteLLM (through the Claude Code route)", "2.1.332", kind="inference",
             evidence_of="claude", also=CLAUDE_ALSO),
    _covered("watsonx", "watsonx (through the Claude Code route)", "2.1.332", kind="inference",
             evidence_of="claude", also=CLAUDE_ALSO),
    # Beyond Hive's list (issue 15, item 7): agent CLIs platform teams run, tried from npm.
    # Qwen Code: 0.5.0 (the oldest release of the last 12 months served here) to 0.10.1 wrap the
    # command (the qwen stripper); 0.12.0 to 0.24.2 write a display string where 0.24.3 on
    # writes a shell_result object (issue 26 item 3; docs/backend-support.md).
    _covered("qwen", "Qwen Code", "0.24.4", hive=False, also=("0.24.2", "0.12.0", "0.5.0")),
    # Cline CLI: 3.0.57 (the oldest 3.0 release served here) writes the same session files;
    # 2.x is another program with another log, its task's ui_messages.json (2.18.0 and 2.14.0,
    # the oldest 2.x served, verified; repeat_failure/backends/cline_tasks.py); 1.0.x does not
    # run on the harness's Node (docs/backend-support.md).
    _covered("cline", "Cline CLI", "3.0.65", hive=False, also=("3.0.57", "2.18.0", "2.14.0")),
    # Continue CLI: 1.5.11, the oldest release served here, verified too (issue 26 item 3).
    _covered("continue", "Continue CLI (cn)", "1.5.47", hive=False, also=("1.5.11",)),
    # Droid's Execute runs the command in a nested shell of its supervisor script; the hook
    # records that inner command (hooks/bash_env.slow.bash).
    _covered("droid", "Factory Droid", "0.215.0", hive=False),
    _not_covered("crush", "Charm Crush", reason=(
        "npm install @charmland/crush@0.96.1 fails: its postinstall downloads the binary from "
        "github.com (\"Error: Installation failed: Request failed: getaddrinfo ENOTFOUND "
        "github.com\"); the Go module proxy answers 403 Forbidden for "
        "github.com/charmbracelet/crush@v0.96.1"),
        follow_up="new issue: install Crush from a registry that serves its binary or source",
        hive=False),
)

#: backend name -> row, for every backend the product knows (read-only).
COVERAGE: MappingProxyType[str, CoverageRow] = MappingProxyType({r.backend: r for r in _ROWS})


def is_covered(backend: str) -> bool:
    """True when ``backend`` has a covered row; unknown backends are not covered."""
    row = COVERAGE.get(backend)
    return row is not None and row.covered


def table_rows(hive: bool = True) -> list[list[str]]:
    """The table as text cells (backend, route, status, evidence, follow-up), the same columns as
    ``docs/backend-support.md``: Hive's backends, or with ``hive=False`` those beyond Hive's list
    (the docs' second table); used by ``repeat-failure coverage`` and the docs test."""
    rows = []
    for r in (r for r in _ROWS if r.hive == hive):
        detail = r.evidence if r.covered else r.reason
        versions = "; ".join([r.version] + ([f"also verified {', '.join(r.also_verified)}"]
                                            if r.also_verified else [])
                             + ([f"session log also read on {', '.join(r.read_only)}: "
                                 f"{r.read_only_note}"] if r.read_only else [])
                             + ([r.pin_note] if r.pin_note else []))
        rows.append([r.backend, r.route or "-", r.status,
                     f"{detail} ({versions})" if r.version else detail,
                     r.shell_activity or "-", r.follow_up or "-"])
    return rows


TABLE_HEADER = ["backend", "route", "status", "evidence / reason", "shell-activity signal",
                "follow-up issue"]
