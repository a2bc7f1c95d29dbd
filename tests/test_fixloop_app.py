"""`repeat-failure fixloop` as a process and its parts around the rules: the config section, the
token, the ledger file, the notifier, the HTTP endpoints. The rules are tests/test_fixloop_rules.py.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from repeat_failure.config import ConfigError
from repeat_failure.fixloop.app import read_token
from repeat_failure.fixloop.config import FixloopConfig, parse_fixloop_config
from repeat_failure.fixloop.ledger import Entry, Ledger
from repeat_failure.fixloop.notify import Notifier
from tests.fakegithub import FakeGitHub
from tests.waiting import free_port, wait_until


@pytest.mark.parametrize("section,message", [
    ({}, "fixloop.repositories: required key missing"),
    ({"repositories": []}, "fixloop.repositories: [] should be non-empty"),
    ({"repositories": ["no-slash"]}, "fixloop.repositories[0]: 'no-slash' is not a repository "
                                     "name (owner/name)"),
    ({"repositories": ["o/r", "o/r"]}, "fixloop.repositories: ['o/r', 'o/r'] has non-unique"),
    ({"repositories": ["o/r"], "threshold": 0}, "fixloop.threshold: 0 is less than the minimum"),
    ({"repositories": ["o/r"], "threshold": 3.0}, "fixloop.threshold: must be a whole number"),
    ({"repositories": ["o/r"], "api_url": "ftp://x"}, "fixloop.api_url: 'ftp://x' does not match"),
    ({"repositories": ["o/r"], "api_url": "https://u:p@x"}, "fixloop.api_url:"),
    ({"repositories": ["o/r"], "ledger": "rel/path"}, "fixloop.ledger: 'rel/path' must be an "
                                                      "absolute path"),
    ({"repositories": ["o/r"], "colour": 1}, "fixloop.colour: unknown key"),
    ({"repositories": ["o/r"], "notifier": {"agents": [{"login": "a", "url": "http://x/"},
                                                       {"login": "A", "url": "http://y/"}]}},
     "fixloop.notifier.agents: each login once"),
])
def test_bad_config_is_refused_naming_the_key(section, message):
    with pytest.raises(ConfigError) as err:
        parse_fixloop_config({"fixloop": section}, "fixloop.yaml")
    assert str(err.value).startswith("fixloop.yaml: ") and message in str(err.value)


def test_defaults_are_the_designs():
    config = parse_fixloop_config({"fixloop": {"repositories": ["o/r"]}})
    assert (config.threshold, config.max_reengagements, config.shared_breakage_prs,
            config.prune_after_s, config.label, config.bots) == (
        3, 6, 3, 86400.0, "needs-human", ("renovate[bot]", "dependabot[bot]", "mergeraptor[bot]"))


def test_the_token_comes_from_the_file_then_the_environment(tmp_path, monkeypatch, log_stream):
    from repeat_failure.fixloop import app as fixloop_app

    monkeypatch.setattr(fixloop_app, "DEFAULT_TOKEN_FILE", str(tmp_path / "token"))
    config = FixloopConfig(("o/r",), token_file=str(tmp_path / "token"))
    assert read_token(config, {}) is None
    assert '"event": "fixloop_no_token"' in log_stream.getvalue()
    assert read_token(config, {"GITHUB_TOKEN": "from-env"}) == "from-env"
    elsewhere = FixloopConfig(("o/r",), token_file=str(tmp_path / "mounted" / "token"))
    with pytest.raises(ConfigError, match="fixloop.token_file: .* does not exist"):
        read_token(elsewhere, {"GITHUB_TOKEN": "from-env"})
    (tmp_path / "token").write_text("from-file\n")
    assert read_token(config, {"GITHUB_TOKEN": "from-env"}) == "from-file"
    (tmp_path / "token").write_text("  \n")
    with pytest.raises(ConfigError, match="the GitHub token file is empty"):
        read_token(config, {})


def test_the_ledger_file_is_private_survives_a_reopen_and_refuses_another_version(tmp_path):
    path = tmp_path / "data" / "fixloop.sqlite"
    ledger = Ledger(path)
    entry = Entry("o/r", 7, 1.0, trees=["t1", "t2"], excerpt="boom", escalated=True,
                  escalations=1, reviewer_sha="abc", escalated_checks=["test"])
    ledger.put(entry)
    ledger.close()
    assert path.stat().st_mode & 0o777 == 0o600
    again = Ledger(path)
    assert again.get("o/r#7") == entry
    again.close()
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 9")
    db.commit()
    db.close()
    with pytest.raises(sqlite3.DatabaseError, match="ledger schema version 9"):
        Ledger(path)


class _Response:
    def __init__(self, status):
        self.status_code = status

    def close(self):
        pass


def test_the_notifier_falls_back_and_counts_only_a_2xx():
    config = parse_fixloop_config({"fixloop": {"repositories": ["o/r"], "notifier": {
        "fixer_url": "http://fixer/kick", "agents": [{"login": "Agent", "url": "http://own/"}]}}})
    calls = []

    def post(url, json, timeout, allow_redirects):
        calls.append((url, json["target"], timeout, allow_redirects))
        if url == "http://own/":
            raise TimeoutError("slow")
        return _Response(302)

    kick = Notifier(config, post=post).kick("agent", {"number": 1})
    assert calls == [("http://own/", "owner", 10.0, False), ("http://fixer/kick", "fixer", 10.0,
                                                               False)]
    assert (kick.delivered, kick.target, kick.status, kick.error) == (False, "fixer", 302,
                                                                      "http_302")
    nobody = Notifier(parse_fixloop_config({"fixloop": {"repositories": ["o/r"]}}),
                      post=post).kick("x", {})
    assert (nobody.delivered, nobody.error) == (False, "no_endpoint")


def _config(tmp_path: Path, gh: FakeGitHub) -> Path:
    (tmp_path / "token").write_text("file-token\n")
    path = tmp_path / "fixloop.yaml"
    path.write_text(f"fixloop:\n  repositories: [acme/web]\n  api_url: {gh.url}\n"
                    f"  token_file: {tmp_path / 'token'}\n  ledger: {tmp_path / 'l.sqlite'}\n"
                    "  interval_s: 10\n  threshold: 1\n")
    return path


def _env():
    return {k: v for k, v in os.environ.items() if not k.startswith(("REPEAT_FAILURE_",
                                                                      "GITHUB_TOKEN"))}


def test_once_sweeps_and_exits_0_using_the_token_file(tmp_path):
    with FakeGitHub(token="file-token") as gh:
        gh.add_pr("acme/web", 1, "agent", "a" * 40, "1" * 40)
        gh.set_check_runs("acme/web", "a" * 40, [dict(name="test", conclusion="failure",
                                                      completed_at=1_800_000_000.0)])
        done = subprocess.run([sys.executable, "-m", "repeat_failure", "fixloop", "--once",
                               "--config", str(_config(tmp_path, gh))],
                              capture_output=True, text=True, timeout=60, env=_env())
        assert done.returncode == 0, done.stderr
        assert gh.labels("acme/web", 1) == ["needs-human"]
        assert "file-token" not in done.stderr
        (tmp_path / "token").write_text("wrong-token\n")
        bad = subprocess.run([sys.executable, "-m", "repeat_failure", "fixloop", "--once", "--config",
                              str(tmp_path / "fixloop.yaml")],
                             capture_output=True, text=True, timeout=60, env=_env())
        assert bad.returncode == 1
        assert '"reason": "auth"' in bad.stderr and "wrong-token" not in bad.stderr


def test_bad_config_exits_2_naming_the_key(tmp_path):
    path = tmp_path / "fixloop.yaml"
    path.write_text("fixloop:\n  repositories: [acme/web]\n  threshold: 0\n")
    done = subprocess.run([sys.executable, "-m", "repeat_failure", "fixloop", "--once", "--config",
                           str(path)], capture_output=True, text=True, timeout=60, env=_env())
    assert (done.returncode, done.stderr.strip()) == (
        2, f"repeat-failure: {path}: fixloop.threshold: 0 is less than the minimum of 1")


def test_the_service_answers_health_readiness_and_metrics_and_stops_on_sigterm(tmp_path):
    with FakeGitHub(token="file-token") as gh:
        gh.add_pr("acme/web", 1, "agent", "a" * 40, "1" * 40)
        port = free_port()
        proc = subprocess.Popen([sys.executable, "-m", "repeat_failure", "fixloop", "--config",
                                 str(_config(tmp_path, gh)), "--listen", f"127.0.0.1:{port}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                env=_env())
        try:
            def get(path):
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
                        return r.status, r.read().decode()
                except urllib.error.HTTPError as exc:
                    return exc.code, ""
                except OSError:
                    return None, ""

            wait_until(lambda: get("/readyz")[0] == 200, timeout=30)
            assert get("/healthz") == (200, "ok\n")
            status, text = get("/metrics")
            assert status == 200
            assert 'hive_repeat_failure_fixloop_sweeps_total{outcome="complete"} 1.0' in text
            assert get("/nope")[0] == 404
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0
        events = [json.loads(line).get("event") for line in err.splitlines() if line.startswith("{")]
        assert "fixloop_sweep" in events


def test_an_escalation_makes_one_kubernetes_event_with_events_on(tmp_path):
    from repeat_failure.fixloop.github import GitHub

    sent = []

    class Events:
        def publish(self, agent, backend, message, now, reason):
            sent.append((agent, backend, message, reason))

    with FakeGitHub(token="t") as gh:
        gh.add_pr("acme/web", 1, "agent", "a" * 40, "1" * 40)
        gh.set_check_runs("acme/web", "a" * 40, [dict(name="test", conclusion="failure",
                                                      completed_at=1_800_000_000.0)])
        config = parse_fixloop_config({"fixloop": {
            "repositories": ["acme/web"], "api_url": gh.url, "threshold": 1, "events": True,
            "ledger": str(tmp_path / "l.sqlite"), "token_file": str(tmp_path / "none")}})
        from repeat_failure.fixloop.app import FixloopApp

        app = FixloopApp(config, github=GitHub(gh.url, "t"), events=Events())
        app.run_once()
        app.run_once()
    assert sent == [("acme/web#1", "github", "Fix loop escalated on acme/web#1: CI red on 1 "
                     "distinct head trees (test)", "FixLoopEscalated")]


def test_readiness_drops_when_a_sweep_lists_no_repository(tmp_path):
    from repeat_failure.fixloop.app import FixloopApp
    from repeat_failure.fixloop.github import GitHub

    with FakeGitHub(token="right") as gh:
        gh.add_pr("acme/web", 1, "agent", "a" * 40, "1" * 40)
        config = parse_fixloop_config({"fixloop": {
            "repositories": ["acme/web"], "api_url": gh.url, "ledger": str(tmp_path / "l.db"),
            "token_file": str(tmp_path / "none")}})
        app = FixloopApp(config, github=GitHub(gh.url, "wrong"))
        port = app.serve("127.0.0.1:0")
        try:
            def ready():
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as r:
                        return r.status
                except urllib.error.HTTPError as exc:
                    return exc.code
            assert ready() == 503
            assert app.run_once() == "failed"
            assert ready() == 503
            app.github = app.sweeper.github = GitHub(gh.url, "right")
            assert app.run_once() == "complete"
            assert ready() == 200
        finally:
            app.stop_serving()


def test_a_rotated_token_file_is_picked_up_before_the_next_sweep(tmp_path):
    from repeat_failure.fixloop.app import FixloopApp

    with FakeGitHub(token="second") as gh:
        gh.add_pr("acme/web", 1, "agent", "a" * 40, "1" * 40)
        (tmp_path / "token").write_text("first\n")
        config = parse_fixloop_config({"fixloop": {
            "repositories": ["acme/web"], "api_url": gh.url, "ledger": str(tmp_path / "l.db"),
            "token_file": str(tmp_path / "token")}})
        app = FixloopApp(config)
        assert app.run_once() == "failed"                 # "first" is refused
        (tmp_path / "token.new").write_text("second\n")
        os.replace(tmp_path / "token.new", tmp_path / "token")  # as a Secret update does
        assert app.run_once() == "complete"
        (tmp_path / "token.new").write_text("")
        os.replace(tmp_path / "token.new", tmp_path / "token")  # unusable: keep "second"
        assert app.run_once() == "complete"
