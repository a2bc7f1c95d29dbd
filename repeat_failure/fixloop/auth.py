"""Where the fixloop's GitHub credentials come from: a token file, or a GitHub App.

Two :class:`repeat_failure.fixloop.github_transport.TokenSource` implementations:

* :class:`FileToken`: one token read from ``token_file`` (a mounted Secret) or
  ``GITHUB_TOKEN`` (:func:`repeat_failure.fixloop.app.read_token`). After a 401 it reads the file
  again, and the request is made once more when the token there changed (a rotated Secret
  that Kubernetes updated in place mid-sweep).
* :class:`AppTokens`: the fixloop as a GitHub App (docs/fixloop.md "Authentication"). GitHub's
  flow (docs "Authenticating as a GitHub App installation", "Generating a JSON Web Token (JWT)
  for a GitHub App", "Generating an installation access token for a GitHub App"):

  1. A JWT signed RS256 with the App's private key, claims ``iat`` (60 s in the past, for
     clock drift), ``exp`` (:data:`JWT_LIFETIME_S` after ``iat``: GitHub refuses more than
     10 minutes ahead) and ``iss`` (the App ID or the client ID, as a string). Minted with PyJWT (the
     ``cryptography`` backend signs), a fresh one per exchange.
  2. The installation: ``installation_id`` when configured, else found per repository
     (``GET /repos/{owner}/{repo}/installation`` with the JWT), kept for the process.
  3. ``POST /app/installations/{id}/access_tokens`` with the JWT gives an installation token
     (GitHub's last one hour) and its ``expires_at``. One token per installation, reused
     until less than :data:`REFRESH_MARGIN_S` is left, then replaced before the next request
     (a sweep never starts a request on a token about to expire); after a 401 it is replaced
     once, and the request made once more. A token that arrives with less than twice the
     margin left (a skewed node clock, or a short-lived token) is replaced when half its time
     is gone, and one whose ``expires_at`` is already past by this node's clock is used until
     GitHub refuses it (with a warning naming the skew): either way one token serves many
     requests, never one exchange per request.
  4. A 401 replaces an installation's token at most once per sweep (:meth:`AppTokens.new_pass`,
     called as each sweep starts): a token GitHub refuses again after that (an App suspended,
     its key revoked) fails that request as ``auth`` and the sweep goes on without minting
     more, instead of two exchanges per remaining request.

  The private key file is read at start (a missing, unreadable or non-RSA PEM key is a
  :class:`repeat_failure.config.ConfigError` naming the file, never its content) and again before a
  JWT is minted when the file changed (a rotated Secret); a changed file that is not a usable
  key keeps the previous key, with a warning.

Tokens and JWTs are never logged; :meth:`AppTokens.secrets` lists the ones handed out (the
newest :data:`KEEP_SECRETS`), so the client redacts them from every error text.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from repeat_failure.config import ConfigError, read_regular_file
from repeat_failure.fixloop.config import FixloopConfig, GitHubApp
from repeat_failure.fixloop.github import GitHub, GitHubError
from repeat_failure.fixloop.github_transport import TokenSource

log = logging.getLogger("repeat_failure")

#: Seconds the JWT is valid from its ``iat`` (which is 60 s in the past): 9 minutes from now,
#: inside GitHub's 10-minute limit with a minute to spare for clock drift.
JWT_LIFETIME_S = 600
JWT_BACKDATE_S = 60
#: An installation token with less than this left is replaced before it is used.
REFRESH_MARGIN_S = 300.0
#: Tokens and JWTs remembered for redaction.
KEEP_SECRETS = 64


def _load_key(path: str) -> Any:
    """The RSA private key in the PEM file at ``path``. Raises :class:`ConfigError` naming
    the file and what is wrong (missing, unreadable, not PEM, encrypted, not RSA)."""
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    data = read_regular_file(path, "the GitHub App private key")
    try:
        key = load_pem_private_key(data, password=None)
    except TypeError:
        raise ConfigError(f"{path}: the GitHub App private key is encrypted (give it "
                          "without a passphrase, as GitHub generates it)") from None
    except ValueError:
        raise ConfigError(f"{path}: not a PEM private key (GitHub's App key file begins "
                          "with -----BEGIN RSA PRIVATE KEY-----)") from None
    if not isinstance(key, RSAPrivateKey):
        raise ConfigError(f"{path}: the GitHub App private key must be RSA (GitHub signs "
                          "App JWTs with RS256)")
    return key


def _stamp(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


class AppTokens(TokenSource):
    """Installation tokens of the GitHub App ``app`` (see the module docstring).

    ``clock`` gives epoch seconds (the JWT's claims and token expiry; GitHub checks both
    against its own clock, so keep the node's time right). Call :meth:`bind` with the client
    whose transport the exchanges use before the first request. Thread-safe.

    Raises :class:`ConfigError` when the private key cannot be used.
    """

    def __init__(self, app: GitHubApp, *, clock: Callable[[], float] = time.time,
                 refresh_margin_s: float = REFRESH_MARGIN_S) -> None:
        self.app = app
        self._clock = clock
        self._margin = float(refresh_margin_s)
        self._key = _load_key(app.private_key_file)
        self._key_stamp = _stamp(app.private_key_file)
        self._github: GitHub | None = None
        self._lock = threading.RLock()
        self._installations: dict[str, int] = {}  # repository (lower case) -> installation
        # installation -> (token, expires_at, when to replace it), epoch seconds
        self._tokens: dict[int, tuple[str, float, float]] = {}
        self._refreshed: set[int] = set()  # installations whose token a 401 replaced this pass
        self._secrets: deque[str] = deque(maxlen=KEEP_SECRETS)
        #: Installation tokens minted so far (a count, for logs and tests).
        self.minted = 0

    def __repr__(self) -> str:
        return f"AppTokens(app_id={self.app.app_id!r})"

    def bind(self, github: GitHub) -> None:
        """Make the JWT exchanges through ``github`` (its timeouts, retries, rate limits)."""
        self._github = github

    def jwt(self) -> str:
        """A new JWT for the App (claims ``iat``, ``exp``, ``iss``; RS256)."""
        import jwt

        self._reload_key()
        now = int(self._clock())
        # ``iss`` is a string (RFC 7519 StringOrURI; PyJWT insists), the App ID's digits or
        # the client ID, both of which GitHub takes.
        token = jwt.encode({"iat": now - JWT_BACKDATE_S, "exp": now - JWT_BACKDATE_S
                            + JWT_LIFETIME_S, "iss": self.app.app_id}, self._key,
                           algorithm="RS256")
        self._secrets.append(token)
        return token

    def installation(self, repo: str | None) -> int:
        """The installation id for calls about ``repo``: the configured one, else the one
        GitHub names for the repository (asked once per repository and process). Raises
        :class:`GitHubError` (``auth`` when the App is not installed there)."""
        if self.app.installation_id is not None:
            return self.app.installation_id
        if repo is None:
            raise GitHubError("auth", "a GitHub call about no repository needs "
                              "fixloop.github_app.installation_id")
        with self._lock:
            found = self._installations.get(repo.lower())
            if found is None:
                found = self._client().repo_installation(repo, self.jwt())
                self._installations[repo.lower()] = found
                log.info("GitHub App installation found for a repository", extra={
                    "event": "fixloop_app_installation", "repository": repo,
                    "installation_id": found})
            return found

    def token(self, repo: str | None) -> str:
        """The installation token for ``repo``: the cached one while more than the refresh
        margin is left, else a new one. Raises :class:`GitHubError` when the exchange fails."""
        with self._lock:
            installation = self.installation(repo)
            cached = self._tokens.get(installation)
            if cached is not None and self._clock() < cached[2]:
                return cached[0]
            return self._mint(installation, "expiring" if cached else "first")

    def new_pass(self) -> None:
        """A sweep starts: a 401 may replace each installation's token once more."""
        with self._lock:
            self._refreshed.clear()

    def refresh(self, repo: str | None, rejected: str | None) -> bool:
        """After a 401 to ``rejected``: forget that token (and, when the installation was
        discovered, which installation covers ``repo``: the App may have been re-installed),
        so the request is made once more with a new one. False when ``rejected`` is not a
        token this source handed out for ``repo`` (nothing new to try)."""
        with self._lock:
            try:
                installation = self.installation(repo)
            except GitHubError:
                return False
            cached = self._tokens.get(installation)
            if cached is None or cached[0] != rejected:
                return True  # a newer token exists already, or one is minted: try it
            if installation in self._refreshed:
                log.warning("GitHub refused the App's new installation token too; no other "
                            "token is minted until the next sweep", extra={
                                "event": "fixloop_app_token_rejected_again",
                                "installation_id": installation})
                return False
            self._refreshed.add(installation)
            del self._tokens[installation]
            if self.app.installation_id is None and repo is not None:
                self._installations.pop(repo.lower(), None)
            log.warning("GitHub answered 401 to the App's installation token; minting a new "
                        "one", extra={"event": "fixloop_app_token_rejected",
                                      "installation_id": installation})
            return True

    def secrets(self) -> tuple[str, ...]:
        return tuple(self._secrets)

    # --- internals -------------------------------------------------------------------------

    def _client(self) -> GitHub:
        if self._github is None:
            raise RuntimeError("AppTokens.bind(github) was not called")
        return self._github

    def _mint(self, installation: int, why: str) -> str:
        token, expires = self._client().installation_token(installation, self.jwt())
        self._secrets.append(token)
        now = self._clock()
        left = expires - now
        if left <= 0:
            # Past already by this clock: the node's clock is ahead of GitHub's (its JWT was
            # accepted, so by less than about a minute more than the token's hour) or GitHub
            # answered oddly. Used until GitHub refuses it (a 401 replaces it).
            replace_at = math.inf
            log.warning("GitHub App installation token expires_at is not in the future by this "
                        "node's clock; check the node's time (NTP). Using the token until "
                        "GitHub refuses it", extra={"event": "fixloop_app_token_clock",
                                                    "installation_id": installation,
                                                    "expires_in_s": round(left)})
        else:
            replace_at = expires - min(self._margin, left / 2)
        self._tokens[installation] = (token, expires, replace_at)
        self.minted += 1
        log.info("GitHub App installation token minted", extra={
            "event": "fixloop_app_token", "installation_id": installation, "why": why,
            "expires_in_s": round(left)})
        return token

    def _reload_key(self) -> None:
        stamp = _stamp(self.app.private_key_file)
        if stamp is None or stamp == self._key_stamp:
            return
        try:
            key = _load_key(self.app.private_key_file)
        except ConfigError as exc:
            log.warning("GitHub App private key file changed but cannot be used; keeping the "
                        "previous key", extra={"event": "fixloop_app_key_unusable",
                                               "error": str(exc)})
            return
        self._key, self._key_stamp = key, stamp
        log.info("GitHub App private key file changed: using the new key",
                 extra={"event": "fixloop_app_key_rotated"})


class FileToken(TokenSource):
    """The token of ``config`` (``token_file``, else ``GITHUB_TOKEN``; ``None``: anonymous),
    read at start by ``read`` (:func:`repeat_failure.fixloop.app.read_token`), and again after a
    401: when the token there changed, the request is made once more with it."""

    def __init__(self, config: FixloopConfig, read: Callable[[FixloopConfig], str | None]
                 ) -> None:
        self._config = config
        self._read = read
        self._token = read(config)
        self._old: deque[str] = deque(maxlen=4)

    def __repr__(self) -> str:
        return f"FileToken({'<set>' if self._token else None})"

    def token(self, repo: str | None) -> str | None:
        return self._token

    def set(self, token: str | None) -> None:
        """Use ``token`` from now on (the file was seen to change before a sweep)."""
        if self._token:
            self._old.append(self._token)
        self._token = token or None

    def refresh(self, repo: str | None, rejected: str | None) -> bool:
        if self._token != rejected:
            return self._token is not None  # changed meanwhile: try the new one
        try:
            token = self._read(self._config)
        except ConfigError as exc:
            log.warning("GitHub answered 401 and the token file cannot be read again",
                        extra={"event": "fixloop_token_unreadable", "error": str(exc)})
            return False
        if not token or token == rejected:
            return False
        self.set(token)
        log.info("GitHub answered 401; the token file holds a new token: using it",
                 extra={"event": "fixloop_token_rotated"})
        return True

    def secrets(self) -> tuple[str, ...]:
        return tuple(self._old) + ((self._token,) if self._token else ())


def token_source(config: FixloopConfig, read: Callable[[FixloopConfig], str | None],
                 clock: Callable[[], float] = time.time) -> TokenSource:
    """The source ``config`` asks for: :class:`AppTokens` with ``github_app``, else
    :class:`FileToken`. Raises :class:`ConfigError` for an unusable key or token file."""
    if config.github_app is not None:
        return AppTokens(config.github_app, clock=clock)
    return FileToken(config, read)
