"""Scrub: replace token-shaped strings in command text with ``[REDACTED]``.

Raw records may hold secrets (spec Constraints, C-AC13). Every command passes through
:func:`scrub` right after parsing; only its output is normalized, counted, stored in the state
file, logged or exported.

Three kinds of rule, applied in order:

* token formats their issuers publish: GitHub (``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_``/
  ``github_pat_``), GitLab (``glpat-``, ``glptt-``, ``glagent-``, ``gloas-`` ...), npm ``npm_``
  and ``.npmrc`` ``_authToken=``, PyPI ``pypi-``, Hugging Face ``hf_``, OpenAI/Anthropic
  ``sk-``, Stripe ``sk_live_``/``rk_live_``, Slack ``xox*-`` and webhook URLs, Discord webhook
  URLs and bot tokens, SendGrid ``SG.``, Square ``sq0csp-``, Twilio ``AC``/``SK``, Mailchimp
  ``-usN`` keys, Telegram bot tokens, Artifactory ``AP``/``AKC`` keys, Azure ``AccountKey=``,
  IBM Cloud/COS, SoftLayer and Cloudant keys, Vault ``hvs.``, age secret keys, Google ``AIza``
  keys and ``ya29.`` tokens, AWS access key IDs (``AKIA``/``ASIA``/``A3T``...) and secret keys
  next to ``aws...key``, JWTs, PEM/OpenSSH/PGP private keys (also a bare ``BEGIN ... PRIVATE
  KEY`` header, and PuTTY key files, to the end of the text). ``tests/test_scrub.py`` checks
  these against detect-secrets as an oracle: whatever its shape-based plugins flag in a
  command is gone after :func:`scrub`;
* credentials by position: ``Authorization:``-style headers (RFC 6750 Bearer, RFC 7617 Basic,
  any scheme), ``user:password@`` in URLs (RFC 3986 userinfo), ``curl -u user:pass``,
  ``mysql -pPASS``, ``sshpass -p``, ``redis-cli -a``, ``docker login -p``, ``openssl ...
  pass:PASS`` and ``-k``, ``keytool -storepass``, ``zip -P``, ``ldapsearch -w``,
  ``htpasswd -b``, ``smbclient -U user%PASS``, ``ssh-keygen -N``,
  ``aws configure set <secret-ish key> VALUE``, ``gh secret set ... --body VALUE``;
* names that say secret: ``NAME=value`` (``GH_TOKEN=``, ``DB_PASSWORD=``, ``MYSQL_PWD=`` ...),
  ``--password``/``--token``/``--secret-key`` style flags, and ``"password": "..."`` in JSON.

A rule errs towards redacting: a harmless string turned into ``[REDACTED]`` costs less than one
leaked token. Every pattern is anchored on a literal or a boundary so its cost stays linear in
the command's length (no catastrophic backtracking on long runs of ``-`` or ``.``); a pattern
without a literal start carries needles, substrings one of which the lowered command must hold
for the pattern to run at all.
"""

from __future__ import annotations

import re
from collections.abc import Callable

REDACTED = "[REDACTED]"

# One shell word: quoted parts, $'...' parts, backslash escapes and plain characters.
_WORD = (r"""(?:\$?'[^']*(?:'|\Z)|"(?:\\.|[^"\\])*(?:"|\Z)|\$\([^)]*\)?|`[^`]*`?|\\.|"""
         r"""[^\s'"\\;&|<>()`])+""")
_SECRET_NAME = (r"[A-Za-z0-9_]{0,64}(?:TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|PASS|_PWD|API_?KEY"
                r"|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIALS?|AUTH(?=[_=]))[A-Za-z0-9_]{0,64}")
_FLAG_NAME = (r"(?:password|passwd|passphrase|pass|token|secret|api-key|apikey|access-key"
              r"|secret-key|private-key|auth-token|client-secret|credentials?)")
_NOT_WORD_BEFORE = r"(?<![A-Za-z0-9_])"
_NOT_WORD_AFTER = r"(?![A-Za-z0-9])"

Replacement = str | Callable[[re.Match[str]], str]


def _keep(*groups: int) -> Callable[[re.Match[str]], str]:
    """A replacement keeping the given groups (context) and redacting the rest of the match."""
    return lambda m: "".join(m[g] or "" for g in groups) + REDACTED


#: (pattern, replacement[, needles]): a rule with needles runs only when the command, lowered,
#: contains one of them (a cheap test that keeps unanchored patterns off most commands).
_RULES: tuple[tuple, ...] = (
    # Private key blocks; a block cut short is redacted to the end.
    (re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
                r".*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)", re.S), REDACTED),
    # A private key's header without its dashes (a cut or reformatted block), PuTTY key files:
    # everything from there on may be key material.
    (re.compile(r"(?:BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?|PuTTY-User-Key-File-\d)[\s\S]*"),
     REDACTED, ("private key", "putty-user-key-file")),
    (re.compile(r"AGE-SECRET-KEY-1[0-9A-Z]{20,}"), REDACTED),
    # JWT: header.payload.signature, base64url; header and payload are JSON objects ("eyJ").
    (re.compile(r"eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),
     REDACTED),
    # Issuer-prefixed tokens.
    (re.compile(r"gh[pousr]_[A-Za-z0-9_]{16,255}" + _NOT_WORD_AFTER), REDACTED),
    (re.compile(r"[MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27}"), REDACTED,
     (".",)),  # Discord bot token
    (re.compile(r"github_pat_[A-Za-z0-9_]{20,255}"), REDACTED),
    (re.compile(r"(?:gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-|GR1348941)[A-Za-z0-9_-]{16,}"),
     REDACTED),
    (re.compile(r"npm_[A-Za-z0-9]{30,}"), REDACTED),
    (re.compile(r"pypi-[A-Za-z0-9_-]{50,}"), REDACTED),
    (re.compile(r"hf_[A-Za-z0-9]{30,}"), REDACTED),
    (re.compile(r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"), REDACTED),
    (re.compile(_NOT_WORD_BEFORE + r"sk-[A-Za-z0-9_-]{20,}"), REDACTED),
    (re.compile(r"sk-[A-Za-z0-9_-]*T3BlbkFJ[A-Za-z0-9_-]*"), REDACTED, ('t3blbkfj',)),  # OpenAI ("OpenAI" in base64)
    (re.compile(r"(?i)xox[abposr]-[A-Za-z0-9-]*[0-9][A-Za-z0-9-]*"), REDACTED, ('xox',)),
    (re.compile(r"xox[abposr]-[A-Za-z0-9-]{10,}"), REDACTED),
    (re.compile(r"xapp-[A-Za-z0-9-]{10,}"), REDACTED),
    (re.compile(r"(?i)https://hooks\.slack\.com/services/[A-Za-z0-9/_-]+"), REDACTED),
    (re.compile(r"https://(?:[a-z]+\.)?discord(?:app)?\.com/api/webhooks/[A-Za-z0-9/_-]+"),
     REDACTED),
    (re.compile(r"SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"), REDACTED),
    (re.compile(r"sq0(?:csp|atp)-[0-9A-Za-z\\_-]{22,}"), REDACTED, ('sq0',)),  # Square
    (re.compile(r"[0-9a-z]{32}-us[0-9]{1,2}"), REDACTED, ('-us',)),  # Mailchimp
    (re.compile(r"(?:AC|SK)[a-z0-9]{32}"), REDACTED, ('ac', 'sk')),  # Twilio account / API key
    (re.compile(r"[0-9]{8,10}:[0-9A-Za-z_-]{35}"), REDACTED, (':',)),  # Telegram bot token
    (re.compile(r"(_authToken=)[^\n]*"), _keep(1), ('_authtoken',)),  # .npmrc lines (npm's own format)
    (re.compile(r"(?i)(https?://api.softlayer.com/soap/v3(?:.1)?/)[a-z0-9]{64}"), _keep(1), ('softlayer',)),
    (re.compile(r"(?<![A-Za-z0-9])(?:AP[0-9A-F][A-Za-z0-9]{8,}|AKC[A-Za-z0-9]{10,})"
                r"(?![A-Za-z0-9])"), REDACTED, ("ap", "akc")),  # Artifactory
    (re.compile(r"(?i)(AccountKey=)[A-Za-z0-9+/=]+"), _keep(1), ('accountkey',)),  # Azure storage
    (re.compile(r"(?i)(\bcl(?:oudant|ou)?[_-]?(?:api)?[_-]?(?:key|pwd|pw|password|pass|token)[\"']?\]?[ ]*"
                r"(?:=>|:=|::|=|:|[ ]+)[ ]*[\"']?)[A-Za-z0-9]{24,}"), _keep(1), ("cl",)),  # Cloudant
    (re.compile(_NOT_WORD_BEFORE + r"hvs\.[A-Za-z0-9_-]{20,}"), REDACTED),
    (re.compile(r"AIza[0-9A-Za-z_-]{35}"), REDACTED),
    (re.compile(_NOT_WORD_BEFORE + r"ya29\.[0-9A-Za-z_-]{10,}"), REDACTED),
    (re.compile(r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}"), REDACTED),
    (re.compile(r"(?i)(aws.{0,20}?(?:key|pwd|pw|password|pass|token).{0,20}?['\"])"
                r"[0-9a-zA-Z/+]{40}(?=['\"])"), _keep(1), ("aws",)),
    # Header credentials, any scheme ("Authorization: token X" keeps "token").
    (re.compile(r"(?i)\b((?:proxy-)?authorization|x-api-key|x-goog-api-key|api-?key|x-api-token"
                r"|private-token|x-auth-token|cookie|set-cookie)"
                r"((?:\s|\\ )*:(?:\s|\\ )*)(?>(?:(bearer|basic|token|digest|negotiate)(?:\s|\\ )+)?)"
                r"(?!\[REDACTED\])(?:\\ |[^\s'\"])+"),
     lambda m: f"{m[1]}{m[2]}{m[3] + ' ' if m[3] else ''}{REDACTED}"),
    # Bearer and Basic credentials anywhere else (Basic: base64 with a digit or + / =, so
    # "Basic configuration" stays).
    (re.compile(r"(?i)\b(bearer)\s+(?!\[REDACTED\])[A-Za-z0-9._~+/=-]{8,}"),
     lambda m: f"{m[1]} {REDACTED}"),
    (re.compile(r"(?i)\b(basic)\s+(?=[A-Za-z0-9+/]*[0-9+/=])(?:[A-Za-z0-9+/]{4}){3,}"
                r"(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?(?![A-Za-z0-9+/=.])"),
     lambda m: f"{m[1]} {REDACTED}"),
    # URLs: user:password@ (the password may hold '@'), and a token used as the user name.
    (re.compile(r"((?:\b[a-zA-Z][a-zA-Z0-9+.-]{0,20})?://)[^\s/@:]*:[^\s/]+@"),
     lambda m: f"{m[1]}{REDACTED}@", ("://",)),
    (re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]{0,20}://)[A-Za-z0-9_-]{20,}@"),
     lambda m: f"{m[1]}{REDACTED}@"),
    # Credentials by position in well-known commands.
    (re.compile(r"(\bcurl\b[^|;&\n]{0,200}?\s(?:-u\s*|--user[=\s]+)(?:'|\")?)([^\s:'\"]*):(" + _WORD + ")"),
     lambda m: f"{m[1]}{m[2]}:{REDACTED}"),
    (re.compile(r"(\b(?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump)\b[^|;&\n]{0,200}?\s-p)"
                r"(?!\s)" + _WORD), _keep(1)),
    (re.compile(r"(\bsshpass\b(?:\s+-[a-oq-zA-Z]\S*)*\s+-p\s*)" + _WORD), _keep(1)),
    (re.compile(r"(\bredis-cli\b[^|;&\n]{0,200}?\s-a\s+)" + _WORD), _keep(1)),
    (re.compile(r"(\bdocker\s+login\b[^|;&\n]{0,200}?\s-p\s+)" + _WORD), _keep(1)),
    (re.compile(r"(\bpass:)" + _WORD), _keep(1)),
    (re.compile(r"(\bkeytool\b[^|;&\n]{0,200}?\s-(?:storepass|keypass|srcstorepass|deststorepass)"
                r"\s+)" + _WORD), _keep(1)),
    (re.compile(r"(\b(?:zip|7z)\b[^|;&\n]{0,200}?\s-(?:P\s+|p))" + _WORD), _keep(1)),
    (re.compile(r"(\bldap(?:search|add|modify|delete|passwd)\b[^|;&\n]{0,200}?\s-w\s+)" + _WORD),
     _keep(1)),
    (re.compile(r"(\bhtpasswd\b(?=[^|;&\n]{0,200}?\s-\w*b)(?:\s+-\w+){0,8}\s+[^\s-]\S*\s+\S+\s+)"
                + _WORD), _keep(1)),
    (re.compile(r"(\bsmbclient\b[^|;&\n]{0,200}?\s-U\s*[^\s%]+%)" + _WORD), _keep(1)),
    (re.compile(r"(\bssh-keygen\b[^|;&\n]{0,200}?\s-[NP]\s+)" + _WORD), _keep(1)),
    (re.compile(r"(\bopenssl\b[^|;&\n]{0,200}?\s-k\s+)" + _WORD), _keep(1)),
    (re.compile(r"(?i)(\baws\s+configure\s+set\s+\S*(?:secret|token|key)\S*\s+)" + _WORD),
     _keep(1)),
    (re.compile(r"(\bgh\s+secret\s+set\b[^|;&\n]{0,200}?\s(?:--body|-b)(?:=|\s+))" + _WORD), _keep(1)),
    # NAME=value where NAME says secret.
    (re.compile(r"(?i)(?<![A-Za-z0-9_])(" + _SECRET_NAME + r")=(?!\[REDACTED\])" + _WORD),
     lambda m: f"{m[1]}={REDACTED}"),
    # --password value / --token=value (a flag name ends at = or whitespace).
    (re.compile(r"(?i)(?<![\w-])(--(?!no-)(?:[a-z0-9]+-){0,4}" + _FLAG_NAME + r")(=|\s+)(?!\[REDACTED\])"
                + _WORD), lambda m: f"{m[1]}{m[2]}{REDACTED}"),
    # JSON members whose key says secret.
    (re.compile(r"(?i)(\\?[\"'](?:[a-z0-9_-]{0,40}(?:password|passwd|secret|token|api_?key|apikey"
                r"|credentials?))\\?[\"']\s*:\s*)\\?([\"'])(?:(?!\\?\2).){0,4096}\\?\2"), _keep(1)),
    # key: value / key = value lines (YAML, TOML, .pypirc, heredocs), to the end of the line.
    (re.compile(r"(?im)^(\s*[A-Za-z0-9_.-]{0,40}(?:password|passwd|secret|token|api[_-]?key"
                r"|credentials?)[A-Za-z0-9_.-]{0,40}\s*[:=]\s*)(?!\[REDACTED\])\S[^\n]*"), _keep(1)),
    # key = value where the key says key/password/token/secret and the value is long and
    # token-shaped (IBM Cloud, SoftLayer, IBM COS forms: ["ibm_cloud_iam_api_key"]="...").
    (re.compile(r"(?i)((?:api|key|pwd|password|pass|token|secret)[A-Za-z_-]{0,20}[\"']?\]?[ ]*"
                r"(?:=>|:=|::|=|:|[ ]+)[ ]*[\"']?)[A-Za-z0-9_-]{32,}"), _keep(1),
     ("api", "key", "pwd", "pass", "token", "secret")),
    # Query parameters that carry credentials.
    (re.compile(r"(?i)([?&](?:pass|password|pwd|passwd|token|access_token|api[-_]?key|key|sig"
                r"|signature|secret|auth|x-amz-signature|x-amz-credential|x-amz-security-token)=)"
                r"(?!\[REDACTED\])[^&\s'\"#]+"), _keep(1)),
)

#: The rules with their needles (``()`` when a rule has none), unpacked once.
_PLAN: tuple[tuple[re.Pattern[str], Replacement, tuple[str, ...]], ...] = tuple(
    (rule[0], rule[1], rule[2] if len(rule) > 2 else ()) for rule in _RULES)

_CONTINUATION = re.compile(r"\\\r?\n")
_LAST_WORD = re.compile(r"\S+\Z")


def scrub(text: str, cut: bool = False) -> str:
    """Return ``text`` with every token-shaped string replaced by ``[REDACTED]``.

    Backslash-newline line continuations are removed first (as the shell does), so a value on the
    next line is still seen as the flag's value. ``cut`` says the route shortened the command:
    its last word may be the head of a secret too short to match any rule, so it is redacted
    too. Idempotent: ``scrub(scrub(t)) == scrub(t)``. Never raises for any ``str``.
    """
    text = _CONTINUATION.sub("", text)
    lowered = text.lower()
    for pattern, replacement, needles in _PLAN:
        if needles:
            for needle in needles:
                if needle in lowered:
                    break
            else:
                continue
        text = pattern.sub(replacement, text)
    if cut:
        text = _LAST_WORD.sub(REDACTED, text)
    return text
