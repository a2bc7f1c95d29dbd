"""Scrubbing (C-AC13): token-shaped strings built in the test never survive scrub()."""

from __future__ import annotations

import base64
import random
import string

import pytest

from repeat_failure.rules import scrub_names as names
from repeat_failure.rules.scrub import REDACTED, scrub

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


MORE_TOKENS = {
    "gitlab": "glpat-" + rand(B64URL, 20),
    "npm": "npm_" + rand(ALNUM, 36),
    "pypi": "pypi-" + rand(B64URL, 60),
    "huggingface": "hf_" + rand(ALNUM, 34),
    "stripe_live": "sk_live_" + rand(ALNUM, 24),
    "stripe_restricted": "rk_live_" + rand(ALNUM, 24),
    "sendgrid": "SG." + rand(B64URL, 22) + "." + rand(B64URL, 43),
    "vault": "hvs." + rand(B64URL, 24),
    "age": "AGE-SECRET-KEY-1" + rand(string.ascii_uppercase + string.digits, 58),
    "google_oauth": "ya29." + rand(B64URL, 40),
    "github_trailing_underscore": "ghp_" + rand(ALNUM, 36),
}


@pytest.mark.parametrize("kind", sorted(MORE_TOKENS))
def test_more_token_kinds(kind: str) -> None:
    """Issuer-prefixed tokens beyond the first list are redacted (also when followed by `_`)."""
    token = MORE_TOKENS[kind]
    out = scrub(f"tool --x {token}_old y")
    assert token not in out and out.startswith("tool --x [REDACTED]")


@pytest.mark.parametrize("template, expected", [
    ("mysql -u root -p{s} db", "mysql -u root -p[REDACTED] db"),
    ("sshpass -p {s} ssh host", "sshpass -p [REDACTED] ssh host"),
    ("redis-cli -h h -a {s} ping", "redis-cli -h h -a [REDACTED] ping"),
    ("docker login -u me -p {s} reg", "docker login -u me -p [REDACTED] reg"),
    ("curl -u admin:{s} https://x", "curl -u admin:[REDACTED] https://x"),
    ("curl --user admin:{s} https://x", "curl --user admin:[REDACTED] https://x"),
    ("openssl enc -pass pass:{s} -in f", "openssl enc -pass pass:[REDACTED] -in f"),
    ("aws configure set aws_secret_access_key {s}",
     "aws configure set aws_secret_access_key [REDACTED]"),
    ("gh secret set NAME --body {s}", "gh secret set NAME --body [REDACTED]"),
    ("tool --secret-key {s} --access-key {s}", "tool --secret-key [REDACTED] --access-key [REDACTED]"),
    ("export MYSQL_PWD={s}", "export MYSQL_PWD=[REDACTED]"),
    ("export AUTH={s}", "export AUTH=[REDACTED]"),
    ("DB_PASSWORD=$'{s} x' run", "DB_PASSWORD=[REDACTED] run"),
    ('DB_PASSWORD=pre"{s} y" run', "DB_PASSWORD=[REDACTED] run"),
    ("DB_PASSWORD=abc\\ {s} run", "DB_PASSWORD=[REDACTED] run"),
    ("mysql --password \\\n{s} db", "mysql --password [REDACTED] db"),
    ("curl -H 'Authorization: Bearer \\\n{s}' x", "curl -H 'Authorization: Bearer [REDACTED]' x"),
    ("curl -d '{{\"password\":\"{s}\"}}' x", "curl -d '{\"password\":[REDACTED]}' x"),
    ("curl -d '{{\"token\": \"{s}\"}}' x", "curl -d '{\"token\": [REDACTED]}' x"),
    ("git clone https://u:p@{s}@github.com/o/r", "git clone https://[REDACTED]@github.com/o/r"),
    ("git clone https://{s}{s}@github.com/o/r", "git clone https://[REDACTED]@github.com/o/r"),
    ("curl -H 'Authorization: Basic dHFpbGtrOnNwTVhURmlMSlhn' x",
     "curl -H 'Authorization: Basic [REDACTED]' x"),
])
def test_credentials_by_position(template: str, expected: str) -> None:
    """Secrets recognised by where they stand in well-known commands, quoting and line
    continuations included."""
    secret = rand(ALNUM, 18)
    assert scrub(template.format(s=secret)) == expected


def test_cut_command_loses_its_last_word() -> None:
    """A command the hook cut may end in the head of a secret too short for any rule."""
    head = "ghp_" + rand(ALNUM, 11)
    assert scrub(f"ls /nonexistent {head}", cut=True) == "ls /nonexistent [REDACTED]"
    assert scrub(f"ls /nonexistent {head}") == f"ls /nonexistent {head}"


@pytest.mark.parametrize("text", [
    "echo " + "-" * 20000, "echo " + "a." * 10000, "echo " + "a" * 20000, "x=" * 10000,
    "curl " + "-u " * 5000, "mysql " + " -p" * 5000, "--" + "a-" * 10000, "Basic " * 3000,
    "https://" + ":" * 10000, "'" * 20000, '"' * 20000, "\\" * 20000,
])
def test_scrub_is_linear_on_long_adversarial_input(text: str) -> None:
    """No catastrophic backtracking: a 20,000-character adversarial command is scrubbed in well
    under a second (a quadratic pattern takes minutes on these)."""
    import time

    start = time.perf_counter()
    scrub(text)
    assert time.perf_counter() - start < 1.0


@pytest.mark.parametrize("template, expected", [
    ('curl -d "{{\\"password\\": \\"{s}\\"}}" x', 'curl -d "{{\\"password\\": [REDACTED]}}" x'),
    ("cat > c.yml <<EOF\npassword: {s}\napi_token: {s}\nEOF",
     "cat > c.yml <<EOF\npassword: [REDACTED]\napi_token: [REDACTED]\nEOF"),
    ("python3 -c \"d={{'password': '{s}'}}\"", "python3 -c \"d={{'password': [REDACTED]}}\""),
    ("SSHPASS={s} sshpass -e ssh h", "SSHPASS=[REDACTED] sshpass -e ssh h"),
    ("curl 'https://x/?user=bob&pass={s}&sig={s}'", "curl 'https://x/?user=bob&pass=[REDACTED]&sig=[REDACTED]'"),
    ("curl -H 'Cookie: session={s}' x", "curl -H 'Cookie: [REDACTED]' x"),
    ("curl -H Authorization:\\ Bearer\\ {s} x", "curl -H Authorization:\\ Bearer [REDACTED] x"),
    ("GITHUB_TOKEN=$(echo {s}) gh api", "GITHUB_TOKEN=[REDACTED] gh api"),
    (': x ; DB_PASSWORD="{s} and more words', ": x ; DB_PASSWORD=[REDACTED]"),
])
def test_second_review_leaks_are_closed(template: str, expected: str) -> None:
    """Shapes a second review found leaking: escaped JSON, config lines in heredocs, Python
    dicts, query strings, cookies, escaped spaces, command substitution, a quote the hook's cut
    left open."""
    secret = rand(ALNUM, 20)
    assert scrub(template.format(s=secret)) == expected.replace("{{", "{").replace("}}", "}")


@pytest.mark.parametrize("prefix", ["printf 'user\\n", "curl 'https://x/?a=1%26auth%3D"])
def test_prefixed_token_glued_to_text(prefix: str) -> None:
    """Issuer-prefixed tokens are found even right after a letter (an escape, URL encoding)."""
    token = "ghp_" + rand(ALNUM, 36)
    assert token not in scrub(prefix + token + "'")


@pytest.mark.parametrize("text", [
    "pg_dump --no-password orders", "ls examples/basic src/main.py",
    "cp -r templates/basic src2/app", "git log --author=alice", "mkdir -p dir",
    "git commit -m 'fix token refresh'",
])
def test_no_false_positives_that_merge_commands(text: str) -> None:
    """Ordinary commands stay as they are, so different commands are not merged by redaction."""
    assert scrub(text) == text


@pytest.mark.parametrize("text", ['"' + "token" * 4000, "TOKEN" * 4000, "curl " * 4000,
                                  "mysql -p " * 3000, "a: " * 6000, "?key=" * 4000])
def test_scrub_is_linear_on_repeated_keywords(text: str) -> None:
    """Keyword-dense input (a second review's quadratic cases) stays fast."""
    import time

    start = time.perf_counter()
    scrub(text)
    assert time.perf_counter() - start < 1.0


@pytest.mark.parametrize("template, expected", [
    ("keytool -list -keystore k.jks -storepass {s}", "keytool -list -keystore k.jks -storepass [REDACTED]"),
    ("zip -P {s} out.zip f", "zip -P [REDACTED] out.zip f"),
    ("ldapsearch -x -D cn=admin -w {s} -b dc=x", "ldapsearch -x -D cn=admin -w [REDACTED] -b dc=x"),
    ("htpasswd -b -c .htpasswd alice {s}", "htpasswd -b -c .htpasswd alice [REDACTED]"),
    ("smbclient //h/s -U bob%{s}", "smbclient //h/s -U bob%[REDACTED]"),
    ("ssh-keygen -t ed25519 -N {s} -f k", "ssh-keygen -t ed25519 -N [REDACTED] -f k"),
    ("openssl enc -aes-256-cbc -k {s} -in f", "openssl enc -aes-256-cbc -k [REDACTED] -in f"),
])
def test_positional_passwords(template: str, expected: str) -> None:
    """Passwords given by position to well-known tools."""
    assert scrub(template.format(s=rand(ALNUM, 16))) == expected


@pytest.mark.parametrize("text", ["zip -r out.zip dir", "ssh-keygen -t ed25519 -f key",
                                  "openssl x509 -in c.pem -noout", "keytool -list -v"])
def test_positional_rules_leave_other_flags(text: str) -> None:
    """The positional rules only touch the password argument."""
    assert scrub(text) == text


# --- detect-secrets as a test oracle (issue 6) ---------------------------------------------------

def _oracle_patterns() -> list[tuple[str, object, object]]:
    """(plugin name, plugin, pattern) for every detect-secrets plugin that recognises secrets by
    their shape (its ``denylist``): not the entropy plugins (any long random word), the keyword
    plugin (any ``password = x``: covered by our own name rules) or public IPv4 addresses."""
    plugins = pytest.importorskip("detect_secrets.core.plugins.util")
    skip = {"Base64HighEntropyString", "HexHighEntropyString", "KeywordDetector",
            "IPPublicDetector"}
    out = []
    for cls in sorted(plugins.get_mapping_from_secret_type_to_class().values(),
                      key=lambda c: c.__name__):
        if cls.__name__ not in skip:
            plugin = cls()
            out.extend((cls.__name__, plugin, pattern) for pattern in plugin.denylist)
    return out


#: Plugins whose pattern has no boundary although the format has a fixed length: their tokens
#: are drawn as whole words. An AWS access key ID is exactly 20 characters (gitleaks'
#: aws-access-token rule bounds it with ``\b``); detect-secrets also flags the first 20 of a
#: longer run of capitals and digits, which scrub() keeps (issue 16: ``ACCAB9X0QWERTY1234567890``
#: became ``[REDACTED]7890``).
WHOLE_WORD_PLUGINS = {"AWSKeyDetector"}


def test_whatever_detect_secrets_flags_is_redacted() -> None:
    """For every shape-based detect-secrets plugin and each of its patterns, strings drawn from
    the pattern itself (printable ASCII) are put in a command; whenever the plugin flags the
    command, it flags nothing in the scrubbed command. The oracle is detect-secrets' own
    patterns, so a token kind it knows and we do not fails here."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    gaps, flagged = [], set()
    patterns = _oracle_patterns()
    for name, plugin, pattern in patterns:
        @settings(max_examples=40, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(st.from_regex(pattern, alphabet=st.characters(min_codepoint=32, max_codepoint=126),
                             fullmatch=name in WHOLE_WORD_PLUGINS))
        def check(token: str) -> None:
            command = f"curl -H 'X: {token}' https://example.com"
            if plugin.analyze_line(filename="cmd", line=command, line_number=1):
                flagged.add(name)
                scrubbed = scrub(command)
                if plugin.analyze_line(filename="cmd", line=scrubbed, line_number=1):
                    gaps.append((name, pattern.pattern[:60], scrubbed))

        check()
    assert gaps == []
    # Every plugin's tokens were tried; a random string is never a JWT (the plugin decodes its
    # JSON), so a JWT is built: header and payload JSON, base64url, a random signature.
    assert flagged | {"JwtTokenDetector"} == {name for name, _, _ in patterns}
    import base64
    import secrets

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).decode().rstrip("=")

    jwt = ".".join([b64(b'{"alg":"HS256","typ":"JWT"}'), b64(b'{"sub":"agent","iat":1}'),
                    b64(secrets.token_bytes(32))])
    command = f"curl -H 'X-Token: {jwt}' https://example.com"
    (plugin,) = [p for name, p, _ in patterns if name == "JwtTokenDetector"][:1]
    assert plugin.analyze_line(filename="cmd", line=command, line_number=1)
    assert not plugin.analyze_line(filename="cmd", line=scrub(command), line_number=1)


@pytest.mark.parametrize("text", [
    "git checkout 3f2c9a1b7e5d4c3b2a1f0e9d8c7b6a5f4e3d2c1b", "git show HEAD~3:src/token.py",
    "docker pull python@sha256:" + "ab" * 32, "npm install lodash@4.17.21",
    "git commit -m 'fix token parsing'", "kubectl logs pod-7d9f8b6c5-x2x4z -n apps",
    "aws s3 ls s3://my-bucket/path/key", "make APPLY=1 DEPLOY_ENV=staging",
    "gh pr view 1234 --json title,body", "pytest tests/test_scrub.py -k secret",
    "grep -rn 'BEGIN CERTIFICATE' /etc/ssl", "curl https://example.com/api/v1/users?page=2",
    "python -m http.server 8000", "ssh deploy@10.0.0.5 uptime", "ls /tmp/APPLICATIONS",
    "echo ACCESS_GRANTED", "go test ./... -run TestSK", "cat README.md | head -20",
])
def test_plain_commands_are_not_redacted(text: str) -> None:
    """The false-positive list: ordinary commands (SHAs, digests, versions, paths, numbers,
    words that merely mention secrets) pass through unchanged."""
    assert scrub(text) == text


# --- third review: verified leaks ---------------------------------------------------------------

@pytest.mark.parametrize("template, expected", [
    # curl: -u in a cluster of short flags, quoted or not; the user stays, the closing quote too.
    ("curl -su 'admin:{s}' https://x", "curl -su 'admin:[REDACTED]' https://x"),
    ("curl -sSfu admin:{s} https://x", "curl -sSfu admin:[REDACTED] https://x"),
    ("curl -u 'admin:{s}' https://x", "curl -u 'admin:[REDACTED]' https://x"),
    ('curl -sS --user "admin:{s} x" https://x', 'curl -sS --user "admin:[REDACTED]" https://x'),
    ("curl -uadmin:{s} https://x", "curl -uadmin:[REDACTED] https://x"),
    ("curl --proxy-user admin:{s} https://x", "curl --proxy-user admin:[REDACTED] https://x"),
    ("curl -x http://p:3128 -U admin:{s} https://x", "curl -x http://p:3128 -U admin:[REDACTED] https://x"),
    # HTTPie, cloud and registry logins, lftp, sqlcmd.
    ("http -a admin:{s} https://x", "http -a admin:[REDACTED] https://x"),
    ("https --auth admin:{s} x.example", "https --auth admin:[REDACTED] x.example"),
    ("xh -a 'admin:{s}' https://x", "xh -a 'admin:[REDACTED]' https://x"),
    ("az login -u me -p {s}", "az login -u me -p [REDACTED]"),
    ("az acr login -n reg -u me -p {s}", "az acr login -n reg -u me -p [REDACTED]"),
    ("oc login -u x -p {s}", "oc login -u x -p [REDACTED]"),
    ("oc login https://api.c:6443 -u x -p{s} --insecure-skip-tls-verify",
     "oc login https://api.c:6443 -u x -p[REDACTED] --insecure-skip-tls-verify"),
    ("podman login -u me -p {s} quay.io", "podman login -u me -p [REDACTED] quay.io"),
    ("helm registry login r.example -u me -p {s}", "helm registry login r.example -u me -p [REDACTED]"),
    ("lftp -u user,{s} host", "lftp -u user,[REDACTED] host"),
    ("lftp -u 'user,{s}' sftp://host", "lftp -u 'user,[REDACTED]' sftp://host"),
    ("sqlcmd -S h -U u -P {s}", "sqlcmd -S h -U u -P [REDACTED]"),
    ("sqlcmd -S h -U u -P {s} -Q 'SELECT 1'", "sqlcmd -S h -U u -P [REDACTED] -Q 'SELECT 1'"),
    # Header names ending in -Token, -Key, -Secret, -Auth, -Password (any case).
    ("curl -H 'X-Vault-Token: {s}' https://x", "curl -H 'X-Vault-Token: [REDACTED]' https://x"),
    ("curl -H 'X-GitHub-Token: {s}' https://x", "curl -H 'X-GitHub-Token: [REDACTED]' https://x"),
    ("curl -H 'Private-Token: {s}' https://x", "curl -H 'Private-Token: [REDACTED]' https://x"),
    ("curl -H 'x-client-secret:{s}' https://x", "curl -H 'x-client-secret:[REDACTED]' https://x"),
    ("curl -H 'X-Auth: {s}' -H 'X-Admin-Password: {s}' https://x",
     "curl -H 'X-Auth: [REDACTED]' -H 'X-Admin-Password: [REDACTED]' https://x"),
    ("curl --header X-Consumer-Key:{s} https://x", "curl --header X-Consumer-Key:[REDACTED] https://x"),
    ("http https://x X-Vault-Token:{s}", "http https://x X-Vault-Token:[REDACTED]"),
    ("curl -H 'X-Authorization: Bearer {s}' x", "curl -H 'X-Authorization: Bearer [REDACTED]' x"),
    # npm config set with the key and value as two words.
    ("npm config set //registry.example.com/:_authToken {s}",
     "npm config set //registry.example.com/:_authToken [REDACTED]"),
    ("npm config set --location=project //r.example/:_password '{s}' && npm ci",
     "npm config set --location=project //r.example/:_password [REDACTED] && npm ci"),
    ("yarn config set npmAuthToken {s}", "yarn config set npmAuthToken [REDACTED]"),
])
def test_third_review_leaks_are_closed(template: str, expected: str) -> None:
    """Shapes a third review found leaking: curl's clustered short flags, HTTPie, az/oc and
    registry logins, lftp, sqlcmd, secret-named headers beyond a fixed list, npm's space form."""
    secret = rand(ALNUM, 20)
    out = scrub(template.format(s=secret))
    assert out == expected
    assert scrub(out) == out


@pytest.mark.parametrize("text, expected", [
    ('curl -d \'{"password": "tr0ub4dor zebra quantum la', 'curl -d \'{"password": [REDACTED]'),
    ('curl -d \'{"user": "bob", "api_key": "k3y with words', 'curl -d \'{"user": "bob", "api_key": [REDACTED]'),
    ('curl -d "{\\"token\\": \\"abc def', 'curl -d "{\\"token\\": [REDACTED]'),
    ("python3 -c \"d={'password': 'tr0ub4dor zebra", "python3 -c \"d={'password': [REDACTED]"),
    ('cfg = {secret: "tr0ub4dor zebra quantum', "cfg = {secret: [REDACTED]"),
    ('x --opts password = "tr0ub4dor zebra', 'x --opts password = [REDACTED]'),
    ('curl -d \'{"password": "a", "token": "tr0ub4dor zebra',
     'curl -d \'{"password": [REDACTED], "token": [REDACTED]'),
])
def test_cut_text_ending_inside_a_quoted_secret_value(text: str, expected: str) -> None:
    """A command the hook cut inside the quoted value of a secret-named key: the value runs to
    the end of the (cut) text, so none of its words is kept."""
    assert scrub(text, cut=True) == expected
    assert scrub(expected, cut=True) == expected


@pytest.mark.parametrize("text", [
    "grep '\"token\": \"' config.json", "jq '.password' f.json | head -1",
    'echo "{\\"api_key\\": \\"',
])
def test_unclosed_quote_is_no_value_unless_cut(text: str) -> None:
    """Without the cut, an unclosed quote after a secret-named key is left alone (a grep for the
    key is an ordinary command)."""
    assert scrub(text) == text


@pytest.mark.parametrize("text", [
    "curl -H 'Content-Type: application/json' -H 'Accept: */*' https://x",
    "curl -sSfL -H 'Accept: application/vnd.github+json' https://api.github.com/repos/o/r",
    "curl -fsSL https://example.com:8443/install.sh", "curl -su admin https://x",
    "http GET https://x Accept:application/json", "gh auth login -p ssh -h github.com",
    "docker run -v ./deploy-key:/root/.ssh/id_rsa img", "docker run -v /etc/tls-key:/certs img",
    "docker login -u me --password-stdin reg", "lftp -u user host", "sqlcmd -S h -E -Q 'SELECT 1'",
    "npm config get registry", "grep _authToken ~/.npmrc", "kubectl get secret api-key -o yaml",
    "az login --use-device-code", "oc login https://api.c:6443 --web",
])
def test_third_review_rules_leave_ordinary_commands(text: str) -> None:
    """The new rules redact passwords only: plain headers, ports, paths with -key in them and
    logins without a password stay as they are."""
    assert scrub(text) == text


@pytest.mark.parametrize("text", [
    '{"password": \'' + "a" * 5000, ('"token": "x", ' * 400) + '"password": \'' + "b" * 2000,
    "a-" * 3000 + ":", ("x-token " * 600) + ":", "curl " + "-su " * 1500 + "a:", "npm set " * 800,
    ("login -p " * 600), "http -a " * 800 + "a:", "a-" * 10000 + ': "x', "password" * 3000 + ': "',
])
def test_new_rules_are_linear_cut_or_not(text: str) -> None:
    """The third review's rules stay fast on adversarial input, cut or not (a cut text's last
    word was found by a search quadratic in a long word before a final space)."""
    import time

    for cut in (False, True):
        start = time.perf_counter()
        scrub(text, cut=cut)
        assert time.perf_counter() - start < 1.0


# --- issue 16: tokens standing on their own, names that only mention a secret --------------------

HEX = "0123456789abcdef"
LOWER = string.ascii_lowercase + string.digits


def _issue16_tokens() -> dict[str, str]:
    """One token of each format the issue found leaking, built here (never a real token)."""
    return {
        "shopify": "shpat_" + rand(HEX, 32),
        "heroku_v2": "HRKU-AA" + rand(B64URL, 58),
        "digitalocean": "dop_v1_" + rand(HEX, 64),
        "slack_refresh": "xoxe-1-" + rand(UPPER, 146),
        "openshift": "sha256~" + rand(B64URL, 43),
        "grafana_sa": "glsa_" + rand(ALNUM, 32) + "_" + rand(HEX, 8),
        "sentry_user": "sntryu_" + rand(HEX, 64),
        "notion": "ntn_" + rand(string.digits, 11) + rand(ALNUM, 35),
        "hf_org": "api_org_" + rand(string.ascii_letters, 34),
        "databricks": "dapi" + rand(HEX, 32),
        "azure_ad": rand(ALNUM, 3) + "8Q~" + rand(ALNUM + "~._-", 34),
        "harness": "pat." + rand(B64URL, 22) + "." + rand(ALNUM, 24) + "." + rand(ALNUM, 20),
        "planetscale": "pscale_tkn_" + rand(B64URL, 43),
        "atlassian": "ATATT3" + rand(B64URL, 186),
        "doppler": "dp.pt." + rand(ALNUM, 43),
        "linear": "lin_api_" + rand(ALNUM, 40),
    }


@pytest.mark.parametrize("kind", sorted(_issue16_tokens()))
@pytest.mark.parametrize("template", [
    "tool auth login {t}", "echo {t} | tool login --with-token", "printf '%s' '{t}' > credentials",
    "tool config set value \"{t}\"", "CONFIG_VALUE={t} ./deploy.sh", "cat > creds <<EOF\n{t}\nEOF",
    "curl -d '{{\"value\": \"{t}\"}}' https://x", "printf 'value: {t}\\n' >> values.yaml",
    "curl 'https://x/v1?q={t}&page=2'",
])
def test_issue16_tokens_standing_on_their_own(kind: str, template: str) -> None:
    """Each format is redacted wherever it stands (argument, piped in, quoted, after =, in a
    heredoc, JSON, YAML, a URL), the command around it kept."""
    token = _issue16_tokens()[kind]
    out = scrub(template.format(t=token))
    assert out == template.format(t=REDACTED)


@pytest.mark.parametrize("text, expected", [
    ("slack auth login xoxe-1-" + "A1" * 73, "slack auth login [REDACTED]"),
    ("curl -X POST https://hooks.slack.com/triggers/T0ABC/123/" + "a1" * 16 + " -d @m.json",
     "curl -X POST [REDACTED] -d @m.json"),
    ("echo 'dropboxToken = \"" + "ab12" * 4 + "\"' >> .env", "echo 'dropboxToken = [REDACTED]' >> .env"),
    ("cat > s.py <<'EOF'\nvar bitbucketToken string = \"k3y" + "x" * 29 + "\"\nEOF",
     "cat > s.py <<'EOF'\nvar bitbucketToken string = [REDACTED]\nEOF"),
    ("tee -a c.ini <<< 'System.setProperty(\"DROPBOX_TOKEN\", \"abc123def456ghi\")'",
     "tee -a c.ini <<< 'System.setProperty(\"DROPBOX_TOKEN\", [REDACTED])'"),
    ("echo '<herokuToken>\n  3f0c1e9a-5b7d-4c2e-9f1a-0b2c3d4e5f60\n</herokuToken>' >> c.xml",
     "echo '<herokuToken>\n  [REDACTED]\n</herokuToken>' >> c.xml"),
    ("echo 'const MessageBirdClientID = \"12345678-ABCD-ABCD-ABCD-1234567890AB\"' >> a.js",
     "echo 'const MessageBirdClientID = [REDACTED]' >> a.js"),
    ("echo 'api_token ::= \"s3cr3tvalue\"' >> Makefile", "echo 'api_token ::= [REDACTED]' >> Makefile"),
    ("echo '$ETSYToken .= \"jwxz7ha47qa3ducs\"' >> a.php", "echo '$ETSYToken .= [REDACTED]' >> a.php"),
    ("echo " + base64.b64encode(b"api:key-" + rand(LOWER, 30).encode()).decode() + " | base64 -d",
     "echo [REDACTED] | base64 -d"),
    ("kubectl apply -f - <<EOF\nkind: Secret\ndata:\n  extra: YWRtaW46cGFzc3dvcmQ=\n  tls.crt: |\n"
     "    LS0tLS1CRUdJTiBDRVJU\nEOF",
     "kubectl apply -f - <<EOF\nkind: Secret\ndata:\n  extra: [REDACTED]\n  tls.crt: |\n"
     "    [REDACTED]\nEOF"),
    ("curl -X POST --user \"{acd3c08b-74e8}\":\"{" + rand(ALNUM, 14) + "}\" https://x",
     "curl -X POST --user \"{acd3c08b-74e8}\":[REDACTED] https://x"),
    ("export BUNDLE_GEMS__CONTRIBSYS__COM=" + rand(HEX, 8) + ":" + rand(HEX, 8),
     "export BUNDLE_GEMS__CONTRIBSYS__COM=[REDACTED]"),
    ("mvn deploy -Dpassword=hunter2", "mvn deploy -Dpassword=[REDACTED]"),
    ("echo PAſſWORD=hunter2", "echo PAſſWORD=[REDACTED]"),
])
def test_issue16_shapes_that_leaked(text: str, expected: str) -> None:
    """Shapes gitleaks flagged after scrub (issue 16): a Slack configuration token and a
    /triggers/ webhook, vendor-named assignments in code and config syntax (Go, Java, XML, PHP,
    Makefile), a base64-encoded credential, a Kubernetes Secret manifest, curl's quoted user and
    password, Bundler's gem-server credentials, a Java system property."""
    assert scrub(text) == expected
    assert scrub(expected) == expected


@pytest.mark.parametrize("name, kind", [
    ("GITHUB_TOKEN", names.SECRET), ("PGPASSWORD", names.SECRET), ("SSHPASS", names.SECRET),
    ("mySecretString", names.SECRET), ("todo_secret_do_not_commit", names.SECRET),
    ("auth.adminPassword", names.SECRET), ("DB_PASSWORD_PROD", names.SECRET), ("api-key", names.SECRET),
    ("TOKEN_TTL", names.NOT_SECRET), ("PASSWORD_MIN_LENGTH", names.NOT_SECRET),
    ("SECRET_BACKEND", names.NOT_SECRET), ("AUTH_MODE", names.NOT_SECRET),
    ("BASIC_AUTH_ENABLED", names.NOT_SECRET), ("KEY_ID", names.NOT_SECRET),
    ("auth.existingSecret", names.NOT_SECRET), ("GITHUB_TOKEN_FILE", names.NOT_SECRET),
    ("MAX_TOKENS", names.NOT_SECRET), ("BYPASS", names.NOT_SECRET), ("PWD", names.NOT_SECRET),
    ("key", names.NOT_SECRET), ("auth.adminUser", names.NOT_SECRET),
    ("TWITTER_CONSUMER_KEY", names.SECRET), ("SUMO_ACCESS_ID", names.VENDOR),
    ("MessageBirdClientID", names.VENDOR), ("SENTRY_RELEASE", names.NOT_SECRET),
    ("DATADOG_SITE", names.NOT_SECRET), ("build_dir", names.NOT_SECRET),
])
def test_name_kind(name: str, kind: int) -> None:
    """What a name says about its value (repeat_failure.rules.scrub_names.name_kind)."""
    assert names.name_kind(name) == kind


@pytest.mark.parametrize("kind, value, secret", [
    (names.SECRET, "hunter2", True), (names.SECRET, "'two words'", True), (names.SECRET, "true", False),
    (names.SECRET, "''", False), (names.SECRET, "$GH_TOKEN", False), (names.SECRET, "${NPM_TOKEN}", False),
    (names.SECRET, "[REDACTED]", False), (names.SECRET, "$(cat f)", False),
    (names.SECRET, "$(echo v)", True),
    (names.VENDOR, "su9OL59biWiJu7", True), (names.VENDOR, "datadoghq.eu", False),
    (names.VENDOR, "v1.2.3", False), (names.NOT_SECRET, "hunter2", False),
])
def test_value_is_secret(kind: int, value: str, secret: bool) -> None:
    """Which values of a name of each kind are redacted (repeat_failure.rules.scrub_names.value_is_secret)."""
    assert names.value_is_secret(kind, value) is secret


@pytest.mark.parametrize("text,expected", [
    # Claude Code 2.1.332's stream-json init line names where its key comes from
    ('{"apiKeySource":"ANTHROPIC_API_KEY","x":1}', '{"apiKeySource":"ANTHROPIC_API_KEY","x":1}'),
    ("mytool --api-key-env GITHUB_TOKEN", "mytool --api-key-env GITHUB_TOKEN"),
    ("export API_KEY=OPENAI_API_KEY", "export API_KEY=OPENAI_API_KEY"),
    ("TOKEN=GH_TOKEN_V2", "TOKEN=GH_TOKEN_V2"),
    # not a variable's name: digits inside a word, one word, lower case
    ("export API_KEY=AB12_CD34EF", "export API_KEY=[REDACTED]"),
    ("PASSWORD=HUNTER_2", "PASSWORD=[REDACTED]"),
    ("export API_KEY=ANTHROPIC", "export API_KEY=[REDACTED]"),
])
def test_a_variables_name_as_the_value_is_kept(text: str, expected: str) -> None:
    """A secret-named key whose value is an environment variable's name names the secret's
    source and holds no secret (a real Claude Code transcript broke as JSON when its
    ``apiKeySource`` value was redacted with its quotes)."""
    assert scrub(text) == expected


def test_a_json_list_of_words_is_no_assignment() -> None:
    """Qwen Code's stream-json lists its commands (``["auth","batch",...]``): a secret-sounding
    word before another quoted word in a list is no name and value; the quoted pair is an
    assignment only as a call's first arguments."""
    assert scrub('"slash_commands":["auth","batch","bug"]') == '"slash_commands":["auth","batch","bug"]'
    value = "abcdef" + "123456"
    assert scrub(f'setProperty("X_TOKEN", "{value}")') == 'setProperty("X_TOKEN", [REDACTED])'
