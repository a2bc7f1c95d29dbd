"""The ``fixloop:`` configuration: one YAML file (a ConfigMap), validated against a JSON Schema.

Same conventions as the sidecar's ``repeat_failure:`` section (:mod:`repeat_failure.config`): unknown
keys, wrong types and out-of-range values are refused with one message naming the key. Durations
are seconds. Defaults are design adr-0010's: three distinct red head trees escalate, six
re-engagements per head SHA, a check red on three other open PRs is shared breakage, entries are
pruned 24 h after their PR stops being listed, dependency bots are never fix loops. Draft PRs
are skipped unless ``include_drafts`` (issue 20), and a head inconclusive for
``inconclusive_after_s`` (6 h) is reported.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repeat_failure.config import ConfigError, _key_path, read_yaml

#: ``owner/name`` as GitHub allows them.
REPOSITORY_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")
DEFAULT_BOTS = ("renovate[bot]", "dependabot[bot]", "mergeraptor[bot]")
DEFAULT_TOKEN_FILE = "/var/run/secrets/repeat-failure-fixloop/token"
DEFAULT_LEDGER = "/data/fixloop.sqlite"
DEFAULT_PRIVATE_KEY_FILE = "/var/run/secrets/repeat-failure-fixloop/private-key.pem"
#: Six hours: well past any CI run, short of a working day for a job waiting on approval.
DEFAULT_INCONCLUSIVE_AFTER_S = 21600.0
#: Heading of the escalation comment (design adr-0010, word for word).
ESCALATION_HEADING = "Fix loop escalated — human attention needed"

_URL = {"type": "string", "pattern": r"^https?://[^\s/?#@]+(/[^\s#]*)?$"}
_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["fixloop"],
    "properties": {
        "fixloop": {
            "type": "object",
            "additionalProperties": False,
            "required": ["repositories"],
            "properties": {
                "repositories": {"type": "array", "minItems": 1, "uniqueItems": True,
                                 "items": {"type": "string", "pattern": REPOSITORY_RE.pattern}},
                "api_url": _URL,
                "token_file": {"type": "string", "minLength": 1},
                "interval_s": {"type": "number", "minimum": 10, "maximum": 86400},
                "threshold": {"type": "integer", "minimum": 1, "maximum": 100},
                "stale_after_s": {"type": "number", "minimum": 60, "maximum": 30 * 86400},
                "max_reengagements": {"type": "integer", "minimum": 0, "maximum": 100},
                "shared_breakage_prs": {"type": "integer", "minimum": 1, "maximum": 1000},
                "label": {"type": "string", "minLength": 1, "maxLength": 50},
                "bots": {"type": "array", "items": {"type": "string", "minLength": 1}},
                # Only these PR authors' red PRs are fix loops (empty: every author but bots).
                "authors": {"type": "array", "items": {"type": "string", "minLength": 1}},
                "prune_after_s": {"type": "number", "minimum": 0, "maximum": 365 * 86400},
                "ledger": {"type": "string", "minLength": 1},
                "request_timeout_s": {"type": "number", "minimum": 1, "maximum": 300},
                # Draft PRs are skipped (no attempt, kick, escalation) unless this is true.
                "include_drafts": {"type": "boolean"},
                # A head whose CI stays inconclusive this long is reported (log, gauge).
                "inconclusive_after_s": {"type": "number", "minimum": 60,
                                         "maximum": 30 * 86400},
                # GitHub App authentication instead of a token (repeat_failure.fixloop.auth).
                "github_app": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["app_id", "private_key_file"],
                    "properties": {
                        # The numeric App ID or the App's client ID (Iv1..., Iv23...).
                        "app_id": {"type": ["integer", "string"], "minLength": 1,
                                   "pattern": r"^[A-Za-z0-9._-]+$", "minimum": 1},
                        "private_key_file": {"type": "string", "minLength": 1},
                        # Without it: discovered per repository.
                        "installation_id": {"type": "integer", "minimum": 1},
                    },
                },
                # One Kubernetes Event per escalation on the fixloop's own pod (repeat_failure.events).
                "events": {"type": "boolean"},
                "notifier": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "timeout_s": {"type": "number", "minimum": 0.5, "maximum": 120},
                        "fixer_url": _URL,
                        # The third kick tier (design adr-0010: owner, review.fixer_agent,
                        # then scanner).
                        "scanner_url": _URL,
                        "agents": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "additionalProperties": False,
                                "required": ["login", "url"],
                                "properties": {
                                    "login": {"type": "string", "minLength": 1},
                                    "url": _URL,
                                    "cadence_s": {"type": "number", "minimum": 0,
                                                  "maximum": 7 * 86400},
                                    # A paused agent gets no kick: the fallbacks do.
                                    "paused": {"type": "boolean"},
                                },
                            },
                        },
                    },
                },
            },
        }
    },
}


@dataclass(frozen=True)
class AgentEndpoint:
    """Where the agent that authors PRs as ``login`` takes a re-engagement kick (``url``, an
    HTTP POST), and its slowest cadence in seconds (re-engagements are spaced at least this
    far apart, and at least ``stale_after_s``). ``paused``: the agent is paused (design
    adr-0010: "when the owner is paused or unreachable"), so its kicks go straight to the
    fallbacks, ``fixer_url`` then ``scanner_url``, without a request to it."""

    login: str
    url: str
    cadence_s: float = 0.0
    paused: bool = False


@dataclass(frozen=True)
class GitHubApp:
    """The fixloop authenticating as a GitHub App (docs/fixloop.md "Authentication"):
    ``app_id`` (the JWT's ``iss``: the numeric App ID or the client ID, as a string),
    ``private_key_file`` (the App's PEM private key, a mounted Secret) and
    ``installation_id`` (``None``: found per repository, ``GET /repos/{owner}/{repo}/
    installation``)."""

    app_id: str
    private_key_file: str
    installation_id: int | None = None


@dataclass(frozen=True)
class FixloopConfig:
    """The validated ``fixloop:`` section (see the module docstring and docs/fixloop.md)."""

    repositories: tuple[str, ...]
    api_url: str = "https://api.github.com"
    token_file: str = DEFAULT_TOKEN_FILE
    interval_s: float = 300.0
    threshold: int = 3
    stale_after_s: float = 3600.0
    max_reengagements: int = 6
    shared_breakage_prs: int = 3
    label: str = "needs-human"
    bots: tuple[str, ...] = DEFAULT_BOTS
    #: Only these GitHub logins' PRs are fix loops (the agents'); empty: every author but bots.
    authors: tuple[str, ...] = ()
    prune_after_s: float = 86400.0
    ledger: str = DEFAULT_LEDGER
    request_timeout_s: float = 30.0
    #: Draft PRs are fix loops too when true; by default they are skipped (an agent's draft
    #: is work in progress: no attempt counted, no kick, no escalation).
    include_drafts: bool = False
    #: Seconds a PR head's CI may stay inconclusive (pending, stale, unreadable) before it is
    #: reported (``fixloop_inconclusive`` log line; the gauges count it from the first pass).
    inconclusive_after_s: float = DEFAULT_INCONCLUSIVE_AFTER_S
    #: GitHub App authentication (``None``: the token from ``token_file``/``GITHUB_TOKEN``).
    github_app: GitHubApp | None = None
    events: bool = False
    notifier_timeout_s: float = 10.0
    fixer_url: str | None = None
    #: The last fallback for a kick, after the owner and ``fixer_url`` (the ADR's ``scanner``).
    scanner_url: str | None = None
    agents: tuple[AgentEndpoint, ...] = field(default_factory=tuple)

    def endpoint(self, login: str) -> AgentEndpoint | None:
        """The agent endpoint configured for PR author ``login`` (case-insensitive, as GitHub
        logins are), or ``None``."""
        for agent in self.agents:
            if agent.login.lower() == login.lower():
                return agent
        return None


def _describe(error: Any) -> str:
    """One line naming the key of a jsonschema error (the key path as the sidecar's config
    names it, :func:`repeat_failure.config._key_path`)."""
    path = _key_path(error)
    if error.validator == "required":
        missing = next((k for k in error.validator_value if k not in error.instance), "?")
        where = f"{path}.{missing}" if path != "(top level)" else missing
        return f"{where}: required key missing"
    if error.validator == "additionalProperties":
        return f"{path}: unknown key"
    if error.validator == "pattern" and path.startswith("fixloop.repositories["):
        return f"{path}: {error.instance!r} is not a repository name (owner/name)"
    return f"{path}: {error.message}"


def parse_fixloop_config(data: Any, source: str = "<config>") -> FixloopConfig:
    """Validate a parsed YAML document; raises :class:`repeat_failure.config.ConfigError` naming
    ``source`` and the first bad key (``"fixloop.yaml: fixloop.threshold: 0 is less than the
    minimum of 1"``)."""
    import jsonschema

    errors = sorted(jsonschema.Draft202012Validator(_SCHEMA).iter_errors(data),
                    key=lambda e: list(e.absolute_path))
    if errors:
        raise ConfigError(f"{source}: {_describe(errors[0])}")
    section = data["fixloop"]
    for key in ("threshold", "max_reengagements", "shared_breakage_prs"):
        if isinstance(section.get(key), float):
            raise ConfigError(f"{source}: fixloop.{key}: must be a whole number")
    lowered = [r.lower() for r in section["repositories"]]
    if len(set(lowered)) != len(lowered):
        raise ConfigError(f"{source}: fixloop.repositories: each repository once (GitHub "
                          "names are case-insensitive)")
    notifier = section.get("notifier") or {}
    agents = tuple(AgentEndpoint(a["login"], a["url"], float(a.get("cadence_s", 0)),
                                 a.get("paused", False))
                   for a in notifier.get("agents", ()))
    logins = [a.login.lower() for a in agents]
    if len(set(logins)) != len(logins):
        raise ConfigError(f"{source}: fixloop.notifier.agents: each login once")
    for key in ("token_file", "ledger"):
        if key in section and not os.path.isabs(section[key]):
            raise ConfigError(f"{source}: fixloop.{key}: {section[key]!r} must be an absolute path")
    app = section.get("github_app")
    github_app = None
    if app is not None:
        if "token_file" in section:
            raise ConfigError(f"{source}: fixloop.github_app: give either github_app or "
                              "token_file, not both")
        if isinstance(app["app_id"], str) and app["app_id"].isdigit() \
                and int(app["app_id"]) < 1:
            raise ConfigError(f"{source}: fixloop.github_app.app_id: must be positive")
        if not os.path.isabs(app["private_key_file"]):
            raise ConfigError(f"{source}: fixloop.github_app.private_key_file: "
                              f"{app['private_key_file']!r} must be an absolute path")
        github_app = GitHubApp(str(app["app_id"]), app["private_key_file"],
                               app.get("installation_id"))
    return FixloopConfig(
        repositories=tuple(section["repositories"]),
        api_url=section.get("api_url", "https://api.github.com").rstrip("/"),
        token_file=section.get("token_file", DEFAULT_TOKEN_FILE),
        interval_s=float(section.get("interval_s", 300)),
        threshold=section.get("threshold", 3),
        stale_after_s=float(section.get("stale_after_s", 3600)),
        max_reengagements=section.get("max_reengagements", 6),
        shared_breakage_prs=section.get("shared_breakage_prs", 3),
        label=section.get("label", "needs-human"),
        bots=tuple(section.get("bots", DEFAULT_BOTS)),
        authors=tuple(section.get("authors", ())),
        prune_after_s=float(section.get("prune_after_s", 86400)),
        ledger=section.get("ledger", DEFAULT_LEDGER),
        request_timeout_s=float(section.get("request_timeout_s", 30)),
        include_drafts=section.get("include_drafts", False),
        inconclusive_after_s=float(section.get("inconclusive_after_s",
                                               DEFAULT_INCONCLUSIVE_AFTER_S)),
        github_app=github_app,
        events=section.get("events", False),
        notifier_timeout_s=float(notifier.get("timeout_s", 10)),
        fixer_url=notifier.get("fixer_url"),
        scanner_url=notifier.get("scanner_url"),
        agents=agents,
    )


def load_fixloop_config(path: str | os.PathLike[str]) -> FixloopConfig:
    """Read and validate the YAML file at ``path``; raises :class:`ConfigError` when it is
    missing, unreadable, not YAML or invalid."""
    return parse_fixloop_config(read_yaml(Path(path), "fixloop config file"), str(path))


def describe_fixloop_config(config: FixloopConfig, source: str) -> str:
    """The one line ``repeat-failure check-config`` prints for a valid fixloop config."""
    return (f"{source}: valid fixloop config ({len(config.repositories)} "
            f"{'repository' if len(config.repositories) == 1 else 'repositories'}, "
            f"threshold {config.threshold}, stale after {config.stale_after_s:g} s, at most "
            f"{config.max_reengagements} re-engagements per head, sweep every "
            f"{config.interval_s:g} s)")


def check_fixloop_config(data: Any, source: str) -> str | None:
    """``repeat-failure check-config`` on a parsed YAML document: None when it has no top-level
    ``fixloop`` key (not the fix loop's), else the line printed for a valid one
    (:func:`describe_fixloop_config`). Raises :class:`ConfigError` naming ``source`` and the
    first bad key, or when the document also holds ``repeat_failure`` (the sidecar's): no
    program reads such a file, so it is refused as ambiguous."""
    keys = set(data) if isinstance(data, dict) else set()
    if "fixloop" not in keys:
        return None
    if "repeat_failure" in keys:
        raise ConfigError(f"{source}: both `repeat_failure:` (the sidecar's config) and "
                          "`fixloop:` (the fix loop's) at the top level; each program reads "
                          "its own file, so split it in two")
    return describe_fixloop_config(parse_fixloop_config(data, source), source)
