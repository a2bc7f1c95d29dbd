"""GitHub REST client for ``repeat-failure fixloop``: open pull requests, head trees, CI checks,
comments and labels (design adr-0010).

Every call is one documented operation of GitHub's published REST API description
(github/rest-api-description, OpenAPI ``descriptions/api.github.com/api.github.com.json``, API
version ``2022-11-28``); operation ids and paths:

* :meth:`~GitHub.open_pulls`: ``pulls/list``,
  ``GET /repos/{owner}/{repo}/pulls?state=open&per_page=100``
* :meth:`~GitHub.head_tree`: ``git/get-commit``,
  ``GET /repos/{owner}/{repo}/git/commits/{commit_sha}``
* :meth:`~GitHub.checks`: ``checks/list-for-ref``,
  ``GET /repos/{owner}/{repo}/commits/{ref}/check-runs?per_page=100`` (GitHub's default
  ``filter=latest``), ``checks/list-suites-for-ref``,
  ``GET /repos/{owner}/{repo}/commits/{ref}/check-suites?per_page=100``, and
  ``repos/get-combined-status-for-ref``,
  ``GET /repos/{owner}/{repo}/commits/{ref}/status?per_page=100``
* :meth:`~GitHub.comment`: ``issues/create-comment``,
  ``POST /repos/{owner}/{repo}/issues/{issue_number}/comments``
* :meth:`~GitHub.add_label`: ``issues/add-labels``,
  ``POST /repos/{owner}/{repo}/issues/{issue_number}/labels``
* :meth:`~GitHub.remove_label`: ``issues/remove-label``,
  ``DELETE /repos/{owner}/{repo}/issues/{issue_number}/labels/{name}``
* :meth:`~GitHub.repo_installation`: ``apps/get-repo-installation``,
  ``GET /repos/{owner}/{repo}/installation`` (as a GitHub App, with its JWT)
* :meth:`~GitHub.installation_token`: ``apps/create-installation-access-token``,
  ``POST /app/installations/{installation_id}/access_tokens`` (as a GitHub App)

Transport (docs.github.com "Getting started with the REST API", "Using pagination in the REST
API", "Rate limits for the REST API", "Best practices for using the REST API"):

* Headers on every request: ``Accept: application/vnd.github+json``, ``X-GitHub-Api-Version:
  2022-11-28``, ``User-Agent: repeat-failure-fixloop`` and, with a token, ``Authorization:
  Bearer <token>`` (the token for the request's repository, :class:`TokenSource`; a 401 lets
  the source refresh once and the request is made once more). ``api_url`` is ``https://api.github.com`` or GitHub Enterprise Server's
  ``https://HOST/api/v3``; paths are appended to it.
* Lists are read to the end by following the ``Link`` header's ``rel="next"`` URL (as given,
  e.g. GitHub's ``/repositories/{id}/...`` form), at most :data:`MAX_PAGES` pages; a next URL
  outside ``api_url`` is refused (``bad_response``), so the token is never sent elsewhere.
* Retries (urllib3 ``Retry`` under a ``requests`` session): a connection that could not be
  opened is retried for every method (nothing was sent); a read error, a dropped connection, a
  read timeout and a 502/503/504 answer are retried only for the idempotent ``GET`` and
  ``DELETE``, :data:`RETRIES` times with urllib3's exponential backoff (waits of 0 s, 1 s and
  2 s before the three retries: ``BACKOFF_FACTOR * 2**(n-1)`` from the second), honouring a
  ``Retry-After`` header on 503 (capped at ``max_rate_limit_wait_s``). ``POST`` is never
  retried once sent, not on 5xx, a dropped connection or a read timeout: a comment posted twice
  is worse than a missed one (the next sweep decides again). All waits go through the injected
  ``sleep``; urllib3 logs each retry at WARNING (method-less path, never the token).
* Redirects are followed for ``GET`` only (requests drops ``Authorization`` when the host
  changes); a 3xx answer to ``POST``/``DELETE`` is ``bad_response``.
* Rate limits: a 403/429 with ``retry-after`` (a secondary rate limit) waits that many seconds;
  else with ``x-ratelimit-remaining: 0`` (the primary limit) waits until ``x-ratelimit-reset``
  (epoch seconds, compared with the injected ``clock``); else a 429, or a 403 whose message
  mentions a rate limit, waits :data:`SECONDARY_WAIT_S` (GitHub: "wait for at least one minute").
  Then the request is made once more; a wait longer than ``max_rate_limit_wait_s``, or a second
  rate-limited answer, raises ``GitHubError("rate_limited")`` (no sleep for an over-long wait).
* ``timeout_s`` bounds the connect and each read of one attempt (not the whole call).

Errors are :class:`GitHubError` with a fixed ``reason`` (:data:`REASONS`, a metric label).
Every response field read is type-checked: a shape GitHub does not document raises
``bad_response``, never ``KeyError``/``TypeError``. The token is never logged and never in an
exception's text, ``repr`` or cause chain (causes are suppressed; texts are redacted).

Not thread-safe: one :class:`GitHub` per sweep loop.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any, Callable, Iterator
from urllib.parse import quote, urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import (ConnectTimeoutError, MaxRetryError, NewConnectionError,
                                ReadTimeoutError)
from urllib3.util.retry import Retry

from repeat_failure.fixloop.config import REPOSITORY_RE

#: Every :attr:`GitHubError.reason` (fixed, for a metric label).
REASONS = ("http_4xx", "http_5xx", "rate_limited", "network", "timeout", "bad_response", "auth")
API_VERSION = "2022-11-28"
ACCEPT = "application/vnd.github+json"
USER_AGENT = "repeat-failure-fixloop"
#: Page size asked for (GitHub's maximum).
PER_PAGE = 100
#: Pages read per list at most (10,000 items at 100 a page); more is ``bad_response``.
MAX_PAGES = 100
#: A bearer token as a header can carry it: visible ASCII, no space (RFC 9110 field values;
#: GitHub's tokens are ``gh?_`` and base62, its JWTs base64url and dots).
_HEADER_SAFE = re.compile(r"[\x21-\x7e]+")
#: :attr:`Check.summary` is cut to this many characters.
SUMMARY_MAX = 2000
#: Retries of one idempotent request (connect errors: any method).
RETRIES = 3
BACKOFF_FACTOR = 0.5
RETRY_STATUSES = (502, 503, 504)
#: Wait for a rate limit that names no time (GitHub: "wait for at least one minute").
SECONDARY_WAIT_S = 60.0

#: Check-run and check-suite conclusions (``check_runs[].conclusion``,
#: ``check_suites[].conclusion``) that are red. ``startup_failure`` is a suite's (a workflow
#: that could not start: no run exists); GitHub's check-run schema does not list it, but a run
#: carrying it would be read red too.
RED_CONCLUSIONS = frozenset({"failure", "timed_out", "cancelled", "action_required",
                             "startup_failure"})
#: Conclusions that are green.
GREEN_CONCLUSIONS = frozenset({"success", "neutral", "skipped"})
#: The check-run/suite ``status`` values of work not finished yet. ``queued`` and
#: ``in_progress`` are any app's; ``waiting`` (a job waiting for an environment's protection
#: rule, e.g. a required reviewer), ``requested`` and ``pending`` (queued behind a concurrency
#: group) only GitHub Actions sets (docs "Using the REST API to interact with checks", "REST
#: API endpoints for check runs"). All are pending: the run will still finish.
UNFINISHED_STATUSES = frozenset({"queued", "in_progress", "waiting", "requested", "pending"})
#: The app whose check suites exist only for a workflow run GitHub Actions created (a run-less
#: suite of it that is not completed is a workflow whose jobs are not created yet: pending).
ACTIONS_APP = "github-actions"
#: Commit-status states (``repos/get-combined-status-for-ref`` ``statuses[].state``) that are red.
RED_STATES = frozenset({"failure", "error"})

_MISSING = object()


@dataclass(frozen=True)
class PullRequest:
    """One open pull request (``pulls/list`` item, schema ``pull-request-simple``).

    ``repo`` is ``owner/name`` as configured; ``number`` the PR number; ``author`` its
    ``user.login`` (``""`` when GitHub reports no user, a deleted account); ``head_sha`` the
    40-hex ``head.sha``; ``labels`` the ``labels[].name`` in GitHub's order; ``draft`` (``False``
    when the field is absent, as on old GitHub Enterprise); ``url`` its ``html_url``.
    """

    repo: str
    number: int
    author: str
    head_sha: str
    labels: tuple[str, ...]
    draft: bool
    url: str


@dataclass(frozen=True)
class Check:
    """One CI signal on a commit: the newest check run of a name in one check suite of one app,
    a check suite that failed without any run, or the newest commit status of a context.

    ``status`` is ``"pending"``, ``"red"`` or ``"green"`` (see :meth:`GitHub.checks`).
    ``conclusion`` is GitHub's own word: a completed check run's ``conclusion``, an unfinished
    one's ``status`` (``queued``, ``in_progress``, ``waiting``, ...), a commit status's ``state``.
    ``completed_at`` is when it reached red or green, epoch seconds (check run ``completed_at``,
    commit status ``updated_at``); ``None`` while pending (and for a completed run GitHub gave no
    time). ``summary`` is human text, at most :data:`SUMMARY_MAX` characters, raw from GitHub
    (not scrubbed). ``url`` its ``details_url``/``html_url`` or ``target_url`` (``""`` when none).
    ``source`` is ``"check_run"``, ``"check_suite"`` or ``"status"``. ``app`` is the reporting
    GitHub App's ``slug`` (``github-actions``; ``""`` for a commit status or a run without an
    app) and ``suite_id`` its check suite's ``id`` (``None`` for a status).
    """

    name: str
    status: str
    conclusion: str
    completed_at: float | None
    summary: str
    url: str
    source: str
    app: str = ""
    suite_id: int | None = None


class GitHubError(Exception):
    """A GitHub call that did not succeed.

    ``reason`` is one of :data:`REASONS`: ``auth`` (401), ``http_4xx`` (other 4xx, also a
    plain 403), ``http_5xx`` (5xx, after the retries an idempotent request gets),
    ``rate_limited`` (see the module docstring), ``network`` (connection refused/reset/dropped,
    TLS, DNS), ``timeout`` (connect or read timeout), ``bad_response`` (not JSON, a field
    missing or of the wrong type, an unexpected status or ``Link``). ``status`` is the HTTP
    status when there was an answer, else ``None``. ``str()`` is one line naming the request
    (``"GET /repos/o/r/pulls: HTTP 404 Not Found"``), never the token.
    """

    def __init__(self, reason: str, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.status = status


class _Bearer(requests.auth.AuthBase):
    """``Authorization: Bearer <token>``. Given as ``auth=`` so requests never replaces it with
    ``.netrc`` credentials; its repr hides the token."""

    def __init__(self, token: str) -> None:
        self._token = token

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = f"Bearer {self._token}"
        return request

    def __repr__(self) -> str:
        return "_Bearer(<token>)"


class TokenSource:
    """Where the client's bearer tokens come from. :meth:`token` gives the token for calls
    about ``repo`` (``owner/name``, or ``None`` for a call about no repository; ``None``:
    anonymous); :meth:`refresh` is called once after GitHub answered 401 to ``rejected`` and
    returns whether a different token may now work (then the request is made once more).
    :meth:`secrets` lists every token handed out, so texts can be redacted. A source may raise
    :class:`GitHubError` (e.g. a GitHub App whose token exchange failed)."""

    def token(self, repo: str | None) -> str | None:
        raise NotImplementedError

    def refresh(self, repo: str | None, rejected: str | None) -> bool:
        return False

    def new_pass(self) -> None:
        """A sweep starts (:meth:`repeat_failure.fixloop.sweep.Sweeper.run_once`): a source that
        limits its refreshes per sweep starts counting again. Nothing by default."""

    def secrets(self) -> tuple[str, ...]:
        return ()


class StaticToken(TokenSource):
    """One token for every call (a personal, fine-grained or CI token), or ``None``; a 401
    cannot be helped by asking again."""

    def __init__(self, token: str | None) -> None:
        self._token = token or None

    def token(self, repo: str | None) -> str | None:
        return self._token

    def secrets(self) -> tuple[str, ...]:
        return (self._token,) if self._token else ()

    def __repr__(self) -> str:
        return f"StaticToken({'<set>' if self._token else None})"


class _Retry(Retry):
    """urllib3 ``Retry`` that waits through an injected ``sleep`` (class attribute ``_sleep``,
    set per client by :func:`_retry_class`, since ``Retry.new`` rebuilds from known keyword
    arguments only), retries statuses only in ``status_forcelist`` (429 is handled by
    :class:`GitHub`, never by urllib3), and ignores a malformed ``Retry-After``."""

    _sleep: Callable[[float], Any] = staticmethod(time.sleep)

    def is_retry(self, method: str, status_code: int, has_retry_after: bool = False) -> bool:
        return bool(self._is_method_retryable(method) and self.status_forcelist
                    and status_code in self.status_forcelist)

    def get_retry_after(self, response: Any) -> float | None:
        try:
            return super().get_retry_after(response)
        except Exception:  # urllib3 InvalidHeader: fall back to the backoff
            return None

    def sleep(self, response: Any = None) -> None:
        if self.respect_retry_after_header and response is not None:
            retry_after = self.get_retry_after(response)
            if retry_after:
                self._sleep(retry_after)
                return
        backoff = self.get_backoff_time()
        if backoff > 0:
            self._sleep(backoff)


def _retry_class(sleep: Callable[[float], Any]) -> type[_Retry]:
    return type("_BoundRetry", (_Retry,), {"_sleep": staticmethod(sleep)})


def _kind(value: Any) -> str:
    if value is _MISSING:
        return "nothing"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


class _Shape:
    """Type-checked reads from a decoded JSON document; any mismatch is ``bad_response``
    naming the request and the field path (``pulls[3].head.sha``)."""

    def __init__(self, what: str, status: int | None) -> None:
        self.what = what
        self.status = status

    def fail(self, path: str, expected: str, value: Any) -> GitHubError:
        return GitHubError("bad_response",
                           f"{self.what}: {path}: expected {expected}, got {_kind(value)}",
                           self.status)

    def obj(self, value: Any, path: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(path, "an object", value)
        return value

    def array(self, value: Any, path: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(path, "a list", value)
        return value

    def string(self, doc: dict[str, Any], key: str, path: str, *, optional: bool = False
               ) -> str | None:
        value = doc.get(key, _MISSING)
        if optional and (value is None or value is _MISSING):
            return None
        if not isinstance(value, str):
            raise self.fail(f"{path}.{key}", "a string", value)
        return value

    def integer(self, doc: dict[str, Any], key: str, path: str) -> int:
        value = doc.get(key, _MISSING)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.fail(f"{path}.{key}", "an integer", value)
        return value

    def boolean(self, doc: dict[str, Any], key: str, path: str, default: bool) -> bool:
        value = doc.get(key, _MISSING)
        if value is _MISSING:
            return default
        if not isinstance(value, bool):
            raise self.fail(f"{path}.{key}", "a boolean", value)
        return value

    def timestamp(self, doc: dict[str, Any], key: str, path: str, *, optional: bool = False
                  ) -> float | None:
        """An ISO 8601 time (``2024-05-01T12:00:00Z``) as epoch seconds."""
        text = self.string(doc, key, path, optional=optional)
        if text is None:
            return None
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise GitHubError("bad_response", f"{self.what}: {path}.{key}: not an ISO 8601 "
                              f"time", self.status) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        return moment.timestamp()


class GitHub:
    """The REST client (see the module docstring for the transport rules).

    ``api_url``: ``https://api.github.com`` or ``https://HOST/api/v3`` (a trailing ``/`` is
    dropped). ``token``: a token for ``Authorization: Bearer``, ``None`` for unauthenticated
    calls, or a :class:`TokenSource` (asked per request with the request's repository; after
    a 401 it may refresh once and the request is made once more: a rotated token file, an
    expired GitHub App installation token, :mod:`repeat_failure.fixloop.auth`). ``timeout_s``: connect and read timeout of one attempt, seconds. ``session``: a
    ``requests.Session`` to use as it is (default: a new one with the retrying adapter mounted;
    only that one is closed by :meth:`close`). ``clock``: epoch seconds, for
    ``x-ratelimit-reset``. ``sleep``: every wait (backoff, ``Retry-After``, rate limits).
    ``max_rate_limit_wait_s``: the longest rate-limit wait; longer is ``rate_limited`` at once.

    After each answer :attr:`rate_remaining` holds the last ``x-ratelimit-remaining`` seen (an
    ``int``, or ``None`` before any) and :attr:`rate_reset` the last ``x-ratelimit-reset`` (epoch
    seconds, or ``None``). Raises ``ValueError`` for a malformed ``api_url`` or ``timeout_s``.
    """

    def __init__(self, api_url: str, token: str | TokenSource | None, timeout_s: float = 30.0, *,
                 session: requests.Session | None = None,
                 clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], Any] = time.sleep,
                 max_rate_limit_wait_s: float = 300.0) -> None:
        parts = urlsplit(api_url)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.query \
                or parts.fragment:
            raise ValueError(f"api_url {api_url!r}: expected http(s)://HOST[/PATH]")
        if not timeout_s > 0:
            raise ValueError("timeout_s must be positive")
        self.api_url = api_url.rstrip("/")
        self.timeout_s = float(timeout_s)
        self.max_rate_limit_wait_s = float(max_rate_limit_wait_s)
        self.rate_remaining: int | None = None
        self.rate_reset: float | None = None
        self._source: TokenSource = token if isinstance(token, TokenSource) \
            else StaticToken(token)
        self._clock = clock
        self._sleep = sleep
        #: Epoch seconds no rate-limit wait may go past (a sweep's time budget; ``None``: no
        #: budget): such a wait raises ``GitHubError("rate_limited")`` instead. The short retry
        #: backoffs after a 5xx are not bounded by it (at most 3 s, or a capped Retry-After).
        self.wait_deadline: float | None = None
        self._headers = {"Accept": ACCEPT, "X-GitHub-Api-Version": API_VERSION,
                         "User-Agent": USER_AGENT}
        self._own_session = session is None
        if session is None:
            session = requests.Session()
            retry = _retry_class(sleep)(
                total=RETRIES, connect=RETRIES, read=RETRIES, status=RETRIES, other=0,
                backoff_factor=BACKOFF_FACTOR, status_forcelist=RETRY_STATUSES,
                allowed_methods=frozenset({"GET", "DELETE"}), raise_on_status=False,
                respect_retry_after_header=True, retry_after_max=self.max_rate_limit_wait_s)
            adapter = HTTPAdapter(max_retries=retry)
            session.mount("http://", adapter)
            session.mount("https://", adapter)
        self._session = session

    def __repr__(self) -> str:
        token = "<set>" if self._source.secrets() else None
        return f"GitHub(api_url={self.api_url!r}, token={token!r})"

    @property
    def token_source(self) -> TokenSource:
        """Where this client's tokens come from."""
        return self._source

    def close(self) -> None:
        """Close the HTTP session if this client created it."""
        if self._own_session:
            self._session.close()

    # --- the operations ------------------------------------------------------------------

    def open_pulls(self, repo: str) -> list[PullRequest]:
        """Every open pull request of ``repo`` (``owner/name``), newest first (GitHub's order),
        all pages (``pulls/list``). A PR listed twice because the list shifted between pages
        is kept once (a PR opened mid-listing may also be missed until the next sweep).

        Raises :class:`GitHubError`; ``ValueError`` for a malformed ``repo``.
        """
        base = self._repo_path(repo)
        pulls: list[PullRequest] = []
        seen: set[int] = set()
        for doc, shape in self._pages(f"{base}/pulls", {"state": "open", "per_page": PER_PAGE},
                                      repo=repo):
            for i, item in enumerate(shape.array(doc, "pulls")):
                path = f"pulls[{i}]"
                item = shape.obj(item, path)
                number = shape.integer(item, "number", path)
                user = item.get("user", _MISSING)
                author = "" if user is None else \
                    shape.string(shape.obj(user, f"{path}.user"), "login", f"{path}.user")
                head = shape.obj(item.get("head", _MISSING), f"{path}.head")
                labels = tuple(
                    shape.string(shape.obj(label, f"{path}.labels[{j}]"), "name",
                                 f"{path}.labels[{j}]")
                    for j, label in enumerate(shape.array(item.get("labels", _MISSING),
                                                          f"{path}.labels")))
                pull = PullRequest(
                    repo=repo, number=number, author=author or "",
                    head_sha=shape.string(head, "sha", f"{path}.head") or "",
                    labels=labels,  # type: ignore[arg-type]
                    draft=shape.boolean(item, "draft", path, False),
                    url=shape.string(item, "html_url", path) or "")
                if number not in seen:
                    seen.add(number)
                    pulls.append(pull)
        return pulls

    def head_tree(self, repo: str, sha: str) -> str:
        """The tree SHA of commit ``sha`` (``git/get-commit``: ``tree.sha``). Two commits with
        the same tree carry the same code (an empty ``ci:`` retrigger commit keeps the tree).

        Raises :class:`GitHubError` (an unknown commit is ``http_4xx``, status 404);
        ``ValueError`` for a malformed ``repo`` or empty ``sha``.
        """
        path = f"{self._repo_path(repo)}/git/commits/{self._segment(sha, 'sha')}"
        doc, shape = self._get_json(path, repo=repo)
        tree = shape.obj(shape.obj(doc, "commit").get("tree", _MISSING), "commit.tree")
        return shape.string(tree, "sha", "commit.tree") or ""

    def checks(self, repo: str, sha: str) -> list[Check]:
        """The CI state of commit ``sha``: check runs (``checks/list-for-ref``, all pages), check
        suites (``checks/list-suites-for-ref``, all pages), then commit statuses
        (``repos/get-combined-status-for-ref``, all pages).

        Check runs are keyed by (app, check suite, name), as GitHub groups them: GitHub
        creates one check suite per app per commit (GitHub Actions one per workflow run), and
        two workflows may both have a job named ``build``: those are two checks, and a red one
        stays red whatever the other says. Within one key the newest run wins (largest ``id``:
        GitHub numbers runs in creation order and a re-run is a new run in the same suite;
        GitHub's default ``filter=latest`` already answers only those, this makes it hold for
        any answer). A run whose ``status`` is unfinished (:data:`UNFINISHED_STATUSES`) is
        pending; completed with a conclusion in :data:`RED_CONCLUSIONS` is red, in
        :data:`GREEN_CONCLUSIONS` green; ``stale`` (only GitHub sets it, on a run it gave up
        waiting for) and any conclusion not documented today are pending, with GitHub's word
        kept in :attr:`Check.conclusion` (a PR that stays so is reported, see
        :mod:`repeat_failure.fixloop.sweep`). A completed run without a conclusion is
        ``bad_response``. Summary: ``output.title``, ``output.summary``, ``output.text`` (each
        when not empty) joined by newlines.

        Check suites add what no run shows: a suite with no run in the list above (a workflow
        that failed to start, ``startup_failure``, has none) that completed red is a red check
        named ``"<app slug> check suite"`` (conclusion the suite's, ``completed_at`` its
        ``updated_at``). A run-less suite of GitHub Actions that is not completed is pending (a
        workflow run whose jobs do not exist yet). A run-less suite of any other app that is
        not completed is ignored: GitHub creates a suite for every installed app with checks
        permission on every push (docs "Using the REST API to interact with checks"), and one
        for an app that never reports stays queued for good. Run-less suites that completed
        green, neutral, skipped or stale say nothing ran and are ignored. A suite with runs is
        its runs: GitHub's suite conclusion is the highest-priority conclusion of them.

        Commit statuses: the newest of each ``context`` wins (largest ``updated_at``, then
        ``id``). State ``pending`` (or undocumented) is pending, ``failure``/``error`` red,
        ``success`` green. Summary: ``description``. The combined ``state`` is not used (it is
        ``pending`` when there are no statuses at all).

        Returns check runs sorted by (name, app, suite id), then failed run-less suites, then
        statuses sorted by context; ``[]`` when the commit has no CI at all (not green:
        nothing ran). Raises :class:`GitHubError` (any fetch failing fails the call: an
        incomplete picture is no picture); ``ValueError`` for a malformed ``repo`` or empty
        ``sha``.
        """
        ref = self._segment(sha, "sha")
        base = self._repo_path(repo)
        runs: dict[tuple[str, int | None, str], tuple[int, Check]] = {}
        for doc, shape in self._pages(f"{base}/commits/{ref}/check-runs", {"per_page": PER_PAGE},
                                      repo=repo):
            doc = shape.obj(doc, "check-runs")
            shape.integer(doc, "total_count", "check-runs")
            for i, item in enumerate(shape.array(doc.get("check_runs", _MISSING),
                                                 "check-runs.check_runs")):
                run_id, check = self._check_run(shape, item, f"check_runs[{i}]")
                key = (check.app, check.suite_id, check.name)
                if key not in runs or run_id > runs[key][0]:
                    runs[key] = (run_id, check)
        with_runs = {check.suite_id for _, check in runs.values()}
        suites: list[Check] = []
        for doc, shape in self._pages(f"{base}/commits/{ref}/check-suites",
                                      {"per_page": PER_PAGE}, repo=repo):
            doc = shape.obj(doc, "check-suites")
            shape.integer(doc, "total_count", "check-suites")
            for i, item in enumerate(shape.array(doc.get("check_suites", _MISSING),
                                                 "check-suites.check_suites")):
                check = self._check_suite(shape, item, f"check_suites[{i}]")
                if check is not None and check.suite_id not in with_runs:
                    suites.append(check)
        statuses: dict[str, tuple[tuple[float, int], Check]] = {}
        for doc, shape in self._pages(f"{base}/commits/{ref}/status", {"per_page": PER_PAGE},
                                      repo=repo):
            doc = shape.obj(doc, "status")
            shape.string(doc, "state", "status")
            for i, item in enumerate(shape.array(doc.get("statuses", _MISSING),
                                                 "status.statuses")):
                key, check = self._status(shape, item, f"statuses[{i}]")
                if check.name not in statuses or key > statuses[check.name][0]:
                    statuses[check.name] = (key, check)
        ordered = sorted(runs, key=lambda k: (k[2], k[0], k[1] if k[1] is not None else -1))
        return [runs[key][1] for key in ordered] + \
            sorted(suites, key=lambda c: (c.name, c.suite_id or 0)) + \
            [statuses[name][1] for name in sorted(statuses)]

    def comment(self, repo: str, number: int, body: str) -> None:
        """Post ``body`` (Markdown) as a comment on PR ``number`` (``issues/create-comment``,
        ``{"body": body}``; GitHub answers 201). Never retried once sent (see the module
        docstring), so a ``network``/``timeout``/``http_5xx`` error may mean it was posted
        anyway. GitHub refuses a body over 65,536 characters (422, ``http_4xx``).

        Raises :class:`GitHubError`; ``ValueError`` for a malformed ``repo`` or ``number``.
        """
        path = f"{self._repo_path(repo)}/issues/{self._number(number)}/comments"
        if not isinstance(body, str):
            raise ValueError("body must be a string")
        self._request("POST", self._url(path), json_body={"body": body}, repo=repo)

    def add_label(self, repo: str, number: int, label: str) -> None:
        """Add ``label`` to PR ``number`` (``issues/add-labels``, ``{"labels": [label]}``;
        GitHub creates the repository label when it does not exist; adding one already there
        is a no-op). Not retried once sent (a POST), although it is idempotent in effect.

        Raises :class:`GitHubError`; ``ValueError`` for a malformed argument.
        """
        path = f"{self._repo_path(repo)}/issues/{self._number(number)}/labels"
        self._request("POST", self._url(path), json_body={"labels": [self._label(label)]},
                      repo=repo)

    def remove_label(self, repo: str, number: int, label: str) -> None:
        """Remove ``label`` from PR ``number`` (``issues/remove-label``; the name is
        percent-encoded as one path segment, so ``a b/c`` is ``a%20b%2Fc``). A 404 (GitHub:
        ``"Label does not exist"``) means it is already gone and is not an error.

        Raises :class:`GitHubError`; ``ValueError`` for a malformed argument.
        """
        path = (f"{self._repo_path(repo)}/issues/{self._number(number)}/labels/"
                f"{quote(self._label(label), safe='')}")
        try:
            self._request("DELETE", self._url(path), repo=repo)
        except GitHubError as exc:
            if exc.reason == "http_4xx" and exc.status == 404:
                return
            raise

    def repo_installation(self, repo: str, jwt: str) -> int:
        """The id of the GitHub App installation that covers ``repo``
        (``apps/get-repo-installation``, ``GET /repos/{owner}/{repo}/installation``,
        authenticated as the app with ``jwt``). A 404 (the app is not installed there) is
        ``GitHubError("auth")`` naming the repository.

        Raises :class:`GitHubError`; ``ValueError`` for a malformed ``repo``.
        """
        try:
            doc, shape = self._get_json(f"{self._repo_path(repo)}/installation", bearer=jwt)
        except GitHubError as exc:
            if exc.status == 404:
                raise GitHubError("auth", f"{exc}: the GitHub App is not installed on {repo} "
                                  "(or cannot see it)", 404) from None
            raise
        return shape.integer(shape.obj(doc, "installation"), "id", "installation")

    def installation_token(self, installation_id: int, jwt: str) -> tuple[str, float]:
        """A new installation access token for ``installation_id``
        (``apps/create-installation-access-token``,
        ``POST /app/installations/{installation_id}/access_tokens``, no body: the
        installation's own repositories and permissions; GitHub answers 201) and when it
        expires (epoch seconds, from ``expires_at``; GitHub's tokens last one hour). A 404 or
        401 (a wrong app id, key or installation) is ``GitHubError("auth")``.

        Raises :class:`GitHubError`; ``ValueError`` for a malformed ``installation_id``.
        """
        number = self._number(installation_id)
        url = self._url(f"/app/installations/{number}/access_tokens")
        try:
            response = self._request("POST", url, bearer=jwt)
        except GitHubError as exc:
            if exc.status == 404:
                raise GitHubError("auth", f"{exc}: no installation {number} of this GitHub App",
                                  404) from None
            raise
        doc, shape = self._json(response, self._what("POST", url))
        doc = shape.obj(doc, "installation-token")
        token = shape.string(doc, "token", "installation-token") or ""
        if not token:
            raise GitHubError("bad_response", f"{shape.what}: installation-token.token is empty",
                              response.status_code)
        expires = shape.timestamp(doc, "expires_at", "installation-token")
        return token, float(expires or 0.0)

    # --- shapes --------------------------------------------------------------------------

    @staticmethod
    def _check_run(shape: _Shape, item: Any, path: str) -> tuple[int, Check]:
        item = shape.obj(item, path)
        run_id = shape.integer(item, "id", path)
        name = shape.string(item, "name", path) or ""
        state = shape.string(item, "status", path) or ""
        conclusion = shape.string(item, "conclusion", path, optional=True)
        completed_at = shape.timestamp(item, "completed_at", path, optional=True)
        output = item.get("output")
        parts: list[str] = []
        if output is not None:
            output = shape.obj(output, f"{path}.output")
            for key in ("title", "summary", "text"):
                text = shape.string(output, key, f"{path}.output", optional=True)
                if text:
                    parts.append(text)
        url = shape.string(item, "details_url", path, optional=True) \
            or shape.string(item, "html_url", path, optional=True) or ""
        app, suite_id = GitHub._app_and_suite(shape, item, path)
        if state != "completed":
            status, word, completed_at = "pending", state, None
        elif conclusion is None:
            raise GitHubError("bad_response", f"{shape.what}: {path}: completed without a "
                              f"conclusion", shape.status)
        elif conclusion in RED_CONCLUSIONS:
            status, word = "red", conclusion
        elif conclusion in GREEN_CONCLUSIONS:
            status, word = "green", conclusion
        else:  # stale, or a conclusion GitHub adds later: not conclusive
            status, word, completed_at = "pending", conclusion, None
        return run_id, Check(name=name, status=status, conclusion=word,
                             completed_at=completed_at, summary="\n".join(parts)[:SUMMARY_MAX],
                             url=url, source="check_run", app=app, suite_id=suite_id)

    @staticmethod
    def _app_and_suite(shape: _Shape, item: dict[str, Any], path: str
                       ) -> tuple[str, int | None]:
        """A check run's ``app.slug`` (``""`` when ``app`` is null or has no slug) and
        ``check_suite.id`` (``None`` when ``check_suite`` is null)."""
        app = item.get("app")
        slug = ""
        if app is not None:
            app = shape.obj(app, f"{path}.app")
            slug = shape.string(app, "slug", f"{path}.app", optional=True) or ""
        suite = item.get("check_suite")
        suite_id = None
        if suite is not None:
            suite_id = shape.integer(shape.obj(suite, f"{path}.check_suite"), "id",
                                     f"{path}.check_suite")
        return slug, suite_id

    @staticmethod
    def _check_suite(shape: _Shape, item: Any, path: str) -> Check | None:
        """A run-less check suite as a :class:`Check` (see :meth:`checks`), or ``None`` for a
        suite that says nothing. Whether it has runs is decided by the caller."""
        item = shape.obj(item, path)
        suite_id = shape.integer(item, "id", path)
        state = shape.string(item, "status", path, optional=True) or ""
        conclusion = shape.string(item, "conclusion", path, optional=True)
        updated_at = shape.timestamp(item, "updated_at", path, optional=True)
        app = item.get("app")
        slug = ""
        if app is not None:
            slug = shape.string(shape.obj(app, f"{path}.app"), "slug", f"{path}.app",
                                optional=True) or ""
        name = f"{slug or 'app'} check suite"
        if state != "completed":
            if slug != ACTIONS_APP:
                return None
            return Check(name=name, status="pending", conclusion=state or "queued",
                         completed_at=None, summary="", url="", source="check_suite",
                         app=slug, suite_id=suite_id)
        if conclusion in RED_CONCLUSIONS:
            return Check(name=name, status="red", conclusion=conclusion,
                         completed_at=updated_at, summary=f"check suite {conclusion}",
                         url="", source="check_suite", app=slug, suite_id=suite_id)
        return None

    @staticmethod
    def _status(shape: _Shape, item: Any, path: str) -> tuple[tuple[float, int], Check]:
        item = shape.obj(item, path)
        context = shape.string(item, "context", path) or ""
        state = shape.string(item, "state", path) or ""
        updated_at = shape.timestamp(item, "updated_at", path) or 0.0
        status_id = item.get("id", 0)
        if not isinstance(status_id, int) or isinstance(status_id, bool):
            raise shape.fail(f"{path}.id", "an integer", status_id)
        description = shape.string(item, "description", path, optional=True) or ""
        url = shape.string(item, "target_url", path, optional=True) or ""
        if state in RED_STATES:
            status, completed_at = "red", updated_at
        elif state == "success":
            status, completed_at = "green", updated_at
        else:
            status, completed_at = "pending", None
        return (updated_at, status_id), Check(
            name=context, status=status, conclusion=state, completed_at=completed_at,
            summary=description[:SUMMARY_MAX], url=url, source="status")

    # --- transport -----------------------------------------------------------------------

    @staticmethod
    def _repo_path(repo: str) -> str:
        if not isinstance(repo, str) or not REPOSITORY_RE.match(repo):
            raise ValueError(f"repo {repo!r}: expected owner/name")
        owner, name = repo.split("/")
        return f"/repos/{quote(owner, safe='')}/{quote(name, safe='')}"

    @staticmethod
    def _segment(value: str, what: str) -> str:
        if not isinstance(value, str) or not value:
            raise ValueError(f"{what} must be a non-empty string")
        return quote(value, safe="")

    @staticmethod
    def _number(number: int) -> int:
        if not isinstance(number, int) or isinstance(number, bool) or number < 1:
            raise ValueError(f"number {number!r}: expected a positive integer")
        return number

    @staticmethod
    def _label(label: str) -> str:
        if not isinstance(label, str) or not label:
            raise ValueError("label must be a non-empty string")
        return label

    def _url(self, path: str) -> str:
        return self.api_url + path

    def _redact(self, text: str) -> str:
        for secret in self._source.secrets():
            if secret:
                text = text.replace(secret, "<token>")
        return text

    def _what(self, method: str, url: str) -> str:
        return self._redact(f"{method} {urlsplit(url).path}")

    def _get_json(self, path: str, *, repo: str | None = None,
                  bearer: str | None = None) -> tuple[Any, _Shape]:
        url = self._url(path)
        response = self._request("GET", url, repo=repo, bearer=bearer)
        return self._json(response, self._what("GET", url))

    def _json(self, response: requests.Response, what: str) -> tuple[Any, _Shape]:
        try:
            doc = json.loads(response.content)
        except (ValueError, RecursionError):
            raise GitHubError("bad_response", f"{what}: HTTP {response.status_code} answer is "
                              f"not JSON", response.status_code) from None
        return doc, _Shape(what, response.status_code)

    def _pages(self, path: str, params: dict[str, Any], *, repo: str | None = None
               ) -> Iterator[tuple[Any, _Shape]]:
        """Each page's decoded JSON, following ``Link: <...>; rel="next"`` (``params`` go on
        the first request only: GitHub's next URL carries them); ``repo`` picks the token."""
        url: str = self._url(path)
        query: dict[str, Any] | None = params
        fetched: set[str] = set()
        for _ in range(MAX_PAGES):
            fetched.add(url)
            what = self._what("GET", url)
            response = self._request("GET", url, params=query, repo=repo)
            yield self._json(response, what)
            try:
                nxt = response.links.get("next", {}).get("url")
            except Exception:
                raise GitHubError("bad_response", f"{what}: unreadable Link header",
                                  response.status_code) from None
            if not nxt:
                return
            if not self._inside_api(nxt):
                raise GitHubError("bad_response", f"{what}: next page link leaves {self.api_url}",
                                  response.status_code)
            if nxt in fetched:  # a loop: MAX_PAGES requests for nothing, every pass
                raise GitHubError("bad_response", f"{what}: next page link repeats a page "
                                  "already read", response.status_code)
            url, query = nxt, None
        raise GitHubError("bad_response", f"{self._what('GET', self._url(path))}: more than "
                          f"{MAX_PAGES} pages")

    def _inside_api(self, url: str) -> bool:
        base, other = urlsplit(self.api_url), urlsplit(url)
        return (other.scheme.lower() == base.scheme.lower()
                and other.netloc.lower() == base.netloc.lower()
                and (other.path + "/").startswith(base.path.rstrip("/") + "/"))

    def set_token(self, token: str | TokenSource | None) -> None:
        """Use ``token`` (a token, ``None`` or a :class:`TokenSource`) from the next request on
        (a rotated Secret)."""
        self._source = token if isinstance(token, TokenSource) else StaticToken(token)

    def _bounded_sleep(self, seconds: float) -> None:
        """Sleep ``seconds`` unless that passes :attr:`wait_deadline` (then ``rate_limited``,
        without sleeping): a sweep under a long rate limit gives up instead of running into
        the next one."""
        if self.wait_deadline is not None and self._clock() + seconds > self.wait_deadline:
            raise GitHubError("rate_limited", f"a wait of {seconds:g} s would pass this sweep's "
                              "time budget")
        self._sleep(seconds)

    def _request(self, method: str, url: str, *, params: dict[str, Any] | None = None,
                 json_body: Any = None, repo: str | None = None,
                 bearer: str | None = None) -> requests.Response:
        """One call: the 2xx response, after at most one rate-limit wait and at most one token
        refresh after a 401; else GitHubError. ``repo`` picks the token from the source;
        ``bearer`` overrides it (a GitHub App's JWT: never refreshed here)."""
        what = self._what(method, url)
        waited = refreshed = False
        while True:
            token = bearer if bearer is not None else self._source.token(repo)
            if token and not _HEADER_SAFE.fullmatch(token):
                # http.client refuses a CR, LF or other control character in a header with a
                # ValueError quoting the whole value, token and all; it is never sent.
                raise GitHubError("auth", f"{what}: the token holds whitespace or control "
                                  "characters an HTTP header cannot carry (check the token "
                                  "file, or what GitHub answered for an App's token)")
            auth = _Bearer(token) if token else None
            response = self._send(method, url, params, json_body, what, auth)
            self._note_rate(response)
            status = response.status_code
            if 200 <= status < 300:
                return response
            if status == 401 and bearer is None and not refreshed:
                refreshed = True
                if self._source.refresh(repo, token):
                    continue
            if status in (403, 429):
                wait = self._rate_limit_wait(response)
                if wait is not None:
                    if waited:
                        raise GitHubError("rate_limited", f"{what}: HTTP {status} rate limited "
                                          f"again after waiting", status)
                    if wait > self.max_rate_limit_wait_s:
                        raise GitHubError("rate_limited", f"{what}: HTTP {status} rate limited "
                                          f"for {wait:g} s, more than the "
                                          f"{self.max_rate_limit_wait_s:g} s allowed", status)
                    if wait > 0:
                        self._bounded_sleep(wait)
                    waited = True
                    continue
            raise self._status_error(what, response)

    def _send(self, method: str, url: str, params: dict[str, Any] | None, json_body: Any,
              what: str, auth: _Bearer | None) -> requests.Response:
        try:
            response = self._session.request(
                method, url, params=params, json=json_body, headers=self._headers,
                auth=auth, timeout=(self.timeout_s, self.timeout_s),
                allow_redirects=(method == "GET"))
            response.content  # read the body here, inside the error handling
            return response
        except requests.RequestException as exc:
            raise GitHubError(self._transport_reason(exc),
                              self._redact(f"{what}: {self._cause(exc)}")) from None

    @staticmethod
    def _transport_reason(exc: requests.RequestException) -> str:
        if isinstance(exc, requests.Timeout):
            return "timeout"
        for arg in exc.args:
            reason = arg.reason if isinstance(arg, MaxRetryError) else arg
            if isinstance(reason, ReadTimeoutError) or (
                    isinstance(reason, ConnectTimeoutError)
                    and not isinstance(reason, NewConnectionError)):
                return "timeout"
        return "network"

    @staticmethod
    def _cause(exc: requests.RequestException) -> str:
        inner: Any = exc
        for arg in exc.args:
            if isinstance(arg, BaseException):
                inner = arg.reason if isinstance(arg, MaxRetryError) and arg.reason else arg
                break
        text = f"{type(inner).__name__}: {inner}"
        return text[:300]

    def _note_rate(self, response: requests.Response) -> None:
        remaining = response.headers.get("x-ratelimit-remaining", "").strip()
        if remaining.isdigit():
            self.rate_remaining = int(remaining)
        reset = response.headers.get("x-ratelimit-reset", "").strip()
        if reset.isdigit():
            self.rate_reset = float(reset)

    def _rate_limit_wait(self, response: requests.Response) -> float | None:
        """Seconds to wait before trying again, or ``None`` when this 403/429 is not a rate
        limit (GitHub docs "Rate limits for the REST API", "Exceeding the rate limit")."""
        retry_after = response.headers.get("retry-after", "").strip()
        if retry_after.isdigit():
            return float(retry_after)
        if retry_after:
            try:
                return max(0.0, parsedate_to_datetime(retry_after).timestamp() - self._clock())
            except (TypeError, ValueError, IndexError, OverflowError):
                pass
        if response.headers.get("x-ratelimit-remaining", "").strip() == "0":
            reset = response.headers.get("x-ratelimit-reset", "").strip()
            if reset.isdigit():
                return max(0.0, float(reset) - self._clock())
            return SECONDARY_WAIT_S
        if response.status_code == 429 or "rate limit" in self._message(response).lower():
            return SECONDARY_WAIT_S
        return None

    @staticmethod
    def _message(response: requests.Response) -> str:
        """GitHub's error ``message`` (``{"message": ..., "documentation_url": ...}``), one
        line, at most 200 characters; ``""`` when the body is not that shape."""
        try:
            doc = json.loads(response.content)
        except (ValueError, RecursionError):
            return ""
        message = doc.get("message") if isinstance(doc, dict) else None
        if not isinstance(message, str):
            return ""
        return " ".join(message.split())[:200]

    def _status_error(self, what: str, response: requests.Response) -> GitHubError:
        status = response.status_code
        message = self._redact(self._message(response))
        text = f"{what}: HTTP {status}" + (f" {message}" if message else "")
        if status == 401:
            return GitHubError("auth", text, status)
        if 400 <= status < 500:
            return GitHubError("http_4xx", text, status)
        if 500 <= status < 600:
            return GitHubError("http_5xx", text, status)
        return GitHubError("bad_response", f"{what}: unexpected HTTP {status}", status)
