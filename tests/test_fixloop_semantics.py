"""The fix loop on real GitHub (issue 20): how check runs, check suites and commit statuses are
read, PRs whose CI never concludes, draft PRs, and the fake GitHub serving GitHub's own shapes.

Against the fake GitHub (tests/fakegithub.py), whose every answer is checked against GitHub's
published schemas (tests/github_schemas.py). Time moves through an injected clock.
"""

from __future__ import annotations

import logging

import pytest

from repeat_failure.fixloop.github import Check, GitHub
from repeat_failure.fixloop.sweep import ci_state
from tests.fakegithub import T0, FakeGitHub
from tests.test_fixloop_rules import (AGENT, HOUR, REPO, Clock, escalations, make, push_red,
                                      red, sha, start, tree)

SHA = sha(1)


@pytest.fixture
def gh():
    with FakeGitHub(token="test-token") as fake:
        yield fake


def client(gh: FakeGitHub) -> GitHub:
    return GitHub(gh.url, "test-token", sleep=lambda s: None)


# --- 1. check runs are keyed by (app, check suite, name) -----------------------------------------

def test_two_suites_sharing_a_check_name_stay_two_checks(gh):
    """Two workflows with a job named ``build``: the older one failed, the newer passed. Read by
    name alone the newer run hid the failure; each suite's run is its own check."""
    gh.add_pr(REPO, 1, AGENT, SHA, tree(1))
    gh.set_check_runs(REPO, SHA, [
        dict(name="build", conclusion="failure", suite=501, completed_at=T0,
             output=dict(title="unit tests failed")),
        dict(name="build", conclusion="success", suite=502, completed_at=T0 + 30)])
    checks = client(gh).checks(REPO, SHA)
    assert [(c.name, c.app, c.suite_id, c.status) for c in checks] == [
        ("build", "github-actions", 501, "red"), ("build", "github-actions", 502, "green")]
    state = ci_state(checks)
    assert (state.state, [c.name for c in state.failing], state.red_at) == ("red", ["build"], T0)


def test_two_apps_sharing_a_check_name_stay_two_checks(gh):
    gh.add_pr(REPO, 1, AGENT, SHA, tree(1))
    gh.set_check_runs(REPO, SHA, [
        dict(name="ci/build", conclusion="failure", app="circleci-checks", completed_at=T0),
        dict(name="ci/build", conclusion="success", completed_at=T0 + 30)])
    assert [(c.app, c.status) for c in client(gh).checks(REPO, SHA)] == [
        ("circleci-checks", "red"), ("github-actions", "green")]


def test_a_rerun_in_the_same_suite_replaces_the_failed_run(gh):
    gh.add_pr(REPO, 1, AGENT, SHA, tree(1))
    gh.set_check_runs(REPO, SHA, [dict(name="build", conclusion="failure", suite=501,
                                       completed_at=T0)])
    gh.add_check_run(REPO, SHA, name="build", conclusion="success", suite=501,
                     completed_at=T0 + 90)
    assert [(c.suite_id, c.status, c.completed_at) for c in client(gh).checks(REPO, SHA)] == [
        (501, "green", T0 + 90)]
    # the client asks for GitHub's default filter (latest); its own rule agrees with it
    assert [r.query.get("filter") for r in gh.requests if r.route.endswith("/check-runs")] == \
        [None]


def test_a_pr_red_in_one_suite_is_not_unparked_by_the_other_suites_green(tmp_path, gh):
    clock, app = start(tmp_path, gh, threshold=1)
    app.run_once()
    app.run_once()  # escalated and the label confirmed
    assert gh.labels(REPO, 1) == ["needs-human"]
    gh.push(REPO, 1, sha(2), tree(2))
    gh.set_check_runs(REPO, sha(2), [
        dict(name="test", conclusion="failure", suite=601, completed_at=clock.now),
        dict(name="test", conclusion="success", suite=602, completed_at=clock.now + 60)])
    app.run_once()
    assert gh.labels(REPO, 1) == ["needs-human"]
    assert app.sweeper.stats.unparked[(REPO, "green")] == 0


# --- 3. check suites -----------------------------------------------------------------------------

def test_a_workflow_that_failed_to_start_is_red_from_its_suite(gh):
    """``startup_failure`` (a workflow file GitHub could not run) exists only on the check
    suite: no check run is ever created."""
    gh.add_pr(REPO, 1, AGENT, SHA, tree(1))
    gh.set_check_runs(REPO, SHA, [dict(name="lint", conclusion="success", completed_at=T0)])
    suite = gh.add_check_suite(REPO, SHA, conclusion="startup_failure", updated_at=T0 + 5)
    checks = client(gh).checks(REPO, SHA)
    assert checks[1] == Check(name="github-actions check suite", status="red",
                              conclusion="startup_failure", completed_at=T0 + 5,
                              summary="check suite startup_failure", url="",
                              source="check_suite", app="github-actions", suite_id=suite)
    assert ci_state(checks).state == "red"


def test_a_startup_failure_counts_as_an_attempt_and_escalates(tmp_path, gh):
    clock = Clock()
    gh.add_pr(REPO, 1, AGENT, sha(1), tree(1))
    gh.add_check_suite(REPO, sha(1), conclusion="startup_failure", updated_at=clock.now)
    app = make(tmp_path, gh, clock, threshold=1)
    app.run_once()
    [body] = escalations(gh)
    assert "- `github-actions check suite`: `startup_failure`" in body


def test_suites_without_runs_that_say_nothing_are_ignored_or_pending(gh):
    gh.add_pr(REPO, 1, AGENT, SHA, tree(1))
    gh.set_check_runs(REPO, SHA, [dict(name="test", conclusion="success", completed_at=T0)])
    # an installed app that was asked for checks and never reported: queued for good
    gh.add_check_suite(REPO, SHA, app="some-linter", status="queued")
    # a suite that completed with nothing in it
    gh.add_check_suite(REPO, SHA, app="other-app", conclusion="skipped")
    assert ci_state(client(gh).checks(REPO, SHA)).state == "green"
    # a GitHub Actions workflow whose jobs are not created yet: pending
    gh.add_check_suite(REPO, SHA, status="queued")
    state = ci_state(client(gh).checks(REPO, SHA))
    assert (state.state, [(c.name, c.conclusion) for c in state.waiting]) == (
        "pending", [("github-actions check suite", "queued")])


def test_a_suite_with_runs_is_its_runs(gh):
    """GitHub's suite conclusion is its runs' highest-priority conclusion: no second check."""
    gh.add_pr(REPO, 1, AGENT, SHA, tree(1))
    gh.set_check_runs(REPO, SHA, [dict(name="test", conclusion="failure", completed_at=T0)])
    [suite] = client(gh).checks(REPO, SHA)
    assert suite.source == "check_run"
    assert gh.requests[1].route == f"/repos/{REPO}/commits/{SHA}/check-suites"


# --- 2. PRs whose CI never concludes -------------------------------------------------------------

INCONCLUSIVE = [
    ("waiting", dict(name="deploy", status="waiting"), "deploy: waiting"),
    ("requested", dict(name="e2e", status="requested"), "e2e: requested"),
    ("pending", dict(name="e2e", status="pending"), "e2e: pending"),
    ("stale", dict(name="e2e", conclusion="stale", completed_at=T0), "e2e: stale"),
]


@pytest.mark.parametrize("word, run, shown", INCONCLUSIVE, ids=[w for w, *_ in INCONCLUSIVE])
def test_an_inconclusive_head_is_exported_and_reported_once_past_the_bound(
        tmp_path, gh, caplog, word, run, shown):
    gh.tolerate(r"check_runs\.\d+\.conclusion: Input should be")  # stale: not in the schema
    clock = Clock()
    gh.add_pr(REPO, 1, AGENT, sha(1), tree(1))
    gh.set_check_runs(REPO, sha(1), [dict(name="test", conclusion="failure",
                                          completed_at=clock.now), run])
    app = make(tmp_path, gh, clock, inconclusive_after_s=4 * HOUR, threshold=1)
    caplog.set_level(logging.WARNING, logger="repeat_failure")
    seen = []
    for _ in range(6):
        app.run_once()
        seen.append(app.sweeper.stats.inconclusive.get((REPO, 1)))
        clock.now += HOUR
    assert seen == [0.0, HOUR, 2 * HOUR, 3 * HOUR, 4 * HOUR, 5 * HOUR]
    assert app.sweeper.stats.inconclusive_over == {REPO: 1}
    # the ledger untouched (design adr-0010): no attempt, no escalation
    assert app.ledger.get(f"{REPO}#1") is None and escalations(gh) == []
    [record] = [r for r in caplog.records if r.event == "fixloop_inconclusive"]
    assert (record.pr, record.head_sha, record.seconds, record.reason, record.waiting) == (
        f"{REPO}#1", sha(1), 4 * HOUR, "pending", [shown])
    from prometheus_client import generate_latest
    text = generate_latest(app.registry).decode()
    assert (f'hive_repeat_failure_fixloop_inconclusive_seconds{{pr="1",repository="{REPO}"}} '
            f'{5 * HOUR + 0.0}') in text
    assert f'hive_repeat_failure_fixloop_inconclusive_prs{{repository="{REPO}"}} 1.0' in text


def test_a_commit_status_stuck_at_pending_is_inconclusive_and_a_new_head_restarts_the_clock(
        tmp_path, gh):
    clock = Clock()
    gh.add_pr(REPO, 1, AGENT, sha(1), tree(1))
    red(gh, sha(1), clock.now)
    gh.set_statuses(REPO, sha(1), [dict(context="ci/jenkins", state="pending")])
    app = make(tmp_path, gh, clock)
    app.run_once()
    clock.now += 3 * HOUR
    app.run_once()
    assert app.sweeper.stats.inconclusive == {(REPO, 1): 3 * HOUR}
    push_red(gh, clock, 2)  # a new head: its own clock (and it concludes: red)
    app.run_once()
    assert app.sweeper.stats.inconclusive == {}
    assert app.sweeper.stats.inconclusive_over == {REPO: 0}
    assert app.ledger.get(f"{REPO}#1").trees == [tree(2)]


def test_an_unreadable_head_is_inconclusive_too(tmp_path, gh, caplog):
    clock = Clock()
    gh.add_pr(REPO, 1, AGENT, sha(1), tree(1))
    red(gh, sha(1), clock.now)
    app = make(tmp_path, gh, clock, inconclusive_after_s=HOUR)
    gh.fail("GET", r"/check-runs$", 500, times=100)
    caplog.set_level(logging.WARNING, logger="repeat_failure")
    app.run_once()
    clock.now += HOUR
    app.run_once()
    [record] = [r for r in caplog.records if r.event == "fixloop_inconclusive"]
    assert (record.reason, record.waiting, record.seconds) == ("checks_unreadable", [], HOUR)


# --- 4. drafts -----------------------------------------------------------------------------------

def test_draft_prs_are_skipped_by_default(tmp_path, gh, caplog):
    clock = Clock()
    gh.add_pr(REPO, 1, AGENT, sha(1), tree(1), draft=True)
    red(gh, sha(1), clock.now)
    app = make(tmp_path, gh, clock, threshold=1)
    assert app.config.include_drafts is False
    app.run_once()
    assert escalations(gh) == [] and gh.labels(REPO, 1) == []
    assert app.ledger.get(f"{REPO}#1") is None
    assert app.sweeper.stats.drafts_skipped == {REPO: 1}
    # still counts towards shared breakage: red on 3 others + this draft
    for n in (2, 3, 4):
        gh.add_pr(REPO, n, f"person-{n}", sha(n), tree(n))
        red(gh, sha(n), clock.now)
    app.run_once()
    assert app.sweeper.stats.shared_checks == {REPO: 1}


def test_with_include_drafts_a_draft_is_a_fix_loop(tmp_path, gh):
    clock = Clock()
    gh.add_pr(REPO, 1, AGENT, sha(1), tree(1), draft=True)
    red(gh, sha(1), clock.now)
    app = make(tmp_path, gh, clock, threshold=1, include_drafts=True)
    app.run_once()
    assert len(escalations(gh)) == 1


def test_a_pr_turned_draft_keeps_its_entry_untouched(tmp_path, gh):
    clock, app = start(tmp_path, gh, prune_after_s=HOUR)
    app.run_once()
    before = app.ledger.get(f"{REPO}#1")
    with gh._lock:
        gh._pr(REPO, 1).draft = True
    push_red(gh, clock, 2)
    clock.now += 3 * HOUR  # past prune_after_s: a listed draft is not pruned
    app.run_once()
    after = app.ledger.get(f"{REPO}#1")
    assert (after.trees, after.head_sha, after.last_seen) == (before.trees, before.head_sha,
                                                               clock.now)
    with gh._lock:
        gh._pr(REPO, 1).draft = False
    app.run_once()
    assert app.ledger.get(f"{REPO}#1").trees == [tree(1), tree(2)]


# --- 6. the fake serves GitHub's shapes ----------------------------------------------------------

def _every_endpoint(fake: FakeGitHub) -> None:
    fake.add_pr(REPO, 1, AGENT, SHA, tree(1), labels=("bug",))
    fake.set_check_runs(REPO, SHA, [dict(name="test", conclusion="failure",
                                         output=dict(title="1 failed"))])
    fake.add_check_suite(REPO, SHA, conclusion="startup_failure")
    fake.set_statuses(REPO, SHA, [dict(context="ci", state="pending", description="x")])
    github = GitHub(fake.url, "test-token", sleep=lambda s: None)
    github.open_pulls(REPO)
    github.head_tree(REPO, SHA)
    github.checks(REPO, SHA)
    github.comment(REPO, 1, "hello")
    github.add_label(REPO, 1, "needs-human")
    github.remove_label(REPO, 1, "bug")


def test_every_answer_the_fake_serves_validates_against_githubs_schema():
    with FakeGitHub(token="test-token") as fake:
        _every_endpoint(fake)
        assert fake.schema_errors == []
        assert len(fake.requests) == 8


def test_a_fake_that_drifts_from_the_schema_fails_the_test(monkeypatch):
    real = FakeGitHub._user

    def without_login(self, login):
        user = real(self, login)
        del user["login"]
        return user

    monkeypatch.setattr(FakeGitHub, "_user", without_login)
    with pytest.raises(AssertionError) as caught:
        with FakeGitHub(token="test-token") as fake:
            with pytest.raises(Exception):
                _every_endpoint(fake)  # the client itself refuses the shape (bad_response)
    assert "0.user.login: Field required" in str(caught.value)
    assert str(caught.value).startswith("the fake GitHub served shapes GitHub's schema does "
                                        "not allow:\nGET /repos/acme/web/pulls (pulls/list)")


def test_error_answers_are_checked_against_the_error_model_github_documents():
    """A 422 of ``issues/create-comment`` is GitHub's ``validation-error`` (``message`` and
    ``documentation_url`` required): the fake's own 422 passes, one without
    ``documentation_url`` is named."""
    import requests

    from tests import github_schemas

    path = f"/repos/{REPO}/issues/1/comments"
    assert github_schemas.response_errors("POST", path, 422, {"message": "Validation Failed"}) \
        == [f"POST {path} (issues/create-comment) HTTP 422 vs ValidationError: "
            "documentation_url: Field required"]
    with FakeGitHub(token="test-token") as fake:
        fake.add_pr(REPO, 1, AGENT, SHA, tree(1))
        answer = requests.post(fake.url + path, json={"text": "no body key"},
                               headers={"Authorization": "Bearer test-token"}, timeout=10)
        assert answer.status_code == 422
        assert fake.schema_errors == []


def test_a_repository_that_cannot_be_listed_keeps_its_inconclusive_clock(tmp_path, gh):
    clock = Clock()
    gh.add_pr(REPO, 1, AGENT, sha(1), tree(1))
    gh.set_check_runs(REPO, sha(1), [dict(name="deploy", status="waiting")])
    app = make(tmp_path, gh, clock)
    app.run_once()
    clock.now += HOUR
    gh.fail("GET", r"/pulls$", 502, times=4)  # one pass: the listing fails after 3 retries
    assert app.run_once() == "failed"
    clock.now += HOUR
    app.run_once()
    assert app.sweeper.stats.inconclusive == {(REPO, 1): 2 * HOUR}
