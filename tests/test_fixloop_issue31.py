"""Issue 31, the fix loop as design adr-0010 says, driven as an operator runs it: each pass is
``repeat-failure fixloop --once --config FILE`` in its own process, against the fake GitHub on
127.0.0.1 (tests/fakegithub.py: GitHub's published schema) and real agent webhooks, with the
ledger file carried from pass to pass. Each test failed before the fix it guards:

1. a PR escalated only by its label (the ledger lost, or the label found on the PR) is
   un-parked when its head goes green;
2. after a green repair, the next escalation gets the hand-off note;
3. kicks have three tiers: the owner, then ``notifier.fixer_url``, then
   ``notifier.scanner_url``, when the owner is paused or unreachable;
4. a label counts as confirmed only when a listing shows it on the PR.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from repeat_failure.fixloop.config import ESCALATION_HEADING
from tests.fakegithub import FakeGitHub
from tests.test_fixloop_rules import Webhook

REPO = "acme/web"
AGENT = "acme-agent"
TOKEN = "-".join(["fixloop", "test", "token"])
GREEN_NOTE = ("CI is green at `{sha}`: the fix loop is over. Removed `needs-human`; the PR's "
              "attempt count starts again from zero.")
HANDOFF = "**Hand-off: no further automated pass is coming.**"


def sha(n: int) -> str:
    return f"{n:040x}"


def tree(n: int) -> str:
    return f"{n + 0xa000:040x}"


def red(gh: FakeGitHub, head: str, ago_s: float = 0.0) -> None:
    gh.set_check_runs(REPO, head, [dict(name="test", conclusion="failure",
                                        completed_at=time.time() - ago_s,
                                        output=dict(title="test failed", summary="1 failed"))])


def green(gh: FakeGitHub, head: str) -> None:
    gh.set_check_runs(REPO, head, [dict(name="test", conclusion="success",
                                        completed_at=time.time())])


class Operator:
    """Writes the fixloop's config file and runs ``repeat-failure fixloop --once`` with it."""

    def __init__(self, tmp_path: Path, gh: FakeGitHub, **section: object) -> None:
        (tmp_path / "token").write_text(TOKEN + "\n")
        self.ledger = tmp_path / "ledger.sqlite"
        config = {"repositories": [REPO], "api_url": gh.url,
                  "token_file": str(tmp_path / "token"), "ledger": str(self.ledger),
                  "interval_s": 10, **section}
        self.path = tmp_path / "fixloop.yaml"
        self.path.write_text(json.dumps({"fixloop": config}))  # JSON is YAML

    def once(self) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("REPEAT_FAILURE_", "GITHUB_TOKEN"))}
        return subprocess.run([sys.executable, "-m", "repeat_failure", "fixloop", "--once",
                               "--config", str(self.path)],
                              capture_output=True, text=True, timeout=60, env=env)

    def sweep(self) -> list[dict]:
        """One pass that must exit 0; its JSON log lines."""
        done = self.once()
        assert done.returncode == 0, done.stderr
        return [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]


def events(lines: list[dict]) -> list[str]:
    return [line["event"] for line in lines if line.get("event", "").startswith("fixloop_")
            and line["event"] != "fixloop_sweep"]


def escalations(gh: FakeGitHub) -> list[str]:
    return [c for c in gh.comments(REPO, 1) if c.startswith(f"## {ESCALATION_HEADING}")]


@pytest.fixture
def gh():
    with FakeGitHub(token=TOKEN) as fake:
        yield fake


# -- 1. label-led un-parking ---------------------------------------------------------------------

def test_a_label_found_on_the_pr_is_unparked_when_the_head_goes_green(tmp_path, gh):
    """The label was on the PR before the fix loop first saw it. It used to stay on the green
    head for good, without a comment."""
    gh.add_pr(REPO, 1, AGENT, sha(1), tree(1), labels=("needs-human",))
    red(gh, sha(1))
    op = Operator(tmp_path, gh)
    assert events(op.sweep()) == ["fixloop_label_adopted"]
    assert gh.comments(REPO, 1) == []               # escalated by the label: no evidence comment
    gh.push(REPO, 1, sha(2), tree(2))
    green(gh, sha(2))
    assert events(op.sweep()) == ["fixloop_unparked"]
    assert gh.labels(REPO, 1) == []
    assert gh.comments(REPO, 1) == [GREEN_NOTE.format(sha=sha(2)[:12])]


def test_an_escalation_whose_ledger_was_lost_is_unparked_when_the_head_goes_green(tmp_path, gh):
    """The fix loop escalated the PR, then its ledger was lost (a new volume, a restore): the
    label alone says escalated, and a green head used to keep it forever."""
    gh.add_pr(REPO, 1, AGENT, sha(1), tree(1))
    red(gh, sha(1))
    op = Operator(tmp_path, gh, threshold=1)
    assert events(op.sweep()) == ["fixloop_escalated"]
    assert gh.labels(REPO, 1) == ["needs-human"] and len(escalations(gh)) == 1
    for path in tmp_path.glob("ledger.sqlite*"):
        path.unlink()
    gh.push(REPO, 1, sha(2), tree(2))
    green(gh, sha(2))
    assert events(op.sweep()) == ["fixloop_label_adopted", "fixloop_unparked"]
    assert gh.labels(REPO, 1) == []
    assert gh.comments(REPO, 1)[1:] == [GREEN_NOTE.format(sha=sha(2)[:12])]
    assert len(escalations(gh)) == 1
    # The label was the record of a first escalation: the next one is the hand-off.
    gh.push(REPO, 1, sha(3), tree(3))
    red(gh, sha(3))
    assert [(line["event"], line.get("kind")) for line in op.sweep()
            if line.get("event") == "fixloop_escalated"] == [("fixloop_escalated", "handoff")]
    assert HANDOFF in escalations(gh)[1]


# -- 2. the hand-off note after a green repair ------------------------------------------------

def test_a_second_escalation_after_a_green_repair_gets_the_handoff_note(tmp_path, gh):
    """Design adr-0010: "after the reviewer lane already repaired or de-escalated it". Only a
    label removal counted as the reviewer's pass: after a green head the second escalation got
    the generic body, and counted as ``first``."""
    gh.add_pr(REPO, 1, AGENT, sha(1), tree(1))
    red(gh, sha(1))
    op = Operator(tmp_path, gh, threshold=1)
    op.sweep()
    gh.push(REPO, 1, sha(2), tree(2))               # the repair: green
    green(gh, sha(2))
    assert events(op.sweep()) == ["fixloop_unparked"]
    gh.push(REPO, 1, sha(3), tree(3))               # red again
    red(gh, sha(3))
    lines = op.sweep()
    assert [(line["event"], line.get("kind")) for line in lines
            if line.get("event") == "fixloop_escalated"] == [("fixloop_escalated", "handoff")]
    first, second = escalations(gh)
    assert HANDOFF not in first
    assert HANDOFF in second
    assert "- The reviewer's pass (" in second
    assert f") left the branch at `{sha(2)[:12]}`." in second
    assert f"  - `{tree(3)[:12]}`" in second
    assert gh.labels(REPO, 1) == ["needs-human"]


# -- 3. the third kick tier --------------------------------------------------------------------

@pytest.mark.parametrize("paused,owner_status", [(True, 200), (False, 503)])
def test_a_kick_falls_back_to_the_fixer_then_the_scanner(tmp_path, gh, paused, owner_status):
    """Design adr-0010: the owner, "falling back to review.fixer_agent, then scanner, when the
    owner is paused or unreachable". ``scanner_url`` and ``paused`` were unknown keys (exit 2).
    A paused owner gets no request; an owner that answers 503 does, then the fixer (503 too),
    then the scanner, which takes the kick: delivered, and charged to the budget."""
    hooks = {name: Webhook(status) for name, status in
             (("owner", owner_status), ("fixer", 503), ("scanner", 202))}
    try:
        gh.add_pr(REPO, 1, AGENT, sha(1), tree(1))
        red(gh, sha(1), ago_s=7200)                 # settled two hours ago: stale
        op = Operator(tmp_path, gh, stale_after_s=3600, notifier={
            "agents": [{"login": AGENT, "url": hooks["owner"].url, "paused": paused}],
            "fixer_url": hooks["fixer"].url, "scanner_url": hooks["scanner"].url})
        lines = op.sweep()
        assert [k["target"] for k in hooks["owner"].kicks] == ([] if paused else ["owner"])
        assert [k["target"] for k in hooks["fixer"].kicks] == ["fixer"]
        assert [(k["target"], k["number"], k["head_sha"], k["reengagement"])
                for k in hooks["scanner"].kicks] == [("scanner", 1, sha(1), 1)]
        delivered = [line for line in lines if line.get("event") == "fixloop_reengaged"]
        assert [(d["target"], d["reengagement"]) for d in delivered] == [("scanner", 1)]
    finally:
        for hook in hooks.values():
            hook.close()


def test_check_config_takes_the_scanner_and_a_paused_agent_and_names_a_bad_one(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text("fixloop:\n  repositories: [acme/web]\n  notifier:\n"
                    "    scanner_url: http://scanner.agents.svc:8080/kick\n"
                    "    agents:\n      - {login: a, url: 'http://a:8080/kick', paused: true}\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("fixloop:\n  repositories: [acme/web]\n  notifier:\n"
                   "    agents:\n      - {login: a, url: 'http://a:8080/kick', paused: 'yes'}\n")
    run = [sys.executable, "-m", "repeat_failure", "check-config"]
    ok = subprocess.run(run + [str(good)], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    refused = subprocess.run(run + [str(bad)], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2
    assert refused.stderr.strip() == (f"repeat-failure: {bad}: fixloop.notifier.agents[0]."
                                      "paused: 'yes' is not of type 'boolean'")


# -- 4. a label is confirmed by a listing --------------------------------------------------------

def test_a_label_no_listing_showed_is_added_again_not_read_as_a_persons_removal(tmp_path, gh):
    """GitHub answered 200 to adding the label but it did not stick: the next listing does not
    show it. That used to count as a person removing a confirmed label: the PR un-parked with a
    fresh budget and a reviewer's stamp, and re-escalated with a second comment on its next red
    tree. Now the label is added again; once a listing shows it, a removal is a person's."""
    gh.add_pr(REPO, 1, AGENT, sha(1), tree(1))
    red(gh, sha(1))
    gh.fail("POST", r"/issues/1/labels$", 200, times=1, body=[])  # 200, and nothing added
    op = Operator(tmp_path, gh, threshold=1)
    assert events(op.sweep()) == ["fixloop_escalated"]
    assert gh.labels(REPO, 1) == [] and len(escalations(gh)) == 1
    assert events(op.sweep()) == ["fixloop_label_missing"]
    assert gh.labels(REPO, 1) == ["needs-human"]
    gh.push(REPO, 1, sha(2), tree(2))               # another red tree: still parked
    red(gh, sha(2))
    assert events(op.sweep()) == []
    assert len(escalations(gh)) == 1
    gh.remove_label_by_human(REPO, 1, "needs-human")
    lines = op.sweep()
    assert [(line["event"], line.get("reason")) for line in lines
            if line.get("event") == "fixloop_unparked"] == [("fixloop_unparked",
                                                             "label_removed")]
    assert len(escalations(gh)) == 1 and gh.labels(REPO, 1) == []
