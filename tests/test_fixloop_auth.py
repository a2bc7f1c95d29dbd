"""The fixloop's credentials (issue 20 item 5; repeat_failure/fixloop/auth.py): a GitHub App end to end
against the fake GitHub, which verifies the App's JWT with the App's public key (PyJWT, RS256)
and hands out installation tokens that expire; and the token file read again after a 401.

The RSA key is generated in the test at run time (cryptography) and written to tmp_path: no key
is in the repository. Installation tokens are made by the fake at run time too.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from repeat_failure.config import ConfigError
from repeat_failure.fixloop.app import FixloopApp, read_token
from repeat_failure.fixloop.auth import JWT_LIFETIME_S, AppTokens, FileToken
from repeat_failure.fixloop.config import GitHubApp, parse_fixloop_config
from repeat_failure.fixloop.github import GitHub, GitHubError
from tests.fakegithub import T0, FakeGitHub

REPO = "acme/web"
OTHER = "acme/api"
AGENT = "acme-agent"
APP_ID = 4242


def sha(n: int) -> str:
    return f"{n:040x}"


def tree(n: int) -> str:
    return f"{n + 0xa000:040x}"


class WallClock:
    """The wall clock plus an offset a test moves (shared by the fake and the fixloop: the
    fake checks JWT times and token expiry against it, as GitHub does against its own)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


@pytest.fixture(scope="module")
def keys() -> tuple[bytes, bytes]:
    """A throwaway RSA key pair: (private PEM, public PEM), made here at run time."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.PEM,
                                serialization.PrivateFormat.TraditionalOpenSSL,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    return private, public


@pytest.fixture
def key_file(tmp_path: Path, keys: tuple[bytes, bytes]) -> Path:
    path = tmp_path / "private-key.pem"
    path.write_bytes(keys[0])
    return path


def config(tmp_path: Path, fake: FakeGitHub, key_file: Path, **app: object):
    section = {"repositories": [REPO], "api_url": fake.url,
               "ledger": str(tmp_path / "ledger.sqlite"), "threshold": 1,
               "github_app": {"app_id": APP_ID, "private_key_file": str(key_file), **app}}
    return parse_fixloop_config({"fixloop": section}, "test")


def red_pr(fake: FakeGitHub, repo: str = REPO, number: int = 1) -> None:
    fake.add_pr(repo, number, AGENT, sha(number), tree(number))
    fake.set_check_runs(repo, sha(number), [dict(name="test", conclusion="failure",
                                                 completed_at=T0, output=dict(title="failed"))])


def auth_of(request) -> str:
    return request.headers.get("authorization", "")


def test_a_github_app_sweeps_end_to_end_with_a_verified_jwt(tmp_path, key_file, keys):
    clock = WallClock()
    with FakeGitHub(token="not-used-by-the-app") as fake:
        fake.install_app(APP_ID, keys[1], {REPO: 77}, clock=clock)
        red_pr(fake)
        app = FixloopApp(config(tmp_path, fake, key_file))
        assert isinstance(app.github.token_source, AppTokens)
        before = int(clock())
        assert app.run_once() == "complete"
        # escalated (threshold 1) with the installation token: comment and label written
        assert fake.labels(REPO, 1) == ["needs-human"] and len(fake.comments(REPO, 1)) == 1
        [claims] = fake.jwt_claims[:1]
        assert claims["iss"] == str(APP_ID) and claims["exp"] - claims["iat"] == JWT_LIFETIME_S
        assert before - 61 <= claims["iat"] <= before - 59
        [token] = fake.issued_tokens
        assert token.startswith("ghs" + "_")
        first = fake.requests[:2]
        assert [(r.method, r.route) for r in first] == [
            ("GET", f"/repos/{REPO}/installation"), ("POST", "/app/installations/77/access_tokens")]
        assert all(auth_of(r).startswith("Bearer ey") for r in first)  # the JWT
        assert {auth_of(r) for r in fake.requests[2:]} == {f"Bearer {token}"}
        assert len(fake.requests) > 4
        # the next sweep reuses the token (an hour left): no JWT, no exchange
        fake.clear_requests()
        assert app.run_once() == "complete"
        assert {auth_of(r) for r in fake.requests} == {f"Bearer {token}"}
        assert fake.issued_tokens == [token]
        app.ledger.close()


def test_the_installation_token_is_replaced_before_it_expires(tmp_path, key_file, keys):
    clock = WallClock()
    with FakeGitHub() as fake:
        fake.install_app(APP_ID, keys[1], {REPO: 77}, clock=clock)
        red_pr(fake)
        cfg = config(tmp_path, fake, key_file, installation_id=77)
        source = AppTokens(cfg.github_app, clock=clock)
        github = GitHub(fake.url, source, sleep=lambda s: None)
        source.bind(github)
        app = FixloopApp(cfg, github=github)
        app.run_once()
        [first] = fake.issued_tokens
        clock.offset = 3600 - 299  # 299 s left: under the 300 s margin
        fake.clear_requests()
        assert app.run_once() == "complete"
        assert len(fake.issued_tokens) == 2
        second = fake.issued_tokens[1]
        assert [(r.method, r.route) for r in fake.requests[:1]] == [
            ("POST", "/app/installations/77/access_tokens")]
        assert {auth_of(r) for r in fake.requests[1:]} == {f"Bearer {second}"}
        # nothing was refused on the way: the old token was never sent again
        assert not any(auth_of(r) == f"Bearer {first}" for r in fake.requests)
        app.ledger.close()


def test_a_401_mid_sweep_mints_a_new_token_once(tmp_path, key_file, keys, caplog):
    clock = WallClock()
    with FakeGitHub() as fake:
        fake.install_app(APP_ID, keys[1], {REPO: 77}, clock=clock)
        red_pr(fake)
        app = FixloopApp(config(tmp_path, fake, key_file))
        app.run_once()
        fake.expire_app_tokens()  # revoked (or expired early): the next request is refused
        fake.clear_requests()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="repeat_failure"):
            assert app.run_once() == "complete"
        assert len(fake.issued_tokens) == 2
        assert [(r.method, r.route, auth_of(r).startswith(f"Bearer {fake.issued_tokens[0]}"))
                for r in fake.requests[:3]] == [
            ("GET", f"/repos/{REPO}/pulls", True),  # refused: 401
            ("GET", f"/repos/{REPO}/installation", False),  # found again (a re-install?)
            ("POST", "/app/installations/77/access_tokens", False)]
        assert {auth_of(r) for r in fake.requests[3:]} == {f"Bearer {fake.issued_tokens[1]}"}
        assert [r.event for r in caplog.records] == ["fixloop_app_token_rejected"]
        assert len(fake.comments(REPO, 1)) == 1
        # a 401 that a new token does not cure is an auth error after one retry, not a loop
        fake.fail("GET", r"/pulls$", 401, times=5)
        fake.clear_requests()
        assert app.run_once() == "failed"
        assert [r.route for r in fake.requests].count(f"/repos/{REPO}/pulls") == 2
        assert app.sweeper.stats.api_errors["auth"] == 1
        app.ledger.close()


def test_installations_are_found_per_repository(tmp_path, key_file, keys):
    with FakeGitHub() as fake:
        fake.install_app(APP_ID, keys[1], {REPO: 77, OTHER: 88})
        red_pr(fake, REPO)
        red_pr(fake, OTHER)
        cfg = parse_fixloop_config({"fixloop": {
            "repositories": [REPO, OTHER], "api_url": fake.url,
            "ledger": str(tmp_path / "l.sqlite"),
            "github_app": {"app_id": str(APP_ID), "private_key_file": str(key_file)}}}, "t")
        app = FixloopApp(cfg)
        assert app.run_once() == "complete"
        exchanges = [r.route for r in fake.requests if r.route.startswith("/app/")]
        assert exchanges == ["/app/installations/77/access_tokens",
                             "/app/installations/88/access_tokens"]
        by_token = {auth_of(r) for r in fake.requests if f"/repos/{OTHER}/" in r.route
                    and not r.route.endswith("/installation")}
        assert by_token == {f"Bearer {fake.issued_tokens[1]}"}
        app.ledger.close()


def test_an_app_not_installed_on_a_repository_is_an_auth_error_naming_it(tmp_path, key_file,
                                                                          keys):
    with FakeGitHub() as fake:
        fake.install_app(APP_ID, keys[1], {OTHER: 88})
        red_pr(fake)
        app = FixloopApp(config(tmp_path, fake, key_file))
        assert app.run_once() == "failed"
        assert app.sweeper.stats.api_errors["auth"] == 1
        source = app.github.token_source
        with pytest.raises(GitHubError) as caught:
            source.token(REPO)
        assert (caught.value.reason, caught.value.status) == ("auth", 404)
        assert str(caught.value) == (f"GET /repos/{REPO}/installation: HTTP 404 Not Found: the "
                                     f"GitHub App is not installed on {REPO} (or cannot see it)")
        app.ledger.close()


def test_the_fake_refuses_a_jwt_signed_with_another_key(tmp_path, keys):
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path = tmp_path / "wrong.pem"
    path.write_bytes(other.private_bytes(serialization.Encoding.PEM,
                                         serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption()))
    with FakeGitHub() as fake:
        fake.install_app(APP_ID, keys[1], {REPO: 77})
        source = AppTokens(GitHubApp(str(APP_ID), str(path), 77))
        github = GitHub(fake.url, source, sleep=lambda s: None)
        source.bind(github)
        with pytest.raises(GitHubError) as caught:
            github.open_pulls(REPO)
        assert (caught.value.reason, caught.value.status) == ("auth", 401)
        assert str(caught.value) == ("POST /app/installations/77/access_tokens: HTTP 401 A JSON "
                                     "web token could not be decoded")
        assert fake.jwt_claims == [] and fake.issued_tokens == []
        # and a JWT is not a token for the repository endpoints
        assert fake._authorized("GET", f"/repos/{REPO}/pulls",
                                {"authorization": f"Bearer {source.jwt()}"}) == \
            (401, "Bad credentials")


def test_tokens_and_jwts_never_show_in_errors(tmp_path, key_file, keys):
    with FakeGitHub() as fake:
        fake.install_app(APP_ID, keys[1], {REPO: 77})
        red_pr(fake)
        source = AppTokens(GitHubApp(str(APP_ID), str(key_file), 77))
        github = GitHub(fake.url, source, sleep=lambda s: None)
        source.bind(github)
        github.open_pulls(REPO)
        [token] = fake.issued_tokens
        fake.fail("GET", r"/pulls$", 403, body={"message": f"no access for {token}"})
        with pytest.raises(GitHubError) as caught:
            github.open_pulls(REPO)
        assert str(caught.value) == f"GET /repos/{REPO}/pulls: HTTP 403 no access for <token>"
        assert token not in repr(source) + repr(github)


@pytest.mark.parametrize("content, message", [
    (None, "cannot read the GitHub App private key: No such file or directory"),
    (b"not a key\n", "not a PEM private key"),
    ("encrypted", "is encrypted"),
    ("ec", "must be RSA"),
])
def test_an_unusable_private_key_is_a_config_error_naming_the_file(tmp_path, content, message):
    path = tmp_path / "key.pem"
    if content == "encrypted":
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        content = key.private_bytes(serialization.Encoding.PEM,
                                    serialization.PrivateFormat.PKCS8,
                                    serialization.BestAvailableEncryption(b"pass" + b"phrase"))
    elif content == "ec":
        content = ec.generate_private_key(ec.SECP256R1()).private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption())
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ConfigError) as caught:
        AppTokens(GitHubApp("1", str(path)))
    assert str(caught.value).startswith(str(path)) and message in str(caught.value)


def test_config_takes_an_app_or_a_token_file_not_both(tmp_path):
    with pytest.raises(ConfigError) as caught:
        parse_fixloop_config({"fixloop": {"repositories": [REPO], "token_file": "/t",
                                          "github_app": {"app_id": 1,
                                                         "private_key_file": "/k"}}}, "f.yaml")
    assert str(caught.value) == ("f.yaml: fixloop.github_app: give either github_app or "
                                 "token_file, not both")
    with pytest.raises(ConfigError) as caught:
        parse_fixloop_config({"fixloop": {"repositories": [REPO],
                                          "github_app": {"app_id": 1}}}, "f.yaml")
    assert str(caught.value) == "f.yaml: fixloop.github_app.private_key_file: required key missing"
    cfg = parse_fixloop_config({"fixloop": {"repositories": [REPO], "github_app": {
        "app_id": "Iv23liAbCdEf", "private_key_file": "/k", "installation_id": 5}}}, "f.yaml")
    assert cfg.github_app == GitHubApp("Iv23liAbCdEf", "/k", 5)


def test_a_401_reads_the_token_file_again_mid_sweep(tmp_path):
    token_file = tmp_path / "token"
    old, new = "tok" + "-old-" + "1" * 8, "tok" + "-new-" + "2" * 8
    token_file.write_text(old + "\n")
    with FakeGitHub(token=new) as fake:
        red_pr(fake)
        cfg = parse_fixloop_config({"fixloop": {
            "repositories": [REPO], "api_url": fake.url, "token_file": str(token_file),
            "ledger": str(tmp_path / "l.sqlite")}}, "t")
        app = FixloopApp(cfg)
        assert isinstance(app.github.token_source, FileToken)
        token_file.write_text(new + "\n")  # the Secret rotated after the sweep started
        app._token_stamp = app._stamp()  # ... so the pre-sweep check saw no change
        assert app.run_once() == "complete"
        assert [auth_of(r) for r in fake.requests[:2]] == [f"Bearer {old}", f"Bearer {new}"]
        assert {auth_of(r) for r in fake.requests[1:]} == {f"Bearer {new}"}
        # an unchanged file after a 401 is the auth error, after one request
        fake.token = "tok" + "-other"
        fake.clear_requests()
        assert app.run_once() == "failed"
        assert len(fake.requests) == 1 and app.sweeper.stats.api_errors["auth"] == 1
        assert read_token(cfg) == new
        app.ledger.close()
