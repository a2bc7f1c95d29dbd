"""Secrets by the grammar of the commands that store one (the break-it run after issue 27): each
command the run found keeping its planted value, as ``scrub()`` must now write it; their
look-alikes that set no secret, unchanged; Subresource Integrity digests, unchanged.

The planted values are built here from a seeded generator (never a real token): ``T`` a random
token of letters and digits, ``P`` a password whose ``/ + =`` break a word. The same commands,
with every value of :mod:`secret_values`, are judged on every channel by
``tests/test_scrub_values.py``.
"""

from __future__ import annotations

import base64
import hashlib
import random

import pytest

from repeat_failure.rules.scrub import REDACTED, scrub
from secret_values import ALNUM, mixed

_rng = random.Random(2027)


def _token(n: int) -> str:
    return mixed(ALNUM, n, _rng)


T = _token(20)
P = _token(6) + "/" + _token(4) + "+" + _token(3) + "=" + _token(3)
R = REDACTED


@pytest.mark.parametrize("command,expected", [
    # 1. gh secret set: --body/-b, and the value read from standard input.
    (f"gh secret set NAME --body {T}", f"gh secret set NAME --body {R}"),
    (f"gh secret set NAME -b {P}", f"gh secret set NAME -b {R}"),
    (f"gh secret set NAME -b{T}", f"gh secret set NAME -b{R}"),
    (f"gh secret set NAME <<< {T}", f"gh secret set NAME <<< {R}"),
    (f"echo {P} | gh secret set NAME", f"echo {R} | gh secret set NAME"),
    (f"gh secret set NAME < <(echo {T})", f"gh secret set NAME < <(echo {R})"),
    (f"gh secret set NAME <<EOF\n{T}\nEOF", f"gh secret set NAME <<EOF\n{R}\nEOF"),
    # 2. aws secretsmanager --secret-string (a JSON document goes whole; standard input).
    (f"aws secretsmanager create-secret --name n --secret-string {T}",
     f"aws secretsmanager create-secret --name n --secret-string {R}"),
    (f"aws secretsmanager put-secret-value --secret-id n --secret-string {P}",
     f"aws secretsmanager put-secret-value --secret-id n --secret-string {R}"),
    (f"aws secretsmanager create-secret --name n --secret-string={P}",
     f"aws secretsmanager create-secret --name n --secret-string={R}"),
    (f"aws secretsmanager create-secret --name n --secret-string '{{\"password\":\"{P}\"}}'",
     f"aws secretsmanager create-secret --name n --secret-string {R}"),
    (f"aws secretsmanager create-secret --name n --secret-string '{{\"user\":\"app\",\"db\":\"{P}\"}}'",
     f"aws secretsmanager create-secret --name n --secret-string {R}"),
    (f"echo -n {T} | aws secretsmanager put-secret-value --secret-id n --secret-string "
     "file:///dev/stdin",
     f"echo -n {R} | aws secretsmanager put-secret-value --secret-id n --secret-string "
     "file:///dev/stdin"),
    # 3. aws ssm put-parameter --value (SecureString, or no type given).
    (f"aws ssm put-parameter --name n --type SecureString --value {P}",
     f"aws ssm put-parameter --name n --type SecureString --value {R}"),
    (f"aws --region eu-west-1 ssm put-parameter --name n --value {T} --overwrite",
     f"aws --region eu-west-1 ssm put-parameter --name n --value {R} --overwrite"),
    # 4. az keyvault secret set --value.
    (f"az keyvault secret set --vault-name v --name n --value {P}",
     f"az keyvault secret set --vault-name v --name n --value {R}"),
    (f"az keyvault secret set --vault-name v -n n --value={T}",
     f"az keyvault secret set --vault-name v -n n --value={R}"),
    # 5. kubectl create secret generic --from-literal: every value, the keys stay.
    (f"kubectl create secret generic n --from-literal=key={P}",
     f"kubectl create secret generic n --from-literal=key={R}"),
    (f"kubectl create secret generic n --from-literal key={P}",
     f"kubectl create secret generic n --from-literal key={R}"),
    (f"kubectl -n prod create secret generic n --from-literal=user=app --from-literal=db={P} "
     f"--from-literal 'api={T}'",
     f"kubectl -n prod create secret generic n --from-literal=user={R} --from-literal=db={R} "
     f"--from-literal 'api={R}'"),
    # 6. doctl auth init -t / --access-token.
    (f"doctl auth init -t {P}", f"doctl auth init -t {R}"),
    (f"doctl auth init --access-token {P}", f"doctl auth init --access-token {R}"),
    # 7. twine -p / --password.
    (f"twine upload -p {P} dist/*", f"twine upload -p {R} dist/*"),
    (f"twine upload --password {P}", f"twine upload --password {R}"),
    (f"python -m twine upload -u __token__ -p {T} dist/*",
     f"python -m twine upload -u __token__ -p {R} dist/*"),
    # 8. sudo -S, chpasswd, unzip -P.
    (f"echo {P} | sudo -S cmd", f"echo {R} | sudo -S cmd"),
    (f"echo {P} | sudo -u root -S ls", f"echo {R} | sudo -u root -S ls"),
    (f"sudo -kS ls <<< {T}", f"sudo -kS ls <<< {R}"),
    (f'echo "user:{P}" | chpasswd', f"echo {R} | chpasswd"),
    (f"chpasswd <<< 'root:{T}'", f"chpasswd <<< {R}"),
    (f"unzip -P {P} file.zip", f"unzip -P {R} file.zip"),
    (f"unzip -o -P{T} file.zip", f"unzip -o -P{R} file.zip"),
    (f"/usr/bin/unzip -P {T} x.zip", f"/usr/bin/unzip -P {R} x.zip"),
    # 9. Docker's and kubectl's credential files.
    (f"echo '{{\"auths\":{{\"r\":{{\"auth\":\"{T}\"}}}}}}' > ~/.docker/config.json",
     f"echo '{{\"auths\":{{\"r\":{{\"auth\":{R}}}}}}}' > ~/.docker/config.json"),
    (f"printf '{{\"auths\":{{\"r\":{{\"auth\":\"%s\"}}}}}}' {P} > ~/.docker/config.json",
     f"printf '{{\"auths\":{{\"r\":{{\"auth\":{R}}}}}}}' {R} > ~/.docker/config.json"),
    (f"cat > ~/.kube/config <<EOF\nusers:\n- name: ci\n  user:\n    token: {T}\nEOF",
     f"cat > ~/.kube/config <<EOF\nusers:\n- name: ci\n  user:\n    token: {R}\nEOF"),
    (f"echo {P} >> ~/.kube/config", f"echo {R} >> ~/.kube/config"),
    (f'echo {T} > "$KUBECONFIG"', f'echo {R} > "$KUBECONFIG"'),
    # 10. A quoted subcommand (the shell removes the quotes), also in the other login rules.
    (f"docker 'login' -p {P}", f"docker 'login' -p {R}"),
    (f'docker "login" --password {P}', f'docker "login" --password {R}'),
    (f"'docker' login -u ci '-p' {T} r.example.com", f"'docker' login -u ci '-p' {R} r.example.com"),
    (f'podman "login" -u ci -p {T} quay.io', f'podman "login" -u ci -p {R} quay.io'),
    (f"somecli 'auth' 'login' {T}", f"somecli 'auth' 'login' {R}"),
    (f'echo {T} | somecli "login"', f'echo {R} | somecli "login"'),
    # A flag quoted whole is a flag too (it was taken for the login's positional argument).
    (f"docker login -u ci '--password' {P} r.example.com",
     f"docker login -u ci '--password' {R} r.example.com"),
    (f"echo {T} | docker 'login' '--password-stdin'", f"echo {R} | docker 'login' '--password-stdin'"),
    (f"somecli login '--token' {T}", f"somecli login '--token' {R}"),
])
def test_the_grammar_of_secret_setting_commands(command: str, expected: str) -> None:
    """The secret a command stores goes, the command around it stays; a second scrub changes
    nothing."""
    assert scrub(command) == expected
    assert scrub(expected) == expected


@pytest.mark.parametrize("command", [
    "gh secret list", 'gh secret set DEPLOY_KEY --body "$DEPLOY_KEY"', "gh secret set -f .env.ci",
    "gh variable set REGION --body eu-west-1",
    "aws ssm get-parameter --name /app/region --query Parameter.Value --output text",
    "aws ssm put-parameter --name /app/region --type String --value eu-west-1 --overwrite",
    "aws ssm put-parameter --name /app/hosts --type StringList --value a.example.com,b.example.com",
    "aws secretsmanager create-secret --name prod/db --secret-string file://db-secret.json",
    'aws secretsmanager put-secret-value --secret-id prod/db --secret-string "$(cat db.json)"',
    "az keyvault secret set --vault-name kv-prod --name db-cert --file ./cert.pem",
    "kubectl create secret generic app-config --from-file=./secrets/",
    "kubectl create configmap app-settings --from-literal=LOG_LEVEL=debug",
    'kubectl create secret generic db --from-literal=password="$DB_PASSWORD"',
    "doctl auth init --context staging", "twine upload dist/*",
    "twine upload --repository testpypi dist/*", "unzip -l backup.zip",
    "unzip -p bundle.zip manifest.json | jq .version", 'unzip -q -P "$ZIP_PASSWORD" s.zip',
    "echo y | sudo pacman -S --needed base-devel",
    'echo "10.0.0.5 db.internal" | sudo tee -a /etc/hosts', "cat users.txt | sudo chpasswd",
    "docker 'logout' ghcr.io", "echo '{\"credsStore\":\"desktop\"}' > ~/.docker/config.json",
    "kubectl config view --raw > ~/.kube/config", "git commit -m 'fix login' ab12cd34ef56",
    "cat > ~/.kube/config <<EOF\napiVersion: v1\nclusters:\n- cluster:\n    server: "
    "https://10.0.0.1:6443\n  name: kind-kind\ncurrent-context: kind-kind\nEOF",
])
def test_look_alikes_that_set_no_secret_stay(command: str) -> None:
    """The same commands reading, listing, naming a file or a ``$VAR``, or a plain type: as
    typed."""
    assert scrub(command) == command


def _sri(algorithm: str, data: bytes) -> str:
    return f"{algorithm}-" + base64.b64encode(hashlib.new(algorithm, data).digest()).decode()


def test_subresource_integrity_digests_stay() -> None:
    """SRI digests (sha1/256/384/512 of 2,000 seeded package names, in four command forms) are
    never changed: before, their base64 read as ``...Pw=`` (a name saying password) or an
    Artifactory token after ``/`` (``.../AP3s…``): 84 of these 32,000 texts changed. A
    secret-named value that is a digest still goes."""
    forms = ("npm install --integrity {d} {n}", "echo '\"integrity\": \"{d}\",' | jq . # {n}",
             "grep -n 'integrity=\"{d}\"' dist/{n}.html", "<script src={n}.js integrity={d}>")
    changed = []
    for i in range(2000):
        name = f"pkg{i}@1.0.{i % 7}"
        for algorithm in ("sha1", "sha256", "sha384", "sha512"):
            digest = _sri(algorithm, name.encode())
            for form in forms:
                command = form.format(d=digest, n=name)
                if scrub(command) != command:
                    changed.append(command)
    assert changed == []
    digest = _sri("sha256", b"x")
    assert scrub(f"TOKEN={digest} ./deploy.sh") == f"TOKEN={R} ./deploy.sh"
    assert scrub(f"npm ci --integrity {digest} \ue000") == f"npm ci --integrity {digest} \ue000"
