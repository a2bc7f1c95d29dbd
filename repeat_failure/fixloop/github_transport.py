"""The HTTP transport of the GitHub REST client: headers and tokens, retries, redirects,
pagination, rate limits and errors, under the typed operations of
:class:`repeat_failure.fixloop.github.GitHub` (a subclass of :class:`GitHubTransport`).

The rules (docs.github.com "Getting started with the REST API", "Using pagination in the REST
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

The token is never logged and never in an exception's text, ``repr`` or cause chain (causes
are suppressed; texts are redacted). Not thread-safe.
"""

from __future__ import annotations

import json
import re
import time
from email.utils import parsedate_to_datetime
from typing import Any, Callable, Iterator
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import (ConnectTimeoutError, MaxRetryError, NewConnectionError,
                                ReadTimeoutError)
from urllib3.util.retry import Retry

from repeat_failure.fixloop.github_models import GitHubError, Shape

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
#: Retries of one idempotent request (connect errors: any method).
RETRIES = 3
BACKOFF_FACTOR = 0.5
RETRY_STATUSES = (502, 503, 504)
#: Wait for a rate limit that names no time (GitHub: "wait for at least one minute").
SECONDARY_WAIT_S = 60.0


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


class GitHubTransport:
    """Requests to GitHub's REST API (see the module docstring for the rules).

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
                respect_retry_after_header=True, retry_after_max=self.max_rate_limit_wait_s)  # type: ignore[arg-type]
            adapter = HTTPAdapter(max_retries=retry)
            session.mount("http://", adapter)
            session.mount("https://", adapter)
        self._session = session

    def __repr__(self) -> str:
        token = "<set>" if self._source.secrets() else None
        return f"{type(self).__name__}(api_url={self.api_url!r}, token={token!r})"

    @property
    def token_source(self) -> TokenSource:
        """Where this client's tokens come from."""
        return self._source

    def close(self) -> None:
        """Close the HTTP session if this client created it."""
        if self._own_session:
            self._session.close()

    # --- requests ------------------------------------------------------------------------

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
                  bearer: str | None = None) -> tuple[Any, Shape]:
        url = self._url(path)
        response = self._request("GET", url, repo=repo, bearer=bearer)
        return self._json(response, self._what("GET", url))

    def _json(self, response: requests.Response, what: str) -> tuple[Any, Shape]:
        try:
            doc = json.loads(response.content)
        except (ValueError, RecursionError):
            raise GitHubError("bad_response", f"{what}: HTTP {response.status_code} answer is "
                              f"not JSON", response.status_code) from None
        return doc, Shape(what, response.status_code)

    def _pages(self, path: str, params: dict[str, Any], *, repo: str | None = None
               ) -> Iterator[tuple[Any, Shape]]:
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
