"""The fixloop GitHub REST client (issue 9, design adr-0010) against a fake GitHub on 127.0.0.1:
real HTTP, GitHub's documented response shapes (tests/fakegithub.py), exact values."""

from __future__ import annotations

import socket
import time
import traceback
from typing import Any, Iterator

import pytest

from fakegithub import RATE_RESET, T0, FakeGitHub
from repeat_failure.fixloop.github import SUMMARY_MAX, Check, GitHub, GitHubError, PullRequest
from repeat_failure.fixloop.github_models import REASONS

#: Built here: the shape of a GitHub token, never a real one.
TOKEN = "ghp_" + "A1b2C3d4E5" * 3 + "F6g7H8"
REPO = "acme/widgets"
SHA = "a" * 40
TREE = "1" * 40


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """requests honours *_PROXY from the environment; 127.0.0.1 must be reached directly."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                 "all_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub(token=TOKEN) as gh:
        yield gh


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def client(fake: FakeGitHub, sleeps: list[float]) -> Iterator[GitHub]:
    gh = GitHub(fake.url, TOKEN, timeout_s=5, clock=lambda: T0, sleep=sleeps.append)
    yield gh
    gh.close()


def _raises(call: Any, *args: Any) -> GitHubError:
    with pytest.raises(GitHubError) as info:
        call(*args)
    return info.value


def _pr(number: int, author: str = "agent-a", labels: tuple[str, ...] = (),
        draft: bool = False, sha: str | None = None) -> PullRequest:
    return PullRequest(repo=REPO, number=number, author=author,
                       head_sha=sha or f"{number:040x}", labels=labels, draft=draft,
                       url=f"https://github.com/{REPO}/pull/{number}")


# --- open_pulls ------------------------------------------------------------------------------

def test_open_pulls_reads_every_page_through_github_link_urls(sleeps: list[float]) -> None:
    with FakeGitHub(token=TOKEN, max_per_page=2) as fake:
        for n in range(1, 6):
            fake.add_pr(REPO, n, "agent-a", sha=f"{n:040x}", tree=TREE)
        fake.add_pr(REPO, 6, "renovate[bot]", sha=f"{6:040x}", tree=TREE,
                    labels=("deps", "needs human/ci"), draft=True)
        fake.add_pr(REPO, 7, "agent-b", sha=f"{7:040x}", tree=TREE)
        fake.close_pr(REPO, 7)
        client = GitHub(fake.url, TOKEN, sleep=sleeps.append)
        assert client.open_pulls(REPO) == [
            _pr(6, "renovate[bot]", ("deps", "needs human/ci"), draft=True),
            _pr(5), _pr(4), _pr(3), _pr(2), _pr(1)]
        assert [(r.method, r.path) for r in fake.requests] == [
            ("GET", "/repos/acme/widgets/pulls?state=open&per_page=100"),
            ("GET", "/repositories/1300001/pulls?state=open&per_page=2&page=2"),
            ("GET", "/repositories/1300001/pulls?state=open&per_page=2&page=3")]
    assert sleeps == []


def test_fake_honours_per_page_and_writes_github_link_header(fake: FakeGitHub) -> None:
    import requests
    for n in range(1, 6):
        fake.add_pr(REPO, n, "agent-a", sha=f"{n:040x}", tree=TREE)
    answer = requests.get(f"{fake.url}/repos/{REPO}/pulls?per_page=2&page=2",
                          headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5)
    assert [p["number"] for p in answer.json()] == [3, 2]
    base = f"{fake.url}/repositories/1300001/pulls"
    assert answer.headers["Link"] == (
        f'<{base}?per_page=2&page=1>; rel="prev", <{base}?per_page=2&page=3>; rel="next", '
        f'<{base}?per_page=2&page=3>; rel="last", <{base}?per_page=2&page=1>; rel="first"')


def test_open_pulls_tolerates_a_deleted_user_and_an_absent_draft(
        fake: FakeGitHub, client: GitHub) -> None:
    fake.add_pr(REPO, 1, "x", sha=SHA, tree=TREE)
    fake.fail("GET", r"/pulls$", 200, body=[{
        "number": 9, "user": None, "head": {"sha": SHA}, "labels": [{"name": "bug"}],
        "html_url": "https://github.com/acme/widgets/pull/9"}])
    assert client.open_pulls(REPO) == [_pr(9, "", ("bug",), sha=SHA)]


def test_open_pulls_keeps_a_pr_listed_twice_once(fake: FakeGitHub, client: GitHub) -> None:
    item = {"number": 3, "user": {"login": "a"}, "head": {"sha": SHA}, "labels": [],
            "html_url": "u", "draft": False}
    fake.add_pr(REPO, 1, "x", sha=SHA, tree=TREE)
    fake.fail("GET", r"/pulls$", 200, body=[item],
              headers={"Link": f'<{fake.url}/repositories/1300001/pulls?page=2>; rel="next"'})
    fake.fail("GET", r"/pulls$", 200, body=[item, {**item, "number": 2}])
    assert [p.number for p in client.open_pulls(REPO)] == [3, 2]


def test_a_next_link_outside_the_api_is_refused_without_following_it(
        fake: FakeGitHub, client: GitHub) -> None:
    fake.add_pr(REPO, 1, "x", sha=SHA, tree=TREE)
    fake.fail("GET", r"/pulls$", 200, body=[],
              headers={"Link": '<http://127.0.0.2:1/repos/acme/widgets/pulls?page=2>; '
                               'rel="next"'})
    error = _raises(client.open_pulls, REPO)
    assert (error.reason, error.status, str(error)) == (
        "bad_response", 200, f"GET /repos/acme/widgets/pulls: next page link leaves {fake.url}")
    assert len(fake.requests) == 1


# --- head_tree -------------------------------------------------------------------------------

def test_head_tree_is_the_commits_tree_sha(fake: FakeGitHub, client: GitHub) -> None:
    fake.add_pr(REPO, 1, "agent-a", sha=SHA, tree=TREE)
    fake.push(REPO, 1, "b" * 40, "2" * 40)
    assert client.head_tree(REPO, SHA) == TREE
    assert client.head_tree(REPO, "b" * 40) == "2" * 40
    assert [r.path for r in fake.requests] == [f"/repos/acme/widgets/git/commits/{SHA}",
                                                f"/repos/acme/widgets/git/commits/{'b' * 40}"]


def test_head_tree_of_an_unknown_commit_is_http_4xx(fake: FakeGitHub, client: GitHub) -> None:
    fake.add_pr(REPO, 1, "agent-a", sha=SHA, tree=TREE)
    error = _raises(client.head_tree, REPO, "c" * 40)
    assert (error.reason, error.status, str(error)) == (
        "http_4xx", 404, f"GET /repos/acme/widgets/git/commits/{'c' * 40}: HTTP 404 Not Found")


# --- checks ----------------------------------------------------------------------------------

#: (check-run status, conclusion) -> (Check.status, Check.conclusion, completed)
RUN_TABLE = [
    ("queued", None, "pending", "queued", False),
    ("in_progress", None, "pending", "in_progress", False),
    ("waiting", None, "pending", "waiting", False),
    ("requested", None, "pending", "requested", False),
    ("pending", None, "pending", "pending", False),
    ("completed", "failure", "red", "failure", True),
    ("completed", "timed_out", "red", "timed_out", True),
    ("completed", "cancelled", "red", "cancelled", True),
    ("completed", "action_required", "red", "action_required", True),
    ("completed", "startup_failure", "red", "startup_failure", True),
    ("completed", "success", "green", "success", True),
    ("completed", "neutral", "green", "neutral", True),
    ("completed", "skipped", "green", "skipped", True),
    ("completed", "stale", "pending", "stale", False),
    ("completed", "some_future_word", "pending", "some_future_word", False),
]
STATUS_TABLE = [("pending", "pending", False), ("failure", "red", True),
                ("error", "red", True), ("success", "green", True)]


#: The check suite GitHub Actions' runs of SHA belong to in the fake unless a test names one.
SUITE = FakeGitHub._default_suite(SHA, "github-actions")
ACTIONS = dict(app="github-actions", suite_id=SUITE)


def test_checks_maps_every_conclusion_and_state(fake: FakeGitHub, client: GitHub) -> None:
    # GitHub's check-run schema lists neither ``stale`` (only GitHub sets it, its docs say)
    # nor ``startup_failure`` (a suite's), nor of course a future word: served on purpose.
    fake.tolerate(r"check_runs\.\d+\.conclusion: Input should be")
    fake.add_pr(REPO, 1, "agent-a", sha=SHA, tree=TREE)
    runs = [dict(name=f"{i:02d}-{status}-{conclusion}", status=status, conclusion=conclusion,
                 completed_at=T0 + i if status == "completed" else None)
            for i, (status, conclusion, *_) in enumerate(RUN_TABLE)]
    ids = fake.set_check_runs(REPO, SHA, runs)
    fake.set_statuses(REPO, SHA, [dict(context=f"ci/{state}", state=state, updated_at=T0 + 100 + i)
                                  for i, (state, *_) in enumerate(STATUS_TABLE)])
    expected = [Check(name=f"{i:02d}-{status}-{conclusion}", status=mapped, conclusion=word,
                      completed_at=T0 + i if completed else None, summary="",
                      url=f"https://github.com/{REPO}/actions/runs/{ids[i]}", source="check_run",
                      **ACTIONS)
                for i, (status, conclusion, mapped, word, completed) in enumerate(RUN_TABLE)]
    expected += sorted((Check(name=f"ci/{state}", status=mapped, conclusion=state,
                              completed_at=T0 + 100 + i if completed else None, summary="",
                              url="", source="status")
                        for i, (state, mapped, completed) in enumerate(STATUS_TABLE)),
                       key=lambda c: c.name)
    assert client.checks(REPO, SHA) == expected
    assert [r.path for r in fake.requests] == [
        f"/repos/acme/widgets/commits/{SHA}/check-runs?per_page=100",
        f"/repos/acme/widgets/commits/{SHA}/check-suites?per_page=100",
        f"/repos/acme/widgets/commits/{SHA}/status?per_page=100"]


def test_the_newest_check_run_of_a_name_wins(fake: FakeGitHub, client: GitHub) -> None:
    fake.add_pr(REPO, 1, "agent-a", sha=SHA, tree=TREE)
    fake.set_check_runs(REPO, SHA, [dict(name="test", conclusion="failure", completed_at=T0),
                                    dict(name="lint", conclusion="success", completed_at=T0)])
    rerun = fake.add_check_run(REPO, SHA, name="test", conclusion="success",
                               completed_at=T0 + 500)
    assert [(c.name, c.status, c.completed_at, c.url) for c in client.checks(REPO, SHA)] == [
        ("lint", "green", T0, f"https://github.com/{REPO}/actions/runs/{rerun - 1}"),
        ("test", "green", T0 + 500, f"https://github.com/{REPO}/actions/runs/{rerun}")]
    # a re-run still in progress makes the name pending again, whatever the order listed
    fake.set_check_runs(REPO, SHA, [
        dict(id=900, name="test", status="in_progress"),
        dict(id=800, name="test", conclusion="failure", completed_at=T0)])
    assert [(c.name, c.status, c.conclusion, c.completed_at)
            for c in client.checks(REPO, SHA)] == [("test", "pending", "in_progress", None)]


def test_the_newest_status_of_a_context_wins(fake: FakeGitHub, client: GitHub) -> None:
    fake.add_pr(REPO, 1, "agent-a", sha=SHA, tree=TREE)
    fake.set_statuses(REPO, SHA, [
        dict(context="ci/jenkins", state="success", updated_at=T0 + 300, id=5),
        dict(context="ci/jenkins", state="failure", updated_at=T0 + 200, id=9,
             description="old"),
        dict(context="ci/jenkins", state="error", updated_at=T0 + 300, id=7,
             description="same second, larger id", target_url="https://ci.example/7")])
    assert client.checks(REPO, SHA) == [
        Check(name="ci/jenkins", status="red", conclusion="error", completed_at=T0 + 300,
              summary="same second, larger id", url="https://ci.example/7", source="status")]


def test_checks_merge_runs_and_statuses_with_summaries(fake: FakeGitHub, client: GitHub) -> None:
    fake.add_pr(REPO, 1, "agent-a", sha=SHA, tree=TREE)
    ids = fake.set_check_runs(REPO, SHA, [
        dict(name="unit", conclusion="failure", completed_at="2027-01-15T08:05:00Z",
             output=dict(title="3 tests failed", summary="test_a, test_b, test_c",
                         text="AssertionError: 1 != 2"),
             details_url="https://ci.example/unit/1"),
        dict(name="big", conclusion="failure", output=dict(title="", summary="x" * 5000)),
        dict(name="build", status="queued", completed_at=None)])
    fake.set_statuses(REPO, SHA, [
        dict(context="codecov/patch", state="failure", description="62% (-3%)",
             target_url="https://codecov.example/1", updated_at=T0 + 70),
        dict(context="buildkite", state="pending", description="Build #4 running")])
    assert client.checks(REPO, SHA) == [
        Check(name="big", status="red", conclusion="failure", completed_at=T0 + 60,
              summary="x" * SUMMARY_MAX, url=f"https://github.com/{REPO}/actions/runs/{ids[1]}",
              source="check_run", **ACTIONS),
        Check(name="build", status="pending", conclusion="queued", completed_at=None,
              summary="", url=f"https://github.com/{REPO}/actions/runs/{ids[2]}",
              source="check_run", **ACTIONS),
        Check(name="unit", status="red", conclusion="failure", completed_at=T0 + 300,
              summary="3 tests failed\ntest_a, test_b, test_c\nAssertionError: 1 != 2",
              url="https://ci.example/unit/1", source="check_run", **ACTIONS),
        Check(name="buildkite", status="pending", conclusion="pending", completed_at=None,
              summary="Build #4 running", url="", source="status"),
        Check(name="codecov/patch", status="red", conclusion="failure", completed_at=T0 + 70,
              summary="62% (-3%)", url="https://codecov.example/1", source="status")]
    assert SUMMARY_MAX == 2000


def test_checks_reads_every_page_of_runs_and_statuses(sleeps: list[float]) -> None:
    with FakeGitHub(token=TOKEN, max_per_page=2) as fake:
        fake.add_pr(REPO, 1, "agent-a", sha=SHA, tree=TREE)
        fake.set_check_runs(REPO, SHA, [dict(name=f"job{i}", conclusion="success")
                                        for i in range(5)])
        fake.set_statuses(REPO, SHA, [dict(context=f"ctx{i}", state="success")
                                      for i in range(3)])
        checks = GitHub(fake.url, TOKEN, sleep=sleeps.append).checks(REPO, SHA)
        assert [c.name for c in checks] == ["job0", "job1", "job2", "job3", "job4",
                                            "ctx0", "ctx1", "ctx2"]
        assert [r.path for r in fake.requests] == [
            f"/repos/acme/widgets/commits/{SHA}/check-runs?per_page=100",
            f"/repositories/1300001/commits/{SHA}/check-runs?per_page=2&page=2",
            f"/repositories/1300001/commits/{SHA}/check-runs?per_page=2&page=3",
            f"/repos/acme/widgets/commits/{SHA}/check-suites?per_page=100",
            f"/repos/acme/widgets/commits/{SHA}/status?per_page=100",
            f"/repositories/1300001/commits/{SHA}/status?per_page=2&page=2"]


def test_a_commit_without_ci_has_no_checks(fake: FakeGitHub, client: GitHub) -> None:
    fake.add_pr(REPO, 1, "agent-a", sha=SHA, tree=TREE)
    assert client.checks(REPO, SHA) == []


# --- writes ----------------------------------------------------------------------------------

def test_comment_posts_the_body(fake: FakeGitHub, client: GitHub) -> None:
    fake.add_pr(REPO, 12, "agent-a", sha=SHA, tree=TREE)
    body = "## Fix loop escalated — human attention needed\n\n`unit` failed 3 times"
    assert client.comment(REPO, 12, body) is None
    assert fake.comments(REPO, 12) == [body]
    (request,) = fake.requests
    assert (request.method, request.path, request.body) == (
        "POST", "/repos/acme/widgets/issues/12/comments", {"body": body})
    assert request.headers["content-type"] == "application/json"


def test_add_and_remove_label_quote_the_name(fake: FakeGitHub, client: GitHub) -> None:
    fake.add_pr(REPO, 12, "agent-a", sha=SHA, tree=TREE, labels=("bug",))
    client.add_label(REPO, 12, "needs human/ci")
    assert fake.labels(REPO, 12) == ["bug", "needs human/ci"]
    client.remove_label(REPO, 12, "needs human/ci")
    assert fake.labels(REPO, 12) == ["bug"]
    client.remove_label(REPO, 12, "needs human/ci")  # already gone: 404, not an error
    assert fake.labels(REPO, 12) == ["bug"]
    assert [(r.method, r.path, r.body) for r in fake.requests] == [
        ("POST", "/repos/acme/widgets/issues/12/labels", {"labels": ["needs human/ci"]}),
        ("DELETE", "/repos/acme/widgets/issues/12/labels/needs%20human%2Fci", None),
        ("DELETE", "/repos/acme/widgets/issues/12/labels/needs%20human%2Fci", None)]


def test_fake_answers_a_missing_label_with_githubs_error_shape(fake: FakeGitHub) -> None:
    import requests
    fake.add_pr(REPO, 12, "agent-a", sha=SHA, tree=TREE)
    answer = requests.delete(f"{fake.url}/repos/{REPO}/issues/12/labels/nope",
                             headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5)
    assert (answer.status_code, answer.json()) == (404, {
        "message": "Label does not exist", "status": "404", "documentation_url":
        "https://docs.github.com/rest/issues/labels#remove-a-label-from-an-issue"})


def test_remove_label_on_an_other_error_raises(fake: FakeGitHub, client: GitHub) -> None:
    fake.add_pr(REPO, 12, "agent-a", sha=SHA, tree=TREE, labels=("needs-human",))
    fake.fail("DELETE", r"/labels/", 403, body={"message": "Resource not accessible by "
                                                           "integration"})
    error = _raises(client.remove_label, REPO, 12, "needs-human")
    assert (error.reason, error.status, str(error)) == (
        "http_4xx", 403, "DELETE /repos/acme/widgets/issues/12/labels/needs-human: HTTP 403 "
        "Resource not accessible by integration")
    assert fake.labels(REPO, 12) == ["needs-human"]


# --- headers, base path ----------------------------------------------------------------------

def test_every_request_carries_githubs_headers(fake: FakeGitHub, client: GitHub) -> None:
    fake.add_pr(REPO, 1, "agent-a", sha=SHA, tree=TREE)
    client.open_pulls(REPO)
    client.comment(REPO, 1, "x")
    client.remove_label(REPO, 1, "y")
    for request in fake.requests:
        assert {k: request.headers.get(k) for k in
                ("accept", "x-github-api-version", "authorization", "user-agent")} == {
            "accept": "application/vnd.github+json", "x-github-api-version": "2022-11-28",
            "authorization": f"Bearer {TOKEN}", "user-agent": "repeat-failure-fixloop"}


def test_without_a_token_no_authorization_is_sent(sleeps: list[float]) -> None:
    with FakeGitHub(token=None) as fake:
        fake.add_pr(REPO, 1, "agent-a", sha=SHA, tree=TREE)
        assert GitHub(fake.url, None, sleep=sleeps.append).open_pulls(REPO) == [_pr(1, sha=SHA)]
        assert "authorization" not in fake.requests[0].headers


def test_github_enterprise_base_path(sleeps: list[float]) -> None:
    with FakeGitHub(token=TOKEN, base_path="/api/v3", max_per_page=1) as fake:
        fake.add_pr(REPO, 1, "agent-a", sha=f"{1:040x}", tree=TREE)
        fake.add_pr(REPO, 2, "agent-a", sha=f"{2:040x}", tree=TREE)
        client = GitHub(fake.url + "/", TOKEN, sleep=sleeps.append)
        assert client.api_url == f"http://127.0.0.1:{fake.port}/api/v3"
        assert [p.number for p in client.open_pulls(REPO)] == [2, 1]
        assert client.head_tree(REPO, f"{1:040x}") == TREE
        assert [r.path for r in fake.requests] == [
            "/api/v3/repos/acme/widgets/pulls?state=open&per_page=100",
            "/api/v3/repositories/1300001/pulls?state=open&per_page=1&page=2",
            f"/api/v3/repos/acme/widgets/git/commits/{1:040x}"]


# --- retries ---------------------------------------------------------------------------------

def test_get_is_retried_on_502_then_succeeds(fake: FakeGitHub, client: GitHub,
                                             sleeps: list[float]) -> None:
    fake.add_pr(REPO, 1, "agent-a", sha=SHA, tree=TREE)
    fake.fail("GET", r"/git/commits/", 502)
    assert client.head_tree(REPO, SHA) == TREE
    assert [r.method for r in fake.requests] == ["GET", "GET"]
    assert sleeps == []  # urllib3: the first retry has no backoff


def test_get_gives_up_after_three_retries_with_backoff(fake: FakeGitHub, client: GitHub,
                                                       sleeps: list[float]) -> None:
    fake.add_pr(REPO, 1, "agent-a", sha=SHA, tree=TREE)
    fake.fail("GET", r"/pulls$", 504, times=10)
    error = _raises(client.open_pulls, REPO)
    assert (error.reason, error.status, str(error)) == (
        "http_5xx", 504, "GET /repos/acme/widgets/pulls: HTTP 504 Gateway Timeout")
    assert len(fake.requests) == 4
    assert sleeps == [1.0, 2.0]


def test_503_retry_after_is_honoured_through_the_injected_sleep(
        fake: FakeGitHub, sleeps: list[float]) -> None:
    fake.add_pr(REPO, 1, "agent-a", sha=SHA, tree=TREE, labels=("x",))
    fake.fail("DELETE", r"/labels/x$", 503, headers={"Retry-After": "7"})
    fake.fail("DELETE", r"/labels/x$", 503, headers={"Retry-After": "3600"})
    client = GitHub(fake.url, TOKEN, sleep=sleeps.append, max_rate_limit_wait_s=20)
    client.remove_label(REPO, 1, "x")
    assert fake.labels(REPO, 1) == []
    assert sleeps == [7.0, 20.0]  # Retry-After capped at max_rate_limit_wait_s
    assert [r.method for r in fake.requests] == ["DELETE"] * 3


def test_post_is_not_retried_on_502(fake: FakeGitHub, client: GitHub,
                                    sleeps: list[float]) -> None:
    fake.add_pr(REPO, 1, "agent-a", sha=SHA, tree=TREE)
    fake.fail("POST", r"/comments$", 502, times=5)
    error = _raises(client.comment, REPO, 1, "hello")
    assert (error.reason, error.status, str(error)) == (
        "http_5xx", 502, "POST /repos/acme/widgets/issues/1/comments: HTTP 502 Server Error")
    assert len(fake.requests) == 1
    assert sleeps == []


def test_a_dropped_connection_retries_get_but_not_post(fake: FakeGitHub, client: GitHub,
                                                       sleeps: list[float]) -> None:
    fake.add_pr(REPO, 1, "agent-a", sha=SHA, tree=TREE)
    fake.fail("GET", r"/pulls$", "drop")
    assert [p.number for p in client.open_pulls(REPO)] == [1]
    fake.fail("POST", r"/labels$", "drop")
    error = _raises(client.add_label, REPO, 1, "needs-human")
    assert (error.reason, error.status) == ("network", None)
    assert str(error).startswith("POST /repos/acme/widgets/issues/1/labels: ")
    assert [r.method for r in fake.requests] == ["GET", "GET", "POST"]
    assert fake.labels(REPO, 1) == []


def test_a_redirected_write_is_not_followed(fake: FakeGitHub, client: GitHub) -> None:
    fake.add_pr(REPO, 1, "agent-a", sha=SHA, tree=TREE)
    fake.fail("POST", r"/comments$", 301, body={"message": "Moved Permanently"},
              headers={"Location": f"{fake.url}/repositories/1300001/issues/1/comments"})
    error = _raises(client.comment, REPO, 1, "x")
    assert (error.reason, error.status, str(error)) == (
        "bad_response", 301, "POST /repos/acme/widgets/issues/1/comments: unexpected HTTP 301")
    assert len(fake.requests) == 1 and fake.comments(REPO, 1) == []


def test_connection_refused_is_network(sleeps: list[float]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = GitHub(f"http://127.0.0.1:{port}", TOKEN, sleep=sleeps.append)
    error = _raises(client.open_pulls, REPO)
    assert (error.reason, error.status) == ("network", None)
    assert str(error).startswith("GET /repos/acme/widgets/pulls: NewConnectionError: ")
    assert "Connection refused" in str(error)
    assert sleeps == [1.0, 2.0]  # connect errors are retried (nothing was sent)


def test_a_slow_answer_is_timeout(fake: FakeGitHub, sleeps: list[float]) -> None:
    fake.add_pr(REPO, 1, "agent-a", sha=SHA, tree=TREE)
    client = GitHub(fake.url, TOKEN, timeout_s=0.2, sleep=sleeps.append)
    fake.fail("POST", r"/comments$", 201, delay_s=1.0, body={})
    started = time.monotonic()
    error = _raises(client.comment, REPO, 1, "hello")
    assert (error.reason, error.status) == ("timeout", None)
    assert time.monotonic() - started < 0.9
    fake.fail("GET", r"/git/commits/", 200, times=4, delay_s=1.0, body={})
    error = _raises(client.head_tree, REPO, SHA)
    assert (error.reason, error.status) == ("timeout", None)
    assert [r.method for r in fake.requests] == ["POST"] + ["GET"] * 4
    assert sleeps == [1.0, 2.0]


# --- rate limits -----------------------------------------------------------------------------

@pytest.mark.parametrize("status", [403, 429])
def test_primary_rate_limit_waits_until_the_reset(fake: FakeGitHub, client: GitHub,
                                                  sleeps: list[float], status: int) -> None:
    fake.add_pr(REPO, 1, "agent-a", sha=SHA, tree=TREE)
    fake.fail("GET", r"/pulls$", status, body={
        "message": "API rate limit exceeded for user ID 1.", "documentation_url":
        "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"},
        headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(T0) + 42)})
    assert [p.number for p in client.open_pulls(REPO)] == [1]
    assert sleeps == [42.0]
    assert len(fake.requests) == 2
    assert client.rate_remaining == 4998
    assert client.rate_reset == float(RATE_RESET)


def test_rate_remaining_is_none_before_any_answer(client: GitHub) -> None:
    assert (client.rate_remaining, client.rate_reset) == (None, None)


def test_secondary_rate_limit_waits_retry_after(fake: FakeGitHub, client: GitHub,
                                                sleeps: list[float]) -> None:
    fake.add_pr(REPO, 1, "agent-a", sha=SHA, tree=TREE)
    fake.fail("POST", r"/comments$", 403, headers={"retry-after": "30"}, body={
        "message": "You have exceeded a secondary rate limit. Please wait a few minutes "
                   "before you try again."})
    client.comment(REPO, 1, "once")
    assert sleeps == [30.0]
    assert fake.comments(REPO, 1) == ["once"]
    assert [r.method for r in fake.requests] == ["POST", "POST"]


def test_secondary_rate_limit_without_headers_waits_a_minute(
        fake: FakeGitHub, client: GitHub, sleeps: list[float]) -> None:
    fake.add_pr(REPO, 1, "agent-a", sha=SHA, tree=TREE)
    fake.fail("GET", r"/pulls$", 429)
    fake.fail("GET", r"/git/commits/", 403, body={
        "message": "You have exceeded a secondary rate limit."})
    client.open_pulls(REPO)
    client.head_tree(REPO, SHA)
    assert sleeps == [60.0, 60.0]


def test_a_wait_over_the_cap_is_rate_limited_without_sleeping(
        fake: FakeGitHub, client: GitHub, sleeps: list[float]) -> None:
    fake.add_pr(REPO, 1, "agent-a", sha=SHA, tree=TREE)
    fake.fail("GET", r"/pulls$", 403,
              headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(T0) + 301)})
    error = _raises(client.open_pulls, REPO)
    assert (error.reason, error.status, str(error)) == (
        "rate_limited", 403, "GET /repos/acme/widgets/pulls: HTTP 403 rate limited for 301 s, "
        "more than the 300 s allowed")
    fake.fail("POST", r"/comments$", 429, headers={"retry-after": "301"})
    error = _raises(client.comment, REPO, 1, "x")
    assert (error.reason, error.status) == ("rate_limited", 429)
    assert sleeps == []
    assert len(fake.requests) == 2


def test_rate_limited_again_after_the_wait_gives_up(fake: FakeGitHub, client: GitHub,
                                                    sleeps: list[float]) -> None:
    fake.add_pr(REPO, 1, "agent-a", sha=SHA, tree=TREE)
    fake.fail("GET", r"/pulls$", 429, times=5, headers={"retry-after": "5"})
    error = _raises(client.open_pulls, REPO)
    assert (error.reason, error.status, str(error)) == (
        "rate_limited", 429, "GET /repos/acme/widgets/pulls: HTTP 429 rate limited again "
        "after waiting")
    assert sleeps == [5.0]
    assert len(fake.requests) == 2


def test_a_plain_403_is_http_4xx_without_waiting(fake: FakeGitHub, client: GitHub,
                                                 sleeps: list[float]) -> None:
    fake.add_pr(REPO, 1, "agent-a", sha=SHA, tree=TREE)
    fake.fail("GET", r"/check-runs$", 403, body={
        "message": "Resource not accessible by personal access token"})
    error = _raises(client.checks, REPO, SHA)
    assert (error.reason, error.status, str(error)) == (
        "http_4xx", 403, f"GET /repos/acme/widgets/commits/{SHA}/check-runs: HTTP 403 "
        "Resource not accessible by personal access token")
    assert sleeps == []


# --- errors ----------------------------------------------------------------------------------

def test_a_wrong_token_is_auth(fake: FakeGitHub, sleeps: list[float]) -> None:
    fake.add_pr(REPO, 1, "agent-a", sha=SHA, tree=TREE)
    error = _raises(GitHub(fake.url, "wrong", sleep=sleeps.append).open_pulls, REPO)
    assert (error.reason, error.status, str(error)) == (
        "auth", 401, "GET /repos/acme/widgets/pulls: HTTP 401 Bad credentials")


def test_invalid_json_is_bad_response(fake: FakeGitHub, client: GitHub) -> None:
    fake.add_pr(REPO, 1, "agent-a", sha=SHA, tree=TREE)
    fake.fail("GET", r"/pulls$", 200, body="<html>unicorn</html>")
    error = _raises(client.open_pulls, REPO)
    assert (error.reason, error.status, str(error)) == (
        "bad_response", 200, "GET /repos/acme/widgets/pulls: HTTP 200 answer is not JSON")


GOOD_PR = {"number": 1, "user": {"login": "a"}, "head": {"sha": SHA}, "labels": [],
           "html_url": "u"}
GOOD_RUN = {"id": 1, "name": "t", "status": "completed", "conclusion": "success",
            "completed_at": "2027-01-15T08:00:00Z", "output": {"title": "x"}}
GOOD_STATUS = {"id": 1, "context": "c", "state": "success", "updated_at": "2027-01-15T08:00:00Z"}


@pytest.mark.parametrize("route, body, message", [
    ("/pulls$", {"items": []}, "GET /repos/acme/widgets/pulls: pulls: expected a list, got an "
     "object"),
    ("/pulls$", [GOOD_PR, "7"], "GET /repos/acme/widgets/pulls: pulls[1]: expected an object, "
     "got a string"),
    ("/pulls$", [{**GOOD_PR, "number": "1"}], "GET /repos/acme/widgets/pulls: pulls[0].number: "
     "expected an integer, got a string"),
    ("/pulls$", [{**GOOD_PR, "number": True}], "GET /repos/acme/widgets/pulls: "
     "pulls[0].number: expected an integer, got a boolean"),
    ("/pulls$", [{k: v for k, v in GOOD_PR.items() if k != "head"}], "GET "
     "/repos/acme/widgets/pulls: pulls[0].head: expected an object, got nothing"),
    ("/pulls$", [{**GOOD_PR, "head": {"sha": None}}], "GET /repos/acme/widgets/pulls: "
     "pulls[0].head.sha: expected a string, got null"),
    ("/pulls$", [{**GOOD_PR, "labels": [{"name": 3}]}], "GET /repos/acme/widgets/pulls: "
     "pulls[0].labels[0].name: expected a string, got a number"),
    ("/pulls$", [{**GOOD_PR, "user": {}}], "GET /repos/acme/widgets/pulls: "
     "pulls[0].user.login: expected a string, got nothing"),
    ("/pulls$", [{**GOOD_PR, "draft": "no"}], "GET /repos/acme/widgets/pulls: "
     "pulls[0].draft: expected a boolean, got a string"),
    ("/git/commits/", {"tree": {"sha": 5}}, f"GET /repos/acme/widgets/git/commits/{SHA}: "
     "commit.tree.sha: expected a string, got a number"),
    ("/git/commits/", [], f"GET /repos/acme/widgets/git/commits/{SHA}: commit: expected an "
     "object, got a list"),
    ("/check-runs$", {"check_runs": []}, f"GET /repos/acme/widgets/commits/{SHA}/check-runs: "
     "check-runs.total_count: expected an integer, got nothing"),
    ("/check-runs$", {"total_count": 1, "check_runs": {}}, f"GET /repos/acme/widgets/commits/"
     f"{SHA}/check-runs: check-runs.check_runs: expected a list, got an object"),
    ("/check-runs$", {"total_count": 1, "check_runs": [{**GOOD_RUN, "conclusion": None}]},
     f"GET /repos/acme/widgets/commits/{SHA}/check-runs: check_runs[0]: completed without a "
     "conclusion"),
    ("/check-runs$", {"total_count": 1, "check_runs": [{**GOOD_RUN, "completed_at": "soon"}]},
     f"GET /repos/acme/widgets/commits/{SHA}/check-runs: check_runs[0].completed_at: not an "
     "ISO 8601 time"),
    ("/check-runs$", {"total_count": 1, "check_runs": [{**GOOD_RUN, "output": "x"}]},
     f"GET /repos/acme/widgets/commits/{SHA}/check-runs: check_runs[0].output: expected an "
     "object, got a string"),
    ("/check-runs$", {"total_count": 1, "check_runs": [{**GOOD_RUN, "id": "1"}]},
     f"GET /repos/acme/widgets/commits/{SHA}/check-runs: check_runs[0].id: expected an "
     "integer, got a string"),
    ("/status$", {"state": "success", "statuses": [{**GOOD_STATUS, "updated_at": None}]},
     f"GET /repos/acme/widgets/commits/{SHA}/status: statuses[0].updated_at: expected a "
     "string, got null"),
    ("/status$", {"statuses": []}, f"GET /repos/acme/widgets/commits/{SHA}/status: "
     "status.state: expected a string, got nothing"),
    ("/status$", {"state": "success", "statuses": [{**GOOD_STATUS, "context": []}]},
     f"GET /repos/acme/widgets/commits/{SHA}/status: statuses[0].context: expected a string, "
     "got a list"),
])
def test_a_wrong_shape_is_bad_response(fake: FakeGitHub, client: GitHub, route: str,
                                       body: Any, message: str) -> None:
    fake.add_pr(REPO, 1, "agent-a", sha=SHA, tree=TREE)
    fake.fail("GET", route, 200, body=body)
    call = client.open_pulls if route == "/pulls$" else \
        client.head_tree if route == "/git/commits/" else client.checks
    error = _raises(call, REPO, *(() if route == "/pulls$" else (SHA,)))
    assert (error.reason, error.status, str(error)) == ("bad_response", 200, message)


def test_the_token_never_shows_in_an_error(fake: FakeGitHub, sleeps: list[float]) -> None:
    fake.add_pr(REPO, 1, "agent-a", sha=SHA, tree=TREE)
    client = GitHub(fake.url, TOKEN, sleep=sleeps.append, clock=lambda: T0)
    fake.fail("GET", r"/pulls$", 401, body={"message": f"Bad credentials: {TOKEN}"})
    fake.fail("GET", r"/git/commits/", "drop", times=4)
    fake.fail("POST", r"/comments$", 429, headers={"retry-after": "9999"})
    fake.fail("GET", r"/check-runs$", 200, body="no json " + TOKEN)
    errors = [_raises(client.open_pulls, REPO), _raises(client.head_tree, REPO, SHA),
              _raises(client.comment, REPO, 1, TOKEN), _raises(client.checks, REPO, SHA)]
    assert [e.reason for e in errors] == ["auth", "network", "rate_limited", "bad_response"]
    assert str(errors[0]) == "GET /repos/acme/widgets/pulls: HTTP 401 Bad credentials: <token>"
    for error in errors:
        text = str(error) + repr(error) + "".join(traceback.format_exception(error))
        assert TOKEN not in text and TOKEN[-8:] not in text
        assert error.__cause__ is None
    assert repr(client) == f"GitHub(api_url='{fake.url}', token='<set>')"
    assert TOKEN not in repr(client.token_source)
    assert all(r.headers["authorization"] == f"Bearer {TOKEN}" for r in fake.requests)


def test_bad_arguments_are_value_errors(client: GitHub) -> None:
    for call in (lambda: client.open_pulls("not-a-repo"),
                 lambda: client.head_tree(REPO, ""),
                 lambda: client.comment(REPO, 0, "x"),
                 lambda: client.add_label(REPO, True, "x"),  # type: ignore[arg-type]
                 lambda: client.remove_label(REPO, 1, ""),
                 lambda: GitHub("ftp://example.com", None),
                 lambda: GitHub("https://api.github.com", None, timeout_s=0)):
        with pytest.raises(ValueError):
            call()


def test_reasons_are_the_fixed_metric_labels() -> None:
    assert REASONS == ("http_4xx", "http_5xx", "rate_limited", "network", "timeout",
                       "bad_response", "auth")


def test_a_summary_is_scrubbed_before_it_is_cut(fake: FakeGitHub, client: GitHub) -> None:
    """Issue 28 item 18: cut to SUMMARY_MAX first, a key ending just past the cut lost its last
    characters and no longer matched its rule, so 18 of its 20 characters stayed (and reached
    the escalation comment, whose scrub could not see it either)."""
    key = "AKIA" + "ABCDEFGH23456789"  # built here: the shape of an AWS access key id
    fake.add_pr(REPO, 1, "agent-a", sha=SHA, tree=TREE)
    fake.set_check_runs(REPO, SHA, [
        dict(name="unit", conclusion="failure", completed_at="2027-01-15T08:05:00Z",
             output=dict(title="", summary="x" * (SUMMARY_MAX - 19) + " " + key))])
    fake.set_statuses(REPO, SHA, [
        dict(context="lint", state="failure", updated_at=T0 + 70,
             description="y" * (SUMMARY_MAX - 19) + " " + key)])
    run, status = client.checks(REPO, SHA)
    assert run.summary == "x" * (SUMMARY_MAX - 19) + " [REDACTED]"
    assert status.summary == "y" * (SUMMARY_MAX - 19) + " [REDACTED]"
