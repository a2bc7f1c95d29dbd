"""Re-engagement kicks: a targeted "fix this PR before anything new" to the agent that owns it.

Design adr-0010: a re-engagement is a DELIVERED kick, not a counter increment. :class:`Notifier`
POSTs one JSON document to the webhook of the agent that authored the PR (``notifier.agents`` in
the config, by GitHub login) and, when there is none, it is paused (``paused: true``) or it does
not take the kick (not a 2xx, or unreachable), to the configured fixer agent
(``notifier.fixer_url``, the ADR's ``review.fixer_agent``), then the same way to the scanner
(``notifier.scanner_url``): the ADR's three tiers, "falling back to review.fixer_agent, then
scanner, when the owner is paused or unreachable". The kick counts against the PR's budget only
when a 2xx came back (:attr:`Kick.delivered`).

The document (``Content-Type: application/json``)::

    {"kind": "fix_before_new", "repository": "owner/repo", "number": 12,
     "url": "https://github.com/owner/repo/pull/12", "head_sha": "...",
     "failing_checks": ["test"], "excerpt": "<scrubbed failure evidence>",
     "reengagement": 2, "max_reengagements": 6, "target": "owner" | "fixer" | "scanner"}

No retries (the next sweep is the retry, spaced by the staleness window), a timeout per POST
(``notifier.timeout_s``), no redirects followed. The response body is never read into logs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from repeat_failure.fixloop.config import FixloopConfig

log = logging.getLogger("repeat_failure")

OWNER, FIXER, SCANNER = "owner", "fixer", "scanner"


@dataclass(frozen=True)
class Kick:
    """The outcome of one re-engagement: ``delivered`` (a 2xx came back), ``target`` (the last
    tier tried: ``owner``, ``fixer``, ``scanner``, or ``""`` when none is configured), ``status`` (the last HTTP status, or
    ``None``), ``error`` (a short reason when not delivered: ``no_endpoint``, ``http_<status>``,
    ``timeout``, ``network``)."""

    delivered: bool
    target: str
    status: int | None = None
    error: str = ""


class Notifier:
    """Sends kicks for ``config``; ``post(url, json, timeout)`` is ``requests.post``-shaped
    (injectable for tests) and returns an object with ``status_code``."""

    def __init__(self, config: FixloopConfig, post: Callable[..., Any] | None = None) -> None:
        self.config = config
        if post is None:
            import requests

            session = requests.Session()
            session.headers["User-Agent"] = "repeat-failure-fixloop"
            post = session.post
        self._post = post

    def kick(self, author: str, payload: dict[str, Any]) -> Kick:
        """Deliver ``payload`` (the document above, without ``target``) for a PR by
        ``author``: its agent's endpoint first (unless paused), then the fixer, then the
        scanner; the first that answers 2xx takes it. Never raises."""
        owner = self.config.endpoint(author)
        tried: Kick = Kick(False, "", error="no_endpoint")
        for target, url in ((OWNER, owner.url if owner and not owner.paused else None),
                            (FIXER, self.config.fixer_url),
                            (SCANNER, self.config.scanner_url)):
            if not url:
                continue
            tried = self._send(url, {**payload, "target": target}, target)
            if tried.delivered:
                return tried
        return tried

    def _send(self, url: str, body: dict[str, Any], target: str) -> Kick:
        try:
            response = self._post(url, json=body, timeout=self.config.notifier_timeout_s,
                                  allow_redirects=False)
        except Exception as exc:  # noqa: BLE001 - any failure is "not delivered"
            name = exc.__class__.__name__
            error = "timeout" if "Timeout" in name else "network"
            log.warning("re-engagement not delivered", extra={
                "event": "fixloop_kick_failed", "target": target, "error": error,
                "pr": f"{body.get('repository')}#{body.get('number')}"})
            return Kick(False, target, None, error)
        status = int(getattr(response, "status_code", 0) or 0)
        close = getattr(response, "close", None)
        if close is not None:
            close()
        if 200 <= status < 300:
            return Kick(True, target, status)
        log.warning("re-engagement refused", extra={
            "event": "fixloop_kick_failed", "target": target, "error": f"http_{status}",
            "pr": f"{body.get('repository')}#{body.get('number')}"})
        return Kick(False, target, status, f"http_{status}")
