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
  any scheme) and any header named ``*-Token``/``-Key``/``-Secret``/``-Auth``/``-Password``,
  ``user:password@`` in URLs (RFC 3986 userinfo), ``curl -u user:pass`` (also ``-su``,
  ``-sSfu``, ``-U``/``--proxy-user``), HTTPie ``http -a user:pass``, ``lftp -u user,pass``,
  ``sqlcmd -P``, ``mysql -pPASS``, ``sshpass -p``, ``redis-cli -a``, ``docker``/``podman``/
  ``az``/``oc``/``cf``/``helm registry`` ``login -p``, ``npm config set ...:_authToken VALUE``,
  ``openssl ...
  pass:PASS`` and ``-k``, ``keytool -storepass``, ``zip -P``, ``ldapsearch -w``,
  ``htpasswd -b``, ``smbclient -U user%PASS``, ``ssh-keygen -N``,
  ``aws configure set <secret-ish key> VALUE``, ``gh secret set ... --body VALUE``;
* names that say secret: ``NAME=value`` (``GH_TOKEN=``, ``DB_PASSWORD=``, ``MYSQL_PWD=`` ...),
  ``--password``/``--token``/``--secret-key`` style flags, and ``"password": "..."`` in JSON.

A text the route cut short (``cut=True``) also loses its last word, and a quoted value of a
secret-named key whose closing quote the cut took runs to the end of the text (:data:`_CUT_RULES`).

A rule errs towards redacting: a harmless string turned into ``[REDACTED]`` costs less than one
leaked token. Every pattern is anchored on a literal or a boundary so its cost stays linear in
the command's length (no catastrophic backtracking on long runs of ``-`` or ``.``).

Speed: every rule carries *needs groups*, substrings taken from the literal text its pattern must
match; the pattern runs only when each group has one of its substrings in the command, so a
command holding no secret costs about a hundred ``in`` tests instead of sixty regular-expression
scans (``tests/test_scrub_gating.py`` checks that the groups never skip a rule that would match).
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


def _user_password(command: str, flag: str, sep: str) -> re.Pattern[str]:
    """``command ... FLAG user<sep>password``: group 1 is the command up to the flag, group 2 an
    opening quote (if any), group 3 the user (kept). Quoted (``-u 'user:pw'``), the password
    runs to the closing quote, which stays (or to the end of a cut text); unquoted, it is one
    shell word."""
    return re.compile(r"(\b(?:" + command + r")\b[^|;&\n]{0,200}?\s(?:" + flag + r"))"
                      r"(['\"])?([^\s" + sep + r"'\"]*)" + sep
                      + r"(?(2)(?:\\.|(?!\2)[^\\])*|" + _WORD + ")")


def _keep_user(sep: str) -> Callable[[re.Match[str]], str]:
    """The replacement of a :func:`_user_password` rule: the password goes, the user stays."""
    return lambda m: f"{m[1]}{m[2] or ''}{m[3]}{sep}{REDACTED}"


def _keep(*groups: int) -> Callable[[re.Match[str]], str]:
    """A replacement keeping the given groups (context) and redacting the rest of the match."""
    return lambda m: "".join(m[g] or "" for g in groups) + REDACTED


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


_DIGIT_COLON = tuple(f"{d}:" for d in range(10))

#: (pattern, replacement, needs...): a rule runs only when each of its needs groups holds, so the
#: regular expression engine never scans a command that cannot contain a match (most commands
#: hold no secret, and most rules are then skipped by one or two ``in`` tests). A group is a
#: necessary condition for a match: its needles come from literal text the pattern must match.
#: Every rule has at least one group; the cheapest and most selective comes first.
_RULES: tuple[tuple, ...] = (
    # Private key blocks; a block cut short is redacted to the end.
    (re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
                r".*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)", re.S), REDACTED,
     _cs("PRIVATE KEY")),
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
     _cs("_"), _cs("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    (re.compile(r"[MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27}"), REDACTED,
     _cs("M", "N", "O"), _ci(".")),  # Discord bot token
    (re.compile(r"github_pat_[A-Za-z0-9_]{20,255}"), REDACTED, _cs("github_pat_")),
    (re.compile(r"(?:gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-|GR1348941)[A-Za-z0-9_-]{16,}"),
     REDACTED, _cs("gl", "GR1348941"),
     _cs("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "glcbt-", "glimt-", "glptt-", "glagent-",
         "gloas-", "GR1348941")),
    (re.compile(r"npm_[A-Za-z0-9]{30,}"), REDACTED, _cs("npm_")),
    (re.compile(r"pypi-[A-Za-z0-9_-]{50,}"), REDACTED, _cs("pypi-")),
    (re.compile(r"hf_[A-Za-z0-9]{30,}"), REDACTED, _cs("hf_")),
    (re.compile(r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"), REDACTED, _cs("k_live_", "k_test_")),
    (re.compile(_NOT_WORD_BEFORE + r"sk-[A-Za-z0-9_-]{20,}"), REDACTED, _cs("sk-")),
    (re.compile(r"sk-[A-Za-z0-9_-]*T3BlbkFJ[A-Za-z0-9_-]*"), REDACTED,
     _cs("T3BlbkFJ"), _ci("t3blbkfj")),  # OpenAI ("OpenAI" in base64)
    (re.compile(r"(?i)xox[abposr]-[A-Za-z0-9-]*[0-9][A-Za-z0-9-]*"), REDACTED, _ci("xox")),
    (re.compile(r"xox[abposr]-[A-Za-z0-9-]{10,}"), REDACTED, _cs("xox")),
    (re.compile(r"xapp-[A-Za-z0-9-]{10,}"), REDACTED, _cs("xapp-")),
    (re.compile(r"(?i)https://hooks\.slack\.com/services/[A-Za-z0-9/_-]+"), REDACTED,
     _ci("hooks.slack.com/services/")),
    (re.compile(r"https://(?:[a-z]+\.)?discord(?:app)?\.com/api/webhooks/[A-Za-z0-9/_-]+"),
     REDACTED, _cs("/api/webhooks/")),
    (re.compile(r"SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"), REDACTED, _cs("SG.")),
    (re.compile(r"sq0(?:csp|atp)-[0-9A-Za-z\\_-]{22,}"), REDACTED,
     _cs("sq0csp-", "sq0atp-"), _ci("sq0")),  # Square
    (re.compile(r"[0-9a-z]{32}-us[0-9]{1,2}"), REDACTED,
     _cs("-us"), _ci("-us"), _cs(*(f"-us{d}" for d in range(10)))),  # Mailchimp
    (re.compile(r"(?:AC|SK)[a-z0-9]{32}"), REDACTED,
     _cs("AC", "SK"), _ci("ac", "sk")),  # Twilio account / API key
    (re.compile(r"[0-9]{8,10}:[0-9A-Za-z_-]{35}"), REDACTED,
     _ci(":"), _cs(*_DIGIT_COLON)),  # Telegram bot token
    (re.compile(r"(_authToken=)[^\n]*"), _keep(1),
     _cs("_authToken="), _ci("_authtoken")),  # .npmrc lines (npm's own format)
    # npm config set //registry/:_authToken VALUE (the key and value as two words).
    (re.compile(r"(\b(?:npm|pnpm|yarn)\s+(?:config\s+)?set\s+(?:-\S+\s+)*\S*"
                r"(?:_authToken|_auth|_password|npmAuthToken|npmAuthIdent|npmPassword)\s+)"
                r"(?!\[REDACTED\])" + _WORD), _keep(1),
     _cs("set"), _cs("_auth", "_password", "npmAuth", "npmPassword")),
    (re.compile(r"(?i)(https?://api.softlayer.com/soap/v3(?:.1)?/)[a-z0-9]{64}"), _keep(1),
     _ci("softlayer")),
    (re.compile(r"(?<![A-Za-z0-9])(?:AP[0-9A-F][A-Za-z0-9]{8,}|AKC[A-Za-z0-9]{10,})"
                r"(?![A-Za-z0-9])"), REDACTED, _cs("AP", "AKC"), _ci("ap", "akc")),  # Artifactory
    (re.compile(r"(?i)(AccountKey=)[A-Za-z0-9+/=]+"), _keep(1),
     _ci("accountkey")),  # Azure storage
    (re.compile(r"(?i)(\bcl(?:oudant|ou)?[_-]?(?:api)?[_-]?(?:key|pwd|pw|password|pass|token)[\"']?\]?[ ]*"
                r"(?:=>|:=|::|=|:|[ ]+)[ ]*[\"']?)[A-Za-z0-9]{24,}"), _keep(1),
     _ci("cl"), _ci("key", "pw", "pass", "token")),  # Cloudant
    (re.compile(_NOT_WORD_BEFORE + r"hvs\.[A-Za-z0-9_-]{20,}"), REDACTED, _cs("hvs.")),
    (re.compile(r"AIza[0-9A-Za-z_-]{35}"), REDACTED, _cs("AIza")),
    (re.compile(_NOT_WORD_BEFORE + r"ya29\.[0-9A-Za-z_-]{10,}"), REDACTED, _cs("ya29.")),
    (re.compile(r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}"), REDACTED,
     _cs("A"), _cs("A3T", "AKIA", "ASIA", "ABIA", "ACCA")),
    (re.compile(r"(?i)(aws.{0,20}?(?:key|pwd|pw|password|pass|token).{0,20}?['\"])"
                r"[0-9a-zA-Z/+]{40}(?=['\"])"), _keep(1),
     _ci("aws"), _cs("'", '"'), _ci("key", "pw", "pass", "token")),
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
     lambda m: f"{m[1]}{m[2]}{m[3] + ' ' if m[3] else ''}{REDACTED}",
     _cs(":"), _ci("authorization", "apikey", "cookie", "-token", "-key", "-secret", "-auth",
                   "-pass", "-credential")),
    # Bearer and Basic credentials anywhere else (Basic: base64 with a digit or + / =, so
    # "Basic configuration" stays).
    (re.compile(r"(?i)\b(bearer)\s+(?!\[REDACTED\])[A-Za-z0-9._~+/=-]{8,}"),
     lambda m: f"{m[1]} {REDACTED}", _ci("bearer")),
    (re.compile(r"(?i)\b(basic)\s+(?=[A-Za-z0-9+/]*[0-9+/=])(?:[A-Za-z0-9+/]{4}){3,}"
                r"(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?(?![A-Za-z0-9+/=.])"),
     lambda m: f"{m[1]} {REDACTED}", _ci("basic")),
    # URLs: user:password@ (the password may hold '@'), and a token used as the user name.
    (re.compile(r"((?:\b[a-zA-Z][a-zA-Z0-9+.-]{0,20})?://)[^\s/@:]*:[^\s/]+@"),
     lambda m: f"{m[1]}{REDACTED}@", _cs("@"), _cs("://"), _ci("://")),
    (re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]{0,20}://)[A-Za-z0-9_-]{20,}@"),
     lambda m: f"{m[1]}{REDACTED}@", _cs("@"), _cs("://")),
    # Credentials by position in well-known commands.
    # curl -u / -U (proxy) user:password, also in a cluster of short flags (-su, -sSfu).
    (_user_password("curl", r"-[A-Za-z0-9#]*[uU]\s*|--(?:proxy-)?user(?:=|\s+)", ":"),
     _keep_user(":"), _cs("curl"), _cs(":"), _cs("-")),
    # HTTPie (and xh): http -a user:password, --auth user:password.
    (_user_password(r"(?<![\w/.:-])(?:https?|xhs?)(?=\s)", r"-a\s*|--auth(?:=|\s+)", ":"),
     _keep_user(":"), _cs("-a"), _cs(":"), _cs("http", "xh")),
    # lftp -u user,password.
    (_user_password("lftp", r"-u\s*", ","), _keep_user(","), _cs("lftp"), _cs(",")),
    # sqlcmd / bcp / osql -P password.
    (re.compile(r"(\b(?:sqlcmd|bcp|osql)\b[^|;&\n]{0,200}?\s-P\s*)(?!\s)" + _WORD), _keep(1),
     _cs("-P"), _cs("sqlcmd", "bcp", "osql")),
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
    (re.compile(r"(\bssh-keygen\b[^|;&\n]{0,200}?\s-[NP]\s+)" + _WORD), _keep(1),
     _cs("ssh-keygen")),
    (re.compile(r"(\bopenssl\b[^|;&\n]{0,200}?\s-k\s+)" + _WORD), _keep(1),
     _cs("openssl"), _cs("-k")),
    (re.compile(r"(?i)(\baws\s+configure\s+set\s+\S*(?:secret|token|key)\S*\s+)" + _WORD),
     _keep(1), _ci("configure"), _ci("aws")),
    (re.compile(r"(\bgh\s+secret\s+set\b[^|;&\n]{0,200}?\s(?:--body|-b)(?:=|\s+))" + _WORD), _keep(1),
     _cs("secret"), _cs("-b")),
    # NAME=value where NAME says secret.
    (re.compile(r"(?i)(?<![A-Za-z0-9_])(" + _SECRET_NAME + r")=(?!\[REDACTED\])" + _WORD),
     lambda m: f"{m[1]}={REDACTED}",
     _cs("="), _ci("token", "secret", "pass", "pwd", "key", "credential", "auth")),
    # --password value / --token=value (a flag name ends at = or whitespace).
    (re.compile(r"(?i)(?<![\w-])(--(?!no-)(?:[a-z0-9]+-){0,4}" + _FLAG_NAME + r")(=|\s+)(?!\[REDACTED\])"
                + _WORD), lambda m: f"{m[1]}{m[2]}{REDACTED}",
     _cs("--"), _ci("pass", "token", "secret", "key", "credential")),
    # JSON members whose key says secret.
    (re.compile(r"(?i)(\\?[\"'](?:[a-z0-9_-]{0,40}(?:password|passwd|secret|token|api_?key|apikey"
                r"|credentials?))\\?[\"']\s*:\s*)\\?([\"'])(?:(?!\\?\2).){0,4096}\\?\2"), _keep(1),
     _cs(":"), _cs('"', "'"), _ci("pass", "secret", "token", "key", "credential")),
    # key: value / key = value lines (YAML, TOML, .pypirc, heredocs), to the end of the line.
    (re.compile(r"(?im)^(\s*[A-Za-z0-9_.-]{0,40}(?:password|passwd|secret|token|api[_-]?key"
                r"|credentials?)[A-Za-z0-9_.-]{0,40}\s*[:=]\s*)(?!\[REDACTED\])\S[^\n]*"), _keep(1),
     _cs(":", "="), _ci("pass", "secret", "token", "key", "credential")),
    # key = value where the key says key/password/token/secret and the value is long and
    # token-shaped (IBM Cloud, SoftLayer, IBM COS forms: ["ibm_cloud_iam_api_key"]="...").
    (re.compile(r"(?i)((?:api|key|pwd|password|pass|token|secret)[A-Za-z_-]{0,20}[\"']?\]?[ ]*"
                r"(?:=>|:=|::|=|:|[ ]+)[ ]*[\"']?)[A-Za-z0-9_-]{32,}"), _keep(1),
     _ci("api", "key", "pwd", "pass", "token", "secret")),
    # Query parameters that carry credentials.
    (re.compile(r"(?i)([?&](?:pass|password|pwd|passwd|token|access_token|api[-_]?key|key|sig"
                r"|signature|secret|auth|x-amz-signature|x-amz-credential|x-amz-security-token)=)"
                r"(?!\[REDACTED\])[^&\s'\"#]+"), _keep(1),
     _cs("="), _cs("?", "&"),
     _ci("pass", "pwd", "token", "key", "sig", "secret", "auth", "credential")),
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
     _cs('"', "'"), _cs(":", "="), _ci("pass", "secret", "token", "key", "credential")),
)

#: The rules unpacked once: (first needs group's needles, where they are looked for, pattern,
#: replacement, the other needs groups). Most commands fail the first group of most rules.
_PLAN: tuple[tuple[tuple[str, ...], int, re.Pattern[str], Replacement, tuple[_Needs, ...]], ...] = \
    tuple((rule[2][0], rule[2][1], rule[0], rule[1], tuple(rule[3:])) for rule in _RULES)
_PLAN_CUT = _PLAN + tuple((rule[2][0], rule[2][1], rule[0], rule[1], tuple(rule[3:]))
                          for rule in _CUT_RULES)

#: Characters ``(?i)`` lets match an ASCII letter although ``str.lower()`` does not turn them
#: into it (Python's ``re`` documentation: U+0130, U+0131, U+017F, U+212A).
_FOLD_MAP = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})

_CONTINUATION = re.compile(r"\\\r?\n")
#: The last word (``\S+\Z``; the look-behind starts it only where a word starts, else the
#: search is quadratic in the length of a text holding no space near its end).
_LAST_WORD = re.compile(r"(?<!\S)\S+\Z")


def _fold(text: str) -> str:
    """The case fold the :func:`_ci` needles are looked for in: ``text`` lowered, with the
    non-ASCII letters ``(?i)`` matches to an ASCII letter turned into that letter first."""
    return text.lower() if text.isascii() else text.translate(_FOLD_MAP).lower()


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
    # The haystack each needs group is looked in: the text as it stands, and its fold.
    hay = [text, _fold(text)]
    for first, first_where, pattern, replacement, needs in _PLAN_CUT if cut else _PLAN:
        haystack = hay[first_where]
        for needle in first:
            if needle in haystack:
                break
        else:
            continue  # no needle of the first group: the pattern cannot match
        for needles, where in needs:
            haystack = hay[where]
            for needle in needles:
                if needle in haystack:
                    break
            else:
                break  # nor of this group
        else:
            changed = pattern.sub(replacement, text)
            if changed is not text:
                text = changed
                hay[0], hay[1] = text, _fold(text)
    if cut:
        text = _LAST_WORD.sub(REDACTED, text)
    return text
