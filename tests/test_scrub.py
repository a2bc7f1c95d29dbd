"""Scrubbing (C-AC13): token-shaped strings built in the test never survive scrub()."""

from __future__ import annotations

import random
import string

import pytest

from sidecar.scrub import REDACTED, scrub

_rng = random.Random(1234)


def rand(alphabet: str, n: int) -> str:
    """A random string; tokens are assembled here so no real token lives in the repo."""
    return "".join(_rng.choice(alphabet) for _ in range(n))


ALNUM = string.ascii_letters + string.digits
B64URL = ALNUM + "-_"
UPPER = string.ascii_uppercase + string.digits

TOKENS = {
    "github_classic": "ghp_" + rand(ALNUM, 36),
    "github_oauth": "gho_" + rand(ALNUM, 36),
    "github_user": "ghu_" + rand(ALNUM, 36),
    "github_server": "ghs_" + rand(ALNUM, 36),
    "github_refresh": "ghr_" + rand(ALNUM, 36),
    "github_fine_grained": "github_pat_" + rand(ALNUM, 22) + "_" + rand(ALNUM, 59),
    "jwt": "eyJ" + rand(B64URL, 30) + ".eyJ" + rand(B64URL, 40) + "." + rand(B64URL, 43),
    "aws_akia": "AKIA" + rand(UPPER, 16),
    "aws_asia": "ASIA" + rand(UPPER, 16),
    "openai": "sk-proj-" + rand(B64URL, 48),
    "anthropic": "sk-ant-api03-" + rand(B64URL, 80),
    "slack_bot": "xoxb-" + rand(string.digits, 12) + "-" + rand(ALNUM, 24),
    "google_api": "AIza" + rand(B64URL, 35),
}


@pytest.mark.parametrize("kind", sorted(TOKENS))
def test_token_kinds_are_redacted(kind: str) -> None:
    """Each token kind the issue lists becomes [REDACTED], with the command around it kept."""
    token = TOKENS[kind]
    out = scrub(f"curl -s https://api.example.com/x?key={token} --fail")
    assert token not in out
    assert out.startswith("curl -s https://api.example.com/x?key=")
    assert out.endswith(" --fail")
    assert REDACTED in out


def test_headers_and_url_credentials() -> None:
    """Bearer/Basic Authorization values and user:password@ in URLs are redacted."""
    secret = rand(ALNUM, 32)
    basic = "dXNlcjpw" + rand(ALNUM, 12) + "=="
    assert scrub(f'curl -H "Authorization: Bearer {secret}" https://x') == \
        'curl -H "Authorization: Bearer [REDACTED]" https://x'
    assert scrub(f"curl -H 'Authorization: Basic {basic}' https://x") == \
        "curl -H 'Authorization: Basic [REDACTED]' https://x"
    assert scrub(f"git clone https://bot:{secret}@github.com/o/r.git") == \
        "git clone https://[REDACTED]@github.com/o/r.git"
    assert scrub(f"curl -H 'X-Api-Key: {secret}' https://x") == "curl -H 'X-Api-Key: [REDACTED]' https://x"


def test_private_key_blocks() -> None:
    """PEM, OpenSSH and PGP private key blocks are redacted whole, even when cut short."""
    body = "\n".join(rand(ALNUM + "+/", 64) for _ in range(4))
    for label in ("RSA PRIVATE KEY", "OPENSSH PRIVATE KEY", "PRIVATE KEY", "PGP PRIVATE KEY BLOCK"):
        block = f"-----BEGIN {label}-----\n{body}\n-----END {label}-----"
        assert scrub(f"echo '{block}' > k") == f"echo '{REDACTED}' > k"
        assert scrub(f"echo '-----BEGIN {label}-----\n{body[:50]}") == f"echo '{REDACTED}"


def test_secret_assignments_and_flags() -> None:
    """NAME=value where NAME says secret, and --password/--token flags."""
    value = rand(ALNUM, 20)
    assert scrub(f"GH_TOKEN={value} gh pr view 1") == "GH_TOKEN=[REDACTED] gh pr view 1"
    assert scrub(f"export DB_PASSWORD='{value} x'") == "export DB_PASSWORD=[REDACTED]"
    assert scrub(f"mysql --password={value} db") == "mysql --password=[REDACTED] db"
    assert scrub(f"tool --api-key {value} run") == "tool --api-key [REDACTED] run"


@pytest.mark.parametrize("text", [
    "ls /nonexistent", "gh pr view 123", "npm test -- --watch=false",
    "git log --since=2026-11-30", "echo Basic configuration", "grep -r token src/",
    "kubectl get pods -n skills-test", "cat ghp_notes.txt",
])
def test_ordinary_commands_unchanged(text: str) -> None:
    """Commands without secrets pass through unchanged (so the detector sees them as they are)."""
    assert scrub(text) == text


def test_idempotent() -> None:
    """scrub(scrub(t)) == scrub(t) for every kind."""
    text = " ".join(TOKENS.values())
    once = scrub(text)
    assert scrub(once) == once
    assert all(token not in once for token in TOKENS.values())
