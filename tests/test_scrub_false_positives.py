"""The scrubber's false-positive budget (issue 16): ordinary agent commands stay as typed.

``tests/data/ordinary_commands.txt`` holds 726 ordinary commands an agent runs, one a line,
written for this test (git with SHAs, npm/pip/cargo/go versions, pytest node ids, kubectl, helm
and terraform with resource names, docker digests, UUIDs, timestamps, paths, and setting names
that mention a secret without holding one: ``KEY_ID=``, ``TOKEN_TTL=``,
``PASSWORD_MIN_LENGTH=``, ``SECRET_BACKEND=``, ``--set auth.existingSecret=``; issue 27 added
SHAs, UUIDs, digests and checksums in ordinary positions, logins without a credential, plain
writes to credentials-like files and connection strings without a password; the break-it run
after it added the look-alikes of secret-setting commands that set none, ``gh secret list``,
``kubectl create secret generic --from-file``, ``aws ssm get-parameter``, ``unzip -l``,
``twine upload dist/*``, ``echo y | sudo pacman -S``, and Subresource Integrity digests,
``--integrity sha512-…==``, five of which scrub() changed; the second break-it run 24 more:
``gh secret set N --env prod < file``, ``kubectl create secret tls``, ``unzip -qo``, ``vault kv
get``, ``xargs`` without a secret flag, ``openssl enc -pass file:``). At most 1 % of
them may change under ``scrub()``, and scrubbing must never make two of them one command for
the detector (C7: the note counts a command; two commands merged count as one).
"""

from __future__ import annotations

import collections
from pathlib import Path

import pytest

from repeat_failure.rules.normalize import normalize
from repeat_failure.rules.scrub import scrub

CORPUS = Path(__file__).parent / "data" / "ordinary_commands.txt"
#: Changed commands the budget allows, of the corpus.
BUDGET = 0.01
#: The corpus commands scrub() changes today, as it changes them (a name of a key inside a
#: Secret that says password: bitnami's ``auth.secretKeys.adminPasswordKey``).
KNOWN_CHANGED = {
    "helm upgrade --install pg bitnami/postgresql --set auth.existingSecret=pg-credentials "
    "--set auth.secretKeys.adminPasswordKey=postgres-password":
    "helm upgrade --install pg bitnami/postgresql --set auth.existingSecret=pg-credentials "
    "--set auth.secretKeys.adminPasswordKey=[REDACTED]",
}


def _corpus() -> list[str]:
    return [line for line in CORPUS.read_text().splitlines() if line]


def test_corpus_is_large_distinct_and_covers_the_issue_cases() -> None:
    """500 or more distinct commands (distinct after normalize too), with every case the issue
    names."""
    commands = _corpus()
    assert len(commands) >= 500
    assert len(set(commands)) == len(commands)
    assert len({normalize(c, "bash") for c in commands}) == len(commands)
    text = "\n".join(commands)
    for needle in ("KEY_ID=", "TOKEN_TTL=3600", "PASSWORD_MIN_LENGTH=12", "AUTH_MODE=oidc",
                   "SECRET_BACKEND=vault", "BASIC_AUTH_ENABLED=false",
                   "--set auth.existingSecret=app-secrets", "kubectl get secret ",
                   "gpg --recv-keys ", "ssh-keygen -t ed25519 -N ''", "ACCAB9X0QWERTY1234567890",
                   "git checkout ", "@sha256:", "pytest tests/", "terraform plan",
                   "gh secret list", "--from-file=./secrets/", "aws ssm get-parameter ",
                   "unzip -l ", "twine upload dist/*", "--integrity sha512-", "integrity=\"sha256-",
                   "kubectl create secret tls ", "unzip -qo ", "vault kv get ", "| xargs "):
        assert needle in text, needle


def test_at_most_one_percent_changed() -> None:
    """scrub() changes at most 1 % of the corpus, and exactly the known commands."""
    commands = _corpus()
    changed = {c: scrub(c) for c in commands if scrub(c) != c}
    assert changed == KNOWN_CHANGED
    assert len(changed) / len(commands) <= BUDGET
    print(f"\nfalse positives: {len(changed)} of {len(commands)} "
          f"({100 * len(changed) / len(commands):.2f} %)")


def test_no_two_commands_merge() -> None:
    """No two commands of the corpus that normalize keeps apart are equal after scrub and
    normalize."""
    groups = collections.defaultdict(set)
    for command in _corpus():
        groups[normalize(scrub(command), "bash")].add(normalize(command, "bash"))
    assert {k: v for k, v in groups.items() if len(v) > 1} == {}


@pytest.mark.parametrize("command", [
    "KEY_ID=3f0c1e9a-5b7d-4c2e-9f1a-0b2c3d4e5f60 ./rotate.sh", "TOKEN_TTL=3600 npm run dev",
    "export PASSWORD_MIN_LENGTH=12", "export AUTH_MODE=oidc", "export SECRET_BACKEND=vault",
    "export BASIC_AUTH_ENABLED=false", "helm upgrade app ./chart --set auth.existingSecret=app-secrets",
    "kubectl get secret my-app-tls-certificate-2024-prod-xyz -o yaml",
    "gpg --recv-keys 3F2C9A1B7E5D4C3B2A1F0E9D8C7B6A5F4E3D2C1B", "ssh-keygen -t ed25519 -N '' -f k",
    'python3 -c "print(\\"ACCAB9X0QWERTY1234567890\\")"',
])
def test_the_issue_cases_stay(command: str) -> None:
    """Each ordinary command the issue found changed is returned as it is."""
    assert scrub(command) == command


def test_two_key_ids_stay_two_commands() -> None:
    """The issue's merge: two commands differing in a KEY_ID became one."""
    a = scrub("KEY_ID=3f0c1e9a-5b7d-4c2e-9f1a-0b2c3d4e5f60 ./rotate.sh")
    b = scrub("KEY_ID=9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d ./rotate.sh")
    assert a != b
