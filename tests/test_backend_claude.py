"""Claude Code's wrapper and helper shells (spec C7, C8, C-AC4), on the harness's real records."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from sidecar.normalize import normalize

EVIDENCE = json.loads((Path(__file__).resolve().parent.parent / "harness" / "evidence"
                       / "claude.json").read_text())
RECORDS = [r for run in EVIDENCE["runs"] for r in run["records"]]
WRAPPED = [r for r in RECORDS if r["raw"].startswith("source ")]


def wrap(command: str, snapshot: str = "/root/.claude/shell-snapshots/snapshot-bash-1-x.sh") -> str:
    """Claude Code's wrapper as the real runs show it, around ``command`` (quoted the way its
    single-word commands and `'...'` forms in the evidence are)."""
    return (f"source {snapshot} 2>/dev/null || true && shopt -u extglob 2>/dev/null || true"
            f" && eval {shlex.quote(command)} < /dev/null && pwd -P >| /tmp/claude-1a2b-cwd")


def test_evidence_has_wrapped_commands_and_helpers() -> None:
    """The real run recorded wrapped agent commands and helper shells (an env probe, the
    snapshot writer)."""
    assert len(WRAPPED) == 8  # 1 + 1 + 1 + 5 agent commands
    helpers = [r for r in RECORDS if not r["raw"].startswith("source ")]
    assert {r["raw"].split("\n", 1)[0].split("=", 1)[0] for r in helpers} == {"env", "SNAPSHOT_FILE"}


def test_wrapped_ls_compares_equal_to_bare_command() -> None:
    """C-AC4: Claude Code's wrapped form of `ls /nonexistent` normalizes to the bare command."""
    first = EVIDENCE["runs"][0]
    (record,) = [r for r in first["records"] if r["raw"].startswith("source ")]
    assert normalize(record["raw"], "claude") == "ls /nonexistent"
    assert record["exit"] == 2


def test_every_real_agent_command_unwraps() -> None:
    """Every wrapped record of every real run unwraps to the command the stub asked for."""
    for run in EVIDENCE["runs"]:
        got = [(normalize(r["raw"], "claude"), r["exit"]) for r in run["records"]
               if r["raw"].startswith("source ")]
        expected_exit = {"ls /nonexistent": 2, "false": 1, "echo harness-ok": 0}[run["command"]]
        assert got == [(run["command"], expected_exit)] * run["repeat"]


def test_helper_shells_never_reach_the_detector() -> None:
    """C8: the env probe and the snapshot writer normalize to the empty command."""
    for record in RECORDS:
        if not record["raw"].startswith("source "):
            assert normalize(record["raw"], "claude") == ""


@pytest.mark.parametrize("command", [
    "ls /nonexistent", "false", 'echo "double" \'single\'', "make && make test || echo failed",
    "printf 'a\\nb'\necho second line", "cat <<'EOF'\nheredoc $HOME\nEOF", "it's", "a  b",
])
def test_stripper_round_trips(command: str) -> None:
    """C-AC4 for quotes, &&, newlines and heredocs: the wrapper comes off exactly (then the
    usual normalization applies: whitespace collapses)."""
    assert normalize(wrap(command), "claude") == normalize(command, "bash")


@pytest.mark.parametrize("backend", ["vllm", "llm-d", "litellm", "watsonx"])
def test_inference_backends_use_the_claude_stripper(backend: str) -> None:
    """Inference backends run through the Claude Code CLI: same wrapper, same result."""
    assert normalize(wrap("ls /nonexistent"), backend) == "ls /nonexistent"
