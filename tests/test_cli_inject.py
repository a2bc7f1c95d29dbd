"""The command line of the Kubernetes parts: `run --config-optional` (the injected sidecar's
ConfigMap is optional) and `inject-webhook` (the injector), as real processes."""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from repeat_failure.sidecar import hook
from repeat_failure.jsonlog import configure_logging
from repeat_failure.sidecar.app import Sidecar
from repeat_failure.cli import build_parser
from repeat_failure.config import AgentSpec
from test_injector import PKI, load  # tests/ is on sys.path (pytest's rootdir insertion)
from waiting import free_port, wait_until


def log_lines(path: Path) -> list[dict]:
    lines = []
    for line in path.read_text().splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            lines.append({"raw": line})
    return lines


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPEAT_FAILURE_")}
    env.update(extra)
    return env


# -- run --config-optional ------------------------------------------------------------------------


def run_cmd(tmp_path: Path, config: Path, port: int, *flags: str) -> list[str]:
    return [sys.executable, "-m", "repeat_failure", "run", "--config", str(config), "--shared-dir",
            str(tmp_path / "shared"), "--agent", "a1", "--backend", "bash", "--listen",
            f"127.0.0.1:{port}", *flags]


def test_run_missing_config_without_the_flag_exits_2(tmp_path: Path) -> None:
    """As before: a --config file that does not exist is an error (exit 2, the file named)."""
    config = tmp_path / "cfg" / "config.yaml"
    done = subprocess.run(run_cmd(tmp_path, config, 0), capture_output=True, text=True,
                          timeout=30, env=clean_env())
    assert done.returncode == 2
    assert done.stderr.startswith(f"repeat-failure: {config}: cannot read config file")


@pytest.mark.parametrize("how", ["flag", "env"])
def test_run_config_optional_waits_for_the_file(tmp_path: Path, how: str) -> None:
    """--config-optional (or REPEAT_FAILURE_CONFIG_OPTIONAL=1) with no file: one warning, the
    built-in defaults (check off: no hook), no log line per pass while it stays missing; when
    the ConfigMap's file appears, the check turns on (hook rendered) without a restart."""
    cfg_dir = tmp_path / "cfg"
    cfg_dir.mkdir()  # an optional ConfigMap volume that does not exist is an empty directory
    config = cfg_dir / "config.yaml"
    port = free_port()
    stderr = tmp_path / "stderr.log"
    flags = ("--config-optional",) if how == "flag" else ()
    env = clean_env(**({"REPEAT_FAILURE_CONFIG_OPTIONAL": "1"} if how == "env" else {}))
    with open(stderr, "w") as err:
        proc = subprocess.Popen(run_cmd(tmp_path, config, port, *flags), stderr=err, env=env)
    try:
        def up() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                    return r.read() == b"ok\n"
            except OSError:
                return False

        wait_until(up)
        time.sleep(2.5)  # several passes and wakes with the file still missing
        (cfg_dir / "other").write_text("x")  # an inotify wake in the config's directory
        time.sleep(0.5)
        lines = log_lines(stderr)
        assert [line["msg"] for line in lines if line.get("level") in ("warning", "error")] == [
            "config file not found: running with the built-in defaults (check off) until it "
            "appears"], lines
        started = next(line for line in lines if line["msg"] == "sidecar started")
        assert started["enabled"] is False
        assert not hook.hook_path(tmp_path / "shared", "a1").exists()
        tmp = cfg_dir / ".config.yaml.tmp"
        tmp.write_text("repeat_failure:\n  enabled: true\n")
        os.replace(tmp, config)
        wait_until(lambda: hook.hook_path(tmp_path / "shared", "a1").is_file())
        assert any(line["msg"] == "config reloaded" and line["enabled"] is True
                   for line in log_lines(stderr))
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0


def test_config_optional_env_values() -> None:
    for value, expected in (("1", True), ("true", True), ("0", False), ("", False)):
        os.environ["REPEAT_FAILURE_CONFIG_OPTIONAL"] = value
        try:
            assert build_parser().parse_args(["run"]).config_optional is expected
        finally:
            del os.environ["REPEAT_FAILURE_CONFIG_OPTIONAL"]
    assert build_parser().parse_args(["run"]).config_optional is False


def test_sidecar_reload_with_optional_missing_file(tmp_path: Path) -> None:
    """Sidecar.reload_config with --config-optional: a file still missing is no change and no
    log line (even forced); once it has existed, it behaves as without the flag (a deleted
    file is refused with one log line and the last good config stays)."""
    stream = io.StringIO()
    configure_logging(stream)
    config = tmp_path / "config.yaml"
    sc = Sidecar(tmp_path / "shared", [AgentSpec("a1", "bash")], config, config_optional=True)
    assert sc.config.enabled is False
    # The missing file, then what runs (issue 31).
    assert [(x["level"], x.get("event")) for x in map(json.loads, stream.getvalue().splitlines())
            ] == [("warning", None), ("info", "what_runs")]
    for _ in range(5):
        assert sc.reload_config() is False
        assert sc.reload_config(force=True) is False
    assert len(stream.getvalue().splitlines()) == 2
    config.write_text("repeat_failure:\n  enabled: true\n")
    assert sc.reload_config() is True and sc.config.enabled is True
    assert hook.hook_path(sc.shared_dir, "a1").is_file()
    config.unlink()
    assert sc.reload_config() is False
    assert sc.reload_config() is False
    refused = [x for x in stream.getvalue().splitlines() if "refused" in x]
    assert len(refused) == 1 and sc.config.enabled is True
    logging.getLogger("repeat_failure").handlers[:] = []


# -- inject-webhook -------------------------------------------------------------------------------


def inject_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "repeat_failure", "inject-webhook", *args]


def test_inject_webhook_usage_errors(tmp_path: Path) -> None:
    """Missing flags or an invalid config: exit 2 naming the flag or key; a certificate that
    does not load: exit 1."""
    done = subprocess.run(inject_cmd(), capture_output=True, text=True, timeout=30,
                          env=clean_env())
    assert done.returncode == 2 and "--config, --tls-cert, --tls-key" in done.stderr
    pki = PKI(tmp_path)
    pki.issue()
    bad = tmp_path / "injector.yaml"
    bad.write_text("enabled: true\nnativesidecar: true\n")
    done = subprocess.run(inject_cmd("--config", str(bad), "--tls-cert", str(pki.cert_file),
                                     "--tls-key", str(pki.key_file), "--listen", "127.0.0.1:0"),
                          capture_output=True, text=True, timeout=30, env=clean_env())
    assert (done.returncode, done.stderr) == (
        2, f"repeat-failure: {bad}: nativesidecar: unknown key\n")
    bad.write_text("enabled: true\n")
    done = subprocess.run(inject_cmd("--config", str(bad), "--tls-cert", str(pki.ca_file),
                                     "--tls-key", str(pki.key_file), "--listen", "127.0.0.1:0"),
                          capture_output=True, text=True, timeout=30, env=clean_env())
    assert done.returncode == 1 and "cannot load the TLS certificate" in done.stderr


def test_inject_webhook_serves_from_env_flags(tmp_path: Path) -> None:
    """The real process, configured by REPEAT_FAILURE_INJECTOR_* (as the chart may): HTTPS
    /healthz and /mutate verified against the CA, and SIGTERM exits 0."""
    pki = PKI(tmp_path)
    pki.issue()
    config = tmp_path / "injector.yaml"
    config.write_text("enabled: true\nnativeSidecar: false\n")
    stderr = tmp_path / "stderr.log"
    env = clean_env(REPEAT_FAILURE_INJECTOR_CONFIG=str(config),
                    REPEAT_FAILURE_INJECTOR_TLS_CERT=str(pki.cert_file),
                    REPEAT_FAILURE_INJECTOR_TLS_KEY=str(pki.key_file),
                    REPEAT_FAILURE_INJECTOR_LISTEN="127.0.0.1:0")
    with open(stderr, "w") as err:
        proc = subprocess.Popen(inject_cmd(), stderr=err, env=env)
    try:
        started = wait_until(lambda: next((line for line in log_lines(stderr)
                                           if line.get("msg") == "injector started"), None))
        assert started["enabled"] is True and started["native_sidecar"] is False
        base = f"https://127.0.0.1:{started['port']}"
        ctx = pki.client_context()
        with urllib.request.urlopen(base + "/healthz", context=ctx, timeout=5) as r:
            assert r.read() == b"ok\n"
        review = load("deployment-one-container")
        req = urllib.request.Request(base + "/mutate?timeout=5s", json.dumps(review).encode(),
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, context=ctx, timeout=5) as r:
            answer = json.loads(r.read())
        assert answer["response"]["uid"] == review["request"]["uid"]
        assert answer["response"]["patchType"] == "JSONPatch"
        with pytest.raises(urllib.error.URLError) as refused:  # not trusted without the CA
            urllib.request.urlopen(base + "/healthz", context=ssl.create_default_context(),
                                   timeout=5)
        assert isinstance(refused.value.reason, ssl.SSLCertVerificationError)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    assert any(line.get("event") == "pod_injected" for line in log_lines(stderr))


# -- the injected sidecar's preview URL -----------------------------------------------------------


def _injected_env(tmp_path: Path, preview_url: str) -> tuple[dict[str, str], list[str]]:
    """The env and args of the sidecar the injector makes of tests/fixtures/admission/
    preview-url.json (with ``preview_url`` as its annotation), its paths moved under
    ``tmp_path`` and its listen address onto loopback; the config file does not exist
    (an optional ConfigMap not created yet)."""
    from repeat_failure.kube.injector import decide, parse_injector_config

    review = load("preview-url")
    review["request"]["object"]["metadata"]["annotations"][
        "repeat-failure.hive.dev/preview-url"] = preview_url
    decision = decide(review["request"], parse_injector_config({"enabled": True}))
    (sidecar,) = [op["value"][0] for op in decision.patch if op["path"] == "/spec/initContainers"]
    moved = {"REPEAT_FAILURE_CONFIG": str(tmp_path / "cfg" / "config.yaml"),
             "REPEAT_FAILURE_SHARED_DIR": str(tmp_path / "shared"),
             "REPEAT_FAILURE_LISTEN": "127.0.0.1:0",
             "REPEAT_FAILURE_AGENT_HOME": str(tmp_path / "home")}
    env = {e["name"]: moved.get(e["name"], e["value"]) for e in sidecar["env"] if "value" in e}
    (tmp_path / "home").mkdir(exist_ok=True)
    return clean_env(**env), [sys.executable, "-m", "repeat_failure", *sidecar["args"]]


def test_injected_preview_url_starts_the_real_sidecar(tmp_path: Path) -> None:
    """The sidecar the injector writes for a pod with the preview-url annotation, run as a real
    process from its env (REPEAT_FAILURE_PREVIEW_URL among it) and args: it starts, serves
    /healthz, and SIGTERM exits 0."""
    env, cmd = _injected_env(tmp_path, "http://127.0.0.1:5173/")
    assert env["REPEAT_FAILURE_PREVIEW_URL"] == "http://127.0.0.1:5173/"
    stderr = tmp_path / "stderr.log"
    with open(stderr, "w") as err:
        proc = subprocess.Popen(cmd, stderr=err, env=env)
    try:
        started = wait_until(lambda: next((line for line in log_lines(stderr)
                                           if line.get("msg") == "sidecar started"), None)
                             or proc.poll() is not None)
        assert started is not True, stderr.read_text()
        assert started["agents"] == ["web-agent"]
        with urllib.request.urlopen(f"http://127.0.0.1:{started['port']}/healthz",
                                    timeout=5) as r:
            assert r.read() == b"ok\n"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0


def test_a_preview_url_the_injector_refuses_would_stop_the_sidecar(tmp_path: Path) -> None:
    """Why the injector leaves a pod with a bad preview-url annotation unchanged: the sidecar
    given that URL exits 2 at start (a crash loop in the pod), naming the variable."""
    env, cmd = _injected_env(tmp_path, "http://127.0.0.1:5173/")
    env["REPEAT_FAILURE_PREVIEW_URL"] = "localhost:5173"
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, env=env)
    assert done.returncode == 2, done.stderr
    assert "REPEAT_FAILURE_PREVIEW_URL" in done.stderr
    assert "must be http:// or https://" in done.stderr
