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

The transport (headers, tokens, retries, redirects, pagination, rate limits) is
:mod:`repeat_failure.fixloop.github_transport`; the returned models, the error and the
type-checked reading of an answer are :mod:`repeat_failure.fixloop.github_models`.

Errors are :class:`GitHubError` with a fixed ``reason`` (:data:`~repeat_failure.fixloop.github_models.REASONS`,
a metric label).
Every response field read is type-checked: a shape GitHub does not document raises
``bad_response``, never ``KeyError``/``TypeError``. The token is never logged and never in an
exception's text, ``repr`` or cause chain (causes are suppressed; texts are redacted).

Not thread-safe: one :class:`GitHub` per sweep loop.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from repeat_failure.fixloop.config import REPOSITORY_RE
from repeat_failure.fixloop.github_models import (MISSING, SUMMARY_MAX, Check, GitHubError,
                                                  PullRequest, Shape)
from repeat_failure.fixloop.github_transport import PER_PAGE, GitHubTransport
from repeat_failure.rules.scrub import scrub

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


class GitHub(GitHubTransport):
    """The REST client: GitHub's operations, each a typed method over the transport
    (:class:`~repeat_failure.fixloop.github_transport.GitHubTransport`: its constructor
    arguments, :attr:`rate_remaining`, :attr:`rate_reset`, :attr:`wait_deadline`,
    :meth:`set_token` and :meth:`close`)."""

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
                user = item.get("user", MISSING)
                author = "" if user is None else \
                    shape.string(shape.obj(user, f"{path}.user"), "login", f"{path}.user")
                head = shape.obj(item.get("head", MISSING), f"{path}.head")
                labels = tuple(
                    shape.string(shape.obj(label, f"{path}.labels[{j}]"), "name",
                                 f"{path}.labels[{j}]")
                    for j, label in enumerate(shape.array(item.get("labels", MISSING),
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
        tree = shape.obj(shape.obj(doc, "commit").get("tree", MISSING), "commit.tree")
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
            for i, item in enumerate(shape.array(doc.get("check_runs", MISSING),
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
            for i, item in enumerate(shape.array(doc.get("check_suites", MISSING),
                                                 "check-suites.check_suites")):
                check = self._check_suite(shape, item, f"check_suites[{i}]")  # type: ignore[assignment]
                if check is not None and check.suite_id not in with_runs:
                    suites.append(check)
        statuses: dict[str, tuple[tuple[float, int], Check]] = {}
        for doc, shape in self._pages(f"{base}/commits/{ref}/status", {"per_page": PER_PAGE},
                                      repo=repo):
            doc = shape.obj(doc, "status")
            shape.string(doc, "state", "status")
            for i, item in enumerate(shape.array(doc.get("statuses", MISSING),
                                                 "status.statuses")):
                key, check = self._status(shape, item, f"statuses[{i}]")  # type: ignore[assignment]
                if check.name not in statuses or key > statuses[check.name][0]:  # type: ignore[operator]
                    statuses[check.name] = (key, check)  # type: ignore[assignment]
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
    def _check_run(shape: Shape, item: Any, path: str) -> tuple[int, Check]:
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
                             completed_at=completed_at, summary=_summary("\n".join(parts)),
                             url=url, source="check_run", app=app, suite_id=suite_id)

    @staticmethod
    def _app_and_suite(shape: Shape, item: dict[str, Any], path: str
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
    def _check_suite(shape: Shape, item: Any, path: str) -> Check | None:
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
    def _status(shape: Shape, item: Any, path: str) -> tuple[tuple[float, int], Check]:
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
            summary=_summary(description), url=url, source="status")

    # --- request paths ---------------------------------------------------------------------

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


def _summary(text: str) -> str:
    """A check's human text as kept: scrubbed whole, then cut to :data:`SUMMARY_MAX`
    characters. Scrubbing first matters (issue 28 item 18): a key cut short by the cut no
    longer matches its rule and would stay, most of it, in the text."""
    return scrub(text)[:SUMMARY_MAX]
