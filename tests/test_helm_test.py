"""The chart's `helm test` hooks (issue 29, item 5), run here without a cluster: the Python
each test Pod runs, taken from `helm template`, is run against a real injector
(``InjectorServer`` over HTTPS with a throwaway CA, as ``tests/test_injector.py`` serves it) and
a real sidecar exporter on loopback, with only the addresses the Pod would use swapped for the
loopback ones. Each passes against what it checks and fails, naming why, against what it must
not accept."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from repeat_failure.config import AgentSpec
from repeat_failure.kube.injector import ConfigSource, InjectorServer, TLSFiles
from repeat_failure.sidecar.app import Sidecar
from repeat_failure.sidecar.exporter import Server
from test_app import Clock, write_config
from test_chart import CHART, HELM, KUBE_NEW, _helm
from test_injector import CONFIG_YAML, PKI

pytestmark = pytest.mark.skipif(HELM is None, reason="helm is not installed")

RELEASE, NAMESPACE = "rf", "repeat-failure"


def _test_pods(*sets: str) -> dict[str, dict]:
    """The rendered `helm test` Pods by name."""
    args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE, "--kube-version",
            KUBE_NEW, "--set", "agentNamespaces={ai-agents}"]
    for s in sets:
        args += ["--set", s]
    docs = [d for d in yaml.safe_load_all(_helm(*args).stdout) if d]
    return {d["metadata"]["name"]: d for d in docs
            if d["metadata"].get("annotations", {}).get("helm.sh/hook") == "test"}


def _script(pod: dict) -> str:
    (container,) = pod["spec"]["containers"]
    assert container["command"] == ["python", "-c"]
    (script,) = container["args"]
    return script


def _run(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)


def test_hooks_are_test_pods_deleted_when_they_pass() -> None:
    """Both Pods are `helm.sh/hook: test`, removed before the next run and when they pass (a
    failed one stays for `kubectl logs`); the sidecar's opts in, in the first agent
    namespace, and the injector's is never sent to the injector."""
    pods = _test_pods("repeatFailure.enabled=true")
    assert sorted(pods) == [f"{RELEASE}-repeat-failure-test-injector",
                            f"{RELEASE}-repeat-failure-test-sidecar"]
    for pod in pods.values():
        assert pod["metadata"]["annotations"]["helm.sh/hook-delete-policy"] == \
            "before-hook-creation,hook-succeeded"
        assert pod["spec"]["restartPolicy"] == "Never"
    injector = pods[f"{RELEASE}-repeat-failure-test-injector"]
    assert injector["metadata"]["namespace"] == NAMESPACE
    assert injector["metadata"]["labels"]["repeat-failure.hive.dev/injector"] == "true"
    sidecar = pods[f"{RELEASE}-repeat-failure-test-sidecar"]
    assert sidecar["metadata"]["namespace"] == "ai-agents"
    assert sidecar["metadata"]["annotations"]["repeat-failure.hive.dev/inject"] == "true"
    # With the check off nothing is injected, so only the injector's test is rendered.
    assert sorted(_test_pods()) == [f"{RELEASE}-repeat-failure-test-injector"]


@pytest.fixture
def injector(tmp_path: Path):
    """A real injector on 127.0.0.1 with a throwaway CA; ``set_enabled`` rewrites its config."""
    pki = PKI(tmp_path)
    pki.issue()
    cfg = tmp_path / "injector.yaml"
    cfg.write_text(CONFIG_YAML.format(native="true"))
    server = InjectorServer("127.0.0.1:0", ConfigSource(cfg, check_interval_s=0),
                            TLSFiles(pki.cert_file, pki.key_file, check_interval_s=0)).start()
    server.ca_file = pki.ca_file
    server.set_enabled = lambda on: cfg.write_text(  # type: ignore[attr-defined]
        CONFIG_YAML.format(native="true").replace("enabled: true", f"enabled: {str(on).lower()}"))
    yield server
    server.stop()


def _injector_script(server: InjectorServer, *sets: str) -> str:
    script = _script(_test_pods(*sets)[f"{RELEASE}-repeat-failure-test-injector"])
    base = f"https://{RELEASE}-repeat-failure-injector.{NAMESPACE}.svc:443"
    assert base in script and "/etc/repeat-failure-test/ca.crt" in script
    # The certificate names 127.0.0.1; one attempt instead of a minute of retries.
    return (script.replace(base, f"https://127.0.0.1:{server.port}")
            .replace("/etc/repeat-failure-test/ca.crt", str(server.ca_file))
            .replace("range(30)", "range(1)"))


@pytest.mark.parametrize("on", [True, False], ids=["check-on", "check-off"])
def test_injector_test_passes_against_a_real_injector(injector, on: bool) -> None:
    """The rendered injector test, run against a real injector configured as the chart
    renders it: /healthz answers, and /mutate answers the dry-run review allowed, with a
    patch exactly when the check is on."""
    injector.set_enabled(on)
    sets = ("repeatFailure.enabled=true",) if on else ()
    done = _run(_injector_script(injector, *sets))
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (f"ok: https://127.0.0.1:{injector.port} answers /healthz and "
                           f"/mutate (patch: {on})\n")


def test_injector_test_fails_when_the_injector_does_not_inject(injector) -> None:
    """The check on in the chart but off in the injector: the test fails and says so."""
    injector.set_enabled(False)
    done = _run(_injector_script(injector, "repeatFailure.enabled=true"))
    assert done.returncode == 1
    assert done.stderr == "FAIL: POST /mutate patched=False, the check is on\n"


def test_injector_test_fails_when_nothing_answers(injector) -> None:
    """No injector behind the address: the test fails naming the address."""
    script = _injector_script(injector)
    injector.stop()
    done = _run(script)
    assert done.returncode == 1
    assert done.stderr.startswith(f"FAIL: https://127.0.0.1:{injector.port}/healthz does not "
                                  "answer: ")


def _sidecar_script(port: int) -> str:
    script = _script(_test_pods("repeatFailure.enabled=true")
                     [f"{RELEASE}-repeat-failure-test-sidecar"])
    assert "http://127.0.0.1:9466/metrics" in script
    return (script.replace("127.0.0.1:9466", f"127.0.0.1:{port}")
            .replace("range(60)", "range(1)"))


def _sidecar(tmp_path: Path, agent: str) -> Sidecar:
    tmp_path.mkdir()
    cfg = write_config(tmp_path / "config.yaml")
    return Sidecar(tmp_path / "shared", [AgentSpec(agent, "bash")], cfg, clock=Clock(),
                   monotonic=itertools.count(0, 10).__next__)


def test_sidecar_test_scrapes_a_real_sidecar(tmp_path: Path) -> None:
    """The rendered sidecar test, run against a real sidecar exporter whose agent is the
    test Pod's (``helm-test``), passes; against one of another agent it fails."""
    sc = _sidecar(tmp_path / "a", "helm-test")
    server = Server(sc, "127.0.0.1:0").start()
    try:
        sc.run_once()
        done = _run(_sidecar_script(server.port))
    finally:
        server.stop()
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (f"ok: the injected sidecar answers http://127.0.0.1:{server.port}"
                           "/metrics with agent helm-test's series\n")

    other = _sidecar(tmp_path / "b", "someone-else")
    server = Server(other, "127.0.0.1:0").start()
    try:
        other.run_once()
        done = _run(_sidecar_script(server.port))
    finally:
        server.stop()
    assert done.returncode == 1
    assert done.stderr == (f"FAIL: http://127.0.0.1:{server.port}/metrics: no series of agent "
                           "helm-test (was the pod injected? kubectl describe pod)\n")
