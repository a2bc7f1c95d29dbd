"""Scrub: replace token-shaped strings in command text with ``[REDACTED]``.

Raw records may hold secrets (spec Constraints, C-AC13). Every command passes through
:func:`scrub` right after parsing; only its output is normalized, counted, stored in the state
file, logged or exported.

Four kinds of rule, applied in order:

* private key blocks (PEM, OpenSSH, PGP; a block cut short, a bare ``BEGIN ... PRIVATE KEY``
  header and PuTTY key files are redacted to the end of the text);
* token formats their issuers publish (:data:`_FORMATS`, one entry per format, each naming its
  issuer): a vendor prefix (``ghp_``, ``glpat-``, ``shpat_``, ``dop_v1_``, ``HRKU-``, ``xoxe-``,
  ``glsa_``, ``sntryu_``, ``ntn_``, ``api_org_``, ``dapi``, ``sha256~`` ...), a fixed structure
  (AWS key IDs, JWTs and base64-encoded JWTs, Azure AD ``…Q~…`` client secrets, Harness
  ``pat.….….…``, Facebook ``<app id>|<secret>`` ...), or a URL form (Slack ``/services/``,
  ``/workflows/`` and ``/triggers/`` webhooks, Discord and Teams webhooks). Each is found
  wherever it stands: as an argument, piped in, quoted, after ``=``, in a heredoc, JSON, YAML or
  a URL. ``tests/test_scrub_gitleaks.py`` checks them against gitleaks' default rules (the
  pinned release's own true-positive examples, in 14 command shapes) and
  ``tests/test_scrub.py`` against detect-secrets' shape-based plugins: whatever either flags
  in a command is gone after :func:`scrub`;
* credentials by position: ``Authorization:``-style headers (RFC 6750 Bearer, RFC 7617 Basic,
  any scheme) and any header named ``*-Token``/``-Key``/``-Secret``/``-Auth``/``-Password``,
  ``user:password@`` in URLs (RFC 3986 userinfo), ``curl -u user:pass`` (also ``-su``,
  ``-sSfu``, ``-U``/``--proxy-user``), HTTPie ``http -a user:pass``, ``lftp -u user,pass``,
  ``sqlcmd -P``, ``mysql -pPASS``, ``sshpass -p``, ``redis-cli -a``, ``docker``/``podman``/
  ``az``/``oc``/``cf``/``helm registry`` ``login -p``, ``npm config set ...:_authToken VALUE``,
  ``openssl ... pass:PASS`` and ``-k``, ``keytool -storepass``, ``zip -P``, ``ldapsearch -w``,
  ``htpasswd -b``, ``smbclient -U user%PASS``, ``ssh-keygen -N`` (not an empty ``''``),
  ``aws configure set <secret-ish key> VALUE``, ``gh secret set ... --body VALUE``, Bundler's
  ``BUNDLE_<HOST>=user:password`` and NuGet's ``<add key="...Password" value="...">``;
* names that say secret, in every assignment form gitleaks knows (``NAME=value``,
  ``name = "value"``, ``name: value``, ``name := value``, ``::=``, ``?=``, ``.=``, ``=>``,
  ``"name", "value"``, ``<name>value</name>``, ``--name value``, JSON ``"name": "value"``): a
  name is secret when one of its parts (split at ``_ - .`` and camelCase) ends in token, secret,
  password, passwd, passphrase, passcode, pwd, pass, apikey, credential(s), creds, auth or
  key(s) and no part after it says the value is about the secret rather than the secret itself
  (:data:`_META_AFTER`: ``TOKEN_TTL``, ``PASSWORD_MIN_LENGTH``, ``SECRET_BACKEND``,
  ``AUTH_MODE``, ``BASIC_AUTH_ENABLED``, ``KEY_ID``, ``*_FILE`` ...) nor the part before it
  that it names one (:data:`_META_BEFORE`: ``existingSecret``, ``ENABLE_AUTH`` ...). A value
  that is a boolean, empty, or a bare ``$VAR`` stays. A name holding a vendor's name
  (:data:`_VENDORS`: ``TWITTER_…``, ``ADOBE_CLIENT_ID`` ...) counts too when its value is
  token-shaped (twelve or more token characters with a digit).

A text the route cut short (``cut=True``) also loses its last word, and a quoted value of a
secret-named key whose closing quote the cut took runs to the end of the text (:data:`_CUT_RULES`).

A rule errs towards redacting: a harmless string turned into ``[REDACTED]`` costs less than one
leaked token; but an ordinary command must stay as typed, or two commands merge into one
(``tests/test_scrub_false_positives.py`` holds a corpus of 500+ ordinary agent commands: at
most 1 % may change). Every pattern is anchored on a literal or a boundary so its cost stays
linear in the command's length (no catastrophic backtracking on long runs of ``-`` or ``.``).

Speed: every rule carries *needs groups*, substrings taken from the literal text its pattern must
match; the pattern runs only when each group has one of its substrings in the command. One
Aho-Corasick pass (pyahocorasick, a C extension) over the command's case fold finds every
needle present at once, so the cost of the gate does not grow with the number of rules: 1.3 µs
per command of the false-positive corpus, where testing the 150 rules' first groups (420
needles) with ``in`` costs 37 µs (issue 16's measure, same run; ahocorasick-rs took 0.9 µs but
returns indexes to look up again, and building it from source needs a Rust toolchain;
the 0.4 µs is 3 % of a record's pipeline cost). ``tests/test_scrub_gating.py`` checks that the
groups never skip a rule that would redact; ``python -m benchmarks`` measures the pipeline.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import functools
import re
import string
from collections.abc import Callable

import ahocorasick

REDACTED = "[REDACTED]"

# One shell word: quoted parts, $'...' parts, backslash escapes and plain characters.
_WORD = (r"""(?:\$?'[^']*(?:'|\Z)|"(?:\\.|[^"\\])*(?:"|\Z)|\$\([^)]*\)?|`[^`]*`?|\\.|"""
         r"""[^\s'"\\;&|<>()`])+""")
_FLAG_NAME = (r"(?:password|passwd|passphrase|pass|token|secret|api-key|apikey|access-key"
              r"|secret-key|private-key|auth-token|client-secret|credentials?)")
_NOT_WORD_BEFORE = r"(?<![A-Za-z0-9_])"
_NOT_WORD_AFTER = r"(?![A-Za-z0-9])"
#: The non-ASCII letters ``(?i)`` matches to ASCII ones (U+0130, U+0131, U+017F, U+212A): a
#: name spelled with them (``PAſſWORD``) is still a name.
_ODD = "\u0130\u0131\u017f\u212a"
#: Where a token starts: no letter or digit right before it.
_B = r"(?<![A-Za-z0-9])"

Replacement = str | Callable[[re.Match[str]], str]


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
_VENDORS = ("adafruit", "adobe", "airtable", "algolia", "alibaba", "asana", "atlassian",
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
_VENDOR_PARTS = frozenset({"jira", "etsy", "okta", "plaid", "sumo", "snyk", "sonar", "xray",
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
    :data:`_VENDORS`: secret when the value is token-shaped) or :data:`NOT_SECRET`."""
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
    if any(v in compact for v in _VENDORS) or not _VENDOR_PARTS.isdisjoint(parts):
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
    (:data:`_SUBSTITUTION`) or a file's ``@PATH`` (:data:`_AT_FILE`); a token-shaped value (twelve or more token characters, a digit among them) of a
    :data:`VENDOR` name."""
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


def _secret_assignment(name_group: int, value_group: int) -> Callable[[re.Match[str]], str]:
    """A replacement redacting group ``value_group`` when group ``name_group`` says secret
    (:func:`name_kind`, :func:`value_is_secret`); the match is kept as it is otherwise."""
    def replace(m: re.Match[str]) -> str:
        value = m[value_group]
        if not value_is_secret(name_kind(m[name_group]), value):
            return m[0]
        start, end = m.start(value_group) - m.start(), m.end(value_group) - m.start()
        return m[0][:start] + REDACTED + m[0][end:]
    return replace


def _assignment(m: re.Match[str]) -> str:
    """The replacement of :data:`_ASSIGNMENT`: the value goes when the name says secret. A
    ``,`` separates a name and a value only when both are quoted and they open a call's
    arguments (``setProperty("X_TOKEN", "v")``) or the value is token-shaped (in a list,
    ``["auth","batch"]`` is two words); after a bare ``name:`` an unquoted value must end the line or the quoted text (a
    YAML line; ``auth: fix token refresh`` is prose). A word between the name and the operator
    is a type (``var xToken string = v``) or, after a keyword, the name (``const xToken = v``):
    either may say secret. An unquoted value that is called (``token = get_token()``) or an
    attribute path (:data:`_ATTRIBUTE_PATH`) is code, no literal, and stays; so does
    kubectl's ``--from-file=KEY=PATH`` (:func:`_names_a_file`)."""
    value, op = m["value"], m["op"].strip()
    quoted = value[0] in "\"'`"
    if op == "," and not (m["q"] and quoted and (
            m.string[:m.start()].rstrip().endswith("(") or value_is_secret(VENDOR, value))):
        return m[0]  # in a list, "name", "value" needs a token-shaped value
    if op == ":" and not quoted and not m["q"] and not _LINE_END.match(m.string, m.end()):
        return m[0]
    if _names_a_file(m.string, m.start()):
        return m[0]
    kind = name_kind(m["name"])
    if kind != SECRET and m["word"]:  # "const NAME = v": the name is the second word
        kind = max(kind, name_kind(m["word"]))
    if not value_is_secret(kind, value):
        return m[0]
    if not quoted and (m.string.startswith("(", m.end()) or _ATTRIBUTE_PATH.fullmatch(value)):
        return m[0]  # code: a call (token = get_token()) or an attribute (process.env.TOKEN)
    return m[0][: m.start("value") - m.start()] + REDACTED


#: An attribute path in code (``process.env.NPM_TOKEN``, ``settings.SECRET_KEY``): a lower-case
#: object's name and one or more attributes; a value, not a literal secret.
_ATTRIBUTE_PATH = re.compile(r"[a-z_$][a-z0-9_$]*(?:\.[A-Za-z_$][A-Za-z0-9_$]*)+")


#: A text's quoted parts (``'...'``; ``"..."`` with its backslash escapes; group 1 or 2 is the
#: closing quote when there is one) and, outside quotes, backslash escapes and other runs.
_QUOTED_PART = re.compile(r"""'[^']*(')?|"(?:\\.|[^"\\])*(")?|\\.|[^'"\\]+""", re.S)


@functools.lru_cache(maxsize=8)
def _closed_quotes(text: str) -> tuple[list[int], list[int]]:
    """The opening quotes' positions in ``text`` (ascending) and, for each, its closing quote's
    position, or -1 when the text ends inside the quoted part (shell quoting, POSIX 2.2)."""
    starts: list[int] = []
    closes: list[int] = []
    for q in _QUOTED_PART.finditer(text):
        if q[0][0] in "'\"":
            starts.append(q.start())
            closes.append(q.end() - 1 if q.lastindex else -1)
    return starts, closes


#: The ``NAME=`` of a shell assignment (group 1 the name); its rule's pattern adds the word.
_SHELL_NAME = (r"(?<![A-Za-z0-9_])(?<!--)([A-Za-z_" + _ODD + r"][A-Za-z0-9_" + _ODD + r"]{0,127})="
               r"(?!\[REDACTED\])")
_SHELL_NAME_RE = re.compile(_SHELL_NAME)


def _names_a_file(text: str, start: int) -> bool:
    """Whether the ``KEY=PATH`` at ``start`` of ``text`` is kubectl's ``--from-file`` (or
    ``--from-env-file``) value: ``KEY`` names the Secret's key, ``PATH`` a file (kubectl create
    secret generic's documented form)."""
    return text.endswith(("--from-file=", "--from-file ", "--from-env-file="), 0, start)


def _shell_assignments(pattern: re.Pattern[str], text: str) -> str:
    """``text`` with the value of each ``NAME=value`` of ``pattern`` (group 1 the name, 2 the
    shell word after ``=``) redacted when the name says secret (:func:`value_is_secret`).

    An assignment inside a quoted word (``curl -d 'password=v' URL``, ``sh -c "TOKEN=v"``)
    ends at that word's closing quote: the quote closes, it opens nothing, so what follows it
    (the URL) stays and is searched again. ``pattern`` must begin with :data:`_SHELL_NAME`.
    A ``KEY=PATH`` of kubectl's ``--from-file`` (and
    ``--from-env-file``) names a file, no secret. Linear in the text's length (one search from
    where the last value ended, one bisection into the quoted parts per assignment; 4 KB of
    ``'TOKEN=x' `` pairs take 3 ms)."""
    starts, closes = _closed_quotes(text)
    out: list[str] = []
    pos = 0
    while (name := _SHELL_NAME_RE.search(text, pos)) is not None:
        start = name.start()
        i = bisect.bisect_left(starts, start) - 1
        # Inside a quoted word the value may not pass its closing quote (the search stops
        # there, so a text of many quoted assignments stays linear).
        inside = i >= 0 and start < closes[i]
        m = pattern.match(text, start, closes[i] if inside else len(text))
        if m is None:  # no word after "=" (or the closing quote right after it)
            pos = name.end()
            continue
        vstart, vend = m.span(2)
        value = text[vstart:vend]
        kind = NOT_SECRET if _names_a_file(text, start) else name_kind(m[1])
        out.append(text[pos:vstart])
        out.append(REDACTED if value and value_is_secret(kind, value) else value)
        pos = max(vend, m.end(1) + 1)
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)


_shell_assignments.whole_text = True  # type: ignore[attr-defined]


def apply_rule(pattern: re.Pattern[str], replacement: Replacement, text: str) -> str:
    """One rule of :data:`_RULES` applied to ``text``: ``pattern.sub(replacement, text)``, or
    ``replacement(pattern, text)`` for a replacement that reads the whole text
    (:func:`_shell_assignments`)."""
    if getattr(replacement, "whole_text", False):
        return replacement(pattern, text)  # type: ignore[call-arg,arg-type]
    return pattern.sub(replacement, text)


#: What may follow the value of a bare ``name: value``: the end of the line or of the text, a
#: closing quote, an escaped newline (not ``,`` or ``}``: ``jq '{key: .name}'`` is no secret).
_LINE_END = re.compile(r"[ \t]*(?:$|[\n\r'\"`]|\\[nr])", re.M)


#: Commands whose bare ``--secret`` names a secret rather than giving one (``gcloud secrets
#: ... --secret=NAME``, BuildKit's ``docker build --secret id=NAME,src=FILE``).
_SECRET_BY_NAME = re.compile(r"\s*(?:gcloud|docker|podman|buildah|nerdctl|buildctl)\b")


def _flag_value(m: re.Match[str]) -> str:
    """The replacement of the ``--flag value`` rule: the value goes when the flag's name says
    secret (:func:`name_kind`), but not a bare ``--secret`` of :data:`_SECRET_BY_NAME`."""
    if m[1].lower() == "--secret" and _SECRET_BY_NAME.match(m.string):
        return m[0]
    return _secret_assignment(1, 3)(m)


#: RFC 7617's Basic credential, user-id ":" password (a URL's "scheme://..." is none).
_BASIC_CREDENTIAL = re.compile(r"[\x21-\x39\x3b-\x7e]{1,64}:(?!//)[\x21-\x7e]{6,}")


def _encoded_secret(m: re.Match[str]) -> str:
    """The replacement of the base64 rule: a word that decodes (standard or URL-safe
    alphabet) to printable ASCII holding a secret (what :func:`scrub` redacts, or a Basic
    ``user:password``) goes whole; any other word stays. gitleaks decodes base64 before it
    looks (``--max-decode-depth``, 5 by default), so a token base64-encoded is still a leak."""
    word = m[0]
    padded = word.rstrip("=") + "=" * (-len(word.rstrip("=")) % 4)
    try:
        decoded = base64.b64decode(padded, altchars=b"-_" if ("-" in word or "_" in word)
                                   else None, validate=True)
    except (binascii.Error, ValueError):
        return word
    if not decoded.isascii():
        return word
    text = decoded.decode("ascii")
    if not text.strip() or not text.replace("\n", "").replace("\t", "").isprintable():
        return word
    if _BASIC_CREDENTIAL.fullmatch(text.strip()) or scrub(text) != text:
        return REDACTED
    return word


_K8S_SECRET_KIND = re.compile(r"(?i)\bkind:[ \t]*[\"']?secret\b")
_DATA_ENTRY = re.compile(r"([ \t]*[\"']?[\w.-]+[\"']?:)([ \t]*)(.*)")
_BLOCK_INDICATORS = frozenset({"", "|", ">", "|-", ">-", "|+", ">+"})


def _secret_data(m: re.Match[str]) -> str:
    """The replacement of the Kubernetes Secret rule: in a text that declares ``kind: Secret``,
    every value under ``data:``/``stringData:`` goes (base64 or not, block scalars line by
    line); the keys and comments stay. Any other ``data:`` block stays."""
    if not _K8S_SECRET_KIND.search(m.string):
        return m[0]
    out = []
    for line in m[3].split("\n"):
        stripped = line.strip()
        entry = _DATA_ENTRY.fullmatch(line)
        if not stripped or stripped.startswith("#") or stripped.startswith(REDACTED):
            out.append(line)
        elif entry is None:  # a line of a block scalar
            out.append(line[: len(line) - len(line.lstrip())] + REDACTED)
        elif entry[3].strip() in _BLOCK_INDICATORS or entry[3].startswith(REDACTED):
            out.append(line)
        else:
            out.append(entry[1] + entry[2] + REDACTED)
    return m[1] + "\n".join(out)


def _user_password(command: str, flag: str, sep: str) -> re.Pattern[str]:
    """``command ... FLAG user<sep>password``: group 1 is the command up to the flag, group 2 an
    opening quote (if any), group 3 the user (kept). Quoted (``-u 'user:pw'``), the password
    runs to the closing quote, which stays (or to the end of a cut text); unquoted, it is one
    shell word."""
    return re.compile(r"(\b(?:" + command + r")\b[^|;&\n]{0,200}?\s(?:" + flag + r"))"
                      r"(['\"])?([^\s" + sep + r"'\"]*)" + sep
                      + r"(?(2)(?:\\.|(?!\2)[^\\])*|" + _WORD + ")")


def _header_value(m: re.Match[str]) -> str:
    """The replacement of the credential-header rule: the value goes (a scheme word before it
    stays), unless it is a bare ``$VAR`` (``Authorization: Bearer $TOKEN``)."""
    if _is_reference(m[0].split()[-1]):
        return m[0]
    return f"{m[1]}{m[2]}{m[3] + ' ' if m[3] else ''}{REDACTED}"


def _is_reference(value: str) -> bool:
    """Whether ``value`` (quoted or not) is a bare ``$VAR``/``${VAR}``: the shell puts the
    secret in when it runs the command, the text holds only the variable's name (two commands
    differing in it stay two)."""
    return bool(_REFERENCE.fullmatch(_unquoted(value)))


def _keep_user(sep: str) -> Callable[[re.Match[str]], str]:
    """The replacement of a :func:`_user_password` rule: the password goes, the user stays; a
    password given as a bare ``$VAR`` (:func:`_is_reference`) stays too."""
    def replace(m: re.Match[str]) -> str:
        if _is_reference(m[0][m.end(3) - m.start() + len(sep):]):
            return m[0]
        return f"{m[1]}{m[2] or ''}{m[3]}{sep}{REDACTED}"
    return replace


def _keep(*groups: int) -> Callable[[re.Match[str]], str]:
    """A replacement keeping the given groups (context) and redacting the rest of the match;
    when the groups are one prefix of the match and the rest is a bare ``$VAR``
    (:func:`_is_reference`: ``docker login -p $PW``, ``mysql -p$MYSQL_PW``), all stays."""
    def replace(m: re.Match[str]) -> str:
        if len(groups) == 1 and m.start(groups[0]) == m.start() \
                and _is_reference(m[0][m.end(groups[0]) - m.start():]):
            return m[0]
        return "".join(m[g] or "" for g in groups) + REDACTED
    return replace


#: Where a needle is looked for (see :func:`_cs`, :func:`_ci`).
_TEXT, _FOLD = 0, 1

#: A needs group: (needles, where they are looked for).
_Needs = tuple[tuple[str, ...], int]


def _cs(*needles: str) -> _Needs:
    """A needs group for a case-sensitive pattern: one of ``needles`` must be a substring of the
    command as it stands when the rule's turn comes (earlier rules may have redacted parts)."""
    return needles, _TEXT


def _ci(*needles: str) -> _Needs:
    """A needs group for a ``(?i)`` pattern: one of ``needles`` (lowercase ASCII) must be a
    substring of the command's case fold as it stands when the rule's turn comes. The fold
    (:func:`_fold`) maps every character ``(?i)`` lets match an ASCII letter to that letter, so
    a needle taken from the pattern's literal text is always there when the pattern matches."""
    return needles, _FOLD


def _format(body: str, *needles: str, ci: bool = False, start: str = _B) -> tuple:
    """A token format: ``body`` (a regular expression) after ``start`` (default: no letter or
    digit right before it), redacted whole; ``needles`` are literal text every match holds
    (case-folded for a ``ci`` format, which matches ignoring case)."""
    if ci:
        return (re.compile(start + body, re.I), REDACTED, _ci(*(n.lower() for n in needles)))
    return (re.compile(start + body), REDACTED, _cs(*needles))


_DIGIT_COLON = tuple(f"{d}:" for d in range(10))
_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"

#: Token formats of the issuers named, as they document them (prefix, alphabet, length, parts).
#: Lengths are minimums where a longer string of the same alphabet is still that token, so the
#: whole token goes. gitleaks' default configuration (v8.30.1) lists the same formats; its
#: rule ids are given where they differ from the issuer's name.
_FORMATS: tuple[tuple, ...] = (
    _format(r"A3-[A-Z0-9]{6}(?:-[A-Z0-9]{5,11}){4,5}", "A3-"),  # 1Password secret key
    _format(r"ops_eyJ[A-Za-z0-9+/=_-]{20,}", "ops_eyJ", start=""),  # 1Password service account
    _format(r"p8e-[A-Za-z0-9]{32,}", "p8e-"),  # Adobe client secret
    _format(r"pat[A-Za-z0-9]{14}\.[A-Fa-f0-9]{64}", "pat"),  # Airtable personal access token
    _format(r"LTAI[A-Za-z0-9]{20}", "LTAI"),  # Alibaba Cloud AccessKey ID
    _format(r"cmVmd[A-Za-z0-9]{40,}", "cmVmd"),  # JFrog Artifactory reference token
    _format(r"ATATT3[A-Za-z0-9_=-]{40,}", "ATATT3", start=""),  # Atlassian API token
    _format(r"(?:sc|ext|scauth|authress)_[A-Za-z0-9]{5,30}\.[A-Za-z0-9]{4,6}\.acc[_-]"
            r"[A-Za-z0-9-]{10,}\.[A-Za-z0-9+/_=-]{20,}", ".acc_", ".acc-"),  # Authress
    _format(r"ABSK[A-Za-z0-9+/]{100,}={0,2}", "ABSK"),  # Amazon Bedrock long-lived key
    _format(r"bedrock-api-key-[A-Za-z0-9+/=]{20,}", "bedrock-api-key-", start=""),  # short-lived
    # Azure AD (Entra ID) client secret: three characters, a digit, "Q~", 31 or more.
    _format(r"[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,}", "Q~", start=r"(?<![A-Za-z0-9_~.-])"),
    _format(r"4b1d[A-Za-z0-9]{38}", "4b1d"),  # ClickHouse Cloud API secret
    _format(r"clojars_[a-z0-9]{40,}", "clojars_", ci=True, start=""),  # Clojars deploy token
    _format(r"v1\.0-[A-Fa-f0-9]{24}-[A-Fa-f0-9]{100,}", "v1.0-"),  # Cloudflare Origin CA key
    _format(r"dapi[A-Fa-f0-9]{32}(?:-[0-9])?", "dapi"),  # Databricks personal access token
    _format(r"dnkey-[A-Za-z0-9=_-]{26}-[A-Za-z0-9=_-]{40,}", "dnkey-", start=""),  # Defined Net.
    _format(r"do[opr]_v1_[a-f0-9]{64}", "_v1_", ci=True, start=""),  # DigitalOcean
    _format(r"dp\.(?:pt|st|ct|sa|scim|audit)\.[A-Za-z0-9]{40,}", "dp."),  # Doppler
    _format(r"duffel_(?:test|live)_[A-Za-z0-9_=-]{40,}", "duffel_", start=""),  # Duffel
    _format(r"dt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}", "dt0c01.", start=""),  # Dynatrace
    _format(r"EZ[AT]K[A-Za-z0-9]{54}", "EZAK", "EZTK"),  # EasyPost (live and test)
    # Facebook app access token: the app id, "|" (or its URL encoding), the app secret.
    _format(r"[0-9]{15,16}(?:\||%7[Cc]|%)[A-Za-z0-9_-]{27,}", "|", "%", start=r"(?<![0-9])"),
    _format(r"EAA[MC][A-Za-z0-9]{60,}", "EAAM", "EAAC"),  # Facebook page access token
    _format(r"FLW(?:SECK|PUBK)(?:_TEST)?-[A-Za-z0-9]{12,}(?:-X)?", "FLWSECK", "FLWPUBK",
            start=""),  # Flutterwave secret, public and encryption keys
    _format(r"fo1_[A-Za-z0-9_-]{40,}", "fo1_"),  # Fly.io
    _format(r"fm[12][ar]?_[A-Za-z0-9+/]{60,}={0,3}", "fm1", "fm2"),  # Fly.io macaroons
    _format(r"fio-u-[A-Za-z0-9_=-]{40,}", "fio-u-", start=""),  # Frame.io
    (re.compile(r"(_gitlab_session=)[A-Za-z0-9]{20,}"), _keep(1),
     _cs("_gitlab_session=")),  # GitLab session cookie
    _format(r"eyJrIjoi[A-Za-z0-9]{40,}={0,3}", "eyJrIjoi", start=""),  # Grafana API key
    _format(r"glc_[A-Za-z0-9+/]{32,}={0,3}", "glc_", ci=True),  # Grafana Cloud
    _format(r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}", "glsa_", ci=True),  # Grafana service account
    _format(r"(?:pat|sat)\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}", "pat.", "sat."),
    _format(r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,}", ".atlasv1."),  # Terraform Cloud
    _format(r"HRKU-[A-Za-z0-9_-]{40,}", "HRKU-", start=""),  # Heroku (v2)
    _format(r"api_org_[A-Za-z0-9]{30,}", "api_org_", start=""),  # Hugging Face organization
    _format(r"ico-[A-Za-z0-9]{32}", "ico-"),  # Infracost
    _format(r"s-s4t2(?:ud|af)-[A-Fa-f0-9]{64}", "s-s4t2", start=""),  # 42 Intra client secret
    # JWT: header.payload.signature; gitleaks allows "/" and "\" (escaped JSON) in the payload.
    _format(r"ey[A-Za-z0-9_-]{10,}\.ey[A-Za-z0-9/\\_-]{10,}(?:\.[A-Za-z0-9/\\_=-]*)?", ".ey"),
    _format(r"ZXlK[A-Za-z0-9+/]{40,}={0,2}", "ZXlK"),  # a JWT, base64-encoded ("eyJ" -> "ZXlK")
    _format(r"(?:live|test)_(?:pub_)?[a-f0-9]{31,35}(?![A-Za-z0-9])", "live_", "test_"),  # Lob
    _format(r"lin_(?:api|oauth)_[A-Za-z0-9]{40,}", "lin_api_", "lin_oauth_", start=""),  # Linear
    _format(r"(?:pub)?key-[a-f0-9]{32}(?![A-Za-z0-9])", "key-"),  # Mailgun
    _format(r"[ps]k\.[A-Za-z0-9_-]{40,}\.[A-Za-z0-9_-]{20,}", "pk.", "sk."),  # Mapbox
    _format(r"[A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk", "_mmk"),  # MaxMind license key
    _format(r"https://[A-Za-z0-9.-]*webhook\.office\.com/webhookb2/[^\s'\"`<>]+",
            "webhook.office.com", ci=True, start=""),  # Microsoft Teams incoming webhook
    _format(r"NR(?:AK|AA|II|IQ|JS|RA|RI|SP)-[A-Za-z0-9-]{19,}", "NRAK-", "NRAA-", "NRII-",
            "NRIQ-", "NRJS-", "NRRA-", "NRRI-", "NRSP-", start=""),  # New Relic
    _format(r"ntn_[0-9]{11}[A-Za-z0-9]{35}", "ntn_", start=""),  # Notion
    _format(r"secret_[A-Za-z0-9]{43}(?![A-Za-z0-9])", "secret_"),  # Notion (internal, legacy)
    _format(r"API-[A-Z0-9]{26}(?![A-Za-z0-9])", "API-", start=r"(?<![A-Za-z0-9-])"),  # Octopus
    _format(r"sha256~[A-Za-z0-9_-]{43}", "sha256~", start=""),  # OpenShift user token
    _format(r"pplx-[A-Za-z0-9]{40,}", "pplx-", start=""),  # Perplexity
    _format(r"access-(?:sandbox|development|production)-" + _UUID, "access-", start=""),  # Plaid
    _format(r"pscale_(?:tkn|oauth|pw)_[A-Za-z0-9_=.-]{32,}", "pscale_", ci=True, start=""),
    _format(r"PMAK-[A-Za-z0-9]{24}-[A-Za-z0-9]{34}", "PMAK-", start=""),  # Postman
    _format(r"pnu_[A-Za-z0-9]{36}", "pnu_", start=""),  # Prefect
    _format(r"pul-[a-f0-9]{40}", "pul-"),  # Pulumi
    _format(r"rdme_[A-Za-z0-9]{40,}", "rdme_", start=""),  # ReadMe
    _format(r"rubygems_[a-f0-9]{48}", "rubygems_", start=""),  # RubyGems
    _format(r"tk-us-[A-Za-z0-9_-]{40,}", "tk-us-", start=""),  # Scalingo
    _format(r"SG\.[A-Za-z0-9=_.-]{60,}", "SG.", start=""),  # SendGrid (any of its characters)
    _format(r"x(?:keysib|smtpsib)-[a-f0-9]{64}-[A-Za-z0-9]{16}", "xkeysib-", "xsmtpsib-",
            start=""),  # Brevo (Sendinblue) API and SMTP keys
    _format(r"sntry[su]_[A-Za-z0-9+/=_]{40,}", "sntrys_", "sntryu_", start=""),  # Sentry
    _format(r"sm_(?:aat|pat|sat)_[A-Za-z0-9]{16}", "sm_aat_", "sm_pat_", "sm_sat_",
            start=""),  # SettleMint
    _format(r"shippo_(?:live|test)_[A-Fa-f0-9]{40}", "shippo_", start=""),  # Shippo
    _format(r"shp(?:at|ca|pa|ss)_[A-Fa-f0-9]{32}", "shpat_", "shpca_", "shppa_", "shpss_",
            start=""),  # Shopify
    _format(r"sq[upa]_[A-Za-z0-9]{40}", "squ_", "sqp_", "sqa_"),  # SonarQube
    _format(r"sgp_(?:[A-Fa-f0-9]{16}_|local_)?[A-Fa-f0-9]{40}", "sgp_", start=""),  # Sourcegraph
    _format(r"EAAA[A-Za-z0-9_-]{22,}", "EAAA"),  # Square access token
    _format(r"[0-9]{5,16}:A[A-Za-z0-9_-]{34}", ":A", start=r"(?<![0-9])"),  # Telegram bot token
    _format(r"SK[0-9a-fA-F]{32}", "SK", start=""),  # Twilio API key (hex in either case)
    _format(r"A{22}[A-Za-z0-9%]{60,}", "A" * 22, start=""),  # Twitter bearer token
    _format(r"tfp_[A-Za-z0-9_.=-]{40,}", "tfp_", start=""),  # Typeform
    _format(r"hv[bsr]\.[A-Za-z0-9_-]{20,}", "hvb.", "hvs.", "hvr.",
            start=_NOT_WORD_BEFORE),  # Vault batch, service and recovery tokens
    _format(r"s\.[A-Za-z0-9]{24}(?![A-Za-z0-9_.-])", "s.",
            start=r"(?<![A-Za-z0-9_./-])"),  # Vault service token (before 1.10)
    _format(r"AQVN[A-Za-z0-9_-]{35,38}", "AQVN"),  # Yandex API key
    _format(r"t1\.[A-Za-z0-9_-]+=*\.[A-Za-z0-9_-]{86}=*", "t1."),  # Yandex IAM token
    _format(r"YC[A-Za-z0-9_-]{38}(?![A-Za-z0-9_-])", "YC"),  # Yandex static access key
)

#: (pattern, replacement, needs...): a rule runs only when each of its needs groups holds, so the
#: regular expression engine never scans a command that cannot contain a match (most commands
#: hold no secret, and most rules are then skipped by the gate). A group is a necessary
#: condition for a match: its needles come from literal text the pattern must match.
_RULES: tuple[tuple, ...] = (
    # Private key blocks (any label: RSA, EC, OPENSSH, ENCRYPTED, PGP ... BLOCK); a block cut
    # short is redacted to the end.
    (re.compile(r"(?i)-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----"
                r".*?(?:-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----|\Z)", re.S),
     REDACTED, _ci("private key")),
    # A private key's header without its dashes (a cut or reformatted block), PuTTY key files:
    # everything from there on may be key material.
    (re.compile(r"(?:BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?|PuTTY-User-Key-File-\d)[\s\S]*"),
     REDACTED, _cs("PRIVATE KEY", "PuTTY-User-Key-File-"),
     _ci("private key", "putty-user-key-file")),
    (re.compile(r"AGE-SECRET-KEY-1[0-9A-Z]{20,}"), REDACTED, _cs("AGE-SECRET-KEY-1")),
    # JWT: header.payload.signature, base64url; header and payload are JSON objects ("eyJ").
    (re.compile(r"eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),
     REDACTED, _cs(".eyJ")),
    # Issuer-prefixed tokens.
    (re.compile(r"gh[pousr]_[A-Za-z0-9_]{16,255}" + _NOT_WORD_AFTER), REDACTED,
     _cs("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    (re.compile(r"[MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27}"), REDACTED,
     _ci("."), _cs("M", "N", "O")),  # Discord bot token
    (re.compile(r"github_pat_[A-Za-z0-9_]{20,255}"), REDACTED, _cs("github_pat_")),
    (re.compile(r"(?:gl(?:pat|dt|ft|ffct|soat|rt|cbt|imt|ptt|agent|oas)-|GR1348941)"
                r"[A-Za-z0-9_-]{16,}(?:\.[A-Za-z0-9]{2,}){0,2}"), REDACTED,
     _cs("glpat-", "gldt-", "glft-", "glffct-", "glsoat-", "glrt-", "glcbt-", "glimt-", "glptt-",
         "glagent-", "gloas-", "GR1348941")),  # GitLab (routable tokens end in ".<crc>")
    (re.compile(r"npm_[A-Za-z0-9]{30,}"), REDACTED, _cs("npm_")),
    (re.compile(r"pypi-[A-Za-z0-9_-]{50,}"), REDACTED, _cs("pypi-")),
    (re.compile(r"hf_[A-Za-z0-9]{30,}"), REDACTED, _cs("hf_")),
    (re.compile(r"(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{10,}"), REDACTED,
     _cs("k_live_", "k_test_", "k_prod_")),  # Stripe
    (re.compile(_NOT_WORD_BEFORE + r"sk-[A-Za-z0-9_-]{20,}"), REDACTED, _cs("sk-")),
    (re.compile(r"sk-[A-Za-z0-9_-]*T3BlbkFJ[A-Za-z0-9_-]*"), REDACTED,
     _cs("T3BlbkFJ"), _ci("t3blbkfj")),  # OpenAI ("OpenAI" in base64)
    (re.compile(r"(?i)xox[abposre]-[A-Za-z0-9-]*[0-9][A-Za-z0-9-]*"), REDACTED, _ci("xox")),
    (re.compile(r"xox[abposre]-[A-Za-z0-9-]{10,}"), REDACTED, _cs("xox")),
    (re.compile(r"(?i)xoxe\.xox[bp]-[A-Za-z0-9-]{10,}"), REDACTED,
     _ci("xoxe.xox")),  # Slack configuration access token
    (re.compile(r"xapp-[A-Za-z0-9-]{10,}"), REDACTED, _cs("xapp-")),
    (re.compile(r"(?i)(?:https?://)?hooks\.slack\.com/(?:services|workflows|triggers)/"
                r"[A-Za-z0-9+/_-]+"), REDACTED, _ci("hooks.slack.com/")),
    (re.compile(r"https://(?:[a-z]+\.)?discord(?:app)?\.com/api/webhooks/[A-Za-z0-9/_-]+"),
     REDACTED, _cs("/api/webhooks/")),
    (re.compile(r"SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"), REDACTED, _cs("SG.")),
    (re.compile(r"sq0(?:csp|atp)-[0-9A-Za-z\\_-]{22,}"), REDACTED,
     _cs("sq0csp-", "sq0atp-"), _ci("sq0")),  # Square
    (re.compile(r"[0-9a-z]{32}-us[0-9]{1,2}"), REDACTED,
     _cs(*(f"-us{d}" for d in range(10))), _ci("-us")),  # Mailchimp
    (re.compile(r"(?:AC|SK)[a-z0-9]{32}"), REDACTED,
     _cs("AC", "SK"), _ci("ac", "sk")),  # Twilio account / API key
    (re.compile(r"[0-9]{8,10}:[0-9A-Za-z_-]{35}"), REDACTED,
     _cs(*_DIGIT_COLON), _ci(":")),  # Telegram bot token
    *_FORMATS,
    (re.compile(r"(_authToken=)[^\n]*"), _keep(1),
     _cs("_authToken="), _ci("_authtoken")),  # .npmrc lines (npm's own format)
    # npm config set //registry/:_authToken VALUE (the key and value as two words).
    (re.compile(r"(\b(?:npm|pnpm|yarn)\s+(?:config\s+)?set\s+(?:-\S+\s+)*\S*"
                r"(?:_authToken|_auth|_password|npmAuthToken|npmAuthIdent|npmPassword)\s+)"
                r"(?!\[REDACTED\])" + _WORD), _keep(1),
     _cs("_auth", "_password", "npmAuth", "npmPassword"), _cs("set")),
    (re.compile(r"(?i)(https?://api.softlayer.com/soap/v3(?:.1)?/)[a-z0-9]{64}"), _keep(1),
     _ci("softlayer")),
    (re.compile(r"(?<![A-Za-z0-9])(?:AP[0-9A-F][A-Za-z0-9]{8,}|AKC[A-Za-z0-9]{10,})"
                r"(?![A-Za-z0-9])"), REDACTED, _cs("AP", "AKC"), _ci("ap", "akc")),  # Artifactory
    (re.compile(r"(?i)(AccountKey=)[A-Za-z0-9+/=]+"), _keep(1),
     _ci("accountkey")),  # Azure storage
    (re.compile(r"(?i)(\bcl(?:oudant|ou)?[_-]?(?:api)?[_-]?(?:key|pwd|pw|password|pass|token)[\"']?\]?[ ]*"
                r"(?:=>|:=|::|=|:|[ ]+)[ ]*[\"']?)[A-Za-z0-9]{24,}"), _keep(1),
     _ci("key", "pw", "pass", "token"), _ci("cl")),  # Cloudant
    (re.compile(_NOT_WORD_BEFORE + r"hvs\.[A-Za-z0-9_-]{20,}"), REDACTED, _cs("hvs.")),
    (re.compile(r"AIza[0-9A-Za-z_-]{35}"), REDACTED, _cs("AIza")),
    (re.compile(_NOT_WORD_BEFORE + r"ya29\.[0-9A-Za-z_-]{10,}"), REDACTED, _cs("ya29.")),
    # AWS access key IDs: exactly 20 characters (a longer run of capitals and digits is none).
    (re.compile(r"(?:(?<![A-Z0-9])|(?<=%[0-9A-F]{2}))(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)"
                r"[A-Z0-9]{16}(?![A-Z0-9])"), REDACTED,
     _cs("A3T", "AKIA", "ASIA", "ABIA", "ACCA")),
    (re.compile(r"(?i)(aws.{0,20}?(?:key|pwd|pw|password|pass|token).{0,20}?['\"])"
                r"[0-9a-zA-Z/+]{40}(?=['\"])"), _keep(1),
     _ci("key", "pw", "pass", "token"), _ci("aws"), _cs("'", '"')),
    # Header credentials, any scheme ("Authorization: token X" keeps "token").
    # Besides the names below, any header name ending in -Token, -Key, -Secret, -Auth, -Password,
    # -Credential(s) (X-Vault-Token, X-GitHub-Token, Private-Token); not after "/" or "." (a
    # path such as ./deploy-key:/root is no header).
    (re.compile(r"(?i)(\b(?:(?:proxy-)?authorization|x-api-key|x-goog-api-key|api-?key"
                r"|x-api-token|private-token|x-auth-token|cookie|set-cookie)"
                r"|(?<![A-Za-z0-9_./-])[A-Za-z0-9_-]*-(?:token|key|secret|auth|pass(?:word|wd)?"
                r"|credentials?))"
                r"((?:\s|\\ )*:(?:\s|\\ )*)(?>(?:(bearer|basic|token|digest|negotiate)(?:\s|\\ )+)?)"
                r"(?!\[REDACTED\])(?:\\ |[^\s'\"])+"),
     _header_value,
     _ci("authorization", "apikey", "api-key", "cookie", "-token", "-key", "-secret", "-auth",
         "-pass", "-credential"), _cs(":")),
    # Bearer and Basic credentials anywhere else (Basic: base64 with a digit or + / =, so
    # "Basic configuration" stays).
    (re.compile(r"(?i)\b(bearer)\s+(?!\[REDACTED\])[A-Za-z0-9._~+/=-]{8,}"),
     lambda m: f"{m[1]} {REDACTED}", _ci("bearer")),
    (re.compile(r"(?i)\b(basic)\s+(?=[A-Za-z0-9+/]*[0-9+/=])(?:[A-Za-z0-9+/]{4}){3,}"
                r"(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?(?![A-Za-z0-9+/=.])"),
     lambda m: f"{m[1]} {REDACTED}", _ci("basic")),
    # URLs: user:password@ (the password may hold '@'), and a token used as the user name.
    (re.compile(r"((?:\b[a-zA-Z][a-zA-Z0-9+.-]{0,20})?://)[^\s/@:]*:[^\s/]+@"),
     lambda m: f"{m[1]}{REDACTED}@", _cs("://"), _cs("@"), _ci("://")),
    (re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]{0,20}://)[A-Za-z0-9_-]{20,}@"),
     lambda m: f"{m[1]}{REDACTED}@", _cs("://"), _cs("@")),
    # Bundler's credentials for a gem server, BUNDLE_<HOST, "." as "__">=user:password (Sidekiq
    # Pro/Enterprise: BUNDLE_GEMS__CONTRIBSYS__COM), and "bundle config set HOST user:password".
    (re.compile(r"(?<![A-Za-z0-9_])(BUNDLE_[A-Z0-9_]*?__[A-Z0-9_]+[\"']?[ \t]*[=:][ \t]*[\"']?)"
                r"(?!\[REDACTED\])[^\s\"':]+:[^\s\"']+"), _keep(1), _cs("BUNDLE_"), _cs("__")),
    (re.compile(r"(\bbundle\s+config\s+(?:set\s+)?(?:--[a-z]+\s+)*[A-Za-z0-9.-]+\.[A-Za-z]{2,}"
                r"\s+)(?!\[REDACTED\])[^\s:]+:\S+"), _keep(1), _cs("bundle"), _cs("config")),
    # A Kubernetes Secret manifest (a heredoc for kubectl apply): the values under data: and
    # stringData: (:func:`_secret_data`; the lines indented deeper than the data: key).
    (re.compile(r"(?im)^(([ \t]*)(?:string)?data:[ \t]*\n)"
                r"((?:\2[ \t]+[^\n]*(?:\n|\Z)|[ \t]*\n)*)"), _secret_data,
     _ci("data:"), _ci("secret"), _ci("kind")),
    # NuGet: <add key="...Password" value="..." /> in nuget.config (and any such key).
    (re.compile(r"(?i)(<add\s+key\s*=\s*([\"'])[^\"'<>]{0,80}(?:password|token|secret|apikey)"
                r"[^\"'<>]{0,80}\2\s+value\s*=\s*)([\"'])[^\"'<>\n]{0,1024}\3"), _keep(1),
     _ci("<add"), _ci("value")),
    # Credentials by position in well-known commands.
    # curl -u / -U (proxy) user:password, also in a cluster of short flags (-su, -sSfu).
    (_user_password("curl", r"-[A-Za-z0-9#]*[uU]\s*|--(?:proxy-)?user(?:=|\s+)", ":"),
     _keep_user(":"), _cs("curl"), _cs(":"), _cs("-")),
    # curl --user "user":"password" (user and password quoted apart).
    (re.compile(r"(\bcurl\b[^|;&\n]{0,200}?\s(?:-[A-Za-z0-9#]*[uU]\s*|--(?:proxy-)?user(?:=|\s+))"
                r"([\"'])[^\"'\n]*\2:)([\"'])(?!\[REDACTED\])[^\"'\n]*\3"), _keep(1),
     _cs("curl"), _cs(":"), _cs("-")),
    # HTTPie (and xh): http -a user:password, --auth user:password.
    (_user_password(r"(?<![\w/.:-])(?:https?|xhs?)(?=\s)", r"-a\s*|--auth(?:=|\s+)", ":"),
     _keep_user(":"), _cs("-a"), _cs(":"), _cs("http", "xh")),
    # lftp -u user,password.
    (_user_password("lftp", r"-u\s*", ","), _keep_user(","), _cs("lftp"), _cs(",")),
    # sqlcmd / bcp / osql -P password.
    (re.compile(r"(\b(?:sqlcmd|bcp|osql)\b[^|;&\n]{0,200}?\s-P\s*)(?!\s)" + _WORD), _keep(1),
     _cs("sqlcmd", "bcp", "osql"), _cs("-P")),
    (re.compile(r"(\b(?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump)\b[^|;&\n]{0,200}?\s-p)"
                r"(?!\s)" + _WORD), _keep(1), _cs("mysql", "mariadb"), _cs("-p")),
    (re.compile(r"(\bsshpass\b(?:\s+-[a-oq-zA-Z]\S*)*\s+-p\s*)" + _WORD), _keep(1),
     _cs("sshpass"), _cs("-p")),
    (re.compile(r"(\bredis-cli\b[^|;&\n]{0,200}?\s-a\s+)" + _WORD), _keep(1),
     _cs("redis-cli"), _cs("-a")),
    # <tool> [sub] login ... -p PASSWORD: docker, podman, az (acr), oc, cf, helm registry ...
    (re.compile(r"(\b(?:docker|podman|buildah|skopeo|nerdctl|az|oc|cf|helm)\s+"
                r"(?:[a-z][a-z0-9-]*\s+){0,2}login\b[^|;&\n]{0,200}?\s-p(?:=|\s+)?)(?!\s)" + _WORD),
     _keep(1), _cs("login"), _cs("-p"),
     _cs("docker", "podman", "buildah", "skopeo", "nerdctl", "az", "oc", "cf", "helm")),
    (re.compile(r"(\bpass:)" + _WORD), _keep(1), _cs("pass:")),
    (re.compile(r"(\bkeytool\b[^|;&\n]{0,200}?\s-(?:storepass|keypass|srcstorepass|deststorepass)"
                r"\s+)" + _WORD), _keep(1), _cs("keytool"), _cs("pass")),
    (re.compile(r"(\b(?:zip|7z)\b[^|;&\n]{0,200}?\s-(?:P\s+|p))" + _WORD), _keep(1),
     _cs("zip", "7z"), _cs("-P", "-p")),
    (re.compile(r"(\bldap(?:search|add|modify|delete|passwd)\b[^|;&\n]{0,200}?\s-w\s+)" + _WORD),
     _keep(1), _cs("ldap"), _cs("-w")),
    (re.compile(r"(\bhtpasswd\b(?=[^|;&\n]{0,200}?\s-\w*b)(?:\s+-\w+){0,8}\s+[^\s-]\S*\s+\S+\s+)"
                + _WORD), _keep(1), _cs("htpasswd")),
    (re.compile(r"(\bsmbclient\b[^|;&\n]{0,200}?\s-U\s*[^\s%]+%)" + _WORD), _keep(1),
     _cs("smbclient"), _cs("%")),
    # ssh-keygen -N/-P PASSPHRASE; an empty passphrase ('' or "") is none.
    (re.compile(r"(\bssh-keygen\b[^|;&\n]{0,200}?\s-[NP]\s+)(?!''|\"\")" + _WORD), _keep(1),
     _cs("ssh-keygen")),
    (re.compile(r"(\bopenssl\b[^|;&\n]{0,200}?\s-k\s+)" + _WORD), _keep(1),
     _cs("openssl"), _cs("-k")),
    (re.compile(r"(?i)(\baws\s+configure\s+set\s+\S*(?:secret|token|key)\S*\s+)" + _WORD),
     _keep(1), _ci("configure"), _ci("aws")),
    (re.compile(r"(\bgh\s+secret\s+set\b[^|;&\n]{0,200}?\s(?:--body|-b)(?:=|\s+))" + _WORD), _keep(1),
     _cs("secret"), _cs("-b")),
    # NAME=value (a shell word) where NAME says secret (:func:`name_kind`; the pattern matches
    # every NAME=value, :func:`_shell_assignments` keeps those whose name does not, and ends a
    # value at the closing quote of a quoted word holding the assignment).
    (re.compile(_SHELL_NAME + "(" + _WORD + ")"), _shell_assignments,
     _ci("token", "secret", "pass", "pw", "key", "cred", "auth"), _cs("=")),
    # --password value / --token=value (a flag name ends at = or whitespace).
    (re.compile(r"(?i)(?<![\w-])(--(?!no-)(?:[a-z0-9]+-){0,4}" + _FLAG_NAME + r")(=|\s+)(?!\[REDACTED\])"
                r"(" + _WORD + ")"), _flag_value,
     _ci("pass", "token", "secret", "key", "credential"), _cs("--")),
    # JSON members whose key says secret (also escaped inside a quoted JSON text).
    (re.compile(r"(?i)(\\?[\"']([a-z0-9_.-]{0,40}(?:password|passwd|secret|token|api_?key|apikey"
                r"|credentials?|auth|creds)[a-z0-9_.-]{0,40})\\?[\"']\s*:\s*)\\?([\"'])"
                r"(?:(?!\\?\3).){0,4096}\\?\3"),
     lambda m: m[0] if not value_is_secret(name_kind(m[2]), m[0][len(m[1]):]) else m[1] + REDACTED,
     _ci("pass", "secret", "token", "key", "credential", "auth", "creds"), _cs('"', "'"), _cs(":")),
    # key: value / key = value lines (YAML, TOML, .pypirc, heredocs), to the end of the line.
    (re.compile(r"(?im)^(\s*([A-Za-z0-9_.-]{0,40}(?:password|passwd|secret|token|api[_-]?key"
                r"|credentials?)[A-Za-z0-9_.-]{0,40})\s*[:=]\s*)(?!\[REDACTED\])(\S[^\n]*)"),
     _secret_assignment(2, 3),
     _ci("pass", "secret", "token", "key", "credential"), _cs(":", "=")),
    # <name>value</name> where the element's name says secret (XML configuration).
    (re.compile(r"(?i)(<([A-Za-z_" + _ODD + r"][A-Za-z0-9_.:" + _ODD + r"-]{0,80})(?:\s[^<>]{0,200})?>\s*)"
                r"(?!\[REDACTED\])([^<>\s](?:[^<>]{0,1024}?[^<>\s])?)(\s*</\2\s*>)"),
     _secret_assignment(2, 3),
     _ci("token", "secret", "pass", "pw", "key", "cred", "auth"), _cs("</")),
    # Any other assignment a program, a config file or a Makefile writes (the pattern matches
    # every one, the replacement redacts those whose name says secret): name = value,
    # name := value, ::=, :::=, ?=, .=, +=, =>, ||, "name", "value", name: value; a type word
    # may stand between the name and the operator (var xToken string = "...").
    (re.compile(r"(?<![A-Za-z0-9_.-])(?P<q>[\"'`]?)(?P<name>[A-Za-z_" + _ODD + r"][A-Za-z0-9"
                + _ODD + r"_.-]{0,80})(?P=q)"
                r"\]?(?:[ \t]*:?[ \t]+(?P<word>[A-Za-z_][A-Za-z0-9_.\[\]*]{0,30}))?"
                r"(?P<op>[ \t]*(?:=>|:{1,3}=|\?=|\.=|\+=|\|\||=|:(?=[ \t]|[\"'`])|,(?=[ \t]*[\"'`]))"
                r"[ \t]*)"
                r"(?P<value>\"(?:\\.|[^\"\\\n])*\"|'[^'\n]*'|`[^`\n]*`|\$\{[A-Za-z0-9_]*\}"
                r"|(?!\[REDACTED\])[^\s'\"`;,&|<>(){}\[\]]+)"), _assignment,
     _ci("token", "secret", "pass", "pw", "key", "cred", "auth", *_VENDORS, *_VENDOR_PARTS),
     _cs("=", ":", ",", "|")),
    # key = value where the key ends in key/password/token and the value is long and
    # token-shaped (IBM Cloud, SoftLayer, IBM COS forms: ["ibm_cloud_iam_api_key"]="...",
    # also with a space for the operator: detect-secrets' assignment patterns).
    (re.compile(r"(?i)((?<![A-Za-z0-9_])[A-Za-z0-9_-]{0,40}(?:key|pwd|password|pass|token)"
                r"[\"']?\]?[ ]*(?:=>|:=|::|=|:|[ ]+)[ ]*[\"']?)(?!\[REDACTED\])"
                r"[A-Za-z0-9_-]{32,}"), _keep(1),
     _ci("key", "pwd", "pass", "token")),
    # Query parameters that carry credentials.
    (re.compile(r"(?i)([?&](?:pass|password|pwd|passwd|token|access_token|api[-_]?key|key|sig"
                r"|signature|secret|auth|x-amz-signature|x-amz-credential|x-amz-security-token)=)"
                r"(?!\[REDACTED\])[^&\s'\"#]+"), _keep(1),
     _ci("pass", "pwd", "token", "key", "sig", "secret", "auth", "credential"),
     _cs("?", "&"), _cs("=")),
    # A base64 word (16 characters or more) that decodes to a secret (:func:`_encoded_secret`).
    # (A run of the alphabet is matched whole: the search resumes after each run, so no
    # look-around is needed, and the engine scans for the alphabet fast.)
    (re.compile(r"[A-Za-z0-9+/_-]{16,}={0,2}"),
     _encoded_secret, _cs(*string.ascii_letters, *string.digits)),
)

#: Rules for a text the route cut short (``scrub(text, cut=True)``), run after :data:`_RULES`:
#: a quoted value whose key says secret and whose closing quote the cut took runs to the end of
#: the text (``curl -d '{"password": "tr0ub4dor zebra quantum la`` keeps none of its words).
#: Only for a cut text: otherwise an unclosed quote is no value (``grep '"token": "' f``).
_CUT_RULES: tuple[tuple, ...] = (
    (re.compile(r"(?i)((?<![A-Za-z0-9_.-])\\?[\"']?[A-Za-z0-9_.-]{0,40}(?:password|passwd"
                r"|passphrase|secret|token|api[_-]?key|apikey|credentials?)[A-Za-z0-9_.-]{0,40}"
                r"\\?[\"']?"
                r"\s*(?:=>|:=|:|=)\s*)\\?([\"'])(?:(?!\\?\2)[\s\S]){0,4096}\Z"), _keep(1),
     _ci("pass", "secret", "token", "key", "credential"), _cs('"', "'"), _cs(":", "=")),
)


# --- the gate --------------------------------------------------------------------------------

class _Gate:
    """Which rules may match a text, from one Aho-Corasick pass over its case fold.

    Each rule is indexed under one of its needs groups (the one whose shortest needle is
    longest, so the most selective): a rule is a *candidate* when a needle of that group, case
    folded, is in the text's fold (a necessary condition of the group: a case-sensitive needle
    in the text is, folded, in the fold). A candidate then runs only when every one of its
    groups holds exactly (``in`` on the text or the fold). A rule whose every group holds a
    one-character needle is a candidate always (such needles are in nearly every command)."""

    def __init__(self, rules: tuple[tuple, ...]) -> None:
        self.rules = [(rule[0], rule[1], tuple(rule[2:])) for rule in rules]
        self.automaton = ahocorasick.Automaton()
        masks: dict[str, int] = {}
        self.always = 0
        for i, (_, _, groups) in enumerate(self.rules):
            assert groups, f"rule {i} has no needs group"
            best = max(groups, key=lambda g: min(len(n) for n in g[0]))
            if min(len(n) for n in best[0]) < 2:
                self.always |= 1 << i
                continue
            for needle in best[0]:
                key = _fold(needle)
                masks[key] = masks.get(key, 0) | 1 << i
        for key, mask in masks.items():
            self.automaton.add_word(key, mask)
        self.automaton.make_automaton()

    def candidates(self, fold: str) -> int:
        """The bit mask of the candidate rules for a text whose fold is ``fold``."""
        mask = self.always
        for _, rules in self.automaton.iter(fold):
            mask |= rules
        return mask



#: Characters ``(?i)`` lets match an ASCII letter although ``str.lower()`` does not turn them
#: into it (Python's ``re`` documentation: U+0130, U+0131, U+017F, U+212A).
_FOLD_MAP = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})

_NAME_FOLD_UPPER = str.maketrans({"\u0130": "I", "\u0131": "I", "\u017f": "S", "\u212a": "K"})

_CONTINUATION = re.compile(r"\\\r?\n")
#: The last word (``\S+\Z``; the look-behind starts it only where a word starts, else the
#: search is quadratic in the length of a text holding no space near its end).
_LAST_WORD = re.compile(r"(?<!\S)\S+\Z")


def _fold(text: str) -> str:
    """The case fold the :func:`_ci` needles are looked for in: ``text`` lowered, with the
    non-ASCII letters ``(?i)`` matches to an ASCII letter turned into that letter first."""
    return text.lower() if text.isascii() else text.translate(_FOLD_MAP).lower()


_GATE = _Gate(_RULES)
_GATE_CUT = _Gate(_RULES + _CUT_RULES)


def scrub(text: str, cut: bool = False) -> str:
    """Return ``text`` with every token-shaped string replaced by ``[REDACTED]``.

    Backslash-newline line continuations are removed first (as the shell does), so a value on the
    next line is still seen as the flag's value. ``cut`` says the route shortened the command:
    its last word may be the head of a secret too short to match any rule, so it is redacted
    too, and a quoted value of a secret-named key left open by the cut (:data:`_CUT_RULES`) is
    redacted to the end. Idempotent: ``scrub(scrub(t)) == scrub(t)``. Never raises for any ``str``.
    """
    if "\\" in text:
        text = _CONTINUATION.sub("", text)
    gate = _GATE_CUT if cut else _GATE
    rules = gate.rules
    hay = [text, _fold(text)]
    mask = gate.candidates(hay[1])
    while mask:
        low = mask & -mask
        mask ^= low
        pattern, replacement, groups = rules[low.bit_length() - 1]
        for needles, where in groups:
            haystack = hay[where]
            for needle in needles:
                if needle in haystack:
                    break
            else:
                break  # a group without its needle: the pattern cannot match
        else:
            changed = apply_rule(pattern, replacement, text)
            if changed != text:
                text = changed
                hay[0], hay[1] = text, _fold(text)
                # The rules after this one see the text as it now stands.
                mask = gate.candidates(hay[1]) & ~((low << 1) - 1)
    if cut:
        text = _LAST_WORD.sub(REDACTED, text)
    return text
