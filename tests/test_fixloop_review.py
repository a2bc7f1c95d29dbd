"""The fix loop's GitHub client and App credentials (issue 20) against a misbehaving GitHub:
401s that a new token does not cure, installation tokens that arrive nearly or already
expired, a token holding CR/LF, and a ``next`` page link that loops. Each test failed before
the fix it guards. Tokens are made at run time (the fake's ``ghs_`` tokens, or built here).
"""

from __future__ import annotations

import logging
from collections import Counter

import pytest

from repeat_failure.fixloop.app import FixloopApp
from repeat_failure.fixloop.github import GitHub, GitHubError
from tests.fakegithub import FakeGitHub
from tests.test_fixloop_auth import (APP_ID, REPO, WallClock, auth_of, config, key_file, keys,
                                     red_pr)

__all__ = ["key_file", "keys"]  # pytest fixtures, imported for their use here

ROUTE_TOKENS = "/app/installations/77/access_tokens"


def routes(fake: FakeGitHub) -> Counter:
    return Counter(r.route.rsplit("/", 1)[-1] for r in fake.requests)


def test_a_401_no_new_token_cures_mints_once_per_sweep(tmp_path, key_file, keys, caplog):
    """Every check-runs call answered 401 (an App whose access was cut for that endpoint's
    repository while listing still worked): each of the 10 PRs minted a token of its own and
    made its request twice (11 exchanges and 20 check-runs calls in one pass). Now the first
    401 replaces the token once; the other PRs' calls fail as ``auth`` on their first answer,
    and the next sweep may replace the token once again."""
    with FakeGitHub() as fake:
        fake.install_app(APP_ID, keys[1], {REPO: 77}, clock=WallClock())
        for n in range(1, 11):
            red_pr(fake, REPO, n)
        app = FixloopApp(config(tmp_path, fake, key_file, installation_id=77))
        assert app.run_once() == "complete"
        fake.fail("GET", r"/check-runs$", 401, times=1000)
        fake.clear_requests()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="repeat_failure"):
            assert app.run_once() == "complete"  # every repository was listed
        assert len(fake.issued_tokens) == 2
        assert routes(fake) == {"pulls": 1, "check-runs": 11, "access_tokens": 1}
        assert app.sweeper.stats.api_errors["auth"] == 10
        events = Counter(getattr(r, "event", None) for r in caplog.records)
        assert (events["fixloop_app_token_rejected"],
                events["fixloop_app_token_rejected_again"]) == (1, 9)
        fake.clear_requests()
        assert app.run_once() == "complete"
        assert len(fake.issued_tokens) == 3
        assert routes(fake)["access_tokens"] == 1
        app.ledger.close()


def test_a_token_with_less_than_the_margin_left_serves_many_requests(tmp_path, key_file,
                                                                     keys):
    """An installation token that arrives with 200 s left (under the 300 s refresh margin:
    a node clock a few minutes off, or a short-lived token) was replaced before every
    request: 31 exchanges for 32 calls. It now serves until half its time is gone."""
    with FakeGitHub() as fake:
        fake.install_app(APP_ID, keys[1], {REPO: 77}, clock=WallClock(), token_ttl_s=200)
        for n in range(1, 11):
            red_pr(fake, REPO, n)
        app = FixloopApp(config(tmp_path, fake, key_file, installation_id=77))
        assert app.run_once() == "complete"
        assert len(fake.issued_tokens) == 1
        assert routes(fake)["access_tokens"] == 1
        assert routes(fake) == {"access_tokens": 1, "pulls": 1, "check-runs": 10,
                                "check-suites": 10, "status": 10}
        assert {auth_of(r) for r in fake.requests if r.route != ROUTE_TOKENS} == {
            f"Bearer {fake.issued_tokens[0]}"}
        app.ledger.close()


def test_a_token_already_expired_by_this_clock_is_used_until_refused(tmp_path, key_file,
                                                                     keys, caplog):
    """An ``expires_at`` already past by the node's clock made every request mint a new
    token first. The token is used until GitHub refuses it, with a warning about the clock."""
    token = "ghs" + "_" + "Kp3" * 12
    with FakeGitHub() as fake:  # token None: the fake accepts any non-JWT credential
        fake.install_app(APP_ID, keys[1], {REPO: 77}, clock=WallClock())
        red_pr(fake)
        fake.fail("POST", r"/access_tokens$", 201, times=1000,
                  body={"token": token, "expires_at": "2001-01-01T00:00:00Z"})
        app = FixloopApp(config(tmp_path, fake, key_file, installation_id=77))
        with caplog.at_level(logging.WARNING, logger="repeat_failure"):
            assert app.run_once() == "complete"
        assert routes(fake)["access_tokens"] == 1
        assert {auth_of(r) for r in fake.requests if r.route != ROUTE_TOKENS} == {
            f"Bearer {token}"}
        assert [r.event for r in caplog.records if getattr(r, "event", "").startswith(
            "fixloop_app")] == ["fixloop_app_token_clock"]
        assert all(token not in r.getMessage() and token not in str(r.__dict__)
                   for r in caplog.records)
        app.ledger.close()


@pytest.mark.parametrize("tail", ["\n", "\r\nX-Injected: 1"])
def test_a_token_with_cr_or_lf_is_never_sent_nor_quoted(tmp_path, key_file, keys, caplog,
                                                       tail):
    """An installation token holding CR/LF made http.client raise a ValueError that quoted the
    whole Authorization header, token and all, out of run_once. It is an ``auth`` error now,
    naming no token, and nothing is sent with it."""
    token = "ghs" + "_" + "Zq9" * 12 + tail
    with FakeGitHub() as fake:
        fake.install_app(APP_ID, keys[1], {REPO: 77}, clock=WallClock())
        red_pr(fake)
        fake.fail("POST", r"/access_tokens$", 201, times=1000,
                  body={"token": token, "expires_at": "2099-01-01T00:00:00Z"})
        app = FixloopApp(config(tmp_path, fake, key_file, installation_id=77))
        with caplog.at_level(logging.INFO, logger="repeat_failure"):
            assert app.run_once() == "failed"
        assert app.sweeper.stats.api_errors == {"auth": 1}
        assert [r.route for r in fake.requests] == [ROUTE_TOKENS]
        secret = token.split("\r")[0].split("\n")[0]
        assert all(secret not in r.getMessage() and secret not in str(r.__dict__)
                   for r in caplog.records)
        app.ledger.close()


def test_a_static_token_with_a_newline_inside_is_an_auth_error_naming_no_token() -> None:
    """A token file holding two lines (stripped at its ends only) gave the same ValueError
    quoting the token."""
    token = "ghp" + "_" + "Wd4" * 12 + "\n" + "second-line"
    with FakeGitHub() as fake:
        fake.add_pr(REPO, 1, "a", "1" * 40, "2" * 40)
        github = GitHub(fake.url, token, sleep=lambda s: None)
        with pytest.raises(GitHubError) as caught:
            github.open_pulls(REPO)
        assert caught.value.reason == "auth"
        assert str(caught.value) == (f"GET /repos/{REPO}/pulls: the token holds whitespace or "
                                     "control characters an HTTP header cannot carry (check "
                                     "the token file, or what GitHub answered for an App's "
                                     "token)")
        assert fake.requests == []


def test_a_next_link_back_to_a_page_already_read_stops_at_once() -> None:
    """A ``Link: rel="next"`` pointing at the page just read was followed MAX_PAGES (100)
    times per call, every pass, for each PR. A page already read ends the list as
    ``bad_response`` at its second answer."""
    sha = "1" * 40
    with FakeGitHub() as fake:
        fake.add_pr(REPO, 1, "a", sha, "2" * 40)
        url = f"{fake.url}/repos/{REPO}/commits/{sha}/check-runs?per_page=100&page=2"
        fake.fail("GET", r"/check-runs$", 200, times=1000,
                  headers={"Link": f'<{url}>; rel="next"'},
                  body={"total_count": 0, "check_runs": []})
        github = GitHub(fake.url, None, sleep=lambda s: None)
        with pytest.raises(GitHubError) as caught:
            github.checks(REPO, sha)
        assert caught.value.reason == "bad_response"
        assert str(caught.value) == (f"GET /repos/{REPO}/commits/{sha}/check-runs: next page "
                                     "link repeats a page already read")
        assert len(fake.requests) == 2
