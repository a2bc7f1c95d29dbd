"""Names that say secret: what a variable's, key's, flag's or element's name says about its
value, and whether that value is redacted (one of the four kinds of rule of
:mod:`repeat_failure.rules.scrub_rules`; the assignment rules call :func:`name_kind` and
:func:`value_is_secret` on each name and value they match).

A name is secret when one of its parts (split at ``_ - .`` and camelCase) ends in token, secret,
password, passwd, passphrase, passcode, pwd, pass, apikey, credential(s), creds, auth or key(s)
and no part after it says the value is about the secret rather than the secret itself
(:data:`_META_AFTER`) nor the part before it that it names one (:data:`_META_BEFORE`). A name
holding a vendor's name (:data:`VENDORS`, :data:`VENDOR_PARTS`) counts too when its value is
token-shaped. A value that is a boolean, empty, a bare ``$VAR``, a variable's name, a command
substitution or a file's ``@PATH`` stays.

Also here, because every scrub module needs them: :data:`REDACTED`, the text every rule writes
in place of a secret, and the case fold (:func:`fold`, :data:`ODD`) that ``(?i)`` patterns and
their needles agree on. Pure functions of their arguments; :func:`name_kind` is cached.
"""

from __future__ import annotations

import functools
import re

REDACTED = "[REDACTED]"

# --- the case fold ------------------------------------------------------------------------------

#: The non-ASCII letters ``(?i)`` matches to ASCII ones (U+0130, U+0131, U+017F, U+212A): a
#: name spelled with them (``PAſſWORD``) is still a name.
ODD = "\u0130\u0131\u017f\u212a"
#: Characters ``(?i)`` lets match an ASCII letter although ``str.lower()`` does not turn them
#: into it (Python's ``re`` documentation: U+0130, U+0131, U+017F, U+212A).
_FOLD_MAP = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})

_NAME_FOLD_UPPER = str.maketrans({"\u0130": "I", "\u0131": "I", "\u017f": "S", "\u212a": "K"})


def fold(text: str) -> str:
    """The case fold a rule's case-insensitive needles are looked for in: ``text`` lowered,
    with the non-ASCII letters ``(?i)`` matches to an ASCII letter turned into that letter
    first."""
    return text.lower() if text.isascii() else text.translate(_FOLD_MAP).lower()


# --- names that say secret ---------------------------------------------------------------------

#: A name's parts: runs of capitals (``API`` in ``APIKey``), capitalised or lower words, digits.
_NAME_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
#: A part ending in one of these says secret (``PGPASSWORD``, ``SSHPASS``, ``ghtoken``).
_SECRET_ENDINGS = ("token", "secret", "secrets", "password", "passwords", "passwd", "passphrase",
                   "passcode", "pwd", "pass", "apikey", "credential", "credentials", "creds",
                   "auth", "key", "keys")
_SECRET_PARTS = frozenset({"pw", "cred"})
#: English words and names with such an ending that say nothing secret.
_NOT_SECRET_PARTS = frozenset({
    "bypass", "compass", "surpass", "trespass", "overpass", "underpass", "encompass", "monkey",
    "turkey", "hockey", "donkey", "jockey", "whiskey", "lackey", "hotkey", "hotkeys"})
#: A part after the secret word saying the value is about the secret, not the secret: a
#: lifetime, a length, a count, a mode or backend, a switch, an id or name, a place.
_META_AFTER = frozenset({
    "ttl", "expiry", "expires", "expire", "expiration", "lifetime", "timeout", "age", "duration",
    "seconds", "secs", "sec", "minutes", "mins", "hours", "days", "ms", "interval", "period",
    "window", "length", "len", "size", "count", "limit", "limits", "min", "max", "budget",
    "retries", "attempts", "threshold", "level", "strength", "complexity", "rounds",
    "iterations", "history", "backend", "backends", "provider", "store", "manager", "engine",
    "mode", "modes", "type", "types", "kind", "method", "methods", "algorithm", "algo", "alg",
    "format", "enabled", "disabled", "enable", "disable", "required", "require", "optional",
    "id", "ids", "name", "names", "file", "files", "path", "paths", "dir", "url", "uri", "urls",
    "endpoint", "host", "port", "header", "scope", "scopes", "version", "policy", "policies",
    "rules", "ref", "refs", "namespace", "arn", "region", "location", "field", "label",
    "selector", "annotation", "hint", "pattern", "regex", "rotation", "strategy", "schema",
    "prefix", "suffix", "env", "var", "vars", "keyring", "table", "bucket",
    "audience", "issuer", "usage", "help", "prompt", "check", "validation", "user", "users",
    "username", "admin", "email", "account", "helper", "helpers"})
#: The part just before the secret word saying the name refers to a secret (a Kubernetes
#: Secret's name; ``secretKeyRef.key``, the name of a key in a Secret) or switches one on or
#: off.
_META_BEFORE = frozenset({
    "existing", "use", "enable", "enabled", "disable", "disabled", "require", "required", "skip",
    "no", "allow", "rotate", "validate", "verify", "show", "generate", "mask", "hide", "redact",
    "has", "is", "max", "min", "num", "public", "pub", "sort", "partition", "primary", "foreign",
    "cache", "object", "routing", "shard", "range", "row", "idempotency", "dedup", "lookup",
    "index", "unique", "cluster", "clustering", "composite", "hash",
    "ref"})
#: A whole name that is no secret although a part ends like one: the shell's working
#: directory; a bare "key" (a map's key, an S3 object's, AWS's ``Key=name,Values=...``; a long
#: token-shaped value after it is still redacted by the IBM-style rule).
_NOT_SECRET_NAMES = frozenset({"pwd", "oldpwd", "key", "keys"})
#: Vendors whose tokens gitleaks recognises by the vendor's name next to them (its
#: semi-generic rules); looked for in the name with ``_ - .`` removed.
VENDORS = ("adafruit", "adobe", "airtable", "algolia", "alibaba", "asana", "atlassian",
            "confluence", "beamer", "bitbucket", "bittrex", "meraki", "cloudflare", "codecov",
            "cohere", "coinbase", "confluent", "contentful", "datadog", "discord", "droneci",
            "dropbox", "facebook", "fastly", "finicity", "finnhub", "flickr", "freshbooks",
            "gitter", "gocardless", "heroku", "hubspot", "intercom", "jfrog", "artifactory",
            "bintray", "kraken", "kucoin", "launchdarkly", "linkedin", "looker", "mailchimp",
            "mailgun", "mapbox", "mattermost", "messagebird", "netlify", "newrelic", "nytimes",
            "privateai", "rapidapi", "sendbird", "sentry", "squarespace", "sumologic",
            "telegram", "travis", "twitch", "twitter", "typeform", "yandex", "zendesk",
            "contribsys", "sourcegraph")
#: Vendor names too short or too common to look for inside a word: a whole part only.
VENDOR_PARTS = frozenset({"jira", "etsy", "okta", "plaid", "sumo", "snyk", "sonar", "xray",
                           "linear", "lob"})
#: What a vendor-named setting that is no token ends in.
_VENDOR_META = (_META_AFTER - {"id", "ids"}) | {"release", "environment", "site", "org", "organization", "project",
                              "app", "team", "user", "username", "email", "channel", "workspace",
                              "domain", "zone", "cluster", "tier", "plan", "sdk", "service",
                              "tag", "image", "repo", "branch", "sha", "commit", "build", "job"}
_TOKEN_VALUE = re.compile(r"[A-Za-z0-9_=+/.~%:|-]{12,}")
_REFERENCE = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?")
#: An environment variable's name given as the value (Claude Code's stream-json
#: ``"apiKeySource":"ANTHROPIC_API_KEY"``, ``--token-env GITHUB_TOKEN``): two or more
#: ``_``-joined words of capitals (two or more in the first), digits only at a word's end
#: (``V2``); it names a secret, never holds one (a token's random characters do not fall into
#: that shape).
_VARIABLE_NAME = re.compile(r"[A-Z]{2,}[0-9]*(?:_[A-Z]+[0-9]*)+")
#: ``@PATH``: the value is read from a file (Vault's ``key=@file``, HTTPie's ``field=@file``,
#: curl's ``-d @file``); a path with a ``/`` or a file extension.
_AT_FILE = re.compile(r"@[A-Za-z0-9_.~/-]*(?:/[A-Za-z0-9_.-]+|\.[A-Za-z0-9]{1,5})")
#: A command substitution ``$(cmd ...)``: the shell computes the value (``export
#: GITHUB_TOKEN=$(gh auth token)``), so the text holds none; the command's own text is scrubbed
#: like any other. Not one that prints a literal (``$(echo VALUE)``), nor the backquoted form:
#: a backquoted value is a Go or JavaScript raw string as often (``xToken := `VALUE` ``). One
#: whose closing parenthesis a cut text's last word took (``$(gh auth [REDACTED]``) is one too,
#: so scrub stays idempotent on cut texts.
_SUBSTITUTION = re.compile(r"\$\((?!\s*(?:echo|printf)\b)[^()`]*(?:\)|(?<=\[REDACTED\]))")
#: Values that are no secret whatever the name: switches, nothing, or a variable's name.
_PLAIN_VALUES = frozenset({"true", "false", "yes", "no", "on", "off", "none", "null", "nil",
                           "enabled", "disabled", "0", "1", "", "''", '""', "``"})

NOT_SECRET, SECRET, VENDOR = 0, 1, 2


def _secret_part(part: str) -> bool:
    return part in _SECRET_PARTS or (part.endswith(_SECRET_ENDINGS)
                                     and part not in _NOT_SECRET_PARTS)


@functools.lru_cache(maxsize=4096)
def name_kind(name: str) -> int:
    """What ``name`` (a variable, key, flag or element name) says about its value:
    :data:`SECRET` (it says secret: module docstring), :data:`VENDOR` (it names a vendor of
    :data:`VENDORS`: secret when the value is token-shaped) or :data:`NOT_SECRET`."""
    if not name.isascii():  # the letters (?i) matches to s, i, k, in the name's own case
        letters = [c for c in name if c.isascii() and c.isalpha()]
        name = name.translate(_NAME_FOLD_UPPER if letters and all(c.isupper() for c in letters)
                              else _FOLD_MAP)
    parts = [p.lower() for p in _NAME_PART.findall(name)]
    if not parts or "".join(parts) in _NOT_SECRET_NAMES:
        return NOT_SECRET
    last = None
    for i, part in enumerate(parts):
        if _secret_part(part):
            last = i
    if last is not None and not any(p in _META_AFTER for p in parts[last + 1:]):
        first = last
        while first > 0 and _secret_part(parts[first - 1]):
            first -= 1
        if first == 0 or parts[first - 1] not in _META_BEFORE:
            return SECRET
    if parts[-1] in _VENDOR_META:
        return NOT_SECRET
    compact = "".join(parts)
    if any(v in compact for v in VENDORS) or not VENDOR_PARTS.isdisjoint(parts):
        return VENDOR
    return NOT_SECRET


def _unquoted(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'`":
        return value[1:-1]
    return value


def value_is_secret(kind: int, value: str) -> bool:
    """Whether ``value`` (quoted or not) of a name of ``kind`` (:func:`name_kind`) is redacted:
    any value of a :data:`SECRET` name but a switch, an empty one, ``[REDACTED]``, a bare
    ``$VAR``, a variable's name (``ANTHROPIC_API_KEY``), a command substitution
    (:data:`_SUBSTITUTION`) or a file's ``@PATH`` (:data:`_AT_FILE`); a token-shaped value
    (twelve or more token characters, a digit among them) of a :data:`VENDOR` name."""
    if kind == NOT_SECRET or value.startswith(REDACTED):
        return False
    inner = _unquoted(value)
    if inner.lower() in _PLAIN_VALUES or inner.startswith(REDACTED) or _REFERENCE.fullmatch(inner) \
            or _AT_FILE.fullmatch(inner) \
            or _VARIABLE_NAME.fullmatch(inner) or _SUBSTITUTION.fullmatch(inner):
        return False
    if kind == VENDOR:
        return bool(_TOKEN_VALUE.fullmatch(inner)) and any(c.isdigit() for c in inner)
    return True


def is_reference(value: str) -> bool:
    """Whether ``value`` (quoted or not) is a bare ``$VAR``/``${VAR}``: the shell puts the
    secret in when it runs the command, the text holds only the variable's name (two commands
    differing in it stay two)."""
    return bool(_REFERENCE.fullmatch(_unquoted(value)))
