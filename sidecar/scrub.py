"""Scrub: replace token-shaped strings in command text with ``[REDACTED]``.

Raw records may hold secrets (spec Constraints, C-AC13). Every command passes through
:func:`scrub` right after parsing; only its output is normalized, counted, stored in the state
file, logged or exported.

Patterns follow the token formats their issuers publish (GitHub's ``ghp_``/``gho_``/``ghu_``/
``ghs_``/``ghr_``/``github_pat_`` prefixes, AWS access key IDs ``AKIA``/``ASIA``, JWT's three
base64url parts, RFC 6750 Bearer and RFC 7617 Basic credentials, RFC 3986 userinfo in URLs,
PEM/OpenSSH/PGP private key armour, OpenAI/Anthropic ``sk-`` keys, Slack ``xox*-`` tokens,
Google ``AIza`` keys), plus ``NAME=value`` assignments and ``--password`` style flags whose name
says they carry a secret. A pattern errs towards redacting: a few harmless strings turned into
``[REDACTED]`` cost less than one leaked token.
"""

from __future__ import annotations

import re
from collections.abc import Callable

REDACTED = "[REDACTED]"

# (pattern, replacement) applied in order; a replacement keeps the non-secret context
# (the scheme of a URL, the name of a variable) so the command stays recognisable.
_RULES: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    # PEM / OpenSSH / PGP private key blocks; a block cut short is redacted to the end.
    (
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
            r".*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            re.S,
        ),
        REDACTED,
    ),
    # JWT: header.payload.signature, each base64url; header and payload are JSON objects ("eyJ").
    (re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"), REDACTED),
    # GitHub tokens.
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,255}\b"), REDACTED),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,255}\b"), REDACTED),
    # AWS access key IDs.
    (re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b"), REDACTED),
    # OpenAI (sk-, sk-proj-, ...) and Anthropic (sk-ant-...) API keys.
    (re.compile(r"\bsk-[A-Za-z0-9_-]{20,}"), REDACTED),
    # Slack tokens and incoming-webhook URLs.
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), REDACTED),
    (re.compile(r"\bxapp-[A-Za-z0-9-]{10,}"), REDACTED),
    (re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9/_-]+"), REDACTED),
    # Google API keys and OAuth access tokens.
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}"), REDACTED),
    (re.compile(r"\bya29\.[0-9A-Za-z_-]{10,}"), REDACTED),
    # Authorization credentials: RFC 6750 Bearer, RFC 7617 Basic (base64 with a digit or + / =,
    # so "Basic configuration" stays), and any Authorization/Token header value.
    (re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 " + REDACTED),
    (
        re.compile(r"(?i)\b(basic)\s+(?=[A-Za-z0-9+/]*[0-9+/=])[A-Za-z0-9+/]{8,}={0,2}"),
        r"\1 " + REDACTED,
    ),
    (
        re.compile(r"(?i)\b((?:proxy-)?authorization|x-api-key|private-token)(\s*:\s*)"
                   r"(?!bearer\b|basic\b)(?:([A-Za-z-]+)\s+)?[^\s'\"]+"),
        lambda m: f"{m[1]}{m[2]}{m[3] + ' ' if m[3] else ''}{REDACTED}",
    ),
    # user:password@ in URLs (RFC 3986 userinfo).
    (re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]*://)[^\s/@:'\"]+:[^\s/@'\"]+@"), r"\1" + REDACTED + "@"),
    # NAME=value where NAME says secret: GH_TOKEN=…, DB_PASSWORD='…', api_key=….
    (
        re.compile(
            r"(?i)\b([A-Z0-9_]*(?:TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY)"
            r"[A-Z0-9_]*)=(?:\"[^\"]*\"|'[^']*'|[^\s'\"]+)"
        ),
        r"\1=" + REDACTED,
    ),
    # --password value, --token=value, -p is too ambiguous to touch.
    (
        re.compile(
            r"(?i)(--(?:[a-z0-9-]*-)?(?:password|passwd|token|secret|api-key|apikey))(=|\s+)"
            r"(?!\[REDACTED\])(?:\"[^\"]*\"|'[^']*'|[^\s'\"]+)"
        ),
        r"\1\2" + REDACTED,
    ),
)


def scrub(text: str) -> str:
    """Return ``text`` with every token-shaped string replaced by ``[REDACTED]``.

    Pure and idempotent: ``scrub(scrub(t)) == scrub(t)``. Never raises for any ``str``.
    """
    for pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    return text
