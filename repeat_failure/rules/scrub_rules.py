"""The scrub rule table: which strings :func:`repeat_failure.rules.scrub.scrub` replaces with
``[REDACTED]``, as data: each rule is ``(pattern, replacement, needs groups...)``, applied in
the order of :data:`RULES`.

Five kinds of rule, applied in order (the fifth, the command's grammar, runs after the names):

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
  in a command is gone after :func:`~repeat_failure.rules.scrub.scrub`;
* credentials by position: ``Authorization:``-style headers (RFC 6750 Bearer, RFC 7617 Basic,
  any scheme) and any header named ``*-Token``/``-Key``/``-Secret``/``-Auth``/``-Password``,
  ``user:password@`` in URLs (RFC 3986 userinfo), ``curl -u user:pass`` (also ``-su``,
  ``-sSfu``, ``-U``/``--proxy-user``), HTTPie ``http -a user:pass``, ``lftp -u user,pass``,
  ``sqlcmd -P``, ``mysql -pPASS``, ``sshpass -p``, ``redis-cli -a``, ``docker``/``podman``/
  ``az``/``oc``/``cf``/``helm registry`` ``login -p``, ``npm config set ...:_authToken VALUE``,
  ``openssl ... pass:PASS`` and ``-k``, ``keytool -storepass``, ``zip -P``, ``ldapsearch -w``,
  ``htpasswd -b``, ``smbclient -U user%PASS``, ``ssh-keygen -N`` (not an empty ``''``),
  ``aws configure set <secret-ish key> VALUE``, Bundler's
  ``BUNDLE_<HOST>=user:password`` and NuGet's ``<add key="...Password" value="...">``;
* names that say secret, in every assignment form gitleaks knows (``NAME=value``,
  ``name = "value"``, ``name: value``, ``name := value``, ``::=``, ``?=``, ``.=``, ``=>``,
  ``"name", "value"``, ``<name>value</name>``, ``--name value``, JSON ``"name": "value"``): a
  name is secret when one of its parts (split at ``_ - .`` and camelCase) ends in token, secret,
  password, passwd, passphrase, passcode, pwd, pass, apikey, credential(s), creds, auth or
  key(s) and no part after it says the value is about the secret rather than the secret itself
  (:data:`repeat_failure.rules.scrub_names._META_AFTER`: ``TOKEN_TTL``, ``PASSWORD_MIN_LENGTH``, ``SECRET_BACKEND``,
  ``AUTH_MODE``, ``BASIC_AUTH_ENABLED``, ``KEY_ID``, ``*_FILE`` ...) nor the part before it
  that it names one (:data:`~repeat_failure.rules.scrub_names._META_BEFORE`: ``existingSecret``, ``ENABLE_AUTH`` ...). A value
  that is a boolean, empty, or a bare ``$VAR`` stays. A name holding a vendor's name
  (:data:`~repeat_failure.rules.scrub_names.VENDORS`: ``TWITTER_…``, ``ADOBE_CLIENT_ID`` ...) counts too when its value is
  token-shaped (twelve or more token characters with a digit).

* the command's grammar (issue 27, :mod:`repeat_failure.rules.scrub_context`): what is
  piped, here-string'd or here-doc'd into a credential reader (``--with-token``,
  ``--password-stdin``), a login's arguments, values written to credentials-like files
  (``.netrc``, ``.pypirc``, ``*.env``, ``~/.config/<vendor>/…``, ``~/.kube/config``),
  connection strings, and the secret a secret-setting command stores
  (:mod:`repeat_failure.rules.scrub_setters`: ``gh secret set --body``, ``aws secretsmanager
  --secret-string``, ``kubectl create secret generic --from-literal`` ...); and the
  generic vendor-token shape (a short lower-case prefix, ``_``/``-``, a random body) found by
  the base64 rule's scan. Last, a run of token characters an earlier rule left right after a
  ``[REDACTED]`` (its alphabet stopped at ``+``) goes too.

A text the route cut short (``cut=True``) also loses its last word, and a quoted value of a
secret-named key whose closing quote the cut took runs to the end of the text (:data:`CUT_RULES`).

A rule errs towards redacting: a harmless string turned into ``[REDACTED]`` costs less than one
leaked token; but an ordinary command must stay as typed, or two commands merge into one
(``tests/test_scrub_false_positives.py`` holds a corpus of 500+ ordinary agent commands: at
most 1 % may change). Every pattern is anchored on a literal or a boundary so its cost stays
linear in the command's length (no catastrophic backtracking on long runs of ``-`` or ``.``).

A rule's needs groups (:func:`_cs`, :func:`_ci`) are substrings every match holds; the gate of
:mod:`repeat_failure.rules.scrub` runs a rule only when each group holds. How a match that
keeps context is replaced is :mod:`repeat_failure.rules.scrub_replacements`.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable

from repeat_failure.rules.scrub_names import (
    ODD, REDACTED, VENDOR_PARTS, VENDORS, name_kind, value_is_secret)
from repeat_failure.rules.scrub_context import CONTEXT_RULES
from repeat_failure.rules.scrub_setters import SETTER_RULES, word
from repeat_failure.rules.scrub_replacements import (
    SHELL_NAME, assignment, encoded_secret, flag_value, header_value, keep, keep_user,
    secret_assignment, secret_data, shell_assignments)

# One shell word: quoted parts, $'...' parts, backslash escapes and plain characters.
_WORD = (r"""(?:\$?'[^']*(?:'|\Z)|"(?:\\.|[^"\\])*(?:"|\Z)|\$\([^)]*\)?|`[^`]*`?|\\.|"""
         r"""[^\s'"\\;&|<>()`])+""")
_FLAG_NAME = (r"(?:password|passwd|passphrase|pass|token|secret|api-key|apikey|access-key"
              r"|secret-key|private-key|auth-token|client-secret|credentials?)")
_NOT_WORD_BEFORE = r"(?<![A-Za-z0-9_])"
_NOT_WORD_AFTER = r"(?![A-Za-z0-9])"
#: Where a token starts: no letter or digit right before it.
_B = r"(?<![A-Za-z0-9])"

#: A rule's replacement: the text put in place of a match, or a function of the match (one
#: with a true ``whole_text`` attribute takes the pattern and the whole text instead).
Replacement = str | Callable[[re.Match[str]], str]


def _user_password(command: str, flag: str, sep: str) -> re.Pattern[str]:
    """``command ... FLAG user<sep>password``: group 1 is the command up to the flag, group 2 an
    opening quote (if any), group 3 the user (kept). Quoted (``-u 'user:pw'``), the password
    runs to the closing quote, which stays (or to the end of a cut text); unquoted, it is one
    shell word."""
    return re.compile(r"(\b(?:" + command + r")\b[^|;&\n]{0,200}?\s(?:" + flag + r"))"
                      r"(['\"])?([^\s" + sep + r"'\"]*)" + sep
                      + r"(?(2)(?:\\.|(?!\2)[^\\])*|" + _WORD + ")")


#: Where a needle is looked for (see :func:`_cs`, :func:`_ci`): the text, or its case fold
#: (:func:`repeat_failure.rules.scrub_names.fold`).
TEXT, FOLD = 0, 1

#: A needs group: (needles, where they are looked for).
_Needs = tuple[tuple[str, ...], int]


def _cs(*needles: str) -> _Needs:
    """A needs group for a case-sensitive pattern: one of ``needles`` must be a substring of the
    command as it stands when the rule's turn comes (earlier rules may have redacted parts)."""
    return needles, TEXT


def _ci(*needles: str) -> _Needs:
    """A needs group for a ``(?i)`` pattern: one of ``needles`` (lowercase ASCII) must be a
    substring of the command's case fold as it stands when the rule's turn comes. The fold
    (:func:`fold`) maps every character ``(?i)`` lets match an ASCII letter to that letter, so
    a needle taken from the pattern's literal text is always there when the pattern matches."""
    return needles, FOLD


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
    (re.compile(r"(_gitlab_session=)[A-Za-z0-9]{20,}"), keep(1),
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
RULES: tuple[tuple, ...] = (
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
    (re.compile(r"(_authToken=)[^\n]*"), keep(1),
     _cs("_authToken="), _ci("_authtoken")),  # .npmrc lines (npm's own format)
    # npm config set //registry/:_authToken VALUE (the key and value as two words).
    (re.compile(r"(\b(?:npm|pnpm|yarn)\s+(?:config\s+)?set\s+(?:-\S+\s+)*\S*"
                r"(?:_authToken|_auth|_password|npmAuthToken|npmAuthIdent|npmPassword)\s+)"
                r"(?!\[REDACTED\])" + _WORD), keep(1),
     _cs("_auth", "_password", "npmAuth", "npmPassword"), _cs("set")),
    (re.compile(r"(?i)(https?://api.softlayer.com/soap/v3(?:.1)?/)[a-z0-9]{64}"), keep(1),
     _ci("softlayer")),
    (re.compile(r"(?<![A-Za-z0-9])(?:AP[0-9A-F][A-Za-z0-9]{8,}|AKC[A-Za-z0-9]{10,})"
                r"(?![A-Za-z0-9])"), REDACTED, _cs("AP", "AKC"), _ci("ap", "akc")),  # Artifactory
    (re.compile(r"(?i)(AccountKey=)[A-Za-z0-9+/=]+"), keep(1),
     _ci("accountkey")),  # Azure storage
    (re.compile(r"(?i)(\bcl(?:oudant|ou)?[_-]?(?:api)?[_-]?(?:key|pwd|pw|password|pass|token)[\"']?\]?[ ]*"
                r"(?:=>|:=|::|=|:|[ ]+)[ ]*[\"']?)[A-Za-z0-9]{24,}"), keep(1),
     _ci("key", "pw", "pass", "token"), _ci("cl")),  # Cloudant
    (re.compile(_NOT_WORD_BEFORE + r"hvs\.[A-Za-z0-9_-]{20,}"), REDACTED, _cs("hvs.")),
    (re.compile(r"AIza[0-9A-Za-z_-]{35}"), REDACTED, _cs("AIza")),
    (re.compile(_NOT_WORD_BEFORE + r"ya29\.[0-9A-Za-z_-]{10,}"), REDACTED, _cs("ya29.")),
    # AWS access key IDs: exactly 20 characters (a longer run of capitals and digits is none).
    (re.compile(r"(?:(?<![A-Z0-9])|(?<=%[0-9A-F]{2}))(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)"
                r"[A-Z0-9]{16}(?![A-Z0-9])"), REDACTED,
     _cs("A3T", "AKIA", "ASIA", "ABIA", "ACCA")),
    (re.compile(r"(?i)(aws.{0,20}?(?:key|pwd|pw|password|pass|token).{0,20}?['\"])"
                r"[0-9a-zA-Z/+]{40}(?=['\"])"), keep(1),
     _ci("key", "pw", "pass", "token"), _ci("aws"), _cs("'", '"')),
    # Header credentials, any scheme ("Authorization: token X" keeps "token").
    # Besides the names below, any header name ending in -Token, -Key, -Secret, -Auth, -Password,
    # -Credential(s) (X-Vault-Token, X-GitHub-Token, Private-Token); not after "/" or "." (a
    # path such as ./deploy-key:/root is no header).
    (re.compile(r"(?i)(\b(?:(?:proxy-)?authorization|x-api-key|x-goog-api-key|api-?key"
                r"|x-api-token|private-token|x-auth-token|cookie|set-cookie)"
                r"|(?<![A-Za-z0-9_./-])[A-Za-z0-9_-]*-(?:token|key|secret|auth|pass(?:word|wd)?"
                r"|credentials?))"
                r"((?:\s|\\ )*:(?>(?:\s|\\ )*))(?>(?:(bearer|basic|token|digest|negotiate)(?:\s|\\ )+)?)"
                r"(?!\[REDACTED\])(?:\\ |[^\s'\"])+"),
     header_value,
     _ci("authorization", "apikey", "api-key", "cookie", "-token", "-key", "-secret", "-auth",
         "-pass", "-credential"), _cs(":")),
    # An Authorization header's scheme the rule above did not know (RFC 9110: any token, as
    # "Api-Token"): it took the scheme for the value; the credential after it, up to the
    # closing quote, goes too.
    (re.compile(r"(?i)(authorization(?:\s|\\ )*:(?:\s|\\ )*(?-i:\[REDACTED\]))[ \t]+"
                r"[A-Za-z0-9._~+/=-]{8,}(?=['\"])"), lambda m: m[1], _ci("authorization"),
     _cs("[REDACTED]")),
    # Bearer and Basic credentials anywhere else (Basic: base64 with a digit or + / =, so
    # "Basic configuration" stays).
    (re.compile(r"(?i)\b(bearer)\s+(?!\[REDACTED\])[A-Za-z0-9._~+/=-]{8,}"),
     lambda m: f"{m[1]} {REDACTED}", _ci("bearer")),
    (re.compile(r"(?i)\b(basic)\s+(?=[A-Za-z0-9+/]*[0-9+/=])(?:[A-Za-z0-9+/]{4}){3,}"
                r"(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?(?![A-Za-z0-9+/=.])"),
     lambda m: f"{m[1]} {REDACTED}", _ci("basic")),
    # URLs: user:password@ (the password may hold '@', or '/' when it holds no '@'; a port
    # and a path are no password), and a token used as the user name.
    (re.compile(r"((?:\b[a-zA-Z][a-zA-Z0-9+.-]{0,20})?://)[^\s/@:]*:(?![0-9]+(?:/|\Z))"
                r"(?:[^\s/]+|[^\s@]+)@"),
     lambda m: f"{m[1]}{REDACTED}@", _cs("://"), _cs("@"), _ci("://")),
    (re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]{0,20}://)[A-Za-z0-9_-]{20,}@"),
     lambda m: f"{m[1]}{REDACTED}@", _cs("://"), _cs("@")),
    # Bundler's credentials for a gem server, BUNDLE_<HOST, "." as "__">=user:password (Sidekiq
    # Pro/Enterprise: BUNDLE_GEMS__CONTRIBSYS__COM), and "bundle config set HOST user:password".
    (re.compile(r"(?<![A-Za-z0-9_])(BUNDLE_[A-Z0-9_]*?__[A-Z0-9_]+[\"']?[ \t]*[=:][ \t]*[\"']?)"
                r"(?!\[REDACTED\])[^\s\"':]+:[^\s\"']+"), keep(1), _cs("BUNDLE_"), _cs("__")),
    (re.compile(r"(\bbundle\s+config\s+(?:set\s+)?(?:--[a-z]+\s+)*[A-Za-z0-9.-]+\.[A-Za-z]{2,}"
                r"\s+)(?!\[REDACTED\])[^\s:]+:\S+"), keep(1), _cs("bundle"), _cs("config")),
    # A Kubernetes Secret manifest (a heredoc for kubectl apply): the values under data: and
    # stringData: (:func:`secret_data`; the lines indented deeper than the data: key).
    (re.compile(r"(?im)^(([ \t]*)(?:string)?data:[ \t]*\n)"
                r"((?:\2[ \t]+[^\n]*(?:\n|\Z)|[ \t]*\n)*)"), secret_data,
     _ci("data:"), _ci("secret"), _ci("kind")),
    # NuGet: <add key="...Password" value="..." /> in nuget.config (and any such key).
    (re.compile(r"(?i)(<add\s+key\s*=\s*([\"'])[^\"'<>]{0,80}(?:password|token|secret|apikey)"
                r"[^\"'<>]{0,80}\2\s+value\s*=\s*)([\"'])[^\"'<>\n]{0,1024}\3"), keep(1),
     _ci("<add"), _ci("value")),
    # Credentials by position in well-known commands.
    # curl -u / -U (proxy) user:password, also in a cluster of short flags (-su, -sSfu).
    (_user_password("curl", r"-[A-Za-z0-9#]*[uU]\s*|--(?:proxy-)?user(?:=|\s+)", ":"),
     keep_user(":"), _cs("curl"), _cs(":"), _cs("-")),
    # curl --user "user":"password" (user and password quoted apart).
    (re.compile(r"(\bcurl\b[^|;&\n]{0,200}?\s(?:-[A-Za-z0-9#]*[uU]\s*|--(?:proxy-)?user(?:=|\s+))"
                r"([\"'])[^\"'\n]*\2:)([\"'])(?!\[REDACTED\])[^\"'\n]*\3"), keep(1),
     _cs("curl"), _cs(":"), _cs("-")),
    # HTTPie (and xh): http -a user:password, --auth user:password.
    (_user_password(r"(?<![\w/.:-])(?:https?|xhs?)(?=\s)", r"-a\s*|--auth(?:=|\s+)", ":"),
     keep_user(":"), _cs("-a"), _cs(":"), _cs("http", "xh")),
    # lftp -u user,password.
    (_user_password("lftp", r"-u\s*", ","), keep_user(","), _cs("lftp"), _cs(",")),
    # sqlcmd / bcp / osql -P password.
    (re.compile(r"(\b(?:sqlcmd|bcp|osql)\b[^|;&\n]{0,200}?\s-P\s*)(?!\s)" + _WORD), keep(1),
     _cs("sqlcmd", "bcp", "osql"), _cs("-P")),
    (re.compile(r"(\b(?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump)\b[^|;&\n]{0,200}?\s-p)"
                r"(?!\s)" + _WORD), keep(1), _cs("mysql", "mariadb"), _cs("-p")),
    (re.compile(r"(\bsshpass\b(?:\s+-[a-oq-zA-Z]\S*)*\s+-p\s*)" + _WORD), keep(1),
     _cs("sshpass"), _cs("-p")),
    (re.compile(r"(\bredis-cli\b[^|;&\n]{0,200}?\s-a\s+)" + _WORD), keep(1),
     _cs("redis-cli"), _cs("-a")),
    # <tool> [sub] login ... -p PASSWORD: docker, podman, az (acr), oc, cf, helm registry ...
    # (each word bare or quoted whole: docker 'login' -p, "docker" login '-p', '--password').
    (re.compile(r"((?<!\w)" + word("docker|podman|buildah|skopeo|nerdctl|az|oc|cf|helm")
                + r"\s+(?:" + word("[a-z][a-z0-9-]*") + r"\s+){0,2}" + word("login")
                + r"(?!\w)[^|;&\n]{0,200}?\s(?:" + word("-p") + r"(?:=|\s+)?|" + word("--password")
                + r"(?:=|\s+)))(?!\s)" + _WORD),
     keep(1), _cs("login"), _cs("-p"),
     _cs("docker", "podman", "buildah", "skopeo", "nerdctl", "az", "oc", "cf", "helm")),
    (re.compile(r"(\bpass:)" + _WORD), keep(1), _cs("pass:")),
    (re.compile(r"(\bkeytool\b[^|;&\n]{0,200}?\s-(?:storepass|keypass|srcstorepass|deststorepass)"
                r"\s+)" + _WORD), keep(1), _cs("keytool"), _cs("pass")),
    (re.compile(r"(\b(?:zip|7z)\b[^|;&\n]{0,200}?\s-(?:P\s+|p))" + _WORD), keep(1),
     _cs("zip", "7z"), _cs("-P", "-p")),
    (re.compile(r"(\bldap(?:search|add|modify|delete|passwd)\b[^|;&\n]{0,200}?\s-w\s+)" + _WORD),
     keep(1), _cs("ldap"), _cs("-w")),
    (re.compile(r"(\bhtpasswd\b(?=[^|;&\n]{0,200}?\s-\w*b)(?:\s+-\w+){0,8}\s+[^\s-]\S*\s+\S+\s+)"
                + _WORD), keep(1), _cs("htpasswd")),
    (re.compile(r"(\bsmbclient\b[^|;&\n]{0,200}?\s-U\s*[^\s%]+%)" + _WORD), keep(1),
     _cs("smbclient"), _cs("%")),
    # ssh-keygen -N/-P PASSPHRASE; an empty passphrase ('' or "") is none.
    (re.compile(r"(\bssh-keygen\b[^|;&\n]{0,200}?\s-[NP]\s+)(?!''|\"\")" + _WORD), keep(1),
     _cs("ssh-keygen")),
    (re.compile(r"(\bopenssl\b[^|;&\n]{0,200}?\s-k\s+)" + _WORD), keep(1),
     _cs("openssl"), _cs("-k")),
    (re.compile(r"(?i)(\baws\s+configure\s+set\s+\S*(?:secret|token|key)\S*\s+)" + _WORD),
     keep(1), _ci("configure"), _ci("aws")),
    # NAME=value (a shell word) where NAME says secret (:func:`name_kind`; the pattern matches
    # every NAME=value, :func:`shell_assignments` keeps those whose name does not, and ends a
    # value at the closing quote of a quoted word holding the assignment).
    (re.compile(SHELL_NAME + "(" + _WORD + ")"), shell_assignments,
     _ci("token", "secret", "pass", "pw", "key", "cred", "auth", *VENDORS, *VENDOR_PARTS),
     _cs("=")),
    # --password value / --token=value (a flag name ends at = or whitespace).
    (re.compile(r"(?i)(?<![\w-])(--(?!no-)(?:[a-z0-9]+-){0,4}" + _FLAG_NAME + r")(=|\s+)(?!\[REDACTED\])"
                r"(" + _WORD + ")"), flag_value,
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
     secret_assignment(2, 3),
     _ci("pass", "secret", "token", "key", "credential"), _cs(":", "=")),
    # <name>value</name> where the element's name says secret (XML configuration).
    (re.compile(r"(?i)(<([A-Za-z_" + ODD + r"][A-Za-z0-9_.:" + ODD + r"-]{0,80})(?:\s[^<>]{0,200})?>\s*)"
                r"(?!\[REDACTED\])([^<>\s](?:[^<>]{0,1024}?[^<>\s])?)(\s*</\2\s*>)"),
     secret_assignment(2, 3),
     _ci("token", "secret", "pass", "pw", "key", "cred", "auth"), _cs("</")),
    # Any other assignment a program, a config file or a Makefile writes (the pattern matches
    # every one, the replacement redacts those whose name says secret): name = value,
    # name := value, ::=, :::=, ?=, .=, +=, =>, ||, "name", "value", name: value; a type word
    # may stand between the name and the operator (var xToken string = "...").
    (re.compile(r"(?:(?<![A-Za-z0-9_.-])|(?<=\\[nrt]))(?P<q>[\"'`]?)(?P<name>[A-Za-z_" + ODD + r"][A-Za-z0-9"
                + ODD + r"_.-]{0,80})(?P=q)"
                r"\]?(?:[ \t]*:?[ \t]+(?P<word>[A-Za-z_][A-Za-z0-9_.\[\]*]{0,30}))?"
                r"(?P<op>[ \t]*(?:=>|:{1,3}=|\?=|\.=|\+=|\|\||=|:(?=[ \t]|[\"'`])|,(?=[ \t]*[\"'`]))"
                r"[ \t]*)"
                r"(?P<value>\"(?:\\.|[^\"\\\n])*\"|'[^'\n]*'|`[^`\n]*`|\$\{[A-Za-z0-9_]*\}"
                r"|(?!\[REDACTED\])(?:(?!\\[nrt])[^\s'\"`;,&|<>(){}\[\]])+)"), assignment,
     _ci("token", "secret", "pass", "pw", "key", "cred", "auth", *VENDORS, *VENDOR_PARTS),
     _cs("=", ":", ",", "|")),
    # Secrets by the command's grammar: piped, here-string'd or here-doc'd into a credential
    # reader, written to a credentials-like file, a login's arguments, connection strings;
    # after the name rules, which redact a named value whole
    # (:mod:`repeat_failure.rules.scrub_context`).
    *CONTEXT_RULES,
    # Commands that store a secret: the argument their grammar names as the secret
    # (:mod:`repeat_failure.rules.scrub_setters`: gh secret set, aws secretsmanager and ssm,
    # az keyvault, kubectl create secret generic, doctl auth init, twine, unzip).
    *SETTER_RULES,
    # key = value where the key ends in key/password/token and the value is long and
    # token-shaped (IBM Cloud, SoftLayer, IBM COS forms: ["ibm_cloud_iam_api_key"]="...",
    # also with a space for the operator: detect-secrets' assignment patterns).
    (re.compile(r"(?i)((?<![A-Za-z0-9_])[A-Za-z0-9_-]{0,40}(?:key|pwd|password|pass|token)"
                r"[\"']?\]?[ ]*(?:=>|:=|::|=|:|[ ]+)[ ]*[\"']?)(?!\[REDACTED\])"
                r"[A-Za-z0-9_-]{32,}[A-Za-z0-9_+/=-]*"), keep(1),
     _ci("key", "pwd", "pass", "token")),
    # Query parameters that carry credentials.
    (re.compile(r"(?i)([?&](?:pass|password|pwd|passwd|token|access_token|api[-_]?key|key|sig"
                r"|signature|secret|auth|x-amz-signature|x-amz-credential|x-amz-security-token)=)"
                r"(?!\[REDACTED\])[^&\s'\"#]+"), keep(1),
     _ci("pass", "pwd", "token", "key", "sig", "secret", "auth", "credential"),
     _cs("?", "&"), _cs("=")),
    # A base64 word (16 characters or more) that decodes to a secret (:func:`encoded_secret`).
    # (A run of the alphabet is matched whole: the search resumes after each run, so no
    # look-around is needed, and the engine scans for the alphabet fast.)
    (re.compile(r"[A-Za-z0-9+/_-]{16,}={0,2}"),
     encoded_secret, _cs(*string.ascii_letters, *string.digits)),
    # What an earlier rule left of a value it redacted the head of (a run of token characters
    # right after [REDACTED] holding a "+" or "=": "[REDACTED]+CuNb1/..." when a rule's alphabet
    # stopped at "+"; a path after it, "[REDACTED]/x.jsonl", stays).
    (re.compile(r"\[REDACTED\]\.?(?=[A-Za-z0-9/_.~%-]*[+=])[A-Za-z0-9+/=_.~%-]*"
                r"[A-Za-z0-9+/=_~%-]"), REDACTED, _cs("[REDACTED]"), _cs("+", "=")),
)

#: Rules for a text the route cut short (``scrub(text, cut=True)``), run after :data:`RULES`:
#: a quoted value whose key says secret and whose closing quote the cut took runs to the end of
#: the text (``curl -d '{"password": "tr0ub4dor zebra quantum la`` keeps none of its words).
#: Only for a cut text: otherwise an unclosed quote is no value (``grep '"token": "' f``).
CUT_RULES: tuple[tuple, ...] = (
    (re.compile(r"(?i)((?<![A-Za-z0-9_.-])\\?[\"']?[A-Za-z0-9_.-]{0,40}(?:password|passwd"
                r"|passphrase|secret|token|api[_-]?key|apikey|credentials?)[A-Za-z0-9_.-]{0,40}"
                r"\\?[\"']?"
                r"\s*(?:=>|:=|:|=)\s*)\\?([\"'])(?:(?!\\?\2)[\s\S]){0,4096}\Z"), keep(1),
     _ci("pass", "secret", "token", "key", "credential"), _cs('"', "'"), _cs(":", "=")),
)
