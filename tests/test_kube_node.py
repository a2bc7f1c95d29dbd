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

import json
import os
import re
import subprocess
import time
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
        "injector": {"replicas": 1},
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
    stopped: bool = False


def _another_live_run(tag: str) -> bool:
    """Whether ``tag`` names a cluster run other than this process's that is still going
    (another test session on this machine: its devices, cgroups and processes are its own)."""
    return tag.isdigit() and int(tag) != os.getpid() and Path(f"/proc/{tag}").exists()


def _run_tag(pid: str) -> str:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return ""
    mark = kube.RUN_MARK.encode() + b"="
    return next((e[len(mark):].decode() for e in environ if e.startswith(mark)), "")


def host_state() -> dict:
    """What the tests must leave as they found it: kernel settings, network devices, the
    iptables rules (all tables), mounts, our cgroups, and processes of the cluster's binaries.
    What belongs to another cluster run still going on this machine (a veth ``rfkh<pid>``,
    cgroups ``/rf-kube-<pid>``, processes marked with its tag) is left out: it comes and goes
    on its own."""
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    links = sorted(re.sub(r"^\d+: ", "", line).split(":")[0] for line in links.splitlines())
    links = [n for n in links
             if not (m := re.fullmatch(r"rfkh(\d+)(@.*)?", n)) or not _another_live_run(m[1])]
    rules = subprocess.run(["iptables-save"], capture_output=True, text=True).stdout
    rules = "\n".join(line for line in rules.splitlines() if not line.startswith("#"))
    rules = re.sub(r"\[\d+:\d+\]", "", rules)  # packet counters move
    mounts = sorted(line.split()[4] for line in Path("/proc/self/mountinfo").read_text()
                    .splitlines())
    cgroups = sorted(str(p) for p in Path("/sys/fs/cgroup").glob("*/rf-kube-*")
                     if not _another_live_run(p.name.removeprefix("rf-kube-")))
    in_ours = sorted(pid for name in {Path(c).name for c in cgroups}
                     for pid in kube.cgroup_processes(name))
    names = ("etcd", "kube-apiserver", "kube-controller", "kube-scheduler", "kubelet",
             "kube-proxy", "containerd", "containerd-shim", "prometheus")
    procs = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                comm = Path(f"/proc/{entry}/comm").read_text().strip()
            except OSError:
                continue
            if comm.startswith(names) and not _another_live_run(_run_tag(entry)):
                procs.append(f"{entry}:{comm}")
    return {"sysctl": kube.host_sysctls(), "links": links, "iptables": rules,
            "mounts": mounts, "cgroups": cgroups, "processes": procs,
            "processes_in_our_cgroups": in_ours}


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
    s.figures = figures
    s.cluster = kube.start(archives, bin_dir)
    figures.update({k: round(v, 1) for k, v in s.cluster.timings.items()})
    yield s
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
    """The prometheus-operator module's example CRDs (``go mod download``, pinned)."""
    go = "go" if subprocess.run(["which", "go"], capture_output=True).returncode == 0 \
        else "/usr/local/go/bin/go"
    out = subprocess.run([go, "mod", "download", "-json",
                          f"github.com/prometheus-operator/prometheus-operator@"
                          f"{PROMETHEUS_OPERATOR}"], capture_output=True, text=True,
                         cwd="/", timeout=300)
    assert out.returncode == 0, out.stderr
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
    """An agent pod annotated for injection, running as user 1000 with fsGroup 2000 (the
    sidecar as its default 10001): the injector adds the native sidecar (the first init
    container, ``restartPolicy: Always``); the agent's real ``bash -c 'ls /nonexistent'`` runs
    five times; the sidecar's /metrics then shows the note with value 5, the pod has the
    ``RepeatingFailure`` Event, the record file was written 0660 and the raw files are gone
    after collection."""
    c = story.cluster
    script = ("for i in 1 2 3 4 5; do bash -c 'ls /nonexistent'; "
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
    modes = set(re.findall(r"^record (\d+) (\d+):(\d+)$", log, re.M))
    assert modes and all(m[0] == "660" for m in modes), log
    assert all(m[1] == str(AGENT_UID) for m in modes), log
    left = json.loads(in_sidecar(c, "agent-1", "import os,json;print(json.dumps(sorted("
                                 "os.listdir('/var/run/repeat-failure/records'))))"))
    assert [n for n in left if n.endswith(".jsonl") or ".collecting" in n] == [], left


def test_prometheus_discovers_scrapes_and_fires(story: Story) -> None:
    """A real Prometheus with ``kubernetes_sd_configs`` (role pod) against the apiserver,
    relabelled as the chart's PodMonitor describes (pods labelled
    ``repeat-failure.hive.dev/injected=true`` in the agent namespace, port ``rf-metrics``,
    path /metrics; target labels namespace, pod, container, endpoint; job
    ``<namespace>/<name>``), with the PrometheusRule's groups as its rules: it scrapes the
    sidecar, has the note series, and ``RepeatFailureRepeatingFailure`` fires for the agent."""
    c = story.cluster
    monitor = c.get_json("podmonitor", "-n", RELEASE_NS)["items"][0]
    rule = c.get_json("prometheusrule", "-n", RELEASE_NS)["items"][0]
    spec, endpoint = monitor["spec"], monitor["spec"]["podMetricsEndpoints"][0]
    (key, value), = spec["selector"]["matchLabels"].items()
    label = re.sub(r"[^a-zA-Z0-9_]", "_", key)
    name = monitor["metadata"]["name"]
    scrape = {
        "job_name": f"podMonitor/{RELEASE_NS}/{name}/0",
        "scrape_interval": endpoint["interval"], "metrics_path": endpoint["path"],
        "kubernetes_sd_configs": [{"role": "pod", "namespaces": {
            "names": spec["namespaceSelector"]["matchNames"]}}],
        "relabel_configs": [
            {"source_labels": [f"__meta_kubernetes_pod_label_{label}"], "regex": value,
             "action": "keep"},
            {"source_labels": ["__meta_kubernetes_pod_container_port_name"],
             "regex": endpoint["port"], "action": "keep"},
            {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
            {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
            {"source_labels": ["__meta_kubernetes_pod_container_name"],
             "target_label": "container"},
            {"target_label": "endpoint", "replacement": endpoint["port"]},
            {"target_label": "job", "replacement": f"{RELEASE_NS}/{name}"},
        ]}
    kube.configure_prometheus(c, [scrape], rule["spec"]["groups"])

    def target_up():
        targets = c.prometheus("/api/v1/targets")["data"]["activeTargets"]
        return [t for t in targets if t["health"] == "up"]
    (target,) = wait("the sidecar as an up target", target_up, 60)
    assert target["labels"]["pod"] == "agent-1"
    assert target["labels"]["container"] == "repeat-failure"
    assert target["labels"]["namespace"] == AGENT_NS
    assert target["scrapeUrl"].endswith(":9466/metrics")
    rules = c.prometheus("/api/v1/rules")["data"]["groups"]
    assert {g["name"] for g in rules} == {g["name"] for g in rule["spec"]["groups"]}

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
    ``repeatFailure.enabled: false``) a new agent pod is not injected, and its environment and
    home hold nothing of ours; on again and off again, a newer pod is just as clean."""
    c = story.cluster
    script = "env > /home/agent/env.txt; bash -c 'ls /nonexistent'"

    def clean_pod(name: str) -> None:
        c.kubectl("apply", "-f", "-", input=json.dumps(agent_pod(name, script)))
        pod = wait(f"{name} Running", lambda: (lambda p: p if p["status"].get("phase") ==
                                               "Running" else None)(
            c.get_json("pod", "-n", AGENT_NS, name)), 120)
        assert "initContainers" not in pod["spec"], pod["spec"].get("initContainers")
        assert "repeat-failure.hive.dev/status" not in pod["metadata"].get("annotations", {})
        listing = wait(f"{name}'s home", lambda: c.kubectl(
            "exec", "-n", AGENT_NS, name, "-c", "agent", "--", "bash", "-c",
            "test -s /home/agent/env.txt && ls -A /home/agent && cat /home/agent/env.txt",
            check=False).stdout, 30)
        files, _, env = listing.partition("\n")
        assert files == "env.txt", listing
        assert not re.search(r"BASH_ENV|REPEAT_FAILURE|repeat-failure", env), env

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
    helm(c, "upgrade", RELEASE, str(CHART), "-n", RELEASE_NS, "--wait", "--timeout", "120s",
         values=_values(False))
    injector_sees(False)
    clean_pod("off-2")


def test_zz_stop_leaves_the_machine_as_it_was(story: Story) -> None:
    """Stopping the cluster leaves no process, network device, iptables rule, mount, cgroup or
    kernel setting different from before it started (the kubelet's sysctl writes went to its
    stand-in files). Also records the components' memory (VmRSS) before stopping."""
    c = story.cluster
    for process in c.processes:
        try:
            status = Path(f"/proc/{process.popen.pid}/status").read_text()
            rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))
            story.figures[f"rss_kib_{process.name}"] = rss
        except (OSError, AttributeError):
            pass
    t = time.monotonic()
    problems = c.stop()
    story.stopped = True
    story.figures["stop_s"] = round(time.monotonic() - t, 1)
    report = kube.cache_dir() / "kube-node-figures.json"
    report.write_text(json.dumps(story.figures, indent=2, sort_keys=True) + "\n")
    print("\nreal-node figures:", json.dumps(story.figures, sort_keys=True))
    assert problems == []
    after = host_state()
    for key in story.before:
        assert after[key] == story.before[key], key
    # Nothing of this run's, whatever an earlier one left: no cgroup, no process in one.
    assert not list(Path("/sys/fs/cgroup").glob(f"*/{c.cgroup.strip('/')}"))
    assert kube.cgroup_processes(c.cgroup) == set()
