"""The product on a real Kubernetes node (issue 18): the image built from the Dockerfile, the
chart installed with helm, a real agent pod injected, recorded, scraped by a real Prometheus.

The cluster (tests/kube/cluster.py) is etcd and Kubernetes v1.34.4's own components built from
source, containerd and runc from Debian, in a network and mount namespace of its own; it is
started once for this module and stopped by the last test, which then checks that nothing is
left on the machine: no process, network device, iptables rule, mount, cgroup or kernel setting
changed. Each test below builds on the ones before it (the order is the story an operator
lives: install, inject, scrape, restart, turn off).

Needs root, Go and the Debian packages ``scripts/test`` installs; the binaries and images are
built into ``~/.cache/repeat-failure`` on the first run (tests/kube/build, tests/kube/images).
Without root or those tools the module is skipped, except under CI (``CI=true``), where that is
a failure: CI must run it.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest
import yaml

from kube import cluster as kube

REPO = Path(__file__).resolve().parent.parent
CHART = REPO / "charts" / "repeat-failure"
RELEASE, RELEASE_NS, AGENT_NS, MONITORING_NS = "rf", "repeat-failure", "agents", "monitoring"
IMAGE = "localhost/repeat-failure:test"
AGENT_IMAGE = "localhost/repeat-failure-test/base:bookworm"
#: The agent's user and the pod's fsGroup: not the sidecar's default (10001), so the shared
#: directory's permissions are what makes the records readable (issue 18).
AGENT_UID, FS_GROUP = 1000, 2000
#: Where the sidecar renders each agent's hook (the agent's BASH_ENV, docs/kubernetes.md).
HOOK_DIR = "/var/run/repeat-failure/hook"
#: The prometheus-operator release whose CRDs (PodMonitor, PrometheusRule) are installed.
PROMETHEUS_OPERATOR = "v0.85.0"
#: Alert `for` durations short enough to watch fire in a test (chart value alertFor).
ALERT_FOR = {"RepeatFailureRepeatingFailure": "6s"}

pytestmark = pytest.mark.slow


def _values(enabled: bool) -> dict:
    return {
        "repeatFailure": {"enabled": enabled, "threshold": 5, "window_s": 600, "events": True,
                          "collect_interval_s": 2, "collect_grace_s": 0.5},
        "agentNamespaces": [AGENT_NS],
        "image": {"reference": IMAGE, "pullPolicy": "Never"},
        # The injector's NetworkPolicy (issue 28) accepted by the API server; the bridge CNI
        # here enforces no policy, so this proves the object, not the filtering.
        "injector": {"replicas": 1,
                     "networkPolicy": {"enabled": True, "apiServerCIDRs": [f"{kube.NODE_IP}/32"]}},
        "monitoring": {"podMonitor": {"enabled": True, "interval": "2s"},
                       "prometheusRule": {"enabled": True, "alertFor": ALERT_FOR},
                       "grafanaDashboard": {"enabled": True}},
        "networkPolicy": {"enabled": True, "prometheusNamespace": MONITORING_NS},
    }


class Story:
    """What the tests share: the cluster, the host's state before it started, figures."""

    cluster: kube.Cluster
    before: dict
    figures: dict
    started: float  # time.time() when the cluster started
    stopped: bool = False


#: Where a node's components write by default: each must look the same after a run (the
#: cluster's own go to its work directory or to tmpfs in its mount namespace).
NODE_DIRS = ("/run/netns", "/var/run/netns", "/run/containerd", "/var/lib/cni", "/var/log/pods",
             "/var/log/containers", "/var/lib/containers", "/var/lib/containerd", "/etc/cni",
             "/opt/cni", "/var/lib/kubelet", "/etc/kubernetes", "/run/runc")


def host_dirs(tag: str) -> dict[str, list[str] | None]:
    """Each of :data:`NODE_DIRS`: the sorted paths under it, or None when it does not exist.
    While another run is up, those it may make or remove meanwhile (a mount point runs share,
    the image builder's ``/var/lib/containers``) are left out: compare the keys both have."""
    volatile = {"/var/lib/containers", "/var/lib/cni"} if kube.other_live_runs(tag) else set()
    return {d: (sorted(str(p) for p in Path(d).rglob("*")) if Path(d).exists() else None)
            for d in NODE_DIRS if d not in volatile}


def host_state(tag: str | None = None) -> dict:
    """What the tests must leave as they found it: kernel settings, network devices, the
    iptables rules (all tables), mounts, our cgroups and processes of the cluster's binaries.

    ``tag`` is this run's (:data:`kube.RUN_MARK`, the test process's PID, the default): what
    carries another run's tag (its veth ``rfkh<tag>``, cgroups ``/rf-kube-<tag>``, processes
    marked with it or unmarked in another network namespace, mounts in its work directory or
    in the image builder's storage) is left out, so a second cluster on the machine (clusters coexist, tests/kube/cluster.py) starting
    or stopping meanwhile does not count as ours."""
    tag = tag or str(os.getpid())

    def others(name: str, prefix: str) -> bool:
        return name.startswith(prefix) and name[len(prefix):].split("-")[0] != tag

    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    links = [re.sub(r"^\d+: ", "", line).split(":")[0].split("@")[0]
             for line in links.splitlines()]
    rules = subprocess.run(["iptables-save"], capture_output=True, text=True).stdout
    rules = "\n".join(line for line in rules.splitlines() if not line.startswith("#"))
    rules = re.sub(r"\[\d+:\d+\]", "", rules)  # packet counters move
    builder = str(kube.cache_dir() / "kube-images") + "/"
    mounts = sorted(point for point in (line.split()[4] for line in
                                        Path("/proc/self/mountinfo").read_text().splitlines())
                    if not point.startswith(builder)
                    and not (point.startswith("/tmp/") and others(point[5:], "rf-kube-")))
    cgroups = sorted(str(p) for p in Path("/sys/fs/cgroup").glob("*/rf-kube-*")
                     if not others(p.name, "rf-kube-"))
    names = ("etcd", "kube-apiserver", "kube-controller", "kube-scheduler", "kubelet",
             "kube-proxy", "containerd", "containerd-shim", "prometheus")
    procs = []
    host_net = kube._ns_inode(os.getpid(), "net")
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                comm = Path(f"/proc/{entry}/comm").read_text().strip()
            except OSError:
                continue
            if not comm.startswith(names):
                continue
            mark = kube.run_tag(entry)
            # Ours carry our tag; an unmarked one is the machine's own when in the machine's
            # network namespace, else another run's (one made before processes were marked).
            if mark == tag or (mark is None and kube._ns_inode(int(entry), "net") == host_net):
                procs.append(f"{entry}:{comm}")
    return {"sysctl": kube.host_sysctls(),
            "links": sorted(name for name in links if not others(name, "rfkh")),
            "iptables": rules, "mounts": mounts, "cgroups": cgroups, "processes": sorted(procs),
            "processes_in_our_cgroups": sorted(kube.cgroup_processes(f"rf-kube-{tag}")),
            "dirs": host_dirs(tag)}


@pytest.fixture(scope="module")
def story():
    missing = kube.missing_prerequisites()
    if missing:
        message = f"a real node needs {', '.join(missing)}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    figures: dict = {}
    t = time.monotonic()
    bin_dir = kube.build_binaries()
    figures["build_s"] = round(time.monotonic() - t, 1)
    t = time.monotonic()
    archives = kube.build_images(bin_dir)
    figures["images_s"] = round(time.monotonic() - t, 1)
    s = Story()
    reaped = kube.reap_stale()  # a run killed before its teardown (never one still running)
    if reaped:
        print("\nreal node: cleaned up after an earlier run:", "; ".join(reaped))
    s.before = host_state()
    s.started = time.time()
    s.figures = figures
    # SIGINT (Ctrl-C) already ends pytest through the teardown below; SIGTERM does too here.
    with kube.sigterm_as_interrupt():
        s.cluster = kube.start(archives, bin_dir)
        figures.update({k: round(v, 1) for k, v in s.cluster.timings.items()})
        try:
            yield s
        finally:
            if not s.stopped:
                s.cluster.stop()


def helm(c: kube.Cluster, *args: str, values: dict | None = None) -> str:
    """``helm ARGS`` against the cluster (its own cache and config dirs); ``values`` as a values
    file. Fails the test with helm's output when it exits non-zero."""
    argv = [str(kube.cache_dir() / "bin" / "helm"), *args]
    if values is not None:
        path = c.work / "values.yaml"
        path.write_text(yaml.safe_dump(values))
        argv += ["-f", str(path)]
    out = subprocess.run(argv, env=c.env, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        pods = c.kubectl("get", "pods", "-A", "-o", "wide", check=False).stdout
        events = c.kubectl("get", "events", "-A", check=False).stdout
        pytest.fail(f"helm {' '.join(args)}:\n{out.stderr}\npods:\n{pods}\n"
                    f"events:\n{events[-4000:]}")
    return out.stdout


def crd_dir() -> Path:
    """The prometheus-operator module's example CRDs (pinned), from the Go module cache
    (``GOPROXY=off``: nothing is fetched during the tests; ``scripts/test`` downloads the
    module). Fails the test naming the module when it is not there."""
    go = "go" if subprocess.run(["which", "go"], capture_output=True).returncode == 0 \
        else "/usr/local/go/bin/go"
    # From the module cache only (scripts/test downloads it): a test reaches no network.
    out = subprocess.run([go, "mod", "download", "-json",
                          f"github.com/prometheus-operator/prometheus-operator@"
                          f"{PROMETHEUS_OPERATOR}"], capture_output=True, text=True,
                         cwd="/", timeout=300, env={**os.environ, "GOPROXY": "off",
                                                    "GOFLAGS": "-mod=mod"})
    assert out.returncode == 0, (
        f"prometheus-operator {PROMETHEUS_OPERATOR} is not in the Go module cache (scripts/test "
        f"downloads it):\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    return Path(json.loads(out.stdout)["Dir"]) / "example" / "prometheus-operator-crd"


def agent_pod(name: str, script: str) -> dict:
    """An agent pod opted in for injection: bash as user AGENT_UID with fsGroup FS_GROUP,
    running ``script`` (then idling, stopping at once on SIGTERM)."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": AGENT_NS,
                     "annotations": {"repeat-failure.hive.dev/inject": "true",
                                     "repeat-failure.hive.dev/agent": name}},
        "spec": {
            "terminationGracePeriodSeconds": 2,
            "securityContext": {"runAsUser": AGENT_UID, "runAsGroup": AGENT_UID,
                                "fsGroup": FS_GROUP, "runAsNonRoot": True},
            "containers": [{
                "name": "agent", "image": AGENT_IMAGE, "imagePullPolicy": "Never",
                "env": [{"name": "HOME", "value": "/home/agent"}],
                "command": ["bash", "-c", script + "\ntrap 'exit 0' TERM\n"
                            "while :; do sleep 1; done"],
                "volumeMounts": [{"name": "home", "mountPath": "/home/agent"}],
            }],
            "volumes": [{"name": "home", "emptyDir": {}}],
        },
    }


def wait(what: str, check, timeout: float = 90, interval: float = 0.5):
    """Poll ``check()`` until truthy (returned) or fail the test after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except Exception as exc:  # noqa: BLE001 - reported below
            last = exc
        time.sleep(interval)
    pytest.fail(f"timed out waiting for {what}" + (f" (last error: {last})" if last else ""))


def metrics(c: kube.Cluster, pod: str) -> str:
    """The sidecar's /metrics, through the apiserver's pod proxy (as an operator would)."""
    return c.raw(f"/api/v1/namespaces/{AGENT_NS}/pods/{pod}:9466/proxy/metrics")


def note_value(text: str, command: str, exit_status: str) -> float | None:
    """The value of the ``hive_repeat_failure_note`` series for ``command``/``exit``."""
    for line in text.splitlines():
        if line.startswith("hive_repeat_failure_note{") and \
                f'command="{command}"' in line and f'exit="{exit_status}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return None


def diagnose(c: kube.Cluster, pod: str) -> None:
    """Print what explains a pod's failed expectation: its status, both containers' logs and
    the sidecar's /metrics (pytest shows it with the failure)."""
    for args in (("get", "pod", "-n", AGENT_NS, pod, "-o", "yaml"),
                 ("logs", "-n", AGENT_NS, pod, "-c", "agent"),
                 ("logs", "-n", AGENT_NS, pod, "-c", "repeat-failure"),
                 ("get", "--raw", f"/api/v1/namespaces/{AGENT_NS}/pods/{pod}:9466/proxy/metrics")):
        out = c.kubectl(*args, check=False)
        print(f"--- kubectl {' '.join(args)}\n{out.stdout[-6000:]}{out.stderr[-2000:]}")


def _route(line: str) -> tuple[str, str]:
    """``(destination network, gateway)`` of a ``/proc/net/route`` line (little-endian hex)."""
    fields = line.split()
    def addr(h: str) -> str:
        return str(ipaddress.IPv4Address(int(h, 16).to_bytes(4, "little")))
    return (str(ipaddress.IPv4Network(f"{addr(fields[1])}/{addr(fields[7])}")), addr(fields[2]))


def in_sidecar(c: kube.Cluster, pod: str, code: str) -> str:
    """Run Python ``code`` in the pod's sidecar container (its image has no shell tools to
    rely on); returns its stdout."""
    return c.kubectl("exec", "-n", AGENT_NS, pod, "-c", "repeat-failure", "--",
                     "python", "-c", code).stdout


def test_reap_stale_cleans_up_after_a_killed_run_only(tmp_path: Path) -> None:
    """A run killed before its teardown leaves marked processes and a work directory:
    :func:`kube.reap_stale` kills and removes those of a run whose test process is gone, and
    leaves a live run's alone."""
    if os.geteuid() != 0:
        pytest.skip("reading other processes' environment needs root")
    dead = "4194305"  # above Linux's largest pid_max: never a live process
    alive = str(os.getpid())
    procs = {tag: subprocess.Popen(["sleep", "60"], env={**os.environ, kube.RUN_MARK: tag})
             for tag in (dead, alive)}
    dirs = {tag: Path(f"/tmp/rf-kube-{tag}-reaptest") for tag in (dead, alive)}
    try:
        for d in dirs.values():
            d.mkdir()
        done = kube.reap_stale()
        assert f"killed {procs[dead].pid} of run {dead}" in done
        assert f"removed {dirs[dead]}" in done
        assert procs[dead].wait(5) == -9
        assert procs[alive].poll() is None and dirs[alive].is_dir()
        assert not dirs[dead].exists()
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()
        for d in dirs.values():
            if d.exists():
                d.rmdir()


def test_host_state_leaves_out_other_runs_only(tmp_path: Path) -> None:
    """:func:`host_state` counts a cluster binary's process that carries this run's tag or is
    unmarked in the machine's network namespace, and leaves out one marked by another run (a
    second cluster on the machine), live or not, and an unmarked one in another network
    namespace."""
    if os.geteuid() != 0:
        pytest.skip("reading other processes' environment needs root")
    etcd = tmp_path / "etcd"  # a process named like a cluster component
    shutil.copy("/bin/sleep", etcd)
    own = str(os.getpid())
    procs = {tag: subprocess.Popen([str(etcd), "60"],
                                   env={**os.environ, kube.RUN_MARK: tag} if tag else None)
             for tag in (own, "1", "4194305", "")}
    # Unmarked, in a network namespace of its own: another run's from before the marks.
    procs["netns"] = subprocess.Popen(["unshare", "--net", "--", str(etcd), "60"])
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not all(
                Path(f"/proc/{p.pid}/comm").read_text().strip() == "etcd"
                for p in procs.values()):
            time.sleep(0.02)
        seen = set(host_state()["processes"])
        assert {f"{p.pid}:etcd" for p in procs.values()} & seen == {
            f"{procs[own].pid}:etcd", f"{procs[''].pid}:etcd"}
        assert f"{procs[own].pid}:etcd" not in set(host_state("1")["processes"])
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()


def test_made_mount_points_go_with_the_last_run(tmp_path: Path) -> None:
    """A mount point a run made (``/var/lib/cni`` where the machine had none) stays while
    another run is alive (removing it would detach that run's tmpfs there) and goes, with the
    empty directories a detached mount's CNI cache left in it, once no other run is; a file
    in it is never removed but reported."""
    tmp, marks, made = tmp_path / "tmp", tmp_path / "marks", tmp_path / "var" / "lib" / "cni"
    tmp.mkdir()
    marks.mkdir()
    (made / "results").mkdir(parents=True)
    (marks / "var.lib.cni").write_text(str(made))
    other = tmp / "rf-kube-1-abc"  # PID 1: a live run
    other.mkdir()
    assert kube.other_live_runs("5", tmp) == ["1"]
    assert kube.release_made_dirs("5", marks, tmp) == []
    assert (made / "results").is_dir() and (marks / "var.lib.cni").exists()
    other.rename(tmp / "rf-kube-4194305-abc")  # its test process gone
    assert kube.other_live_runs("5", tmp) == []
    (made / "results" / "cache").write_text("x")
    assert kube.release_made_dirs("5", marks, tmp) == [f"mount point left, not empty: {made}"]
    assert (made / "results" / "cache").read_text() == "x"
    (made / "results" / "cache").unlink()
    assert kube.release_made_dirs("5", marks, tmp) == []
    assert not made.exists() and not marks.exists()


def test_sigterm_becomes_an_interrupt_that_runs_the_teardown(tmp_path: Path) -> None:
    """Inside :func:`kube.sigterm_as_interrupt`, SIGTERM raises KeyboardInterrupt (so the
    fixture's teardown stops the cluster); outside it, SIGTERM kills the process as before."""
    code = ("import os, signal, sys\nsys.path.insert(0, sys.argv[1])\n"
            "from kube import cluster\n"
            "try:\n"
            "    with cluster.sigterm_as_interrupt():\n"
            "        os.kill(os.getpid(), signal.SIGTERM)\n"
            "        signal.pause()\n"
            "except KeyboardInterrupt as e:\n"
            "    print('interrupted:', e, flush=True)\n"
            "os.kill(os.getpid(), signal.SIGTERM)\nsignal.pause()\n")
    out = subprocess.run([sys.executable, "-c", code, str(REPO / "tests")], capture_output=True,
                         text=True, timeout=30)
    assert (out.stdout, out.returncode) == ("interrupted: signal 15\n", -15), out.stderr


def test_scripts_test_downloads_the_pinned_crds() -> None:
    """``scripts/test`` puts the prometheus-operator release this module installs into the Go
    module cache (the tests read it offline, :func:`crd_dir`)."""
    text = (REPO / "scripts" / "test").read_text()
    assert re.findall(r"prometheus-operator/prometheus-operator@(v[\d.]+)", text) == [
        PROMETHEUS_OPERATOR]


# -- the story ------------------------------------------------------------------------------------


def test_the_node_runs_v1_34(story: Story) -> None:
    """The node is Ready and every component reports the pinned release (the version ldflags
    are set: an unset one says v0.0.0-master)."""
    c = story.cluster
    version = json.loads(c.kubectl("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"] == kube.KUBE_VERSION
    assert version["clientVersion"]["gitVersion"] == kube.KUBE_VERSION
    node = c.get_json("node", kube.NODE_NAME)
    assert node["status"]["nodeInfo"]["kubeletVersion"] == kube.KUBE_VERSION
    assert node["status"]["nodeInfo"]["kubeProxyVersion"] in ("", kube.KUBE_VERSION)
    assert node["status"]["addresses"][0] == {"type": "InternalIP", "address": kube.NODE_IP}


def test_helm_install_every_object_accepted(story: Story) -> None:
    """``helm install`` with the injector, Events, PodMonitor, PrometheusRule (the
    prometheus-operator CRDs installed first), dashboard ConfigMap and NetworkPolicy: every
    object of the release's manifest exists in the cluster afterwards, and the injector is
    available."""
    c = story.cluster
    crds = crd_dir()
    for name in ("monitoring.coreos.com_podmonitors.yaml",
                 "monitoring.coreos.com_prometheusrules.yaml"):
        c.kubectl("apply", "--server-side", "-f", str(crds / name))
    c.kubectl("wait", "--for=condition=Established", "--timeout=60s",
              "crd/podmonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com")
    for ns in (RELEASE_NS, AGENT_NS, MONITORING_NS):
        c.kubectl("create", "namespace", ns)
    t = time.monotonic()
    helm(c, "install", RELEASE, str(CHART), "-n", RELEASE_NS, "--wait", "--timeout", "120s",
         values=_values(True))
    story.figures["helm_install_s"] = round(time.monotonic() - t, 1)
    manifest = list(yaml.safe_load_all(helm(c, "get", "manifest", RELEASE, "-n", RELEASE_NS)))
    kinds = sorted({m["kind"] for m in manifest if m})
    assert {"Deployment", "Service", "MutatingWebhookConfiguration", "PodMonitor",
            "PrometheusRule", "NetworkPolicy", "ConfigMap", "Role", "RoleBinding",
            "Secret"} <= set(kinds), kinds
    for obj in filter(None, manifest):
        ns = obj["metadata"].get("namespace", RELEASE_NS)
        got = c.kubectl("get", f"{obj['kind'].lower()}.{obj['apiVersion'].split('/')[0]}"
                        if "/" in obj["apiVersion"] else obj["kind"].lower(),
                        obj["metadata"]["name"], "-n", ns, "-o", "name", check=False)
        assert got.returncode == 0, f"{obj['kind']} {ns}/{obj['metadata']['name']}: {got.stderr}"
    deploy = c.get_json("deployment", "-n", RELEASE_NS, "-l",
                        "app.kubernetes.io/component=injector")["items"][0]
    assert deploy["status"].get("availableReplicas") == 1


def test_helm_upgrade_keeps_the_webhook_certificate(story: Story) -> None:
    """``helm upgrade`` (same values) keeps the webhook's serving certificate and caBundle:
    the chart looks the existing Secret up instead of generating a new pair."""
    c = story.cluster

    def cert_and_bundle() -> tuple[str, str]:
        secrets = c.get_json("secret", "-n", RELEASE_NS)["items"]
        tls = [s for s in secrets if s.get("type") == "kubernetes.io/tls"]
        assert len(tls) == 1, [s["metadata"]["name"] for s in secrets]
        hooks = c.get_json("mutatingwebhookconfiguration")["items"]
        ours = [h for h in hooks if h["metadata"]["name"].startswith(RELEASE)]
        return tls[0]["data"]["tls.crt"], ours[0]["webhooks"][0]["clientConfig"]["caBundle"]

    before = cert_and_bundle()
    helm(c, "upgrade", RELEASE, str(CHART), "-n", RELEASE_NS, "--wait", "--timeout", "120s",
         values=_values(True))
    assert cert_and_bundle() == before


def test_injected_agent_pod_raises_the_note(story: Story) -> None:
    """An agent pod annotated for injection, running as user 1000 with fsGroup 2000: the
    injector adds the native sidecar (the first init container, ``restartPolicy: Always``)
    running as the agent's user, not its image's 10001, with its startup probe; the agent's
    real ``bash -c 'ls /nonexistent'`` runs five times from its very first line, without
    waiting for anything (issue 29: the startup probe holds the agent container until the hook
    is rendered, so the hook is there at its start and the first command is recorded: the note
    counts all five); the sidecar's /metrics then
    shows the note with value 5, the pod has the ``RepeatingFailure`` Warning Event, the record
    file was written 0660 owned by 1000:2000, the raw files are gone after collection; and the
    pod has no route but the pod and Service ranges and no name server but its own loopback
    (nothing reaches the machine's resolver)."""
    c = story.cluster
    # Issue 29: the native sidecar's startup probe (GET /startupz: the hook rendered, records/
    # writable) holds the agent container, so its very first shell is hooked. It used to wait
    # for the hook file itself here.
    script = (f"if [ -s {HOOK_DIR}/agent-1.sh ]; then echo 'hook at start: yes'; "
              "else echo 'hook at start: no'; fi; "
              "for i in 1 2 3 4 5; do bash -c 'ls /nonexistent'; "
              "stat -c 'record %a %u:%g' /var/run/repeat-failure/records/* 2>/dev/null; done")
    t = time.monotonic()
    c.kubectl("apply", "-f", "-", input=json.dumps(agent_pod("agent-1", script)))
    pod = wait("agent-1 Running", lambda: (lambda p: p if p["status"].get("phase") == "Running"
                                           else None)(c.get_json("pod", "-n", AGENT_NS,
                                                                 "agent-1")), 120)
    story.figures["pod_running_s"] = round(time.monotonic() - t, 1)
    inits = pod["spec"].get("initContainers", [])
    assert [i["name"] for i in inits][:1] == ["repeat-failure"]
    assert inits[0]["restartPolicy"] == "Always"
    assert inits[0]["securityContext"]["runAsUser"] == AGENT_UID  # shares the agent's files
    # The apiserver defaults the probe's scheme (core/v1 HTTPGetAction: HTTP).
    assert inits[0]["startupProbe"]["httpGet"] == {"path": "/startupz", "port": "rf-metrics",
                                                   "scheme": "HTTP"}
    sidecar_status = [s for s in pod["status"].get("initContainerStatuses", [])
                      if s["name"] == "repeat-failure"][0]
    assert sidecar_status["started"] is True
    agent = pod["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in agent["env"]}
    assert env["BASH_ENV"] == "/var/run/repeat-failure/hook/agent-1.sh"
    assert pod["metadata"]["annotations"]["repeat-failure.hive.dev/status"] == "injected"

    def noted():
        return note_value(metrics(c, "agent-1"), "ls /nonexistent", "2") == 5
    try:
        wait("the note on /metrics", noted, 90)
    except BaseException:
        diagnose(c, "agent-1")
        raise
    story.figures["note_after_pod_s"] = round(time.monotonic() - t, 1)
    events = wait("the RepeatingFailure Event", lambda: c.get_json(
        "events", "-n", AGENT_NS, "--field-selector",
        "involvedObject.name=agent-1,reason=RepeatingFailure")["items"], 60)
    assert events[0]["type"] == "Warning"
    assert "ls /nonexistent" in events[0]["message"]
    log = c.kubectl("logs", "-n", AGENT_NS, "agent-1", "-c", "agent").stdout
    assert log.count("No such file or directory") == 5, log
    assert log.splitlines()[0] == "hook at start: yes", log
    modes = set(re.findall(r"^record (\d+) (\d+):(\d+)$", log, re.M))
    # 0660, the agent's user, and the pod's fsGroup (the emptyDir is setgid to it).
    assert modes == {("660", str(AGENT_UID), str(FS_GROUP))}, log
    left = json.loads(in_sidecar(c, "agent-1", "import os,json;print(json.dumps(sorted("
                                 "os.listdir('/var/run/repeat-failure/records'))))"))
    assert [n for n in left if n.endswith(".jsonl") or ".collecting" in n] == [], left
    # No cluster DNS, no way out: the kubelet (resolvConf: "") gives pods no name server but
    # 127.0.0.1, the pod's own loopback; the CNI bridge gives no default route.
    resolv = c.kubectl("exec", "-n", AGENT_NS, "agent-1", "-c", "agent", "--", "cat",
                       "/etc/resolv.conf").stdout
    assert re.findall(r"^nameserver\s+(\S+)", resolv, re.M) == ["127.0.0.1"], resolv
    routes = c.kubectl("exec", "-n", AGENT_NS, "agent-1", "-c", "agent", "--", "cat",
                       "/proc/net/route").stdout.splitlines()[1:]
    assert sorted(_route(line) for line in routes) == [
        (kube.POD_CIDR, "0.0.0.0"), (kube.SERVICE_CIDR, kube.NODE_IP)], routes


def _scrape_config(monitor: dict) -> dict:
    """The scrape config prometheus-operator makes of a PodMonitor: pods with its selector's
    labels in its namespaces, the endpoint's port and path; target labels namespace, pod,
    container, endpoint; job ``<namespace>/<name>``."""
    spec, endpoint = monitor["spec"], monitor["spec"]["podMetricsEndpoints"][0]
    name, namespace = monitor["metadata"]["name"], monitor["metadata"]["namespace"]
    keep = [{"source_labels": [f"__meta_kubernetes_pod_label_{re.sub(r'[^a-zA-Z0-9_]', '_', k)}"],
             "regex": v, "action": "keep"} for k, v in spec["selector"]["matchLabels"].items()]
    return {
        "job_name": f"podMonitor/{namespace}/{name}/0",
        "scrape_interval": endpoint.get("interval", "2s"), "metrics_path": endpoint["path"],
        "kubernetes_sd_configs": [{"role": "pod", "namespaces": {
            "names": spec["namespaceSelector"]["matchNames"]}}],
        "relabel_configs": [
            *keep,
            {"source_labels": ["__meta_kubernetes_pod_container_port_name"],
             "regex": endpoint["port"], "action": "keep"},
            {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
            {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
            {"source_labels": ["__meta_kubernetes_pod_container_name"],
             "target_label": "container"},
            {"target_label": "endpoint", "replacement": endpoint["port"]},
            {"target_label": "job", "replacement": f"{namespace}/{name}"},
        ]}


def test_prometheus_discovers_scrapes_and_fires(story: Story) -> None:
    """A real Prometheus with ``kubernetes_sd_configs`` (role pod) against the apiserver,
    relabelled as the chart's two PodMonitors describe (the sidecars': pods labelled
    ``repeat-failure.hive.dev/injected=true`` in the agent namespace, port ``rf-metrics``; the
    injector's: its pods, port ``rf-inj-metrics``; path /metrics; target labels namespace, pod,
    container, endpoint; job ``<namespace>/<name>``), with the PrometheusRule's groups as its
    rules: it scrapes the sidecar and the injector (issue 29: the injector's admission reviews,
    one of them agent-1's injection, its certificate's expiry and process_* series), has the
    note series, ``RepeatFailureRepeatingFailure`` fires for the agent and
    ``RepeatFailureInjectorDown`` does not."""
    c = story.cluster
    monitors = {m["spec"]["podMetricsEndpoints"][0]["port"]: m
                for m in c.get_json("podmonitor", "-n", RELEASE_NS)["items"]}
    assert sorted(monitors) == ["rf-inj-metrics", "rf-metrics"]
    rule = c.get_json("prometheusrule", "-n", RELEASE_NS)["items"][0]
    kube.configure_prometheus(c, [_scrape_config(m) for m in monitors.values()],
                              rule["spec"]["groups"])

    def targets_up():
        targets = c.prometheus("/api/v1/targets")["data"]["activeTargets"]
        up = {t["labels"]["endpoint"]: t for t in targets if t["health"] == "up"}
        return up if len(up) == 2 else None
    up = wait("the sidecar and the injector as up targets", targets_up, 60)
    target = up["rf-metrics"]
    assert target["labels"]["pod"] == "agent-1"
    assert target["labels"]["container"] == "repeat-failure"
    assert target["labels"]["namespace"] == AGENT_NS
    assert target["scrapeUrl"].endswith(":9466/metrics")
    assert up["rf-inj-metrics"]["labels"]["container"] == "injector"
    assert up["rf-inj-metrics"]["scrapeUrl"].endswith(":9468/metrics")
    rules = c.prometheus("/api/v1/rules")["data"]["groups"]
    assert {g["name"] for g in rules} == {g["name"] for g in rule["spec"]["groups"]}
    assert "repeat-failure-injector" in {g["name"] for g in rules}

    def query(expr: str) -> list:
        return c.prometheus(f"/api/v1/query?query={urllib.parse.quote(expr)}")["data"]["result"]
    injected = wait("the injector's injected reviews", lambda: query(
        'hive_repeat_failure_injector_admission_reviews_total{outcome="injected"} >= 1'), 30)
    assert injected[0]["metric"]["endpoint"] == "rf-inj-metrics"
    (expiry,) = query("hive_repeat_failure_injector_certificate_expiry_timestamp_seconds")
    assert float(expiry["value"][1]) > time.time() + 86400  # Helm's certificate: 10 years
    assert query('process_resident_memory_bytes{endpoint="rf-inj-metrics"} > 0')
    assert query('process_resident_memory_bytes{endpoint="rf-metrics"} > 0')

    def firing():
        alerts = c.prometheus("/api/v1/alerts")["data"]["alerts"]
        return [a for a in alerts if a["labels"]["alertname"] == "RepeatFailureRepeatingFailure"
                and a["state"] == "firing"]
    (alert,) = wait("RepeatFailureRepeatingFailure firing", firing, 90, interval=1)
    assert alert["labels"]["agent"] == "agent-1"
    assert alert["labels"]["command"] == "ls /nonexistent"
    assert alert["labels"]["exit"] == "2"
    assert alert["labels"]["pod"] == "agent-1"
    assert float(alert["value"]) == 5
    # Pending only in the seconds before the injector's first scrape, then gone for good.
    wait("no RepeatFailureInjectorDown", lambda: not [
        a for a in c.prometheus("/api/v1/alerts")["data"]["alerts"]
        if a["labels"]["alertname"] == "RepeatFailureInjectorDown"], 30)


def test_sidecar_restart_keeps_the_note(story: Story) -> None:
    """The sidecar container stopped with ``crictl stop``: the kubelet restarts it (its
    restart count goes up) and the note is still on /metrics with the same value."""
    c = story.cluster
    ps = json.loads(c.crictl("ps", "--name", "repeat-failure", "--label",
                             "io.kubernetes.pod.name=agent-1", "-o", "json").stdout)
    (container,) = ps["containers"]
    c.crictl("stop", container["id"])

    def restarted():
        pod = c.get_json("pod", "-n", AGENT_NS, "agent-1")
        status = [s for s in pod["status"].get("initContainerStatuses", [])
                  if s["name"] == "repeat-failure"][0]
        return status["restartCount"] >= 1 and status.get("state", {}).get("running")
    wait("the sidecar restarted", restarted, 90)
    assert wait("the note after the restart",
                lambda: note_value(metrics(c, "agent-1"), "ls /nonexistent", "2"), 60) == 5


def test_sidecar_read_only_root_non_root(story: Story) -> None:
    """Inside the running sidecar container: uid 1000 (the agent's), not root; the root file
    system is read-only (a write fails with EROFS); the shared directory is writable; and
    memory figures of the sidecar and injector are recorded."""
    c = story.cluster
    code = ("import os,errno,json\n"
            "r={'uid':os.getuid(),'gid':os.getgid()}\n"
            "try:\n open('/opt/venv/x','w')\nexcept OSError as e:\n r['write_root']=errno.errorcode[e.errno]\n"
            "try:\n open('/tmp/x','w')\nexcept OSError as e:\n r['write_tmp']=errno.errorcode[e.errno]\n"
            "r['shared']=os.access('/var/run/repeat-failure',os.W_OK)\n"
            "r['rss']=[l for l in open('/proc/1/status') if l.startswith('VmRSS')][0].split()[1]\n"
            "print(json.dumps(r))")
    got = json.loads(in_sidecar(c, "agent-1", code))
    assert (got["uid"], got["write_root"], got["write_tmp"], got["shared"]) == (
        AGENT_UID, "EROFS", "EROFS", True)
    story.figures["sidecar_rss_kib"] = int(got["rss"])
    injector = c.get_json("pod", "-n", RELEASE_NS, "-l",
                          "app.kubernetes.io/component=injector")["items"][0]
    rss = c.kubectl("exec", "-n", RELEASE_NS, injector["metadata"]["name"], "--", "python", "-c",
                    "print([l for l in open('/proc/1/status') if l.startswith('VmRSS')][0]"
                    ".split()[1])").stdout
    story.figures["injector_rss_kib"] = int(rss)


def test_off_means_off_in_real_pods(story: Story) -> None:
    """C-AC12 on a real node: with the check turned off (``helm upgrade`` with
    ``repeatFailure.enabled: false``) a new agent pod is exactly the pod submitted (no init
    container, volume, mount, env entry, label or annotation of ours), its environment is
    exactly the container runtime's and Kubernetes' own (no ``BASH_ENV``, ``SHELL`` or
    ``SHLVL`` of the injector's) and its home holds only what the agent wrote; on again, a new
    pod is injected (the switch works both ways); off again, a newer pod is just as clean."""
    c = story.cluster
    script = "env > /home/agent/env.txt; bash -c 'ls /nonexistent'"
    kubernetes_env = {  # the Service links of the default namespace's `kubernetes` Service
        "KUBERNETES_SERVICE_HOST": kube.SERVICE_IP, "KUBERNETES_SERVICE_PORT": "443",
        "KUBERNETES_SERVICE_PORT_HTTPS": "443", "KUBERNETES_PORT": f"tcp://{kube.SERVICE_IP}:443",
        "KUBERNETES_PORT_443_TCP": f"tcp://{kube.SERVICE_IP}:443",
        "KUBERNETES_PORT_443_TCP_PROTO": "tcp", "KUBERNETES_PORT_443_TCP_PORT": "443",
        "KUBERNETES_PORT_443_TCP_ADDR": kube.SERVICE_IP}

    def running(name: str) -> dict:
        c.kubectl("apply", "-f", "-", input=json.dumps(agent_pod(name, script)))
        return wait(f"{name} Running", lambda: (lambda p: p if p["status"].get("phase") ==
                                                "Running" else None)(
            c.get_json("pod", "-n", AGENT_NS, name)), 120)

    def clean_pod(name: str) -> None:
        pod = running(name)
        submitted = agent_pod(name, script)
        assert "initContainers" not in pod["spec"], pod["spec"].get("initContainers")
        ours = sorted(k for k in {**pod["metadata"].get("annotations", {}),
                                  **pod["metadata"].get("labels", {})}
                      if k.startswith("repeat-failure.hive.dev/"))
        assert ours == ["repeat-failure.hive.dev/agent", "repeat-failure.hive.dev/inject"], ours
        (agent,) = pod["spec"]["containers"]
        assert agent["env"] == submitted["spec"]["containers"][0]["env"]
        assert agent["command"] == submitted["spec"]["containers"][0]["command"]
        assert [m["mountPath"] for m in agent["volumeMounts"]] == [
            "/home/agent", "/var/run/secrets/kubernetes.io/serviceaccount"]
        assert [v["name"] for v in pod["spec"]["volumes"]][:1] == ["home"]
        assert len(pod["spec"]["volumes"]) == 2  # and the service-account token's
        listing = wait(f"{name}'s home", lambda: c.kubectl(
            "exec", "-n", AGENT_NS, name, "-c", "agent", "--", "bash", "-c",
            "test -s /home/agent/env.txt && ls -A /home/agent && cat /home/agent/env.txt",
            check=False).stdout, 30)
        files, _, env_text = listing.partition("\n")
        assert files == "env.txt", listing
        env = dict(line.split("=", 1) for line in env_text.splitlines())
        assert env == {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                       "HOSTNAME": name, "HOME": "/home/agent", "PWD": "/", "SHLVL": "1",
                       "_": "/usr/bin/env", **kubernetes_env}, env_text

    def injector_sees(enabled: bool) -> None:
        # The injector re-reads its config file; the kubelet updates a mounted ConfigMap on its
        # sync (syncFrequency, 10 s on this node; a minute by default): until then new pods
        # are still injected (docs/kubernetes.md, "Off means off").
        pod = c.get_json("pod", "-n", RELEASE_NS, "-l",
                         "app.kubernetes.io/component=injector")["items"][0]["metadata"]["name"]
        wait(f"the injector's mounted config saying enabled: {enabled}", lambda: re.search(
            rf"^enabled: {str(enabled).lower()}$", c.kubectl(
                "exec", "-n", RELEASE_NS, pod, "--", "python", "-c",
                "print(open('/etc/repeat-failure-injector/injector.yaml').read())",
                check=False).stdout, re.M), 120, interval=1)

    helm(c, "upgrade", RELEASE, str(CHART), "-n", RELEASE_NS, "--wait", "--timeout", "120s",
         values=_values(False))
    injector_sees(False)
    clean_pod("off-1")
    helm(c, "upgrade", RELEASE, str(CHART), "-n", RELEASE_NS, "--wait", "--timeout", "120s",
         values=_values(True))
    injector_sees(True)
    on = running("on-2")
    assert [i["name"] for i in on["spec"].get("initContainers", [])] == ["repeat-failure"]
    assert on["metadata"]["annotations"]["repeat-failure.hive.dev/status"] == "injected"
    helm(c, "upgrade", RELEASE, str(CHART), "-n", RELEASE_NS, "--wait", "--timeout", "120s",
         values=_values(False))
    injector_sees(False)
    clean_pod("off-2")


def test_zz_stop_leaves_the_machine_as_it_was(story: Story) -> None:
    """Stopping the cluster leaves no process, network device, iptables rule, mount, cgroup or
    kernel setting different from before it started (the kubelet's sysctl writes went to its
    stand-in files), and kubectl and helm wrote nothing under ``~/.kube``. Also records the components' memory (VmRSS) before stopping."""
    c = story.cluster
    for process in c.processes:
        try:
            status = Path(f"/proc/{process.popen.pid}/status").read_text()
            rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))
            story.figures[f"rss_kib_{process.name}"] = rss
        except (OSError, AttributeError):
            pass
    # kubectl's and helm's caches went to the work directory (KUBECACHEDIR), not ~/.kube.
    assert (c.work / "kube-cache" / "discovery").is_dir()
    home_cache = Path.home() / ".kube" / "cache" / "discovery" / f"{c.ns_ip}_6443"
    written = [str(p) for p in home_cache.rglob("*") if p.stat().st_mtime >= story.started] \
        if home_cache.is_dir() else []
    assert written == []
    t = time.monotonic()
    problems = c.stop()
    story.stopped = True
    story.figures["stop_s"] = round(time.monotonic() - t, 1)
    report = kube.cache_dir() / "kube-node-figures.json"
    report.write_text(json.dumps(story.figures, indent=2, sort_keys=True) + "\n")
    print("\nreal-node figures:", json.dumps(story.figures, sort_keys=True))
    assert problems == []
    after = host_state()
    for state in (after, story.before):
        state["dirs"] = {d: v for d, v in state["dirs"].items()
                         if d in after["dirs"] and d in story.before["dirs"]}
    changed = {key: {"before": story.before[key], "after": after[key]}
               for key in story.before if after[key] != story.before[key]}
    assert changed == {}
    # Nothing of this run's, whatever an earlier one left: no cgroup, no process in one.
    assert not list(Path("/sys/fs/cgroup").glob(f"*/{c.cgroup.strip('/')}"))
    assert kube.cgroup_processes(c.cgroup) == set()
