"""The fix-loop ledger under failures and hostile input (issue 9's break-it review): a lost
answer never means a second comment, a failed call never strands a PR, nothing a check says can
ping people or leak a secret, and a locked ledger or a long rate limit never stops the whole
sweep. Same setting as tests/test_fixloop_rules.py: a fake GitHub on 127.0.0.1."""

from __future__ import annotations

import sqlite3

from repeat_failure.fixloop.config import ESCALATION_HEADING, parse_fixloop_config
from repeat_failure.config import ConfigError
from tests.fakegithub import FakeGitHub
from tests.test_fixloop_rules import (AGENT, HOUR, REPO, Clock, Webhook, escalations, green, make,
                                      push_red, red, sha, start, tree)

import pytest


@pytest.fixture
def gh():
    with FakeGitHub(token="test-token") as fake:
        yield fake


def test_a_lost_comment_answer_never_leads_to_a_second_comment(tmp_path, gh):
    clock, app = start(tmp_path, gh, threshold=1)
    gh.fail("POST", r"/issues/1/comments$", 502, times=5)  # posted or not, the answer is lost
    for _ in range(4):
        app.run_once()
    assert gh.labels(REPO, 1) == ["needs-human"]       # the label holds the escalation
    assert len(escalations(gh)) == 0                    # the fake refused the POSTs: none posted
    assert app.ledger.get(f"{REPO}#1").escalated is True
    assert [r.method for r in gh.requests if r.route.endswith("/comments")] == ["POST"]


def test_a_failed_label_request_escalates_on_the_next_pass(tmp_path, gh):
    clock, app = start(tmp_path, gh, threshold=1)
    gh.fail("POST", r"/issues/1/labels$", 500, times=1)
    app.run_once()
    assert gh.labels(REPO, 1) == [] and escalations(gh) == []
    assert app.ledger.get(f"{REPO}#1").escalated is False
    app.run_once()
    assert gh.labels(REPO, 1) == ["needs-human"] and len(escalations(gh)) == 1


def test_a_label_removed_before_any_pass_saw_it_is_added_again(tmp_path, gh):
    """Issue 31: a label counts as confirmed only once a listing showed it on the PR, not on
    GitHub's 200 to adding it. One taken off before any pass saw it (a person within the same
    interval, another automation, an add that did not stick) is added again; a removal after
    a pass saw it is a person's, and un-parks."""
    clock, app = start(tmp_path, gh, threshold=1)
    app.run_once()
    gh.remove_label_by_human(REPO, 1, "needs-human")   # within the same interval
    app.run_once()
    entry = app.ledger.get(f"{REPO}#1")
    assert (entry.escalated, entry.label_confirmed, entry.reviewer_sha) == (True, False, None)
    assert gh.labels(REPO, 1) == ["needs-human"]
    assert app.sweeper.stats.unparked[(REPO, "label_removed")] == 0
    app.run_once()                                      # this listing shows it: confirmed
    assert app.ledger.get(f"{REPO}#1").label_confirmed is True
    gh.remove_label_by_human(REPO, 1, "needs-human")
    app.run_once()
    entry = app.ledger.get(f"{REPO}#1")
    assert (entry.escalated, entry.reviewer_sha) == (False, sha(1))
    assert app.sweeper.stats.unparked[(REPO, "label_removed")] == 1
    assert len(escalations(gh)) == 1


def test_a_lost_unpark_comment_is_not_read_as_a_persons_removal(tmp_path, gh):
    clock, app = start(tmp_path, gh, threshold=1)
    app.run_once()
    gh.push(REPO, 1, sha(2), tree(2))
    green(gh, sha(2), clock.now)
    gh.fail("POST", r"/issues/1/comments$", 500, times=1)
    app.run_once()
    app.run_once()
    stats = app.sweeper.stats.unparked
    assert (stats[(REPO, "green")], stats[(REPO, "label_removed")]) == (1, 0)
    entry = app.ledger.get(f"{REPO}#1")
    # The green head is stamped as the reviewer lane's repair (issue 31).
    assert (entry.escalated, entry.reviewer_sha, entry.escalations) == (False, sha(2), 1)


def test_breakage_is_not_called_cleared_while_other_prs_are_pending(tmp_path, gh):
    clock, app = start(tmp_path, gh, threshold=1)
    red(gh, sha(1), clock.now, name="lint")
    app.run_once()
    for number in (2, 3, 4):
        gh.add_pr(REPO, number, f"someone-{number}", sha(100 + number), tree(100 + number))
        red(gh, sha(100 + number), clock.now, name="lint")
    app.run_once()
    assert app.ledger.get(f"{REPO}#1").over_incident is True
    for number in (2, 3, 4):                             # re-runs: pending, not green
        gh.set_check_runs(REPO, sha(100 + number), [dict(name="lint", status="in_progress",
                                                         conclusion=None)])
    app.run_once()
    assert gh.labels(REPO, 1) == ["needs-human"]
    assert app.sweeper.stats.unparked[(REPO, "breakage_cleared")] == 0
    assert len(escalations(gh)) == 1


def test_check_names_and_urls_cannot_ping_people_or_leak_a_token(tmp_path, gh):
    clock = Clock()
    token = "ghp_" + "T" * 36
    gh.add_pr(REPO, 1, AGENT, sha(1), tree(1))
    gh.set_check_runs(REPO, sha(1), [
        dict(name="lint` @acme/everyone <img src=x> `", conclusion="failure",
             completed_at=clock.now, details_url=f"https://ci.example/run?api_token={token}"),
        dict(name=f"deploy {token}", conclusion="failure", completed_at=clock.now,
             details_url="https://x/a) @acme/security-team (x")])
    app = make(tmp_path, gh, clock, threshold=1)
    app.run_once()
    [body] = escalations(gh)
    assert token not in body
    for line in body.splitlines():
        if line.startswith("- "):
            # every mention-looking text sits inside one code span
            assert line.count("`") % 2 == 0 and "@acme" not in line.split("`")[0]
            assert "](" not in line                      # no link for either URL
    assert "- `lint' @acme/everyone <img src=x> '`: `failure`" in body
    entry = app.ledger.get(f"{REPO}#1")
    assert token not in repr(entry)


def test_the_comment_is_cut_to_what_github_takes(tmp_path, gh):
    clock = Clock()
    gh.add_pr(REPO, 1, AGENT, sha(1), tree(1))
    gh.set_check_runs(REPO, sha(1), [dict(name=f"check-{i:03d}", conclusion="failure",
                                          completed_at=clock.now,
                                          output=dict(title="x" * 2000)) for i in range(400)])
    app = make(tmp_path, gh, clock, threshold=1)
    app.run_once()
    [body] = escalations(gh)
    assert len(body) <= 60000 and "- … and 370 more" in body


def test_the_label_is_matched_whatever_its_case(tmp_path, gh):
    clock = Clock()
    gh.add_pr(REPO, 1, AGENT, sha(1), tree(1), labels=("Needs-Human",))
    red(gh, sha(1), clock.now)
    app = make(tmp_path, gh, clock, threshold=1)
    app.run_once()
    assert escalations(gh) == [] and gh.labels(REPO, 1) == ["Needs-Human"]
    assert app.ledger.get(f"{REPO}#1").escalated is True


def test_a_locked_ledger_costs_one_pass_for_the_prs_it_blocks_not_the_sweep(tmp_path, gh):
    clock = Clock()
    for number in (1, 2):
        gh.add_pr(REPO, number, AGENT, sha(number), tree(number))
        red(gh, sha(number), clock.now)
    app = make(tmp_path, gh, clock)
    blocker = sqlite3.connect(tmp_path / "ledger.sqlite", timeout=0)
    blocker.execute("BEGIN EXCLUSIVE")
    app.ledger._db.execute("PRAGMA busy_timeout = 50")
    assert app.run_once() == "partial"
    assert app.sweeper.stats.ledger_errors >= 2
    blocker.rollback()
    blocker.close()
    assert app.run_once() == "complete"
    assert [e.number for e in app.ledger.entries()] == [1, 2]


def test_dependency_bots_count_towards_shared_breakage(tmp_path, gh):
    clock = Clock()
    for number in (2, 3, 4):
        gh.add_pr(REPO, number, "dependabot[bot]", sha(100 + number), tree(100 + number))
        red(gh, sha(100 + number), clock.now, name="lint")
    gh.add_pr(REPO, 1, AGENT, sha(1), tree(1))
    red(gh, sha(1), clock.now, name="lint")
    app = make(tmp_path, gh, clock, threshold=1)
    app.run_once()
    assert escalations(gh) == [] and app.sweeper.stats.shared_checks == {REPO: 1}


def test_a_rerun_that_settles_again_restarts_the_staleness_clock(tmp_path, gh):
    owner = Webhook()
    try:
        clock, app = start(tmp_path, gh, owner=owner)
        app.run_once()
        clock.now += HOUR - 60
        gh.set_check_runs(REPO, sha(1), [dict(name="test", status="in_progress",
                                              conclusion=None)])
        app.run_once()                                    # re-run: pending
        red(gh, sha(1), clock.now)                        # settled red again, now
        clock.now += 120
        app.run_once()
        assert owner.kicks == []                          # 2 minutes, not an hour
        clock.now += HOUR
        app.run_once()
        assert len(owner.kicks) == 1
    finally:
        owner.close()


def test_an_empty_commit_on_the_reviewers_head_is_not_an_attempt(tmp_path, gh):
    clock, app = start(tmp_path, gh, threshold=2)
    app.run_once()
    push_red(gh, clock, 2)
    app.run_once()
    app.run_once()                                       # the label seen: confirmed
    gh.remove_label_by_human(REPO, 1, "needs-human")     # the reviewer's pass at sha 2
    app.run_once()
    push_red(gh, clock, 3, tree_n=2)                     # `ci: retrigger`: the same tree
    app.run_once()
    assert app.ledger.get(f"{REPO}#1").trees == []
    assert len(escalations(gh)) == 1


def test_a_long_rate_limit_ends_the_pass_instead_of_sleeping_through_it(tmp_path, gh):
    clock = Clock()
    for number in (1, 2, 3):
        gh.add_pr(REPO, number, AGENT, sha(number), tree(number))
        red(gh, sha(number), clock.now)
    app = make(tmp_path, gh, clock, interval_s=60)
    slept = []
    app.github._sleep = slept.append
    gh.fail("GET", r"/check-runs", 403, times=100,
            headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(clock.now) + 120)})
    assert app.run_once() == "partial"
    assert slept == [] and app.sweeper.stats.api_errors["rate_limited"] == 1
    assert len([r for r in gh.requests if "check-runs" in r.route]) == 1


def test_a_repository_listed_twice_in_another_case_is_refused():
    with pytest.raises(ConfigError, match="each repository once"):
        parse_fixloop_config({"fixloop": {"repositories": ["acme/web", "Acme/Web"]}}, "f")


def test_an_unusable_ledger_is_moved_aside_and_a_new_one_started(tmp_path, gh):
    (tmp_path / "ledger.sqlite").write_bytes(b"not a database at all" * 100)
    clock, app = start(tmp_path, gh, threshold=1)
    app.run_once()
    assert gh.labels(REPO, 1) == ["needs-human"]
    assert len(list(tmp_path.glob("ledger.sqlite.unusable.*"))) == 1
    assert ESCALATION_HEADING in escalations(gh)[0]


def test_an_agents_cadence_spaces_kicks_over_all_its_prs(tmp_path, gh):
    clock = Clock()
    owner = Webhook()
    try:
        for number in (1, 2, 3):
            gh.add_pr(REPO, number, AGENT, sha(number), tree(number))
            red(gh, sha(number), clock.now)
        app = make(tmp_path, gh, clock, notifier={
            "agents": [{"login": AGENT, "url": owner.url, "cadence_s": 2 * HOUR}]})
        clock.now += HOUR
        app.run_once()
        assert len(owner.kicks) == 1                       # one kick per cadence, not per PR
        clock.now += HOUR
        app.run_once()
        assert len(owner.kicks) == 1
        clock.now += HOUR
        app.run_once()
        assert len({k["number"] for k in owner.kicks}) == len(owner.kicks) == 2
    finally:
        owner.close()


def test_the_head_a_reviewer_handed_back_is_not_kicked_at_once(tmp_path, gh):
    owner = Webhook()
    try:
        clock, app = start(tmp_path, gh, owner=owner, threshold=1)
        app.run_once()
        app.run_once()                                      # the label seen: confirmed
        clock.now += 3 * HOUR
        gh.remove_label_by_human(REPO, 1, "needs-human")
        app.run_once()
        assert owner.kicks == []                            # its clock starts at the hand-back
        clock.now += HOUR
        app.run_once()
        assert [k["head_sha"] for k in owner.kicks] == [sha(1)]
    finally:
        owner.close()


def test_check_config_validates_a_fixloop_file(tmp_path):
    import subprocess
    import sys

    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text("fixloop:\n  repositories: [acme/web]\n")
    bad.write_text("fixloop:\n  repositories: [acmeweb]\n")
    ok = subprocess.run([sys.executable, "-m", "repeat_failure", "check-config", str(good)],
                        capture_output=True, text=True, timeout=60)
    assert (ok.returncode, ok.stdout.strip()) == (0, (
        f"{good}: valid fixloop config (1 repository, threshold 3, stale after 3600 s, at "
        "most 6 re-engagements per head, sweep every 300 s)"))
    from repeat_failure.fixloop.config import describe_fixloop_config, parse_fixloop_config

    two = parse_fixloop_config({"fixloop": {"repositories": ["acme/web", "acme/api"]}}, "f")
    assert describe_fixloop_config(two, "f").startswith("f: valid fixloop config (2 repositories, ")
    no = subprocess.run([sys.executable, "-m", "repeat_failure", "check-config", str(bad)],
                        capture_output=True, text=True, timeout=60)
    assert (no.returncode, no.stderr.strip()) == (2, (
        f"repeat-failure: {bad}: fixloop.repositories[0]: 'acmeweb' is not a repository name "
        "(owner/name)"))


def _others_red(gh, clock, numbers, name="lint"):
    for number in numbers:
        gh.add_pr(REPO, number, f"someone-{number}", sha(100 + number), tree(100 + number))
        red(gh, sha(100 + number), clock.now, name=name)


def test_a_pr_stuck_pending_does_not_freeze_shared_breakage(tmp_path, gh):
    clock, app = start(tmp_path, gh, threshold=1)
    red(gh, sha(1), clock.now, name="lint")
    app.run_once()                                        # escalated over lint
    _others_red(gh, clock, (2, 3, 4))
    gh.add_pr(REPO, 9, "someone-9", sha(109), tree(109))  # CI queued forever
    gh.set_check_runs(REPO, sha(109), [dict(name="e2e", status="queued", conclusion=None)])
    app.run_once()
    assert app.ledger.get(f"{REPO}#1").over_incident is True
    for number in (2, 3, 4):
        green(gh, sha(100 + number), clock.now)
    app.run_once()                                        # one unknown PR cannot make it shared
    assert gh.labels(REPO, 1) == []
    assert app.sweeper.stats.unparked[(REPO, "breakage_cleared")] == 1
    gh.add_pr(REPO, 5, AGENT, sha(5), tree(5))            # a new PR failing lint on its own
    for n in (5, 6, 7):
        gh.push(REPO, 5, sha(n), tree(n))
        red(gh, sha(n), clock.now, name="lint")
        app.run_once()
    assert len(escalations(gh, 5)) == 1
    assert app.sweeper.stats.incidents[REPO] == 1


def test_an_escalation_over_own_and_shared_checks_is_not_unparked_by_the_breakage(tmp_path, gh):
    clock, app = start(tmp_path, gh, threshold=1)
    gh.set_check_runs(REPO, sha(1), [
        dict(name="lint", conclusion="failure", completed_at=clock.now),
        dict(name="test", conclusion="failure", completed_at=clock.now)])
    app.run_once()
    _others_red(gh, clock, (2, 3, 4))
    app.run_once()
    for number in (2, 3, 4):
        green(gh, sha(100 + number), clock.now)
    app.run_once()
    assert gh.labels(REPO, 1) == ["needs-human"] and len(escalations(gh)) == 1


def test_a_slow_github_past_the_interval_does_not_throw_the_pass_away(tmp_path, gh):
    clock, app = start(tmp_path, gh, interval_s=10)
    slept = []

    def slow_sleep(seconds):
        slept.append(seconds)
        clock.now += seconds

    app.github._sleep = slow_sleep
    clock.now += 60                                        # the pass already runs late
    gh.fail("GET", r"/git/commits/", 502, times=2)         # a short outage: retried
    assert app.run_once() == "complete"
    assert app.ledger.get(f"{REPO}#1").trees == [tree(1)]


def test_empty_commits_answering_kicks_do_not_get_kicks_faster(tmp_path, gh):
    owner = Webhook()
    try:
        clock, app = start(tmp_path, gh, owner=owner)
        clock.now += HOUR
        app.run_once()
        assert len(owner.kicks) == 1
        for n in range(2, 8):                             # each kick answered by an empty commit
            push_red(gh, clock, n, tree_n=1)
            clock.now += HOUR / 4
            app.run_once()
        assert len(owner.kicks) == 1                      # each new head's CI settles anew
        clock.now += HOUR
        app.run_once()
        assert len(owner.kicks) == 2                      # one per staleness window at most
    finally:
        owner.close()


def test_a_label_found_on_the_pr_is_taken_off_when_ci_goes_green(tmp_path, gh):
    """Issue 31 (design adr-0010: the label, not the ledger, is the record, and an escalation
    is un-parked when the head goes green): a label found on the PR used to stay on a green
    head for good, with no comment."""
    clock = Clock()
    gh.add_pr(REPO, 1, AGENT, sha(1), tree(1), labels=("needs-human",))
    red(gh, sha(1), clock.now)
    app = make(tmp_path, gh, clock)
    app.run_once()
    assert gh.labels(REPO, 1) == ["needs-human"] and gh.comments(REPO, 1) == []
    green(gh, sha(1), clock.now)
    app.run_once()
    assert gh.labels(REPO, 1) == []
    assert gh.comments(REPO, 1) == [
        f"CI is green at `{sha(1)[:12]}`: the fix loop is over. Removed `needs-human`; the "
        "PR's attempt count starts again from zero."]


def test_a_refused_escalation_comment_is_posted_on_the_next_pass(tmp_path, gh):
    clock, app = start(tmp_path, gh, threshold=1)
    gh.fail("POST", r"/issues/1/comments$", 422, times=1)  # refused: nothing was posted
    app.run_once()
    assert gh.labels(REPO, 1) == ["needs-human"] and escalations(gh) == []
    assert app.ledger.get(f"{REPO}#1").comment_pending is True
    app.run_once()
    assert len(escalations(gh)) == 1
    app.run_once()
    assert len(escalations(gh)) == 1


def test_a_reposted_green_status_does_not_hold_the_staleness_clock(tmp_path, gh):
    owner = Webhook()
    try:
        clock, app = start(tmp_path, gh, owner=owner)
        for _ in range(3):
            clock.now += HOUR * 0.8
            gh.set_statuses(REPO, sha(1), [dict(context="cla", state="success",
                                                updated_at=clock.now)])
            app.run_once()
        assert len(owner.kicks) == 1                       # stale since the red, not the CLA
    finally:
        owner.close()


def test_long_or_scrubbed_check_names_stay_distinct():
    from repeat_failure.fixloop.github import Check
    from repeat_failure.fixloop.sweep import ci_state

    base = "build (ubuntu-latest, python 3.11, " + "x" * 90
    checks = [Check(f"{base} shard {i}/2)", "red", "failure", 1.0, "", "", "check_run")
              for i in (1, 2)]
    checks += [Check(f"deploy token={'a' * 30}", "red", "failure", 1.0, "", "", "status"),
               Check(f"deploy token={'b' * 30}", "red", "failure", 1.0, "", "", "status")]
    names = [c.name for c in ci_state(checks).failing]
    assert len(set(names)) == 4 and all(len(n) <= 100 for n in names)
    assert not any("a" * 30 in n or "b" * 30 in n for n in names)
