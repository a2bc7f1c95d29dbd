"""A scripted fake GitHub REST API on 127.0.0.1, for the fixloop tests (issue 9).

:class:`FakeGitHub` is a context manager around a :class:`http.server.ThreadingHTTPServer` on
``127.0.0.1`` port 0 (HTTP/1.1, keep-alive); ``.url`` is the API base to give
:class:`sidecar.fixloop.github.GitHub` (``http://127.0.0.1:PORT`` plus ``base_path``, e.g.
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
==========================================================  ===================================

The same paths under ``/repositories/{id}/`` (the form GitHub's ``Link`` URLs use) are served
too. Lists honour ``per_page`` (default 30, at most 100 as GitHub's, and at most
:attr:`FakeGitHub.max_per_page`, a knob to force small pages) and ``page``, with a ``Link``
header like GitHub's (``<URL>; rel="prev"``, ``"next"``, ``"last"``, ``"first"``; docs "Using
pagination in the REST API"). Every answer carries ``x-ratelimit-limit``, ``-remaining``,
``-used``, ``-reset`` and ``-resource`` (docs "Rate limits for the REST API"). Errors have
GitHub's error shape ``{"message", "documentation_url", "status"}`` (docs "Troubleshooting the
REST API"): unknown path 404 ``Not Found``, a wrong bearer token 401 ``Bad credentials``, an
unknown commit 422 ``No commit found for SHA: ...``, a malformed write body 422.

Deliberate simplifications: check runs and statuses are answered as scripted, in script order
(``filter=latest`` is not applied and the combined status is not reduced to one per context;
GitHub does both, a test scripts duplicates to exercise the client's own newest-wins rule);
times are fixed (see :data:`T0`), not the wall clock.

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
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

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
    statuses: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    label_ids: dict[str, int] = field(default_factory=dict)


class FakeGitHub:
    """The fake GitHub (see the module docstring). ``token``: the only bearer token accepted
    (``Authorization: Bearer <token>`` or ``token <token>``), or ``None`` to accept any
    request. ``base_path``: served under this prefix (``/api/v3`` for GHE). ``login``: the
    account comments are posted as. ``max_per_page``: caps every page (force pagination)."""

    def __init__(self, token: str | None = None, *, base_path: str = "",
                 login: str = "fixloop-bot", max_per_page: int = 100) -> None:
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

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

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
        optionally ``status`` (default ``"completed"``), ``conclusion`` (default ``None``),
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
        uid = sum(login.encode()) + 1000
        return {"login": login, "id": uid, "node_id": f"MDQ6VXNlcj{uid}",
                "avatar_url": f"https://avatars.githubusercontent.com/u/{uid}?v=4",
                "gravatar_id": "", "url": f"{self.url}/users/{login}",
                "html_url": f"https://github.com/{login}",
                "type": "Bot" if login.endswith("[bot]") else "User", "site_admin": False}

    def _label_on(self, r: _Repo, pr: _PR, name: str) -> None:
        r.label_ids.setdefault(name, self._next_id())
        if name not in pr.labels:
            pr.labels.append(name)

    def _label(self, r: _Repo, name: str) -> dict[str, Any]:
        lid = r.label_ids.setdefault(name, self._next_id())
        return {"id": lid, "node_id": f"LA_{lid}", "name": name, "description": None,
                "color": "ededed", "default": False,
                "url": f"{self.url}/repos/{r.full_name}/labels/{name}"}

    def _repository(self, r: _Repo) -> dict[str, Any]:
        owner, name = r.full_name.split("/")
        return {"id": r.id, "node_id": f"R_{r.id}", "name": name, "full_name": r.full_name,
                "private": False, "owner": self._user(owner),
                "html_url": f"https://github.com/{r.full_name}", "fork": False,
                "url": f"{self.url}/repos/{r.full_name}"}

    def _pull(self, r: _Repo, pr: _PR) -> dict[str, Any]:
        api = f"{self.url}/repos/{r.full_name}"
        html = f"https://github.com/{r.full_name}/pull/{pr.number}"
        owner = r.full_name.split("/")[0]
        return {
            "url": f"{api}/pulls/{pr.number}", "id": pr.number + 5_000_000,
            "node_id": f"PR_{pr.number}", "html_url": html, "diff_url": f"{html}.diff",
            "patch_url": f"{html}.patch", "issue_url": f"{api}/issues/{pr.number}",
            "commits_url": f"{api}/pulls/{pr.number}/commits",
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
            "_links": {"self": {"href": f"{api}/pulls/{pr.number}"},
                       "html": {"href": html}},
            "author_association": "CONTRIBUTOR", "auto_merge": None, "draft": pr.draft}

    def _check_run(self, r: _Repo, sha: str, run: dict[str, Any]) -> dict[str, Any]:
        run_id = run.get("id", self._next_id())
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
            "name": run["name"], "check_suite": {"id": 7_000_000 + run_id},
            "app": {"id": 15368, "slug": "github-actions", "name": "GitHub Actions",
                    "owner": self._user("github")},
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

    def _authorized(self, headers: dict[str, str]) -> bool:
        if self.token is None:
            return True
        return headers.get("authorization") in (f"Bearer {self.token}", f"token {self.token}")

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
        m = re.fullmatch(r"/commits/([^/]+)/(check-runs|status)", rest)
        if method == "GET" and m:
            sha = unquote(m.group(1))
            if sha not in r.trees:
                return _error(422, f"No commit found for SHA: {sha}",
                              "/commits/statuses#get-the-combined-status-for-a-specific-reference")
            if m.group(2) == "check-runs":
                runs = r.check_runs.get(sha, [])
                items, links = self._page(r, rest, query, runs)
                return 200, {"total_count": len(runs), "check_runs": items}, links
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
        if not fake._authorized(headers):
            self._send(401, _error(401, "Bad credentials")[1], fake._rate_headers())
            return
        status, doc, extra = fake._answer(self.command, self.path, body)
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
