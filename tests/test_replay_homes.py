"""``repeat-failure replay`` (issue 26 item 4): a directory of homes is searched home by home,
calls without a result are reported, and a SWE-agent ``.traj`` holding both a ``history``
list and a ``messages`` list of lists is read.

The homes hold copies of the harness's real captures (found through the evidence JSON); the
SWE-agent file is ``tests/fixtures/swe-agent-history/sweagent__both-5.traj``, built for this
test on the shape seen in public SWE-agent runs of 2024 (a ``history`` of chat messages whose
observations mostly carry no ``<returncode>``, beside ``trajectory`` steps and a ``messages``
list of lists, each the conversation as sent at one step): it is not a real run.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from sessionlogs import EVIDENCE_DIR, evidence_of
from repeat_failure.cli import main

FIXTURE = Path(__file__).parent / "fixtures" / "swe-agent-history" / "sweagent__both-5.traj"
HEADER = ("threshold  window_s   match  sessions  commands  failures  sessions_with_note  notes  "
          "same  changing  unknown")
#: The fixture's file time (a SWE-agent trajectory has no times: the file's is used).
MTIME = 1796090000


def put_home(home: Path, backend: str) -> str:
    """Copy the backend's real five-failure session into ``home``; its path under the home."""
    (rel,) = evidence_of(backend)["session_files"]
    (home / rel).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(EVIDENCE_DIR / backend / rel, home / rel)
    return rel


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["replay", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_directory_of_homes_is_searched_home_by_home(tmp_path: Path, capsys) -> None:
    """/data/homes holding alice/ (a Claude Code home) and team/bob/ (a Codex home): both
    sessions are found, in path order. Not searched: a home nested in a home (alice/old/, a pi
    home), a hidden folder (.trash/carol/), a symlink to a home (link -> alice)."""
    homes = tmp_path / "homes"
    alice = put_home(homes / "alice", "claude")
    bob = put_home(homes / "team" / "bob", "codex")
    put_home(homes / "alice" / "old", "pi")
    put_home(homes / ".trash" / "carol", "pi")
    (homes / "link").symlink_to(homes / "alice")
    code, out, err = run(capsys, "--json", str(homes))
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert [(s["path"], s["backend"], s["commands"], s["failures"]) for s in doc["sessions"]] == [
        (f"{homes}/alice/{alice}", "claude", 5, 5), (f"{homes}/team/bob/{bob}", "codex", 5, 5)]


def test_homes_are_looked_for_four_levels_down(tmp_path: Path, capsys) -> None:
    """A home four folders below the directory given is found; five is too deep (nothing
    found: exit 1, an empty table, the message saying how deep homes are looked for)."""
    root = tmp_path / "root"
    rel = put_home(root / "a" / "b" / "c" / "d", "pi")
    code, out, _ = run(capsys, "--json", str(root))
    assert code == 0
    assert [s["path"] for s in json.loads(out)["sessions"]] == [f"{root}/a/b/c/d/{rel}"]
    deep = tmp_path / "deep"
    put_home(deep / "a" / "b" / "c" / "d" / "e", "pi")
    code, out, err = run(capsys, str(deep))
    assert (code, out.splitlines()[0]) == (1, HEADER)
    assert err == ("repeat-failure replay: no session file or trajectory found under the paths "
                   "given (a directory is searched as an agent's home, or for homes up to 4 "
                   "levels below it: docs/operations.md)\n")


def test_a_home_given_is_searched_as_one(tmp_path: Path, capsys) -> None:
    """A directory that is itself a home is not also searched for homes below it: the pi home
    under alice/old/ stays out, as the sidecar's search of alice's home leaves it out."""
    alice = tmp_path / "alice"
    rel = put_home(alice, "claude")
    put_home(alice / "old", "pi")
    code, out, _ = run(capsys, "--json", str(alice))
    assert code == 0
    assert [s["path"] for s in json.loads(out)["sessions"]] == [f"{alice}/{rel}"]


def test_swe_agent_history_beside_a_messages_list_of_lists(tmp_path: Path, capsys) -> None:
    """The fixture is read from its history (before, its messages list of lists made it
    "not a mini-swe-agent file"): five actions, two with a <returncode> (the failing test run,
    exit 1, then the passing one), three without (open, edit, submit), listed with their
    commands as exported; at threshold 1 the failure is a note cleared by the passing run."""
    dest = tmp_path / "runs" / FIXTURE.name
    dest.parent.mkdir()
    shutil.copy(FIXTURE, dest)
    os.utime(dest, (MTIME, MTIME))
    code, out, err = run(capsys, "--threshold", "1", str(dest.parent))
    assert (code, err) == (0, "")
    assert out == (
        f"{dest} (mini-swe-agent): 3 calls without a result (the log gives no exit status): "
        "not judged\n"
        "  no result: open src/parse.py\n"
        "  no result: edit 41:41 return n + 1 end_of_edit\n"
        "  no result: submit\n"
        f"{dest} (mini-swe-agent): 2 commands, 1 failures, 3 without a result\n"
        "  note: python -m pytest tests/test_parse.py -x (exit 1): 1 failures in 1 min, output "
        "same, raised 2026-12-01 01:53:20Z, cleared (success)\n"
        "calls without a result: 3 in 1 session (not judged)\n"
        "\n"
        f"{HEADER}\n"
        "        1       600  output         1         2         1                   1      1     1"
        "         0        0\n")
    code, out, _ = run(capsys, "--json", str(dest))
    (session,) = json.loads(out)["sessions"]
    assert (session["commands"], session["no_result"], session["no_result_calls"],
            json.loads(out)["no_result"]) == (
        2, 3, ["open src/parse.py", "edit 41:41 return n + 1 end_of_edit", "submit"], 3)


def test_only_the_first_five_calls_without_a_result_are_listed(tmp_path: Path,
                                                               capsys) -> None:
    """Seven calls without a result: the count is exact, five commands are printed, then how
    many more."""
    doc = json.loads(FIXTURE.read_text())
    history = doc["history"][:2]
    for i in range(7):
        history += [{"role": "assistant", "content": "", "action": f"cat file{i}.py\n"},
                    {"role": "user", "content": f"contents of file{i}"}]
    dest = tmp_path / "seven.traj"
    dest.write_text(json.dumps({"history": history, "messages": [history[:2]]}))
    code, out, _ = run(capsys, str(dest))
    assert code == 0
    assert out.split("\n\n")[0] == "\n".join([
        f"{dest} (mini-swe-agent): 7 calls without a result (the log gives no exit status): "
        "not judged",
        *[f"  no result: cat file{i}.py" for i in range(5)],
        "  … and 2 more",
        "calls without a result: 7 in 1 session (not judged)"])
