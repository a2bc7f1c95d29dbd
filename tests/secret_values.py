"""Planted secrets judged by value (issue 27): token-shaped values built here, the command shapes
they are planted in, and the oracle that says whether any piece of a value survived.

gitleaks (``tests/test_scrub_gitleaks.py``) needs its keyword next to a value, so once
``scrub()`` removes or changes the keyword, or when the command holds none, it is silent while
the value may still be there. The judge here is the value itself: the test knows every planted
value, and :func:`survivors` finds any piece of :data:`PIECE` or more characters of it in any
text a channel shows.

Every value is built in code from a published format or a detector's shape, drawn from a seeded
random generator (never a real token, never a copied file):

* ``vendor-formats``: token formats their issuers document (GitHub, GitLab, Slack, Stripe, npm,
  PyPI, Doppler, Hugging Face, Vault, Anthropic, OpenAI, Shopify, Twilio, DigitalOcean, Linear,
  Postman, Atlassian, Databricks, Grafana, SendGrid, Sentry ...);
* ``detect-secrets``: the shapes of detect-secrets' shape-based plugins (AWS, Artifactory,
  Azure storage, Basic auth in URLs, Cloudant, Discord, IBM COS HMAC, Mailchimp, Square,
  Telegram, Twilio, SoftLayer, npm ...);
* ``no-vendor``: the generic vendor-token shape, a short lowercase prefix, a separator and a
  long random body, for vendors no list names;
* ``structure-only``: passwords with nothing about their characters (letters, digits and
  ``/ + = ! @ % .``), recognised only by where the command puts them.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass

#: The length of the pieces looked for: no piece this long of a planted value may survive.
PIECE = 8

_rng = random.Random(27)

LOWER = string.ascii_lowercase
UPPER = string.ascii_uppercase
DIGITS = string.digits
ALNUM = LOWER + UPPER + DIGITS
HEX = DIGITS + "abcdef"
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"


def rand(alphabet: str, n: int, rng: random.Random | None = None) -> str:
    """``n`` characters drawn from ``alphabet`` by ``rng`` (default this module's; seeded: the
    corpus is the same every run)."""
    return "".join((rng or _rng).choice(alphabet) for _ in range(n))


def mixed(alphabet: str, n: int, rng: random.Random | None = None) -> str:
    """``n`` characters of ``alphabet`` holding a lower case letter, a capital and a digit (the
    characters of a real random token of that length nearly always do); drawn by ``rng``
    (default this module's)."""
    while True:
        s = rand(alphabet, n, rng)
        if any(c.islower() for c in s) and any(c.isupper() for c in s) \
                and any(c.isdigit() for c in s):
            return s


def _password() -> str:
    """A password with nothing about its characters: letters, digits and ``/ + = ! % .``,
    holding a ``/``, a ``+`` and an ``=`` (what breaks a URL's userinfo)."""
    body = list(mixed(ALNUM, 14)) + list(rand("!%.", 2)) + ["/", "+", "="]
    _rng.shuffle(body)
    return "".join(body)


def _build() -> dict[tuple[str, str], str]:
    """(source, kind) -> value."""
    v: dict[tuple[str, str], str] = {}
    vendor = {
        "github-classic": "ghp_" + mixed(ALNUM, 36),
        "github-fine-grained": "github_pat_" + mixed(ALNUM, 22) + "_" + mixed(ALNUM, 59),
        "gitlab-pat": "glpat-" + mixed(B64URL, 20),
        "slack-bot": "xoxb-" + rand(DIGITS, 12) + "-" + rand(DIGITS, 13) + "-" + mixed(ALNUM, 24),
        "stripe-live": "sk_live_" + mixed(ALNUM, 24),
        "npm": "npm_" + mixed(ALNUM, 36),
        "pypi": "pypi-AgEIcHlwaS5vcmc" + mixed(B64URL, 60),
        "doppler": "dp.st." + mixed(ALNUM, 43),
        "huggingface": "hf_" + mixed(ALNUM, 34),
        "vault-service": "hvs." + mixed(B64URL, 24),
        "anthropic": "sk-ant-api03-" + mixed(B64URL, 93) + "AA",
        "openai-project": "sk-proj-" + mixed(B64URL, 48),
        "shopify": "shpat_" + rand(HEX, 32),
        "twilio-api-key": "SK" + rand(HEX, 32),
        "digitalocean": "dop_v1_" + rand(HEX, 64),
        "linear": "lin_api_" + mixed(ALNUM, 40),
        "postman": "PMAK-" + rand(HEX, 24) + "-" + rand(HEX, 34),
        "atlassian": "ATATT3xFfGF0" + mixed(B64URL, 180),
        "databricks": "dapi" + rand(HEX, 32),
        "grafana-sa": "glsa_" + mixed(ALNUM, 32) + "_" + rand(HEX, 8),
        "sendgrid": "SG." + mixed(B64URL, 22) + "." + mixed(B64URL, 43),
        "sentry-user": "sntryu_" + rand(HEX, 64),
        "age-secret-key": "AGE-SECRET-KEY-1" + rand(UPPER + DIGITS, 58),
    }
    detect = {
        "aws-access-key": "AKIA" + rand(UPPER + DIGITS, 16),
        "aws-secret-key": mixed(B64, 40),
        "artifactory": "AKCp8" + mixed(ALNUM, 68),
        "azure-storage": mixed(B64, 86) + "==",
        "cloudant": rand(LOWER + DIGITS, 64),
        "discord-bot": "M" + mixed(B64URL, 23) + "." + mixed(B64URL, 6) + "." + mixed(B64URL, 27),
        "ibm-cos-hmac": rand(HEX, 48),
        "mailchimp": rand(HEX, 32) + "-us14",
        "square-oauth": "sq0csp-" + mixed(B64URL, 43),
        "telegram-bot": rand(DIGITS, 10) + ":AA" + mixed(B64URL, 33),
        "twilio-account": "AC" + rand(LOWER + DIGITS, 32),
        "softlayer": rand(LOWER + DIGITS, 64),
        "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiI" + mixed(B64URL, 30) + "." + mixed(B64URL, 43),
    }
    generic = {
        "prefix-underscore": "acme_" + mixed(ALNUM, 32),
        "prefix-live": "zeta_live_" + mixed(ALNUM, 40),
        "prefix-dash": "qx-" + mixed(ALNUM, 28),
        "prefix-two-parts": "orb_sk_" + mixed(ALNUM, 24),
        "prefix-b64url": "nimbus-" + mixed(B64URL, 44),
    }
    plain = {f"password-{i}": _password() for i in range(3)}
    plain["hex-40"] = rand(HEX, 40)
    plain["b64-32"] = mixed(B64, 32)
    for source, table in (("vendor-formats", vendor), ("detect-secrets", detect),
                          ("no-vendor", generic), ("structure-only", plain)):
        for kind, value in table.items():
            v[source, kind] = value
    return v


#: (source, kind) -> the planted value.
VALUES: dict[tuple[str, str], str] = _build()

#: (shape, template): ``{s}`` is the value. The contexts issue 27 names, where the command's own
#: grammar says the value is a secret; none holds a secret of its own.
SHAPES: tuple[tuple[str, str], ...] = (
    ("piped-with-token", "echo {s} | gh auth login --with-token"),
    ("piped-printf-with-token", "printf '%s\\n' '{s}' | somecli login --with-token"),
    ("piped-password-stdin", 'echo "{s}" | docker login -u ci --password-stdin ghcr.io'),
    ("herestring-with-token", "somecli auth login --with-token <<< '{s}'"),
    ("herestring-password-stdin", 'podman login -u ci --password-stdin quay.io <<< "{s}"'),
    ("heredoc-with-token", "gh auth login --with-token <<'EOF'\n{s}\nEOF"),
    ("heredoc-piped-stdin", "cat <<EOF | docker login --username ci --password-stdin\n{s}\nEOF"),
    ("auth-login-arg", "somecli auth login {s}"),
    ("login-arg", "vendorctl login {s}"),
    ("login-arg-after-flag", "vendorctl login --region eu {s}"),
    ("docker-login-p", "docker login -u ci -p {s} registry.example.com"),
    ("config-credentials", "printf '%s\\n' {s} > ~/.config/vendorctl/credentials"),
    ("config-token-file", "echo '{s}' > ~/.config/somecli/token"),
    ("netrc", "echo 'machine api.example.com login ci password {s}' >> ~/.netrc"),
    ("npmrc", "echo '//registry.example.com/:_authToken={s}' > ~/.npmrc"),
    ("pypirc", "printf '[pypi]\\nusername = __token__\\npassword = {s}\\n' > ~/.pypirc"),
    ("dotenv-file", "echo {s} >> deploy.env"),
    ("token-file", "printf '%s' '{s}' > .token"),
    ("tee-credentials", "tee ~/.aws/credentials <<< '{s}'"),
    ("heredoc-credentials", "cat > creds.txt <<EOF\n{s}\nEOF"),
    ("quoted-assignment", "printf '%s\\n' 'key = \"{s}\"' >> config.toml"),
    ("quoted-assignment-token", "printf '%s\\n' 'api_token = \"{s}\"' >> settings.toml"),
    ("echo-quoted-assignment", "echo 'secret: \"{s}\"' >> app.yaml"),
    ("url-userinfo", "git clone https://deploy:{s}@git.example.com/org/repo.git"),
    ("url-userinfo-db", "psql 'postgresql://app:{s}@db.example.com:5432/app' -c 'select 1'"),
    ("jdbc-query", "java -jar app.jar --db 'jdbc:mysql://db:3306/app?user=app&password={s}'"),
    ("jdbc-semicolon", "sqlline -u 'jdbc:sqlserver://db:1433;databaseName=app;user=sa;password={s};'"),
    ("jdbc-oracle-thin", "sqlplus -L 'jdbc:oracle:thin:app/{s}@db.example.com:1521/ORCL'"),
    ("ado-connection", "dotnet run -- \"Server=db;Database=app;User Id=sa;Pwd={s};\""),
    # Commands that store a secret (the break-it run after issue 27): the argument or the input
    # their own grammar names as the secret, with no secret-saying name before it.
    ("gh-secret-body", "gh secret set DEPLOY_KEY --body '{s}' --repo org/app"),
    ("gh-secret-b", "gh secret set DEPLOY_KEY -b {s}"),
    ("gh-secret-herestring", "gh secret set DEPLOY_KEY <<< '{s}'"),
    ("gh-secret-piped", "echo '{s}' | gh secret set DEPLOY_KEY --repo org/app"),
    ("secretsmanager-string", "aws secretsmanager create-secret --name prod/db --secret-string '{s}'"),
    ("secretsmanager-string-eq", "aws secretsmanager put-secret-value --secret-id prod/db "
     "--secret-string={s}"),
    ("secretsmanager-json", "aws secretsmanager create-secret --name prod/db --secret-string "
     "'{\"username\":\"app\",\"password\":\"{s}\"}'"),
    ("secretsmanager-json-plain-key", "aws --region eu-west-1 secretsmanager put-secret-value "
     "--secret-id prod/db --secret-string '{\"db\":\"{s}\"}'"),
    ("ssm-securestring", "aws ssm put-parameter --name /app/db --type SecureString --value '{s}'"),
    ("az-keyvault", "az keyvault secret set --vault-name kv-prod --name db --value {s}"),
    ("kubectl-from-literal", "kubectl create secret generic db --from-literal=db={s}"),
    ("kubectl-from-literal-blank", "kubectl create secret generic db --from-literal db='{s}'"),
    ("kubectl-from-literal-several", "kubectl -n prod create secret generic db "
     "--from-literal=user=app --from-literal=db={s} --from-literal=api={s}"),
    ("doctl-t", "doctl auth init -t {s}"),
    ("doctl-access-token", "doctl auth init --context ci --access-token {s}"),
    ("twine-p", "twine upload -u __token__ -p {s} dist/*"),
    ("twine-password", "twine upload --password '{s}' dist/*"),
    ("sudo-stdin", "echo '{s}' | sudo -S apt-get install -y jq"),
    ("chpasswd", "echo 'deploy:{s}' | chpasswd"),
    ("unzip-P", "unzip -P '{s}' backup.zip -d restore/"),
    ("docker-config-json", "echo '{\"auths\":{\"registry.example.com\":{\"auth\":\"{s}\"}}}' "
     "> ~/.docker/config.json"),
    ("docker-config-printf", "printf '{\"auths\":{\"r.example.com\":{\"auth\":\"%s\"}}}' '{s}' "
     "> ~/.docker/config.json"),
    ("kube-config-heredoc", "cat > ~/.kube/config <<EOF\napiVersion: v1\nusers:\n- name: ci\n"
     "  user:\n    token: {s}\nEOF"),
    ("kube-config-echo", "echo '{s}' >> ~/.kube/config"),
    ("docker-login-quoted", "docker 'login' -u ci -p {s} registry.example.com"),
    ("docker-login-dquoted", "docker \"login\" --password {s} registry.example.com"),
    ("argument", "somecli config set value {s}"),
    ("env-generic-name", "CONFIG_VALUE={s} ./deploy.sh"),
)

#: The shapes whose value is only recognisable by its own characters (the structure says
#: nothing secret): only token-shaped values are expected gone there, not plain passwords.
SHAPE_ONLY = {"argument", "env-generic-name"}


@dataclass(frozen=True)
class Planted:
    """One command of the corpus: where its value comes from, the shape, the value, the command."""

    source: str
    kind: str
    shape: str
    value: str
    command: str


def corpus() -> list[Planted]:
    """Every value in every shape (the plain passwords not in :data:`SHAPE_ONLY` shapes)."""
    out = []
    for (source, kind), value in VALUES.items():
        for shape, template in SHAPES:
            if shape in SHAPE_ONLY and source == "structure-only":
                continue
            out.append(Planted(source, kind, shape, value, template.replace("{s}", value)))
    return out


def pieces(value: str, n: int = PIECE) -> set[str]:
    """Every ``n``-character piece of ``value`` (none when it is shorter: issue 27 judges
    pieces of eight characters or more)."""
    if len(value) < n:
        return set()
    return {value[i:i + n] for i in range(len(value) - n + 1)}


def survivors(value: str, text: str, n: int = PIECE, context: str = "") -> list[str]:
    """The pieces of ``value`` (:func:`pieces`) found in ``text``, sorted; ``[]`` when none is.
    A piece the command also holds outside the value (``context``: the command with every
    occurrence of the value taken out) is no evidence and is not counted: gitleaks' example
    ``shippo_token: shippo_test_…`` names its vendor in the key, which stays."""
    return sorted(p for p in pieces(value, n) if p in text and p not in context)


def context_of(command: str, values: list[str] | set[str]) -> str:
    """``command`` with every occurrence of each of ``values`` taken out (longest first), each
    leaving a newline, so no piece spans the gap."""
    for value in sorted(values, key=len, reverse=True):
        command = command.replace(value, "\n")
    return command


def survivors_escaped(value: str, text: str) -> list[str]:
    """:func:`survivors` of ``value`` in ``text`` and in ``text`` with JSON's and the shell's
    escapes undone (``\\/``, ``\\u002b`` ...), so a value a channel escaped still counts."""
    found = set(survivors(value, text))
    unescaped = text.replace("\\/", "/").replace("\\\\", "\\")
    for code, ch in (("\\u002b", "+"), ("\\u003d", "="), ("\\u0026", "&"), ("\\u003c", "<"),
                     ("\\u003e", ">"), ("\\u0027", "'"), ("\\\"", "\"")):
        unescaped = unescaped.replace(code, ch)
    found.update(survivors(value, unescaped))
    return sorted(found)


#: gitleaks rules whose secret holds a name before the secret: curl's ``user:password`` (the
#: user name is no secret) and a cookie's ``name=value``. The planted value is what follows the
#: first separator.
_NAMED_SECRETS = {"curl-auth-user": ":", "gitlab-session-cookie": "="}


def planted_value(rule: str, secret: str) -> str:
    """The value of gitleaks' ``secret`` for ``rule`` that must not survive: the secret, or
    for :data:`_NAMED_SECRETS` the part after the name (``developer:PASSWORD`` -> ``PASSWORD``)."""
    sep = _NAMED_SECRETS.get(rule)
    if sep and sep in secret:
        return secret.split(sep, 1)[1].strip("\"'")
    return secret
