"""A scripted fake GitHub REST API on 127.0.0.1, for the fixloop tests (issue 9).

:class:`FakeGitHub` is a context manager around a :class:`http.server.ThreadingHTTPServer` on
``127.0.0.1`` port 0 (HTTP/1.1, keep-alive); ``.url`` is the API base to give
:class:`repeat_failure.fixloop.github.GitHub` (``http://127.0.0.1:PORT`` plus ``base_path``, e.g.
``/api/v3`` to play GitHub Enterprise Server). It serves, with GitHub's documented response
shapes (GitHub REST API description, github/rest-api-description, OpenAPI
``api.github.com.json``, API version 2022-11-28; the docs pages named below):

==========================================================  ===================================
request                                                     operationId, schema / docs page
==========================================================  ===================================
``GET  /repos/{o}/{r}/pulls`` (``state``, ``per_page``,     ``pulls/list``: list of
``page``)                                                   ``pull-request-simple``; docs "REST
                                                            API endpoints for pull requests"
``GET  /repos/{o}/{r}/git/commits/{sha}``                   ``git/get-commit``: ``git-commit``
                                                            (``tree.sha``); docs "Git commits"
``GET  /repos/{o}/{r}/commits/{ref}/check-runs``            ``checks/list-for-ref``:
                                                            ``{"total_count", "check_runs":
                                                            [check-run]}``; docs "Check runs"
``GET  /repos/{o}/{r}/commits/{ref}/status``                ``repos/get-combined-status-for-
                                                            ref``: ``combined-commit-status``
                                                            ``{"state", "statuses", "sha",
                                                            "total_count", "repository", ...}``;
                                                            docs "Commit statuses"
``GET|POST /repos/{o}/{r}/issues/{n}/comments``             ``issues/list-comments`` /
                                                            ``issues/create-comment`` (201,
                                                            ``issue-comment``); docs "Issue
                                                            comments"
``GET|POST /repos/{o}/{r}/issues/{n}/labels``               ``issues/list-labels-on-issue`` /
                                                            ``issues/add-labels`` (200, list of
                                                            ``label``); docs "Labels"
``DELETE /repos/{o}/{r}/issues/{n}/labels/{name}``          ``issues/remove-label`` (200, the
                                                            labels left; 404 ``{"message":
                                                            "Label does not exist", ...}``)
``GET  /repos/{o}/{r}/commits/{ref}/check-suites``          ``checks/list-suites-for-ref``:
                                                            ``{"total_count", "check_suites":
                                                            [check-suite]}``; docs "Check
                                                            suites"
``GET  /repos/{o}/{r}/installation``                        ``apps/get-repo-installation``
                                                            (as the app: a JWT); docs "Apps"
``POST /app/installations/{id}/access_tokens``              ``apps/create-installation-access-
                                                            token`` (201, ``installation-
                                                            token``); docs "Apps"
==========================================================  ===================================

Every answer the fake builds (not an injected :meth:`FakeGitHub.fail`) is checked against
GitHub's published schema for its operation (:mod:`github_schemas`, githubkit's generated
models: the response model for a 2xx, the error model GitHub documents for that status
otherwise), and so is the body of every request it accepts; a mismatch is kept in
:attr:`FakeGitHub.schema_errors` and fails the test when the ``with`` block ends, so the fake
cannot drift from the real API. :meth:`FakeGitHub.tolerate` names a known gap between GitHub's
docs and its schema for one test (a check run GitHub marked ``stale``: the docs say only GitHub
sets that conclusion, the check-run schema's enum does not list it).

GitHub App (:meth:`FakeGitHub.install_app`): the app's JWT is verified with its public key
(PyJWT, RS256; ``iss`` the app id, ``iat``/``exp`` present, ``exp`` at most 10 minutes ahead of
the wall clock, as GitHub's docs "Generating a JSON Web Token (JWT) for a GitHub App" require)
on the two ``/app``-side endpoints; installation tokens it hands out are accepted, for their
installation's repositories, until they expire or :meth:`FakeGitHub.expire_app_tokens`.

The same paths under ``/repositories/{id}/`` (the form GitHub's ``Link`` URLs use) are served
too. Lists honour ``per_page`` (default 30, at most 100 as GitHub's, and at most
:attr:`FakeGitHub.max_per_page`, a knob to force small pages) and ``page``, with a ``Link``
header like GitHub's (``<URL>; rel="prev"``, ``"next"``, ``"last"``, ``"first"``; docs "Using
pagination in the REST API"). Every answer carries ``x-ratelimit-limit``, ``-remaining``,
``-used``, ``-reset`` and ``-resource`` (docs "Rate limits for the REST API"). Errors have
GitHub's error shape ``{"message", "documentation_url", "status"}`` (docs "Troubleshooting the
REST API"): unknown path 404 ``Not Found``, a wrong bearer token 401 ``Bad credentials``, an
unknown commit 422 ``No commit found for SHA: ...``, a malformed write body 422.

Check runs: each belongs to a check suite of an app (``suite``, ``app`` when scripted; by
default one suite per commit of GitHub Actions). ``filter=latest`` (GitHub's default) answers
the newest run (largest id) of each (app, suite, name); ``filter=all`` every run. The suites of a
commit are those of its runs (status and conclusion derived from their latest runs, the
conclusion the highest-priority one) and those scripted with :meth:`FakeGitHub.add_check_suite`
(a suite with no run: a workflow that failed to start, an app that never reports).

Deliberate simplifications: commit statuses are answered as scripted, in script order (the
combined status is not reduced to one per context; GitHub does, a test scripts duplicates to
exercise the client's own newest-wins rule); times are fixed (see :data:`T0`), not the wall
clock (except JWT and installation-token expiry, which GitHub checks against its clock).

Scripting (all thread-safe; times are epoch seconds or ISO 8601 strings)::

    with FakeGitHub(token="t") as gh:
        gh.add_pr("o/r", 7, "agent-a", sha="a" * 40, tree="1" * 40, labels=("bug",))
        gh.set_check_runs("o/r", "a" * 40, [dict(name="test", conclusion="failure",
                                                  completed_at=T0 + 60,
                                                  output=dict(title="2 failed"))])
        gh.fail("GET", r"/pulls$", 502)          # next matching request answers 502 once
        ...                                      # GitHub(gh.url, "t").open_pulls("o/r")
        assert gh.comments("o/r", 7) == []
        assert [r.path for r in gh.requests] == [...]
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterable
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

#: The fake's "now" for created_at/updated_at defaults (2027-01-15T08:00:00Z).
T0 = 1_800_000_000.0
DOCS = "https://docs.github.com/rest"
#: Where ``x-ratelimit-reset`` points unless a failure overrides it (T0 + 1 h).
RATE_RESET = int(T0) + 3600

_REASONS = {200: "OK", 201: "Created", 204: "No Content", 301: "Moved Permanently",
            400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
            422: "Unprocessable Entity", 429: "Too Many Requests", 500: "Internal Server Error",
            502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout"}
_MESSAGES = {401: "Bad credentials", 403: "Forbidden", 404: "Not Found",
             422: "Validation Failed", 429: "You have exceeded a secondary rate limit. Please "
             "wait a few minutes before you try again.", 500: "Server Error",
             502: "Server Error", 503: "Service Unavailable", 504: "Gateway Timeout"}


def iso(when: float | str | None) -> str | None:
    """``when`` (epoch seconds, or already ISO 8601) as GitHub writes times:
    ``2027-01-15T08:00:00Z``; ``None`` stays ``None``."""
    if when is None or isinstance(when, str):
        return when
    return datetime.fromtimestamp(when, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the fake received it (recorded before it is answered).

    ``path`` is the raw request target (path and query, still percent-encoded); ``route`` the
    path alone; ``query`` the decoded query (first value per key); ``body`` the decoded JSON
    body, the raw bytes when it is not JSON, ``None`` when empty; ``headers`` with lower-case
    names."""

    method: str
    path: str
    body: Any
    headers: dict[str, str]

    @property
    def route(self) -> str:
        return urlsplit(self.path).path

    @property
    def query(self) -> dict[str, str]:
        return {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}


@dataclass
class _Failure:
    method: str
    pattern: re.Pattern[str]
    status: int | str
    times: int
    headers: dict[str, str]
    body: Any
    delay_s: float


@dataclass
class _PR:
    number: int
    author: str
    sha: str
    title: str
    ref: str
    draft: bool
    labels: list[str]
    state: str = "open"
    created_at: float = T0
    updated_at: float = T0
    closed_at: float | None = None
    comments: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _Repo:
    id: int
    full_name: str
    pulls: dict[int, _PR] = field(default_factory=dict)
    trees: dict[str, str] = field(default_factory=dict)  # commit sha -> tree sha
    check_runs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    check_suites: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # run-less
    statuses: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    label_ids: dict[str, int] = field(default_factory=dict)


class FakeGitHub:
    """The fake GitHub (see the module docstring). ``token``: the only bearer token accepted
    (``Authorization: Bearer <token>`` or ``token <token>``), or ``None`` to accept any
    request. ``base_path``: served under this prefix (``/api/v3`` for GHE). ``login``: the
    account comments are posted as. ``max_per_page``: caps every page (force pagination)."""

    def __init__(self, token: str | None = None, *, base_path: str = "",
                 login: str = "fixloop-bot", max_per_page: int = 100,
                 validate: bool = True) -> None:
        self.token = token
        self.base_path = base_path.rstrip("/")
        self.login = login
        self.max_per_page = max_per_page
        self._lock = threading.RLock()
        self._repos: dict[str, _Repo] = {}
        self._requests: list[RecordedRequest] = []
        self._failures: list[_Failure] = []
        self._ids = 100
        self._remaining = 5000
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        #: Every way a served answer (or a received request body) did not match GitHub's
        #: published schema (:mod:`github_schemas`); leaving the ``with`` block with any fails.
        self.schema_errors: list[str] = []
        self.validate = validate
        self._tolerated: list[re.Pattern[str]] = []
        self._app: dict[str, Any] | None = None  # install_app()
        self._app_tokens: dict[str, tuple[int, float]] = {}  # token -> (installation, expiry)
        #: Installation tokens handed out, in order (tests assert on refreshes).
        self.issued_tokens: list[str] = []
        #: The JWT claims the fake verified, in order.
        self.jwt_claims: list[dict[str, Any]] = []

    # --- lifecycle -----------------------------------------------------------------------

    def __enter__(self) -> FakeGitHub:
        fake = self

        class Handler(_Handler):
            github = fake

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        server.block_on_close = False
        server.handle_error = lambda request, address: None  # type: ignore[method-assign]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01},
                                        name="fakegithub", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
        if self.schema_errors and exc_type is None:
            raise AssertionError("the fake GitHub served shapes GitHub's schema does not "
                                 "allow:\n" + "\n".join(self.schema_errors[:30]))

    def _check_schema(self, method: str, target: str, status: int, doc: Any,
                      body: Any) -> None:
        """Check one real (not injected) answer, and the request body it answered, against
        GitHub's published schema (:mod:`github_schemas`); problems go to
        :attr:`schema_errors`."""
        if not self.validate:
            return
        import github_schemas

        path = urlsplit(target).path
        if self.base_path and path.startswith(self.base_path + "/"):
            path = path[len(self.base_path):]
        try:
            problems = github_schemas.response_errors(method, path, status, doc)
            if body is not None and 200 <= status < 300:
                problems += github_schemas.request_errors(method, path, body)
        except Exception as exc:  # a broken check must fail the test, not the connection
            problems = [f"{method} {path}: schema check failed: {exc!r}"]
        problems = [p for p in problems if not any(t.search(p) for t in self._tolerated)]
        if problems:
            with self._lock:
                self.schema_errors.extend(problems)

    @property
    def port(self) -> int:
        assert self._server is not None, "use FakeGitHub as a context manager"
        return self._server.server_address[1]

    @property
    def origin(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The API base URL: :attr:`origin` plus ``base_path``."""
        return self.origin + self.base_path

    # --- scripting -----------------------------------------------------------------------

    def tolerate(self, pattern: str) -> None:
        """Drop schema problems matching ``pattern`` (``re.search``) for this fake: a known
        gap between GitHub's docs and its schema, or a test's deliberately undocumented
        value."""
        with self._lock:
            self._tolerated.append(re.compile(pattern))

    def install_app(self, app_id: int | str, public_key_pem: bytes,
                    installations: dict[str, int], *, token_ttl_s: float = 3600.0,
                    clock: Any = time.time) -> None:
        """Play a GitHub App: ``app_id`` (the JWT's ``iss``; a numeric id or a client id),
        ``public_key_pem`` (verifies the JWT), ``installations`` (``owner/name`` → installation
        id). Installation tokens last ``token_ttl_s`` seconds of ``clock`` (GitHub's clock:
        the wall clock unless a test moves it), which also judges the JWT's times."""
        with self._lock:
            self._app = {"id": str(app_id), "key": public_key_pem,
                         "installations": dict(installations), "ttl": token_ttl_s,
                         "clock": clock}

    def expire_app_tokens(self) -> None:
        """Every installation token handed out so far stops working (expiry, revocation): the
        next request with one is answered 401 ``Bad credentials``."""
        with self._lock:
            self._app_tokens = {t: (i, 0.0) for t, (i, _) in self._app_tokens.items()}

    def add_check_suite(self, repo: str, sha: str, *, app: str = "github-actions",
                        status: str = "completed", conclusion: str | None = None,
                        updated_at: float | str = T0 + 60, id: int | None = None) -> int:
        """Add a check suite with no check run to commit ``sha`` (a workflow that failed to
        start: ``conclusion="startup_failure"``; an app that was asked and never reported:
        ``status="queued"``). Returns its id."""
        with self._lock:
            r = self._repo(repo)
            suite_id = id if id is not None else 8_000_000 + self._next_id()
            r.check_suites.setdefault(sha, []).append(
                {"id": suite_id, "app": app, "status": status, "conclusion": conclusion,
                 "updated_at": updated_at})
            r.trees.setdefault(sha, "0" * 40)
            return suite_id

    def _next_id(self) -> int:
        with self._lock:
            self._ids += 1
            return self._ids

    def _repo(self, repo: str) -> _Repo:
        with self._lock:
            if repo not in self._repos:
                self._repos[repo] = _Repo(id=len(self._repos) + 1300001, full_name=repo)
            return self._repos[repo]

    def _pr(self, repo: str, number: int) -> _PR:
        return self._repo(repo).pulls[number]

    def add_commit(self, repo: str, sha: str, tree: str) -> None:
        """Make commit ``sha`` (tree ``tree``) known, for ``git/get-commit``."""
        with self._lock:
            self._repo(repo).trees[sha] = tree

    def add_pr(self, repo: str, number: int, author: str, sha: str, tree: str,
               labels: Iterable[str] = (), draft: bool = False, *, title: str | None = None,
               ref: str | None = None, created_at: float = T0) -> None:
        """Open PR ``number`` by ``author`` with head commit ``sha`` (tree ``tree``)."""
        with self._lock:
            r = self._repo(repo)
            r.trees[sha] = tree
            r.pulls[number] = _PR(number=number, author=author, sha=sha,
                                  title=title or f"PR {number}", ref=ref or f"fix-{number}",
                                  draft=draft, labels=[], created_at=created_at,
                                  updated_at=created_at)
            for label in labels:
                self._label_on(r, r.pulls[number], label)

    def push(self, repo: str, number: int, sha: str, tree: str) -> None:
        """A new head commit ``sha`` (tree ``tree``) on PR ``number``."""
        with self._lock:
            r = self._repo(repo)
            r.trees[sha] = tree
            r.pulls[number].sha = sha

    def close_pr(self, repo: str, number: int) -> None:
        """Close PR ``number`` (it leaves the ``state=open`` list)."""
        with self._lock:
            pr = self._pr(repo, number)
            pr.state, pr.closed_at = "closed", T0

    def set_check_runs(self, repo: str, sha: str, runs: list[dict[str, Any]]) -> list[int]:
        """Replace the check runs of commit ``sha``. Each run is a dict with ``name`` and
        optionally ``app`` (the reporting app's slug, default ``github-actions``), ``suite``
        (its check suite's id, default one per commit and app), ``status`` (default
        ``"completed"``), ``conclusion`` (default ``None``),
        ``started_at``, ``completed_at`` (epoch or ISO; ``completed_at`` defaults to T0 + 60
        for a completed run), ``output`` (``{"title", "summary", "text"}``), ``details_url``,
        ``id`` (default: increasing in script order). Returns the ids."""
        with self._lock:
            r = self._repo(repo)
            r.check_runs[sha] = [self._check_run(r, sha, run) for run in runs]
            return [run["id"] for run in r.check_runs[sha]]

    def add_check_run(self, repo: str, sha: str, **run: Any) -> int:
        """Append one check run (a re-run: a new, larger id); same keys as
        :meth:`set_check_runs`. Returns its id."""
        with self._lock:
            r = self._repo(repo)
            built = self._check_run(r, sha, run)
            r.check_runs.setdefault(sha, []).append(built)
            return built["id"]

    def set_statuses(self, repo: str, sha: str, statuses: list[dict[str, Any]]) -> None:
        """Replace the commit statuses of ``sha``. Each is a dict with ``context``, ``state``
        (``pending``/``success``/``failure``/``error``) and optionally ``description``,
        ``target_url``, ``created_at``, ``updated_at`` (epoch or ISO; default T0 + 60),
        ``id``."""
        with self._lock:
            r = self._repo(repo)
            built = []
            for s in statuses:
                status_id = s.get("id", self._next_id())
                updated = iso(s.get("updated_at", T0 + 60))
                built.append({
                    "url": f"{self.url}/repos/{repo}/statuses/{sha}",
                    "avatar_url": "https://avatars.githubusercontent.com/u/9919?v=4",
                    "id": status_id, "node_id": f"SC_{status_id}", "state": s["state"],
                    "description": s.get("description"), "target_url": s.get("target_url"),
                    "context": s["context"], "created_at": iso(s.get("created_at", updated)),
                    "updated_at": updated})
            r.statuses[sha] = built
            r.trees.setdefault(sha, "0" * 40)

    def set_labels(self, repo: str, number: int, labels: Iterable[str]) -> None:
        """Replace PR ``number``'s labels (a human editing them)."""
        with self._lock:
            r = self._repo(repo)
            pr = r.pulls[number]
            pr.labels = []
            for label in labels:
                self._label_on(r, pr, label)

    def remove_label_by_human(self, repo: str, number: int, label: str) -> None:
        """A human removes ``label`` from PR ``number`` (no-op when it is not there)."""
        with self._lock:
            pr = self._pr(repo, number)
            if label in pr.labels:
                pr.labels.remove(label)

    def comments(self, repo: str, number: int) -> list[str]:
        """The bodies of PR ``number``'s comments, oldest first."""
        with self._lock:
            return [c["body"] for c in self._pr(repo, number).comments]

    def labels(self, repo: str, number: int) -> list[str]:
        """PR ``number``'s label names, in the order they were added."""
        with self._lock:
            return list(self._pr(repo, number).labels)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    def clear_requests(self) -> None:
        with self._lock:
            self._requests.clear()

    def fail(self, method: str, path_regex: str, status: int | str, times: int = 1,
             headers: dict[str, str] | None = None, body: Any = None,
             delay_s: float = 0.0) -> None:
        """Answer the next ``times`` requests whose method is ``method`` (``"*"``: any) and
        whose path (no query, still percent-encoded, including ``base_path``) matches
        ``path_regex`` (``re.search``) with ``status`` instead of the real answer.

        ``status`` is an HTTP status or ``"drop"`` (close the connection without answering).
        ``headers`` are added (and override the rate-limit headers); ``body`` is a dict/list
        (sent as JSON), ``str``/``bytes`` (sent as is: invalid JSON), or ``None`` for GitHub's
        error shape with the usual message for the status. ``delay_s`` waits before answering
        (a timeout). Checked before the token, in the order the failures were added."""
        with self._lock:
            self._failures.append(_Failure(method.upper(), re.compile(path_regex), status,
                                           times, dict(headers or {}), body, delay_s))

    # --- GitHub's objects ----------------------------------------------------------------

    def _user(self, login: str) -> dict[str, Any]:
        """A ``simple-user`` (every required field of GitHub's schema)."""
        uid = sum(login.encode()) + 1000
        api = f"{self.url}/users/{login}"
        return {"login": login, "id": uid, "node_id": f"MDQ6VXNlcj{uid}",
                "avatar_url": f"https://avatars.githubusercontent.com/u/{uid}?v=4",
                "gravatar_id": "", "url": api, "html_url": f"https://github.com/{login}",
                "followers_url": f"{api}/followers",
                "following_url": f"{api}/following{{/other_user}}",
                "gists_url": f"{api}/gists{{/gist_id}}",
                "starred_url": f"{api}/starred{{/owner}}{{/repo}}",
                "subscriptions_url": f"{api}/subscriptions",
                "organizations_url": f"{api}/orgs", "repos_url": f"{api}/repos",
                "events_url": f"{api}/events{{/privacy}}",
                "received_events_url": f"{api}/received_events",
                "type": "Bot" if login.endswith("[bot]") else "User", "site_admin": False}

    def _integration(self, slug: str = "github-actions") -> dict[str, Any]:
        """The ``integration`` (GitHub App) ``slug`` that reports check runs and suites
        (GitHub Actions, as on github.com, by default)."""
        app_id = 15368 if slug == "github-actions" else 20000 + sum(slug.encode())
        return {"id": app_id, "slug": slug, "node_id": f"A_{app_id}",
                "client_id": f"Iv1.{app_id:016x}", "owner": self._user("github"),
                "name": "GitHub Actions" if slug == "github-actions" else slug,
                "description": None, "external_url": f"https://github.com/apps/{slug}",
                "html_url": f"https://github.com/apps/{slug}",
                "created_at": "2018-07-30T09:30:17Z", "updated_at": "2024-04-10T20:33:16Z",
                "permissions": {"actions": "write", "checks": "write", "contents": "write",
                                "metadata": "read", "pull_requests": "write",
                                "statuses": "write"},
                "events": ["check_run", "check_suite", "pull_request", "push"]}

    def _label_on(self, r: _Repo, pr: _PR, name: str) -> None:
        r.label_ids.setdefault(name, self._next_id())
        if name not in pr.labels:
            pr.labels.append(name)

    def _label(self, r: _Repo, name: str) -> dict[str, Any]:
        lid = r.label_ids.setdefault(name, self._next_id())
        return {"id": lid, "node_id": f"LA_{lid}", "name": name, "description": None,
                "color": "ededed", "default": False,
                "url": f"{self.url}/repos/{r.full_name}/labels/{quote(name, safe='')}",
                "archived_at": None, "archived_by": None}

    def _repository(self, r: _Repo) -> dict[str, Any]:
        """A ``repository`` (a superset of ``minimal-repository``: every required field of
        both)."""
        owner, name = r.full_name.split("/")
        api = f"{self.url}/repos/{r.full_name}"
        html = f"https://github.com/{r.full_name}"
        urls = {f"{key}_url": f"{api}/{path}" for key, path in (
            ("archive", "{archive_format}{/ref}"), ("assignees", "assignees{/user}"),
            ("blobs", "git/blobs{/sha}"), ("branches", "branches{/branch}"),
            ("collaborators", "collaborators{/collaborator}"),
            ("comments", "comments{/number}"), ("commits", "commits{/sha}"),
            ("compare", "compare/{base}...{head}"), ("contents", "contents/{+path}"),
            ("contributors", "contributors"), ("deployments", "deployments"),
            ("downloads", "downloads"), ("events", "events"), ("forks", "forks"),
            ("git_commits", "git/commits{/sha}"), ("git_refs", "git/refs{/sha}"),
            ("git_tags", "git/tags{/sha}"), ("issue_comment", "issues/comments{/number}"),
            ("issue_events", "issues/events{/number}"), ("issues", "issues{/number}"),
            ("keys", "keys{/key_id}"), ("labels", "labels{/name}"),
            ("languages", "languages"), ("merges", "merges"),
            ("milestones", "milestones{/number}"),
            ("notifications", "notifications{?since,all,participating}"),
            ("pulls", "pulls{/number}"), ("releases", "releases{/id}"),
            ("stargazers", "stargazers"), ("statuses", "statuses/{sha}"),
            ("subscribers", "subscribers"), ("subscription", "subscription"),
            ("tags", "tags"), ("teams", "teams"), ("trees", "git/trees{/sha}"),
            ("hooks", "hooks"))}
        return {"id": r.id, "node_id": f"R_{r.id}", "name": name, "full_name": r.full_name,
                "private": False, "owner": self._user(owner), "html_url": html,
                "description": None, "fork": False, "url": api, **urls,
                "git_url": f"git://github.com/{r.full_name}.git",
                "ssh_url": f"git@github.com:{r.full_name}.git",
                "clone_url": f"{html}.git", "svn_url": html, "mirror_url": None,
                "homepage": None, "language": "Python", "license": None,
                "forks": 0, "forks_count": 0, "stargazers_count": 0, "watchers_count": 0,
                "watchers": 0, "size": 1024, "default_branch": "main",
                "open_issues_count": len(r.pulls), "open_issues": len(r.pulls),
                "has_pages": False, "disabled": False, "archived": False,
                "visibility": "public", "pushed_at": iso(T0), "created_at": iso(T0 - 86400),
                "updated_at": iso(T0)}

    def _pull(self, r: _Repo, pr: _PR) -> dict[str, Any]:
        api = f"{self.url}/repos/{r.full_name}"
        html = f"https://github.com/{r.full_name}/pull/{pr.number}"
        owner = r.full_name.split("/")[0]
        return {
            "url": f"{api}/pulls/{pr.number}", "id": pr.number + 5_000_000,
            "node_id": f"PR_{pr.number}", "html_url": html, "diff_url": f"{html}.diff",
            "patch_url": f"{html}.patch", "issue_url": f"{api}/issues/{pr.number}",
            "commits_url": f"{api}/pulls/{pr.number}/commits",
            "review_comments_url": f"{api}/pulls/{pr.number}/comments",
            "review_comment_url": f"{api}/pulls/comments{{/number}}",
            "comments_url": f"{api}/issues/{pr.number}/comments",
            "statuses_url": f"{api}/statuses/{pr.sha}",
            "number": pr.number, "state": pr.state, "locked": False, "title": pr.title,
            "user": self._user(pr.author), "body": None,
            "labels": [self._label(r, name) for name in pr.labels],
            "milestone": None, "active_lock_reason": None,
            "created_at": iso(pr.created_at), "updated_at": iso(pr.updated_at),
            "closed_at": iso(pr.closed_at), "merged_at": None, "merge_commit_sha": None,
            "assignee": None, "assignees": [], "requested_reviewers": [],
            "requested_teams": [],
            "head": {"label": f"{owner}:{pr.ref}", "ref": pr.ref, "sha": pr.sha,
                     "user": self._user(owner), "repo": self._repository(r)},
            "base": {"label": f"{owner}:main", "ref": "main", "sha": "b" * 40,
                     "user": self._user(owner), "repo": self._repository(r)},
            "_links": {"self": {"href": f"{api}/pulls/{pr.number}"}, "html": {"href": html},
                       "issue": {"href": f"{api}/issues/{pr.number}"},
                       "comments": {"href": f"{api}/issues/{pr.number}/comments"},
                       "review_comments": {"href": f"{api}/pulls/{pr.number}/comments"},
                       "review_comment": {"href": f"{api}/pulls/comments{{/number}}"},
                       "commits": {"href": f"{api}/pulls/{pr.number}/commits"},
                       "statuses": {"href": f"{api}/statuses/{pr.sha}"}},
            "author_association": "CONTRIBUTOR", "auto_merge": None, "draft": pr.draft}

    @staticmethod
    def _default_suite(sha: str, app: str) -> int:
        return 7_000_000 + sum(f"{sha}/{app}".encode()) % 1_000_000

    def _check_run(self, r: _Repo, sha: str, run: dict[str, Any]) -> dict[str, Any]:
        run_id = run.get("id", self._next_id())
        app = run.get("app", "github-actions")
        status = run.get("status", "completed")
        completed = run.get("completed_at", T0 + 60 if status == "completed" else None)
        output = run.get("output") or {}
        r.trees.setdefault(sha, "0" * 40)
        return {
            "id": run_id, "head_sha": sha, "node_id": f"CR_{run_id}",
            "external_id": str(run_id),
            "url": f"{self.url}/repos/{r.full_name}/check-runs/{run_id}",
            "html_url": f"https://github.com/{r.full_name}/runs/{run_id}",
            "details_url": run.get("details_url",
                                   f"https://github.com/{r.full_name}/actions/runs/{run_id}"),
            "status": status, "conclusion": run.get("conclusion"),
            "started_at": iso(run.get("started_at", T0)), "completed_at": iso(completed),
            "output": {"title": output.get("title"), "summary": output.get("summary"),
                       "text": output.get("text"), "annotations_count": 0,
                       "annotations_url": f"{self.url}/repos/{r.full_name}/check-runs/"
                                          f"{run_id}/annotations"},
            "name": run["name"], "check_suite": {"id": run.get("suite",
                                                               self._default_suite(sha, app))},
            "app": self._integration(app),
            "pull_requests": []}

    # --- serving -------------------------------------------------------------------------

    def _record(self, request: RecordedRequest) -> _Failure | None:
        """Record ``request``; return the injected failure it consumes, if any."""
        with self._lock:
            self._requests.append(request)
            self._remaining = max(0, self._remaining - 1)
            route = request.route
            for failure in self._failures:
                if failure.times > 0 and failure.method in ("*", request.method) \
                        and failure.pattern.search(route):
                    failure.times -= 1
                    return failure
            return None

    def _rate_headers(self) -> dict[str, str]:
        with self._lock:
            return {"x-ratelimit-limit": "5000",
                    "x-ratelimit-remaining": str(self._remaining),
                    "x-ratelimit-used": str(5000 - self._remaining),
                    "x-ratelimit-reset": str(RATE_RESET), "x-ratelimit-resource": "core"}

    def _authorized(self, method: str, target: str, headers: dict[str, str]
                    ) -> tuple[int, str] | None:
        """``None`` when ``headers`` may make this request, else (status, message) of GitHub's
        refusal. The two app-side endpoints take only the app's JWT; every other one the
        configured token (``None``: any, as long as it is not a JWT or a dead installation
        token) or an installation token, live, of an installation covering the repository."""
        path = urlsplit(target).path
        if self.base_path and path.startswith(self.base_path + "/"):
            path = path[len(self.base_path):]
        auth = headers.get("authorization", "")
        scheme, _, credential = auth.partition(" ")
        app_side = bool(re.fullmatch(r"/app/installations/\d+/access_tokens", path)
                        or re.fullmatch(r"/repos/[^/]+/[^/]+/installation", path))
        if app_side:
            if self._app is None:
                return 404, "Not Found"
            if scheme != "Bearer" or not credential:
                return 401, "A JSON web token could not be decoded"
            return self._verify_jwt(credential)
        with self._lock:
            if credential in self._app_tokens:
                installation, expiry = self._app_tokens[credential]
                if self._app_clock() >= expiry:
                    return 401, "Bad credentials"
                m = re.fullmatch(r"/repos/([^/]+)/([^/]+)/.*", path)
                repo = f"{unquote(m.group(1))}/{unquote(m.group(2))}" if m else None
                if m is None:
                    mid = re.fullmatch(r"/repositories/(\d+)/.*", path)
                    repo = next((r.full_name for r in self._repos.values()
                                 if mid and r.id == int(mid.group(1))), None)
                covered = {k.lower() for k, v in (self._app or {}).get(
                    "installations", {}).items() if v == installation}
                if repo is None or repo.lower() not in covered:
                    return 404, "Not Found"  # GitHub hides what a token cannot see
                return None
        if credential.count(".") == 2 and self._app is not None:
            return 401, "Bad credentials"  # a JWT is only for the app-side endpoints
        if self.token is None:
            return None
        if auth in (f"Bearer {self.token}", f"token {self.token}"):
            return None
        return 401, "Bad credentials"

    def _app_clock(self) -> float:
        return (self._app or {}).get("clock", time.time)()

    def _verify_jwt(self, token: str) -> tuple[int, str] | None:
        """Check the app's JWT as GitHub documents: RS256 signed by the app's key, ``iss`` the
        app's id, ``iat`` and ``exp`` present, ``exp`` in the future and at most 10 minutes
        ahead (60 s of clock drift allowed on ``iat``)."""
        import jwt

        assert self._app is not None
        now = self._app_clock()
        try:
            claims = jwt.decode(token, self._app["key"], algorithms=["RS256"],
                                options={"require": ["iat", "exp", "iss"], "verify_exp": False,
                                         "verify_iat": False})
            if claims["exp"] <= now:
                raise jwt.ExpiredSignatureError
            if str(claims["iss"]) != self._app["id"]:  # an integer App ID or a client ID
                raise jwt.InvalidIssuerError
        except jwt.ExpiredSignatureError:
            return 401, "'Expiration time' claim ('exp') must be a numeric value representing " \
                        "the future time at which the assertion expires"
        except jwt.InvalidIssuerError:
            return 401, "'Issuer' claim ('iss') does not name this app"
        except jwt.PyJWTError:
            return 401, "A JSON web token could not be decoded"
        if claims["exp"] > now + 600 + 5:
            return 401, "'Expiration time' claim ('exp') is too far in the future"
        if claims["iat"] > now + 60:
            return 401, "'Issued at' claim ('iat') must be an Integer representing the time " \
                        "that the assertion was issued"
        with self._lock:
            self.jwt_claims.append(claims)
        return None

    def _answer(self, method: str, target: str, body: Any
                ) -> tuple[int, Any, dict[str, str]]:
        """(status, JSON document, extra headers) for one authorized request."""
        parts = urlsplit(target)
        path = parts.path
        if self.base_path:
            if not path.startswith(self.base_path + "/"):
                return _error(404, "Not Found")
            path = path[len(self.base_path):]
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        with self._lock:
            m = re.fullmatch(r"/app/installations/(\d+)/access_tokens", path)
            if m and method == "POST":
                return self._access_token(int(m.group(1)))
            m = re.fullmatch(r"/repos/([^/]+)/([^/]+)/installation", path)
            if m and method == "GET":
                return self._installation(f"{unquote(m.group(1))}/{unquote(m.group(2))}")
            m = re.fullmatch(r"/repositories/(\d+)(/.*)", path)
            if m:
                repo = next((r for r in self._repos.values() if r.id == int(m.group(1))), None)
                if repo is None:
                    return _error(404, "Not Found")
            else:
                m = re.fullmatch(r"/repos/([^/]+)/([^/]+)(/.*)", path)
                if not m:
                    return _error(404, "Not Found")
                repo = self._repos.get(f"{unquote(m.group(1))}/{unquote(m.group(2))}")
                if repo is None:
                    return _error(404, "Not Found")
            rest = m.groups()[-1]
            return self._route(repo, method, rest, query, body, target)

    def _route(self, r: _Repo, method: str, rest: str, query: dict[str, str], body: Any,
               target: str) -> tuple[int, Any, dict[str, str]]:
        if method == "GET" and rest == "/pulls":
            state = query.get("state", "open")
            pulls = sorted((p for p in r.pulls.values() if state in ("all", p.state)),
                           key=lambda p: -p.number)
            items, links = self._page(r, rest, query, pulls)
            return 200, [self._pull(r, p) for p in items], links
        m = re.fullmatch(r"/git/commits/([^/]+)", rest)
        if method == "GET" and m:
            sha = unquote(m.group(1))
            if sha not in r.trees:
                return _error(404, "Not Found", "/git/commits#get-a-commit-object")
            api = f"{self.url}/repos/{r.full_name}/git"
            who = {"name": "Agent", "email": "agent@example.com", "date": iso(T0)}
            return 200, {
                "sha": sha, "node_id": f"C_{sha[:12]}", "url": f"{api}/commits/{sha}",
                "html_url": f"https://github.com/{r.full_name}/commit/{sha}",
                "author": who, "committer": who, "message": "fix",
                "tree": {"sha": r.trees[sha], "url": f"{api}/trees/{r.trees[sha]}"},
                "parents": [], "verification": {"verified": False, "reason": "unsigned",
                                                "signature": None, "payload": None,
                                                "verified_at": None}}, {}
        m = re.fullmatch(r"/commits/([^/]+)/(check-runs|check-suites|status)", rest)
        if method == "GET" and m:
            sha = unquote(m.group(1))
            if sha not in r.trees:
                return _error(422, f"No commit found for SHA: {sha}",
                              "/commits/statuses#get-the-combined-status-for-a-specific-reference")
            if m.group(2) == "check-runs":
                runs = r.check_runs.get(sha, [])
                if query.get("filter", "latest") == "latest":
                    runs = self._latest(runs)
                items, links = self._page(r, rest, query, runs)
                return 200, {"total_count": len(runs), "check_runs": items}, links
            if m.group(2) == "check-suites":
                suites = self._suites(r, sha)
                items, links = self._page(r, rest, query, suites)
                return 200, {"total_count": len(suites), "check_suites": items}, links
            statuses = r.statuses.get(sha, [])
            items, links = self._page(r, rest, query, statuses)
            states = {s["state"] for s in statuses}
            state = "failure" if states & {"failure", "error"} else \
                "pending" if not statuses or "pending" in states else "success"
            return 200, {"state": state, "statuses": items, "sha": sha,
                         "total_count": len(statuses), "repository": self._repository(r),
                         "commit_url": f"{self.url}/repos/{r.full_name}/commits/{sha}",
                         "url": f"{self.url}/repos/{r.full_name}/commits/{sha}/status"}, links
        m = re.fullmatch(r"/issues/(\d+)/(comments|labels)(?:/([^/]+))?", rest)
        if m and int(m.group(1)) in r.pulls:
            pr = r.pulls[int(m.group(1))]
            if m.group(2) == "comments" and m.group(3) is None:
                if method == "GET":
                    return 200, list(pr.comments), {}
                if method == "POST":
                    if not isinstance(body, dict) or not isinstance(body.get("body"), str):
                        return _error(422, "Invalid request.\n\n\"body\" wasn't supplied.",
                                      "/issues/comments#create-an-issue-comment")
                    cid = self._next_id()
                    url = f"{self.url}/repos/{r.full_name}/issues/comments/{cid}"
                    comment = {
                        "id": cid, "node_id": f"IC_{cid}", "url": url,
                        "html_url": f"https://github.com/{r.full_name}/pull/{pr.number}"
                                    f"#issuecomment-{cid}",
                        "body": body["body"], "user": self._user(self.login),
                        "created_at": iso(T0), "updated_at": iso(T0),
                        "issue_url": f"{self.url}/repos/{r.full_name}/issues/{pr.number}",
                        "author_association": "NONE"}
                    pr.comments.append(comment)
                    return 201, comment, {"Location": url}
            if m.group(2) == "labels" and m.group(3) is None:
                if method == "GET":
                    return 200, [self._label(r, n) for n in pr.labels], {}
                if method == "POST":
                    names = body.get("labels") if isinstance(body, dict) else body
                    if not isinstance(names, list) or not all(isinstance(n, str) and n
                                                              for n in names):
                        return _error(422, "Invalid request.\n\nFor 'links/0/schema', "
                                      f"{json.dumps(body)} is not an array.",
                                      "/issues/labels#add-labels-to-an-issue")
                    for name in names:
                        self._label_on(r, pr, name)
                    return 200, [self._label(r, n) for n in pr.labels], {}
            if m.group(2) == "labels" and m.group(3) is not None and method == "DELETE":
                name = unquote(m.group(3))
                if name not in pr.labels:
                    return _error(404, "Label does not exist",
                                  "/issues/labels#remove-a-label-from-an-issue")
                pr.labels.remove(name)
                return 200, [self._label(r, n) for n in pr.labels], {}
        return _error(404, "Not Found")

    @staticmethod
    def _latest(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``filter=latest``: the newest run (largest id) of each (app, suite, name), in
        script order."""
        newest: dict[tuple[int, int, str], int] = {}
        for run in runs:
            key = (run["app"]["id"], run["check_suite"]["id"], run["name"])
            newest[key] = max(newest.get(key, run["id"]), run["id"])
        return [run for run in runs if newest[(run["app"]["id"], run["check_suite"]["id"],
                                               run["name"])] == run["id"]]

    #: Conclusions from highest to lowest priority, for a suite derived from its runs.
    _PRIORITY = ("action_required", "cancelled", "timed_out", "failure", "stale", "neutral",
                 "success", "skipped")

    def _suites(self, r: _Repo, sha: str) -> list[dict[str, Any]]:
        """The check suites of ``sha``: one per (app, suite id) of its runs, then the scripted
        run-less ones (``check-suite`` objects)."""
        by_suite: dict[tuple[str, int], list[dict[str, Any]]] = {}
        for run in self._latest(r.check_runs.get(sha, [])):
            by_suite.setdefault((run["app"]["slug"], run["check_suite"]["id"]), []).append(run)
        suites = []
        for (app, suite_id), runs in by_suite.items():
            done = all(run["status"] == "completed" for run in runs)
            words = [run["conclusion"] for run in runs if run["conclusion"]]
            conclusion = next((w for w in self._PRIORITY if w in words), None) if done else None
            status = "completed" if done else "in_progress" if any(
                run["status"] == "in_progress" for run in runs) else "queued"
            suites.append(self._suite(r, sha, suite_id, app, status, conclusion,
                                      max((run["completed_at"] or iso(T0)) for run in runs),
                                      len(runs)))
        for suite in r.check_suites.get(sha, []):
            suites.append(self._suite(r, sha, suite["id"], suite["app"], suite["status"],
                                      suite["conclusion"], iso(suite["updated_at"]), 0))
        return suites

    def _suite(self, r: _Repo, sha: str, suite_id: int, app: str, status: str,
               conclusion: str | None, updated_at: str | None, runs: int) -> dict[str, Any]:
        api = f"{self.url}/repos/{r.full_name}"
        who = {"name": "Agent", "email": "agent@example.com"}
        return {"id": suite_id, "node_id": f"CS_{suite_id}", "head_branch": "fix",
                "head_sha": sha, "status": status, "conclusion": conclusion,
                "url": f"{api}/check-suites/{suite_id}", "before": "0" * 40, "after": sha,
                "pull_requests": [], "app": self._integration(app),
                "repository": self._repository(r), "created_at": iso(T0),
                "updated_at": updated_at, "rerequestable": True,
                "runs_rerequestable": True, "latest_check_runs_count": runs,
                "check_runs_url": f"{api}/check-suites/{suite_id}/check-runs",
                "head_commit": {"id": sha, "tree_id": r.trees.get(sha, "0" * 40),
                                "message": "fix", "timestamp": iso(T0), "author": who,
                                "committer": who}}

    def _installation(self, repo: str) -> tuple[int, Any, dict[str, str]]:
        """``apps/get-repo-installation``: the ``installation`` covering ``repo``, or 404."""
        assert self._app is not None
        found = {k.lower(): v for k, v in self._app["installations"].items()}.get(repo.lower())
        if found is None:
            return _error(404, "Not Found", "/apps/apps#get-a-repository-installation-for-the-"
                                            "authenticated-app")
        owner = repo.split("/")[0]
        return 200, {
            "id": found, "account": self._user(owner), "repository_selection": "selected",
            "access_tokens_url": f"{self.url}/app/installations/{found}/access_tokens",
            "repositories_url": f"{self.url}/installation/repositories",
            "html_url": f"https://github.com/settings/installations/{found}",
            "app_id": int(self._app["id"]) if self._app["id"].isdigit() else 1,
            "client_id": self._app["id"], "target_id": sum(owner.encode()) + 1000,
            "target_type": "User",
            "permissions": {"checks": "read", "issues": "write", "metadata": "read",
                            "pull_requests": "read", "statuses": "read"},
            "events": [], "created_at": iso(T0 - 86400), "updated_at": iso(T0 - 86400),
            "single_file_name": None, "app_slug": "fixloop", "suspended_by": None,
            "suspended_at": None}, {}

    def _access_token(self, installation: int) -> tuple[int, Any, dict[str, str]]:
        """``apps/create-installation-access-token``: a new token for ``installation``
        (``ghs_`` and 36 random characters, built at run time), 201."""
        import secrets

        assert self._app is not None
        if installation not in self._app["installations"].values():
            return _error(404, "Not Found", "/apps/apps#create-an-installation-access-token-"
                                            "for-an-app")
        token = "ghs" + "_" + secrets.token_hex(18)
        expiry = self._app_clock() + self._app["ttl"]
        self._app_tokens[token] = (installation, expiry)
        self.issued_tokens.append(token)
        return 201, {"token": token, "expires_at": iso(float(int(expiry))),
                     "permissions": {"checks": "read", "issues": "write",
                                     "metadata": "read", "pull_requests": "read",
                                     "statuses": "read"},
                     "repository_selection": "selected"}, {}

    def _page(self, r: _Repo, rest: str, query: dict[str, str], items: list[Any]
              ) -> tuple[list[Any], dict[str, str]]:
        """One page of ``items`` and its ``Link`` header (GitHub's ``/repositories/{id}``
        form, the request's other query parameters kept)."""
        try:
            per_page = int(query.get("per_page", "30"))
        except ValueError:
            per_page = 30
        per_page = max(1, min(per_page, 100, self.max_per_page))
        try:
            page = max(1, int(query.get("page", "1")))
        except ValueError:
            page = 1
        last = max(1, -(-len(items) // per_page))

        def link(n: int) -> str:
            q = {**query, "per_page": str(per_page), "page": str(n)}
            return f"<{self.url}/repositories/{r.id}{rest}?{urlencode(q)}>"

        rels = []
        if page > 1:
            rels.append(f'{link(page - 1)}; rel="prev"')
        if page < last:
            rels += [f'{link(page + 1)}; rel="next"', f'{link(last)}; rel="last"']
        if page > 1:
            rels.append(f'{link(1)}; rel="first"')
        headers = {"Link": ", ".join(rels)} if rels else {}
        return items[(page - 1) * per_page:page * per_page], headers


def _error(status: int, message: str, doc: str = "") -> tuple[int, Any, dict[str, str]]:
    return status, {"message": message, "documentation_url": DOCS + doc,
                    "status": str(status)}, {}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed ACK
    github: FakeGitHub

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw
        headers = {k.lower(): v for k, v in self.headers.items()}
        fake = self.github
        failure = fake._record(RecordedRequest(self.command, self.path, body, headers))
        if failure is not None:
            if failure.delay_s:
                time.sleep(failure.delay_s)
            if failure.status == "drop":
                self.close_connection = True
                return
            status = int(failure.status)
            doc: Any = failure.body
            if doc is None:
                doc = _error(status, _MESSAGES.get(status, "Error"))[1]
            self._send(status, doc, {**fake._rate_headers(), **failure.headers})
            return
        refusal = fake._authorized(self.command, self.path, headers)
        if refusal is not None:
            self._send(refusal[0], _error(*refusal)[1], fake._rate_headers())
            return
        status, doc, extra = fake._answer(self.command, self.path, body)
        fake._check_schema(self.command, self.path, status, doc, body)
        self._send(status, doc, {**fake._rate_headers(), **extra})

    def _send(self, status: int, doc: Any, headers: dict[str, str]) -> None:
        if isinstance(doc, bytes):
            payload = doc
        elif isinstance(doc, str):
            payload = doc.encode()
        else:
            payload = json.dumps(doc).encode()
        self.send_response(status, _REASONS.get(status, "Status"))
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("X-GitHub-Api-Version-Selected", "2022-11-28")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_DELETE = do_PATCH = do_PUT = _serve
