"""The fix-loop ledger's rules (design adr-0010; docs/fixloop.md "The ladder"), one test each,
against a fake GitHub on 127.0.0.1 (tests/fakegithub.py: the response shapes of GitHub's
published REST API description, github/rest-api-description) replaying scripted PR histories,
with the real client, the real SQLite ledger and a real webhook receiver for kicks. Time moves
through an injected clock, never by sleeping.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from repeat_failure.fixloop.app import FixloopApp
from repeat_failure.fixloop.config import ESCALATION_HEADING, parse_fixloop_config
from repeat_failure.fixloop.github import GitHub
from repeat_failure.fixloop.notify import Notifier
from tests.fakegithub import T0, FakeGitHub

REPO = "acme/web"
AGENT = "acme-agent"
HOUR = 3600.0


class Clock:
    def __init__(self) -> None:
        self.now = T0 + 1000.0

    def __call__(self) -> float:
        return self.now


class Webhook:
    """A real agent webhook on 127.0.0.1: records each kick; answers ``status``."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.kicks: list[dict] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hook.kicks.append(json.loads(body))
                self.send_response(hook.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/kick"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def gh():
    with FakeGitHub(token="test-token") as fake:
        yield fake


@pytest.fixture
def owner():
    hook = Webhook()
    yield hook
    hook.close()


@pytest.fixture
def fixer():
    hook = Webhook()
    yield hook
    hook.close()


def make(tmp_path: Path, gh: FakeGitHub, clock: Clock, owner: Webhook | None = None,
         fixer: Webhook | None = None, **overrides) -> FixloopApp:
    section = {"repositories": [REPO], "api_url": gh.url, "ledger": str(tmp_path / "ledger.sqlite"),
               "token_file": str(tmp_path / "no-token-file"), **overrides}
    notifier = {}
    if owner is not None:
        notifier["agents"] = [{"login": AGENT, "url": owner.url}]
    if fixer is not None:
        notifier["fixer_url"] = fixer.url
    if notifier:
        section["notifier"] = notifier
    config = parse_fixloop_config({"fixloop": section}, "test")
    github = GitHub(gh.url, "test-token", clock=clock, sleep=lambda s: None)
    return FixloopApp(config, github=github, notifier=Notifier(config), clock=clock)


def sha(n: int) -> str:
    return f"{n:040x}"


def tree(n: int) -> str:
    return f"{n + 0xa000:040x}"


def red(gh: FakeGitHub, head: str, at: float, name: str = "test", text: str = "") -> None:
    gh.set_check_runs(REPO, head, [dict(name=name, conclusion="failure", completed_at=at,
                                        output=dict(title=f"{name} failed", summary=text))])


def green(gh: FakeGitHub, head: str, at: float) -> None:
    gh.set_check_runs(REPO, head, [dict(name="test", conclusion="success", completed_at=at)])


def escalations(gh: FakeGitHub, number: int = 1) -> list[str]:
    return [c for c in gh.comments(REPO, number) if c.startswith(f"## {ESCALATION_HEADING}")]


def start(tmp_path: Path, gh: FakeGitHub, **kwargs) -> tuple[Clock, FixloopApp]:
    """A clock and a fixloop over one agent's PR #1, red at ``sha(1)``/``tree(1)``; ``kwargs``
    go to :func:`make` (webhooks, config overrides)."""
    clock = Clock()
    gh.add_pr(REPO, 1, AGENT, sha(1), tree(1))
    red(gh, sha(1), clock.now)
    return clock, make(tmp_path, gh, clock, **kwargs)


def push_red(gh: FakeGitHub, clock: Clock, n: int, number: int = 1, tree_n: int | None = None,
             name: str = "test") -> None:
    gh.push(REPO, number, sha(n), tree(n if tree_n is None else tree_n))
    red(gh, sha(n), clock.now, name)


def test_three_distinct_red_trees_escalate_once_with_the_evidence(tmp_path, gh, clock=None):
    clock = Clock()
    token = "ghp_" + "S" * 36
    gh.add_pr(REPO, 1, AGENT, sha(1), tree(1))
    red(gh, sha(1), clock.now, text=f"AssertionError: expected 2\nexport TOKEN={token}")
    app = make(tmp_path, gh, clock)
    assert app.run_once() == "complete"
    assert escalations(gh) == [] and gh.labels(REPO, 1) == []
    push_red(gh, clock, 2)
    app.run_once()
    assert escalations(gh) == []
    push_red(gh, clock, 3)
    red(gh, sha(3), clock.now, text=f"AssertionError: expected 2\nexport TOKEN={token}")
    app.run_once()
    [body] = escalations(gh)
    assert gh.labels(REPO, 1) == ["needs-human"]
    assert "CI has been red on 3 distinct head trees" in body
    assert f"**Failing checks** at `{sha(3)[:12]}`:\n- `test`: `failure` ([details](https://" \
        in body
    assert "**Re-engagements delivered:** 0" in body
    assert "AssertionError: expected 2" in body and token not in body and "[REDACTED]" in body
    app.run_once()
    app.run_once()
    assert len(escalations(gh)) == 1  # parked: no second comment
    entry = app.ledger.get(f"{REPO}#1")
    assert (entry.escalated, entry.label_confirmed, entry.escalations, len(entry.trees)) == \
        (True, True, 1, 3)


def test_an_empty_retrigger_commit_is_not_an_attempt(tmp_path, gh):
    clock, app = start(tmp_path, gh)
    app.run_once()
    for n in (2, 3, 4, 5):  # four `ci: retrigger` commits: new SHAs, the same tree
        push_red(gh, clock, n, tree_n=1)
        app.run_once()
    assert escalations(gh) == []
    assert app.ledger.get(f"{REPO}#1").trees == [tree(1)]


def test_checks_still_running_leave_the_ledger_untouched(tmp_path, gh):
    clock, app = start(tmp_path, gh)
    app.run_once()
    before = app.ledger.get(f"{REPO}#1")
    gh.push(REPO, 1, sha(2), tree(2))
    gh.set_check_runs(REPO, sha(2), [
        dict(name="test", conclusion="failure", completed_at=clock.now),
        dict(name="e2e", status="in_progress", conclusion=None)])  # red on one, others running
    clock.now += 2 * HOUR
    app.run_once()
    after = app.ledger.get(f"{REPO}#1")
    assert (after.trees, after.head_sha, after.red_since) == \
        (before.trees, before.head_sha, before.red_since)


def test_a_failed_check_fetch_leaves_the_ledger_untouched_and_is_counted(tmp_path, gh):
    clock, app = start(tmp_path, gh)
    app.run_once()
    push_red(gh, clock, 2)
    gh.fail("GET", r"/check-runs", 404, times=1)
    app.run_once()
    assert app.ledger.get(f"{REPO}#1").trees == [tree(1)]
    assert app.sweeper.stats.api_errors["http_4xx"] == 1
    app.run_once()
    assert app.ledger.get(f"{REPO}#1").trees == [tree(1), tree(2)]


def test_green_clears_history(tmp_path, gh):
    clock, app = start(tmp_path, gh)
    app.run_once()
    push_red(gh, clock, 2)
    app.run_once()
    assert len(app.ledger.get(f"{REPO}#1").trees) == 2
    gh.push(REPO, 1, sha(3), tree(3))
    green(gh, sha(3), clock.now)
    app.run_once()
    assert app.ledger.get(f"{REPO}#1") is None
    for n in (4, 5):  # two more reds: a fresh count, no escalation
        push_red(gh, clock, n)
        app.run_once()
    assert escalations(gh) == [] and len(app.ledger.get(f"{REPO}#1").trees) == 2


def test_escalated_pr_going_green_is_unparked_with_a_comment(tmp_path, gh):
    clock, app = start(tmp_path, gh, threshold=1)
    app.run_once()
    app.run_once()  # the label is seen: confirmed
    assert gh.labels(REPO, 1) == ["needs-human"]
    gh.push(REPO, 1, sha(2), tree(2))
    green(gh, sha(2), clock.now)
    app.run_once()
    assert gh.labels(REPO, 1) == []
    assert gh.comments(REPO, 1)[-1] == (
        f"CI is green at `{sha(2)[:12]}`: the fix loop is over. Removed `needs-human`; the "
        "PR's attempt count starts again from zero.")
    assert app.ledger.get(f"{REPO}#1").escalated is False
    assert app.sweeper.stats.unparked[(REPO, "green")] == 1


def _kicks_setup(tmp_path, gh, clock, owner, fixer=None, **overrides):
    gh.add_pr(REPO, 1, AGENT, sha(1), tree(1))
    red(gh, sha(1), clock.now)
    return make(tmp_path, gh, clock, owner=owner, fixer=fixer, **overrides)


def test_a_stale_red_head_is_reengaged_at_most_six_times_spaced_by_the_window(tmp_path, gh,
                                                                             owner):
    clock = Clock()
    app = _kicks_setup(tmp_path, gh, clock, owner)
    app.run_once()
    assert owner.kicks == []                      # just settled: not stale yet
    clock.now += HOUR - 1
    app.run_once()
    assert owner.kicks == []
    clock.now += 1
    app.run_once()
    assert [k["reengagement"] for k in owner.kicks] == [1]
    kick = owner.kicks[0]
    assert (kick["kind"], kick["repository"], kick["number"], kick["head_sha"],
            kick["failing_checks"], kick["max_reengagements"], kick["target"]) == \
        ("fix_before_new", REPO, 1, sha(1), ["test"], 6, "owner")
    clock.now += HOUR / 2
    app.run_once()
    assert len(owner.kicks) == 1                  # spaced at least the staleness window
    for _ in range(10):
        clock.now += HOUR
        app.run_once()
    assert [k["reengagement"] for k in owner.kicks] == [1, 2, 3, 4, 5, 6]  # capped per head
    assert app.sweeper.stats.reengagements[(REPO, "delivered")] == 6


def test_a_moving_branch_resets_the_reengagement_count(tmp_path, gh, owner):
    clock = Clock()
    app = _kicks_setup(tmp_path, gh, clock, owner, max_reengagements=2)
    for _ in range(4):
        clock.now += HOUR
        app.run_once()
    assert len(owner.kicks) == 2
    push_red(gh, clock, 2)                         # the agent pushed: a new head
    app.run_once()
    for _ in range(3):
        clock.now += HOUR
        app.run_once()
    assert [k["head_sha"] for k in owner.kicks] == [sha(1), sha(1), sha(2), sha(2)]


def test_spacing_respects_the_owners_slower_cadence(tmp_path, gh, owner):
    clock = Clock()
    gh.add_pr(REPO, 1, AGENT, sha(1), tree(1))
    red(gh, sha(1), clock.now)
    config_owner = {"agents": [{"login": AGENT, "url": owner.url, "cadence_s": 3 * HOUR}]}
    app = make(tmp_path, gh, clock, notifier=config_owner)
    clock.now += HOUR
    app.run_once()
    for _ in range(2):
        clock.now += HOUR
        app.run_once()
    assert len(owner.kicks) == 1
    clock.now += HOUR
    app.run_once()
    assert len(owner.kicks) == 2


def test_only_delivered_kicks_count_and_the_fixer_is_the_fallback(tmp_path, gh, owner, fixer):
    clock = Clock()
    owner.status = 503
    app = _kicks_setup(tmp_path, gh, clock, owner, fixer)
    clock.now += HOUR
    app.run_once()
    assert [k["target"] for k in owner.kicks] == ["owner"]
    assert [k["target"] for k in fixer.kicks] == ["fixer"]
    assert app.ledger.get(f"{REPO}#1").reengagements == 1
    fixer.status = 500
    clock.now += HOUR
    app.run_once()                                  # nobody took it: not counted
    assert app.ledger.get(f"{REPO}#1").reengagements == 1
    assert app.sweeper.stats.reengagements[(REPO, "failed")] == 1
    owner.status = 200
    clock.now += HOUR / 2                           # failed attempts are spaced too
    app.run_once()
    assert app.ledger.get(f"{REPO}#1").reengagements == 1
    clock.now += HOUR / 2
    app.run_once()
    assert app.ledger.get(f"{REPO}#1").reengagements == 2


def test_the_escalation_comment_quotes_the_kicks_actually_delivered(tmp_path, gh, owner):
    clock = Clock()
    app = _kicks_setup(tmp_path, gh, clock, owner)
    for _ in range(2):
        clock.now += HOUR
        app.run_once()
    owner.status = 500
    clock.now += HOUR
    app.run_once()                                  # a failed kick: not quoted
    push_red(gh, clock, 2)
    app.run_once()
    push_red(gh, clock, 3)
    app.run_once()
    [body] = escalations(gh)
    assert "**Re-engagements delivered:** 2 " in body


def _shared_setup(gh, clock, others: int):
    for number in range(2, 2 + others):
        gh.add_pr(REPO, number, f"someone-{number}", sha(100 + number), tree(100 + number))
        red(gh, sha(100 + number), clock.now, name="lint")


def test_a_check_red_on_three_other_prs_is_shared_breakage_not_an_attempt(tmp_path, gh, owner):
    clock = Clock()
    _shared_setup(gh, clock, others=3)
    gh.add_pr(REPO, 1, AGENT, sha(1), tree(1))
    red(gh, sha(1), clock.now, name="lint")
    app = make(tmp_path, gh, clock, owner=owner)
    for n in (2, 3, 4):
        push_red(gh, clock, n, name="lint")
        clock.now += 2 * HOUR
        app.run_once()
    assert escalations(gh) == [] and owner.kicks == []
    assert app.ledger.get(f"{REPO}#1") is None       # no attempt, no staleness clock
    assert app.sweeper.stats.incidents[REPO] == 1
    assert app.sweeper.stats.shared_checks == {REPO: 1}


def test_a_check_red_on_two_other_prs_is_not_shared(tmp_path, gh):
    clock = Clock()
    _shared_setup(gh, clock, others=2)
    gh.add_pr(REPO, 1, AGENT, sha(1), tree(1))
    red(gh, sha(1), clock.now, name="lint")
    app = make(tmp_path, gh, clock)
    app.run_once()
    assert app.ledger.get(f"{REPO}#1").trees == [tree(1)]
    assert app.sweeper.stats.incidents[REPO] == 0


def test_shared_breakage_appearing_after_escalation_unparks_when_it_clears(tmp_path, gh):
    clock = Clock()
    gh.add_pr(REPO, 1, AGENT, sha(1), tree(1))
    red(gh, sha(1), clock.now, name="lint")
    app = make(tmp_path, gh, clock, threshold=1)
    app.run_once()
    assert len(escalations(gh)) == 1
    _shared_setup(gh, clock, others=3)              # the base broke: lint red everywhere
    app.run_once()
    assert app.ledger.get(f"{REPO}#1").over_incident is True
    for number in (2, 3, 4):                        # the base is fixed
        green(gh, sha(100 + number), clock.now)
    app.run_once()
    assert gh.labels(REPO, 1) == []
    assert gh.comments(REPO, 1)[-1].startswith(
        "The shared CI breakage this PR was escalated over has cleared (`lint` no longer red")
    assert app.sweeper.stats.unparked[(REPO, "breakage_cleared")] == 1


def test_the_label_is_authoritative_even_with_a_lost_ledger(tmp_path, gh):
    clock, app = start(tmp_path, gh, threshold=1)
    app.run_once()
    assert len(escalations(gh)) == 1
    app.ledger.close()
    (tmp_path / "ledger.sqlite").unlink()           # the volume was lost
    for suffix in ("-wal", "-shm"):
        (tmp_path / f"ledger.sqlite{suffix}").unlink(missing_ok=True)
    again = make(tmp_path, gh, clock, threshold=1)
    for n in (2, 3):
        push_red(gh, clock, n)
        again.run_once()
    assert len(escalations(gh)) == 1                # never a second comment
    assert again.ledger.get(f"{REPO}#1").escalated is True


def test_a_human_removing_the_label_unparks_with_a_fresh_budget(tmp_path, gh):
    clock, app = start(tmp_path, gh, threshold=2)
    app.run_once()
    push_red(gh, clock, 2)
    app.run_once()
    app.run_once()                                  # label confirmed
    gh.remove_label_by_human(REPO, 1, "needs-human")
    app.run_once()
    entry = app.ledger.get(f"{REPO}#1")
    assert (entry.escalated, entry.trees, entry.reviewer_sha) == (False, [], sha(2))
    assert app.sweeper.stats.unparked[(REPO, "label_removed")] == 1
    comments_before = len(gh.comments(REPO, 1))
    push_red(gh, clock, 3)                          # one new red tree: budget is 2 again
    app.run_once()
    assert len(gh.comments(REPO, 1)) == comments_before and gh.labels(REPO, 1) == []


def test_a_second_escalation_after_the_reviewers_pass_is_the_handoff_note(tmp_path, gh, owner):
    clock, app = start(tmp_path, gh, owner=owner, threshold=2)
    app.run_once()
    push_red(gh, clock, 2)
    app.run_once()
    app.run_once()
    gh.remove_label_by_human(REPO, 1, "needs-human")  # the reviewer's pass
    clock.now += 60
    reviewed = clock.now
    app.run_once()
    push_red(gh, clock, 3)
    app.run_once()
    clock.now += HOUR
    app.run_once()                                  # one kick delivered since the pass
    push_red(gh, clock, 4)
    app.run_once()
    first, second = escalations(gh)
    assert "Hand-off" not in first
    assert "**Hand-off: no further automated pass is coming.**" in second
    from datetime import datetime, timezone
    when = datetime.fromtimestamp(reviewed, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    assert f"- The reviewer's pass ({when}) left the branch at `{sha(2)[:12]}`." in second
    assert ("Counted from that pass, CI has been red on 2 distinct head trees (the limit is 2):"
            f"\n  - `{tree(3)[:12]}`\n  - `{tree(4)[:12]}`") in second
    assert "- Re-engagements delivered since: 1." in second
    assert gh.labels(REPO, 1) == ["needs-human"]
    assert app.sweeper.stats.escalations[(REPO, "handoff")] == 1


def test_dependency_bots_are_never_fix_loops(tmp_path, gh, owner):
    clock = Clock()
    gh.add_pr(REPO, 1, "dependabot[bot]", sha(1), tree(1))
    red(gh, sha(1), clock.now)
    app = make(tmp_path, gh, clock, owner=owner, threshold=1)
    for n in (2, 3, 4):
        push_red(gh, clock, n)
        clock.now += 2 * HOUR
        app.run_once()
    assert gh.comments(REPO, 1) == [] and owner.kicks == []
    assert list(app.ledger.entries()) == []


def test_entries_are_pruned_a_day_after_their_pr_stops_being_listed(tmp_path, gh):
    clock, app = start(tmp_path, gh)
    app.run_once()
    gh.close_pr(REPO, 1)
    clock.now += 23 * HOUR
    app.run_once()
    assert app.ledger.get(f"{REPO}#1") is not None   # not on the first pass that misses it
    clock.now += HOUR + 1
    app.run_once()
    assert app.ledger.get(f"{REPO}#1") is None


def test_a_repository_that_cannot_be_listed_is_left_alone(tmp_path, gh):
    clock, app = start(tmp_path, gh)
    app.run_once()
    gh.fail("GET", r"/pulls$", 500, times=10)
    clock.now += 2 * 86400
    assert app.run_once() == "failed"
    assert app.ledger.get(f"{REPO}#1") is not None   # not pruned
    assert app.sweeper.stats.sweeps["failed"] == 1


def test_a_restart_keeps_the_ledger(tmp_path, gh):
    clock, app = start(tmp_path, gh)
    app.run_once()
    push_red(gh, clock, 2)
    app.run_once()
    app.ledger.close()
    again = make(tmp_path, gh, clock)
    push_red(gh, clock, 3)
    again.run_once()
    assert len(escalations(gh)) == 1


def test_metrics_after_an_escalation(tmp_path, gh):
    from prometheus_client import generate_latest

    clock, app = start(tmp_path, gh, threshold=1)
    app.run_once()
    text = generate_latest(app.registry).decode()
    lines = [ln for ln in text.splitlines() if ln.startswith("hive_") and "_created" not in ln
             and "_bucket" not in ln and "duration" not in ln]
    assert lines == [
        'hive_repeat_failure_fixloop_red_trees{pr="1",repository="acme/web"} 1.0',
        'hive_repeat_failure_fixloop_escalated_prs{repository="acme/web"} 1.0',
        'hive_repeat_failure_fixloop_escalations_total{kind="first",repository="acme/web"} 1.0',
        'hive_repeat_failure_fixloop_escalations_total{kind="handoff",repository="acme/web"} 0.0',
        'hive_repeat_failure_fixloop_reengagements_total{outcome="delivered",repository="acme/web"} 0.0',
        'hive_repeat_failure_fixloop_reengagements_total{outcome="failed",repository="acme/web"} 0.0',
        'hive_repeat_failure_fixloop_shared_breakage_checks{repository="acme/web"} 0.0',
        'hive_repeat_failure_fixloop_shared_breakage_incidents_total{repository="acme/web"} 0.0',
        'hive_repeat_failure_fixloop_unparked_total{reason="green",repository="acme/web"} 0.0',
        'hive_repeat_failure_fixloop_unparked_total{reason="breakage_cleared",repository="acme/web"} 0.0',
        'hive_repeat_failure_fixloop_unparked_total{reason="label_removed",repository="acme/web"} 0.0',
        'hive_repeat_failure_fixloop_inconclusive_prs{repository="acme/web"} 0.0',
        'hive_repeat_failure_fixloop_skipped_draft_prs{repository="acme/web"} 0.0',
        'hive_repeat_failure_fixloop_sweeps_total{outcome="complete"} 1.0',
        'hive_repeat_failure_fixloop_sweeps_total{outcome="partial"} 0.0',
        'hive_repeat_failure_fixloop_sweeps_total{outcome="failed"} 0.0',
        'hive_repeat_failure_fixloop_api_errors_total{reason="auth"} 0.0',
        'hive_repeat_failure_fixloop_api_errors_total{reason="bad_response"} 0.0',
        'hive_repeat_failure_fixloop_api_errors_total{reason="http_4xx"} 0.0',
        'hive_repeat_failure_fixloop_api_errors_total{reason="http_5xx"} 0.0',
        'hive_repeat_failure_fixloop_api_errors_total{reason="network"} 0.0',
        'hive_repeat_failure_fixloop_api_errors_total{reason="rate_limited"} 0.0',
        'hive_repeat_failure_fixloop_api_errors_total{reason="timeout"} 0.0',
        'hive_repeat_failure_fixloop_last_sweep_timestamp_seconds 1.800001e+09',
        'hive_repeat_failure_fixloop_ledger_errors_total 0.0',
    ]


def test_with_authors_only_the_agents_prs_are_fix_loops(tmp_path, gh):
    clock = Clock()
    gh.add_pr(REPO, 1, "A-Person", sha(1), tree(1))
    gh.add_pr(REPO, 2, AGENT, sha(2), tree(2))
    for number in (1, 2):
        red(gh, sha(number), clock.now)
    app = make(tmp_path, gh, clock, threshold=1, authors=[AGENT.upper()])
    app.run_once()
    assert escalations(gh, 1) == [] and len(escalations(gh, 2)) == 1
    assert [e.number for e in app.ledger.entries()] == [2]
