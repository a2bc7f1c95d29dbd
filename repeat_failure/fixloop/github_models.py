"""What the GitHub REST client (:class:`repeat_failure.fixloop.github.GitHub`) returns and
raises, and how it reads GitHub's JSON: the data models :class:`PullRequest` and :class:`Check`,
the error :class:`GitHubError` with its fixed :data:`REASONS`, and :class:`Shape`, the
type-checked reading of one decoded answer.

Every response field read goes through :class:`Shape`: a shape GitHub does not document raises
``GitHubError("bad_response")`` naming the request and the field path, never
``KeyError``/``TypeError``. The models are frozen dataclasses; nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

#: Every :attr:`GitHubError.reason` (fixed, for a metric label).
REASONS = ("http_4xx", "http_5xx", "rate_limited", "network", "timeout", "bad_response", "auth")
#: :attr:`Check.summary` is cut to this many characters.
SUMMARY_MAX = 2000

#: A key absent from a JSON object (``doc.get(key, MISSING)``), told apart from ``null``.
MISSING = object()


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
    time). ``summary`` is human text from GitHub, scrubbed and then cut to at most
    :data:`SUMMARY_MAX` characters (issue 28 item 18: scrubbed first). ``url`` its ``details_url``/``html_url`` or ``target_url`` (``""`` when none).
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



def _kind(value: Any) -> str:
    if value is MISSING:
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


class Shape:
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
        value = doc.get(key, MISSING)
        if optional and (value is None or value is MISSING):
            return None
        if not isinstance(value, str):
            raise self.fail(f"{path}.{key}", "a string", value)
        return value

    def integer(self, doc: dict[str, Any], key: str, path: str) -> int:
        value = doc.get(key, MISSING)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.fail(f"{path}.{key}", "an integer", value)
        return value

    def boolean(self, doc: dict[str, Any], key: str, path: str, default: bool) -> bool:
        value = doc.get(key, MISSING)
        if value is MISSING:
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
