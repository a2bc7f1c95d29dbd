"""Regressions found by trying to break the scrubber after issue 16 (C-AC13): ordinary
commands that changed or merged, kept exactly; the secrets beside them still go."""

from __future__ import annotations

import pytest

from repeat_failure.rules.normalize import normalize
from repeat_failure.rules.scrub import REDACTED, scrub

# A password-shaped value built at runtime (no credential in the source).
PW = "hun" + "ter" + "2x9Q"


@pytest.mark.parametrize("text, expected", [
    # NAME=value inside a quoted word: the value ends at the closing quote (the quote was read
    # as opening a new quoted part running to the end of the text, which then went).
    (f"curl -d 'password={PW}' https://a.example/x",
     f"curl -d 'password={REDACTED}' https://a.example/x"),
    (f"curl -d 'user=bob&password={PW}' -H 'Accept: x' https://a/b",
     f"curl -d 'user=bob&password={REDACTED}' -H 'Accept: x' https://a/b"),
    (f'sh -c "TOKEN={PW}" && make test', f'sh -c "TOKEN={REDACTED}" && make test'),
    (f"pytest 'tests/test_api.py::test_x[password={PW}]' -q",
     f"pytest 'tests/test_api.py::test_x[password={REDACTED}' -q"),  # "]" is the word's
    (f"echo 'a=1' 'TOKEN={PW}' done", f"echo 'a=1' 'TOKEN={REDACTED}' done"),
    # Outside quotes a quoted part still belongs to the value (shell concatenation).
    (f"TOKEN={PW}'more words' make", f"TOKEN={REDACTED} make"),
])
def test_an_assignment_inside_quotes_ends_at_the_closing_quote(text: str, expected: str) -> None:
    assert scrub(text) == expected
    assert scrub(scrub(text)) == scrub(text)


@pytest.mark.parametrize("text", [
    # A Kubernetes secretKeyRef names the key of a Secret; --from-file's value is a path.
    "helm upgrade x ./c --set env[0].valueFrom.secretKeyRef.key=password",
    "helm upgrade x ./c --set secretKeyRef.key=token",
    "kubectl create secret generic db --from-file=password=./pw.txt",
    "kubectl create secret generic db --from-file=token=/run/a/token",
    # A command substitution computes the value: it holds none (its text is scrubbed as any).
    "export GITHUB_TOKEN=$(gh auth token)",
    "export TOKEN=$(vault read -field=token secret/a)",
    # Code: a call or an attribute path is no literal secret.
    "python -c 'token = get_token(); print(token)'",
    "python -c 'password = getpass.getpass()'",
    "node -e 'const token = process.env.NPM_TOKEN; console.log(token)'",
    "node -e 'const secret = crypto.randomBytes(16)'",
])
def test_ordinary_commands_stay(text: str) -> None:
    assert scrub(text) == text


@pytest.mark.parametrize("a, b", [
    (f"curl -d 'password={PW}' https://a.example/x", f"curl -d 'password={PW}' https://a.example/y"),
    ("export TOKEN=$(vault read -field=token a)", "export TOKEN=$(vault read -field=token b)"),
    ("python -c 'password = input()'", "python -c 'password = getpass.getpass()'"),
    ("kubectl create secret generic db --from-file=password=./a.txt",
     "kubectl create secret generic db --from-file=password=./b.txt"),
])
def test_distinct_commands_stay_distinct(a: str, b: str) -> None:
    assert normalize(scrub(a), "x", now=0.0) != normalize(scrub(b), "x", now=0.0)


@pytest.mark.parametrize("text, expected", [
    (f"export TOKEN=$(echo {PW})", f"export TOKEN={REDACTED}"),
    (f"export TOKEN=$(printf %s {PW})", f"export TOKEN={REDACTED}"),
    (f"python -c 'token = {PW}'", f"python -c 'token = {REDACTED}'"),
    # A backquoted value is a Go raw string as often as a command substitution.
    (f'echo "xToken := `{PW}`" >> .env', f'echo "xToken := {REDACTED}" >> .env'),
    (f"kubectl create secret generic db --from-literal=password={PW}",
     f"kubectl create secret generic db --from-literal=password={REDACTED}"),
])
def test_literal_secrets_beside_them_still_go(text: str, expected: str) -> None:
    assert scrub(text) == expected


@pytest.mark.parametrize("a, b", [
    # A bare $VAR holds no secret (NAME=$VAR was kept already; the positional rules took it).
    ('curl -H "Authorization: Bearer $TOKEN" https://api.x/u',
     'curl -H "Authorization: Bearer $GH_TOKEN" https://api.x/u'),
    ('curl -u "$USER:$PASS" https://x/a', 'curl -u "$USER:$PASSWORD" https://x/a'),
    ("docker login -u u -p $PW r.io", "docker login -u u -p $REG_PW r.io"),
    ("mysql -u root -p$MYSQL_PW db", "mysql -u root -p$PW db"),
    # git's credential.helper names a program; Vault's key=@file reads a file.
    ("git -c credential.helper=store fetch", "git -c credential.helper=cache fetch"),
    ("vault kv put secret/app password=@pw1.txt", "vault kv put secret/app password=@pw2.txt"),
])
def test_references_and_helpers_stay(a: str, b: str) -> None:
    assert (scrub(a), scrub(b)) == (a, b)


@pytest.mark.parametrize("text, expected", [
    (f'curl -H "Authorization: Bearer {PW}abcdef" https://x',
     f'curl -H "Authorization: Bearer {REDACTED}" https://x'),
    (f"docker login -u u -p {PW} r.io", f"docker login -u u -p {REDACTED} r.io"),
    (f"mysql -u root -p{PW} db", f"mysql -u root -p{REDACTED} db"),
    (f'curl -u "bob:{PW}" https://x', f'curl -u "bob:{REDACTED}" https://x'),
    (f"vault kv put secret/app password=@{PW}", f"vault kv put secret/app password={REDACTED}"),
])
def test_literal_credentials_in_those_places_still_go(text: str, expected: str) -> None:
    assert scrub(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("export GITHUB_TOKEN=$(gh auth token)", f"export GITHUB_TOKEN=$(gh auth {REDACTED}"),
    ('"password=$(gh auth token)"', f'"password=$(gh auth {REDACTED}'),
])
def test_a_cut_substitution_is_scrubbed_once_for_all(text: str, expected: str) -> None:
    assert scrub(text, cut=True) == expected
    assert scrub(expected, cut=True) == expected
