"""The Helm chart `charts/repeat-failure`: lint it, render it for each combination of values that
changes what it installs, validate every rendered object, and pin the fields that the injector,
the sidecar and docs/kubernetes.md (the contract) agree on.

`helm` comes from scripts/test (`go install helm.sh/helm/v3/cmd/helm@v3.22.0` into
~/.cache/repeat-failure/bin); without it every test here is skipped with that reason. Built-in
kinds are validated with `kubernetes-validate` (its strict schemas: unknown fields fail) for
Kubernetes 1.28 and the newest version the package ships. It has no schemas for custom resources,
so PodMonitor, PrometheusRule, Certificate and Issuer are checked against small structural
schemas written here from the fields this chart uses (not the upstream CRDs): they catch a typo
or a wrong type in those fields, not everything the real CRDs would refuse. Nothing here talks to
a cluster: `lookup` (certificate reuse on upgrade) always finds nothing under `helm template`, so
its branch is exercised on a copy of the chart that reads the "existing" Secret from a file.
Every render passes `--kube-version`: a go-installed helm has no build-time Kubernetes version
and would assume v1.20, below the chart's floor.
"""

from __future__ import annotations

import argparse
import base64
import copy
import functools
import hashlib
import json
import re
import shutil
import socket
import ssl
import subprocess
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any, Iterator

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
CHART = REPO / "charts" / "repeat-failure"
VALUES = CHART / "values.yaml"
SCHEMA = CHART / "values.schema.json"
README = CHART / "README.md"
CONTRACT = REPO / "docs" / "kubernetes.md"
RULES_FILE = CHART / "files" / "prometheus-rules.yaml"
DASHBOARD_FILE = CHART / "files" / "dashboard.json"

RELEASE = "rf"
NAMESPACE = "agents"
FULLNAME = "rf-repeat-failure"
INJECTOR = f"{FULLNAME}-injector"
KUBE_OLD = "1.28.0"
KUBE_NEW = "1.31.0"

try:
    import kubernetes_validate
    KUBE_NEWEST = ".".join(kubernetes_validate.latest_version().split(".")[:2]) + ".0"
except ImportError:  # the validation tests skip; the rest still run
    kubernetes_validate = None
    KUBE_NEWEST = "1.33.0"


def _find_helm() -> str | None:
    cached = Path.home() / ".cache" / "repeat-failure" / "bin" / "helm"
    if cached.is_file():
        return str(cached)
    return shutil.which("helm")


HELM = _find_helm()
pytestmark = pytest.mark.skipif(
    HELM is None, reason="helm is not installed; scripts/test installs it "
    "(go install helm.sh/helm/v3/cmd/helm@v3.22.0 into ~/.cache/repeat-failure/bin)")

MONITORING = ("monitoring.podMonitor.enabled=true", "monitoring.prometheusRule.enabled=true",
              "monitoring.grafanaDashboard.enabled=true", "networkPolicy.enabled=true")
TEAMS = ("team-a", "team-b", "team-c")
FIXLOOP = f"{FULLNAME}-fixloop"
#: The fixloop on, with the two values it cannot run without (a repository and a token source).
FIXLOOP_ON = ("fixloop.enabled=true", "fixloop.config.repositories={hive/app,hive/web}")
FIXLOOP_TOKEN = (*FIXLOOP_ON, "fixloop.github.token=ghp_0123456789abcdef")

#: name -> (--set arguments, --kube-version): every combination that changes what is installed.
COMBOS: dict[str, tuple[tuple[str, ...], str]] = {
    "defaults": ((), KUBE_NEW),
    "defaults-kube-1.28": ((), KUBE_OLD),
    "defaults-kube-newest": ((), KUBE_NEWEST),
    "enabled-events": (("repeatFailure.enabled=true", "repeatFailure.events=true"), KUBE_NEW),
    "cert-manager": (("injector.certManager.enabled=true",), KUBE_NEW),
    "cert-manager-issuer-ref": (("injector.certManager.enabled=true",
                                 "injector.certManager.issuerRef.name=corp-ca",
                                 "injector.certManager.issuerRef.kind=ClusterIssuer"), KUBE_NEW),
    "monitoring-networkpolicy": (MONITORING, KUBE_NEW),
    "agent-namespaces": ((f"agentNamespaces={{{','.join(TEAMS)}}}", "repeatFailure.enabled=true",
                          "repeatFailure.events=true", "agentServiceAccounts={default,runner}",
                          *MONITORING), KUBE_NEW),
    # Issue 28: the injector's NetworkPolicy (only the API server's addresses reach the webhook).
    "injector-networkpolicy": (("injector.networkPolicy.enabled=true",
                                "injector.networkPolicy.apiServerCIDRs={10.0.0.0/24,fd00:10::/64}"),
                               KUBE_NEW),
    "native-sidecar-true-kube-1.28": (("injector.nativeSidecar=true",), KUBE_OLD),
    "native-sidecar-false": (("injector.nativeSidecar=false",), KUBE_NEW),
    "single-replica": (("injector.replicas=1",), KUBE_NEW),
    "injector-disabled": (("injector.enabled=false", "repeatFailure.events=true",
                           "networkPolicy.enabled=true"), KUBE_NEW),
    "everything-kube-1.28": ((f"agentNamespaces={{{','.join(TEAMS)}}}",
                              "repeatFailure.enabled=true", "repeatFailure.events=true",
                              "injector.certManager.enabled=true", *MONITORING), KUBE_OLD),
    # Issue 9: the fix-loop escalation Deployment (off in every combination above).
    "fixloop-token": (FIXLOOP_TOKEN, KUBE_NEW),
    "fixloop-existing-secret-kube-1.28": ((*FIXLOOP_ON, "fixloop.github.existingSecret=gh-bot",
                                           "fixloop.github.existingSecretKey=pat"), KUBE_OLD),
    "fixloop-existing-claim-events-off": ((*FIXLOOP_TOKEN,
                                           "fixloop.persistence.existingClaim=ledger",
                                           "fixloop.config.events=false"), KUBE_NEW),
    "fixloop-everything": ((*FIXLOOP_TOKEN, f"agentNamespaces={{{','.join(TEAMS)}}}",
                            "repeatFailure.enabled=true", "repeatFailure.events=true",
                            "fixloop.persistence.storageClassName=fast",
                            "json:fixloop.config.notifier={\"timeout_s\": 2.5, \"fixer_url\": "
                            "\"http://fixer.agents.svc:8080/kick\", \"agents\": [{\"login\": "
                            "\"hive-coder\", \"url\": \"http://coder.agents.svc:8080/kick\", "
                            "\"cadence_s\": 900}]}",
                            "imagePullSecrets[0].name=regcred",
                            "fixloop.nodeSelector.pool=system", *MONITORING), KUBE_NEWEST),
}


def _helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    assert HELM is not None
    proc = subprocess.run([HELM, *args], capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed:\n{proc.stderr}")
    return proc


def _set_args(sets: tuple[str, ...]) -> list[str]:
    """`--set key=value`, or `--set-json key=value` for an item written `json:key=value`
    (`--set` passes `0.5` as the string "0.5", which the schema rightly refuses)."""
    args = []
    for s in sets:
        args += ["--set-json", s[5:]] if s.startswith("json:") else ["--set", s]
    return args


def _template_args(sets: tuple[str, ...], kube: str, namespace: str) -> list[str]:
    return ["template", RELEASE, str(CHART), "--namespace", namespace, "--kube-version", kube,
            *_set_args(sets)]


@functools.lru_cache(maxsize=None)
def _render_text(sets: tuple[str, ...], kube: str, namespace: str) -> str:
    return _helm(*_template_args(sets, kube, namespace)).stdout


def render(*sets: str, kube: str = KUBE_NEW, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    """The objects `helm template` renders (a fresh copy: tests may change it)."""
    text = _render_text(tuple(sets), kube, namespace)
    return [doc for doc in yaml.safe_load_all(text) if doc is not None]


def render_fails(*sets: str, kube: str = KUBE_NEW) -> str:
    """`helm template` must fail; returns its error output."""
    proc = _helm(*_template_args(tuple(sets), kube, NAMESPACE), check=False)
    assert proc.returncode != 0, f"helm template {sets} succeeded"
    return proc.stderr


def of_kind(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


def one(objs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [o for o in of_kind(objs, kind) if name is None or o["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def injector_config(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return yaml.safe_load(one(objs, "ConfigMap", INJECTOR)["data"]["injector.yaml"])


def sidecar_configs(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in of_kind(objs, "ConfigMap")
            if o["metadata"]["name"] == "repeat-failure-config"]


def values_yaml() -> dict[str, Any]:
    return yaml.safe_load(VALUES.read_text())


# --- values.yaml documentation: the leaves the README table must list -------------------------

def _doc_comment(lines: list[str], line: int) -> str | None:
    """The `# --` comment right above values.yaml line `line` (0-based), continuation lines
    joined; None when the key has none (helm-docs' convention)."""
    parts: list[str] = []
    i = line - 1
    while i >= 0 and lines[i].strip().startswith("#"):
        text = lines[i].strip()
        if text.startswith("# --"):
            return " ".join([text[4:].strip(), *reversed(parts)]).strip()
        parts.append(text[1:].strip())
        i -= 1
    return None


def values_leaves() -> list[tuple[str, Any, str]]:
    """(dotted key, default, description) of every documented leaf of values.yaml, in file order.

    A key documented with `# --` is a leaf (a map documented so, like `resources`, is one row);
    an undocumented key must be a non-empty map and its keys are visited instead. An undocumented
    key that is not a map fails: every value the chart reads is described."""
    text = VALUES.read_text()
    lines = text.splitlines()
    root = yaml.compose(text)
    plain = yaml.safe_load(text)
    leaves: list[tuple[str, Any, str]] = []

    def walk(node: yaml.MappingNode, value: dict[str, Any], prefix: str) -> None:
        for key_node, child in node.value:
            key = key_node.value
            path = f"{prefix}{key}"
            doc = _doc_comment(lines, key_node.start_mark.line)
            if doc is not None:
                leaves.append((path, value[key], doc))
            elif isinstance(child, yaml.MappingNode) and child.value:
                walk(child, value[key], path + ".")
            else:
                raise AssertionError(f"values.yaml: {path} has no `# --` comment")

    walk(root, plain, "")
    return leaves


def schema_type(schema: dict[str, Any], dotted: str) -> str:
    """The README's type name for a value, from values.schema.json."""
    node = schema
    for part in dotted.split("."):
        node = node["properties"][part]
    if "enum" in node and "type" not in node:
        return "/".join(sorted({"bool" if isinstance(v, bool) else "string" for v in node["enum"]},
                               reverse=True))
    kind = node.get("type") or node["anyOf"][0]["type"]
    return {"integer": "int", "number": "number", "boolean": "bool", "string": "string",
            "array": "list", "object": "object"}[kind]


def readme_values_table() -> dict[str, tuple[str, str, str]]:
    """key -> (type, default, description) from the README's values table."""
    rows: dict[str, tuple[str, str, str]] = {}
    in_table = False
    for line in README.read_text().splitlines():
        if line.startswith("| key | type | default | description |"):
            in_table = True
            continue
        if in_table:
            if not line.startswith("|"):
                break
            if line.startswith("| ---"):
                continue
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            key, typ, default, desc = cells
            assert key.startswith("`") and default.startswith("`"), line
            assert key not in rows, f"README lists {key} twice"
            rows[key.strip("`")] = (typ, default[1:-1].replace("\\|", "|"), desc)
    return rows


# --- structural schemas of the custom resources the chart renders ------------------------------

def _strict(props: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "properties": props,
            "required": list(required)}


_STR = {"type": "string", "minLength": 1}
_STRMAP = {"type": "object", "additionalProperties": {"type": "string"}}
_META = _strict({"name": _STR, "namespace": _STR, "labels": _STRMAP, "annotations": _STRMAP},
                ("name", "namespace"))
_GO_DURATION = {"type": "string", "pattern": r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"}
_PROM_DURATION = {"type": "string", "pattern": r"^(0|([0-9]+(ms|s|m|h|d|w|y))+)$"}
_ISSUER_REF = _strict({"name": _STR, "kind": _STR, "group": _STR}, ("name",))
_LABEL_SELECTOR = _strict({"matchLabels": _STRMAP, "matchExpressions": {"type": "array"}})


def _crd(api_version: str, kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return _strict({"apiVersion": {"const": api_version}, "kind": {"const": kind},
                    "metadata": _META, "spec": spec}, ("apiVersion", "kind", "metadata", "spec"))


CRD_SCHEMAS: dict[str, dict[str, Any]] = {
    "PodMonitor": _crd("monitoring.coreos.com/v1", "PodMonitor", _strict({
        "selector": _LABEL_SELECTOR,
        "namespaceSelector": _strict({"any": {"type": "boolean"},
                                      "matchNames": {"type": "array", "items": _STR}}),
        "podMetricsEndpoints": {"type": "array", "minItems": 1, "items": _strict({
            "port": _STR, "path": {"type": "string", "pattern": "^/"},
            "interval": _PROM_DURATION, "scrapeTimeout": _PROM_DURATION})},
    }, ("selector", "podMetricsEndpoints"))),
    "PrometheusRule": _crd("monitoring.coreos.com/v1", "PrometheusRule", _strict({
        "groups": {"type": "array", "minItems": 1, "items": _strict({
            "name": _STR, "interval": _PROM_DURATION, "limit": {"type": "integer"},
            "rules": {"type": "array", "minItems": 1, "items": {
                "type": "object", "additionalProperties": False,
                "properties": {"alert": _STR, "record": _STR,
                               "expr": {"type": ["string", "integer"]},
                               "for": _PROM_DURATION, "keep_firing_for": _PROM_DURATION,
                               "labels": _STRMAP, "annotations": _STRMAP},
                "required": ["expr"],
                "oneOf": [{"required": ["alert"]}, {"required": ["record"]}]}},
        }, ("name", "rules"))},
    }, ("groups",))),
    "Certificate": _crd("cert-manager.io/v1", "Certificate", _strict({
        "secretName": _STR, "commonName": _STR, "isCA": {"type": "boolean"},
        "dnsNames": {"type": "array", "items": _STR},
        "duration": _GO_DURATION, "renewBefore": _GO_DURATION,
        "privateKey": _strict({"algorithm": {"enum": ["RSA", "ECDSA", "Ed25519"]},
                               "size": {"type": "integer"},
                               "rotationPolicy": {"enum": ["Never", "Always"]}}),
        "usages": {"type": "array", "items": {"enum": [
            "signing", "digital signature", "content commitment", "key encipherment",
            "key agreement", "data encipherment", "cert sign", "crl sign", "encipher only",
            "decipher only", "any", "server auth", "client auth", "code signing",
            "email protection", "s/mime", "ipsec end system", "ipsec tunnel", "ipsec user",
            "timestamping", "ocsp signing", "microsoft sgc", "netscape sgc"]}},
        "issuerRef": _ISSUER_REF,
    }, ("secretName", "issuerRef"))),
    "Issuer": _crd("cert-manager.io/v1", "Issuer", {
        "type": "object", "minProperties": 1, "maxProperties": 1, "additionalProperties": False,
        "properties": {"selfSigned": _strict({}),
                       "ca": _strict({"secretName": _STR}, ("secretName",))}}),
}


def validate_object(obj: dict[str, Any]) -> list[str]:
    """Validate one rendered object; returns what validated it (one entry per schema used)."""
    if obj["kind"] in CRD_SCHEMAS:
        jsonschema.Draft202012Validator(CRD_SCHEMAS[obj["kind"]]).validate(obj)
        return [f"own:{obj['kind']}"]
    assert kubernetes_validate is not None
    used = []
    for version in sorted({KUBE_OLD, KUBE_NEWEST}):
        kubernetes_validate.validate(obj, version, strict=True)
        used.append(f"kubernetes-validate:{version}")
    return used


# --- lint and validation, every combination ----------------------------------------------------

@pytest.mark.parametrize("combo", COMBOS)
def test_helm_lint_plain_and_strict(combo: str) -> None:
    """`helm lint` and `helm lint --strict` (warnings fail) pass for the combination."""
    sets, kube = COMBOS[combo]
    for strict in ((), ("--strict",)):
        proc = _helm("lint", str(CHART), *strict, "--namespace", NAMESPACE, "--kube-version", kube,
                     *_set_args(sets))
        assert "0 chart(s) failed" in proc.stdout, proc.stdout
        assert "[WARNING]" not in proc.stdout and "[ERROR]" not in proc.stdout, proc.stdout


@pytest.mark.parametrize("combo", COMBOS)
def test_every_rendered_object_validates(combo: str) -> None:
    """Each object the combination renders validates: built-in kinds against kubernetes-validate's
    strict schemas for 1.28 and the newest version it ships (unknown fields fail), custom
    resources against the structural schemas above; no object goes unchecked."""
    if kubernetes_validate is None:
        pytest.skip("kubernetes-validate is not installed (pip install -e '.[test]')")
    sets, kube = COMBOS[combo]
    objs = render(*sets, kube=kube)
    assert objs
    for obj in objs:
        try:
            assert validate_object(obj)
        except Exception as exc:  # name the object in the failure
            raise AssertionError(f"{obj['kind']}/{obj['metadata']['name']}: {exc}") from exc


_INJECTOR_OBJECTS = {"ServiceAccount": 1, "Service": 1, "Deployment": 1,
                     "MutatingWebhookConfiguration": 1, "PodDisruptionBudget": 1}
_HELM_TLS = {**_INJECTOR_OBJECTS, "Secret": 1}
#: Objects per combination, kind by kind. ConfigMaps: one sidecar config per agent namespace, the
#: injector's config, the Grafana dashboard. Pods: the `helm test` hooks (issue 29): the
#: injector's with the injector, the sidecar's too with the check on and native sidecars.
EXPECTED_COUNTS: dict[str, dict[str, int]] = {
    "defaults": {"Pod": 1, "ConfigMap": 2, **_HELM_TLS},
    "defaults-kube-1.28": {"Pod": 1, "ConfigMap": 2, **_HELM_TLS},
    "defaults-kube-newest": {"Pod": 1, "ConfigMap": 2, **_HELM_TLS},
    "enabled-events": {"Pod": 2, "ConfigMap": 2, **_HELM_TLS, "Role": 1, "RoleBinding": 1},
    "cert-manager": {"Pod": 1, "ConfigMap": 2, **_INJECTOR_OBJECTS, "Certificate": 2, "Issuer": 2},
    "cert-manager-issuer-ref": {"Pod": 1, "ConfigMap": 2, **_INJECTOR_OBJECTS, "Certificate": 1},
    # PodMonitors: the sidecars' and the injector's (issue 29).
    "monitoring-networkpolicy": {"Pod": 1, "ConfigMap": 3, **_HELM_TLS, "NetworkPolicy": 1,
                                 "PodMonitor": 2, "PrometheusRule": 1},
    "agent-namespaces": {"Pod": 2, "ConfigMap": 5, **_HELM_TLS, "Role": 3, "RoleBinding": 3,
                         "NetworkPolicy": 3, "PodMonitor": 2, "PrometheusRule": 1},
    "injector-networkpolicy": {"Pod": 1, "ConfigMap": 2, **_HELM_TLS, "NetworkPolicy": 1},
    "native-sidecar-true-kube-1.28": {"Pod": 1, "ConfigMap": 2, **_HELM_TLS},
    "native-sidecar-false": {"Pod": 1, "ConfigMap": 2, **_HELM_TLS},
    "single-replica": {"Pod": 1, "ConfigMap": 2, **_HELM_TLS, "PodDisruptionBudget": 0},
    "injector-disabled": {"Pod": 0, "ConfigMap": 1, "Role": 1, "RoleBinding": 1, "NetworkPolicy": 1},
    "everything-kube-1.28": {"Pod": 1, "ConfigMap": 5, **_INJECTOR_OBJECTS, "Certificate": 2, "Issuer": 2,
                             "Role": 3, "RoleBinding": 3, "NetworkPolicy": 3, "PodMonitor": 2,
                             "PrometheusRule": 1},
    # The fixloop adds its ConfigMap, Deployment, Service, ServiceAccount and (unless
    # existingClaim) PVC; the chart's Secret with `token`; the Events Role and RoleBinding with
    # events (default on); its PodMonitor and NetworkPolicy with the monitoring toggles.
    "fixloop-token": {"Pod": 1, "ConfigMap": 3, "Secret": 2, "ServiceAccount": 2, "Service": 2,
                      "Deployment": 2, "MutatingWebhookConfiguration": 1,
                      "PodDisruptionBudget": 1, "PersistentVolumeClaim": 1, "Role": 1,
                      "RoleBinding": 1},
    "fixloop-existing-secret-kube-1.28": {"Pod": 1, "ConfigMap": 3, **_HELM_TLS, "ServiceAccount": 2,
                                          "Service": 2, "Deployment": 2,
                                          "PersistentVolumeClaim": 1, "Role": 1,
                                          "RoleBinding": 1},
    "fixloop-existing-claim-events-off": {"Pod": 1, "ConfigMap": 3, "Secret": 2, "ServiceAccount": 2,
                                          "Service": 2, "Deployment": 2,
                                          "MutatingWebhookConfiguration": 1,
                                          "PodDisruptionBudget": 1},
    "fixloop-everything": {"Pod": 2, "ConfigMap": 6, "Secret": 2, "ServiceAccount": 2, "Service": 2,
                           "Deployment": 2, "MutatingWebhookConfiguration": 1,
                           "PodDisruptionBudget": 1, "PersistentVolumeClaim": 1, "Role": 4,
                           "RoleBinding": 4, "NetworkPolicy": 4, "PodMonitor": 3,
                           "PrometheusRule": 1},
}


@pytest.mark.parametrize("combo", COMBOS)
def test_object_counts(combo: str) -> None:
    """Each combination renders exactly the expected objects, kind by kind (injector objects only
    with the injector, the TLS Secret or the cert-manager objects, per-namespace objects once per
    agent namespace, RBAC only with Events, a PDB only with more than one replica). Without
    files/prometheus-rules.yaml or files/dashboard.json their objects are not expected."""
    sets, kube = COMBOS[combo]
    expected = {kind: n for kind, n in EXPECTED_COUNTS[combo].items() if n}
    if not RULES_FILE.is_file():
        expected.pop("PrometheusRule", None)
    if not DASHBOARD_FILE.is_file() and "monitoring.grafanaDashboard.enabled=true" in sets:
        expected["ConfigMap"] -= 1
    counts: dict[str, int] = {}
    for obj in render(*sets, kube=kube):
        counts[obj["kind"]] = counts.get(obj["kind"], 0) + 1
    assert counts == expected


@pytest.mark.parametrize("combo", COMBOS)
def test_labels_and_namespaces_everywhere(combo: str) -> None:
    """Every object (and the injector's pod template) carries the seven recommended labels with
    the chart's values; every namespaced object names its namespace, so `helm template | kubectl
    apply` puts it where `helm install` would."""
    sets, kube = COMBOS[combo]
    expected = {"helm.sh/chart": "repeat-failure-0.1.0", "app.kubernetes.io/name": "repeat-failure",
                "app.kubernetes.io/instance": RELEASE, "app.kubernetes.io/version": "0.1.0",
                "app.kubernetes.io/part-of": "repeat-failure",
                "app.kubernetes.io/managed-by": "Helm"}
    components = {"injector", "sidecar-config", "events", "monitoring", "network-policy",
                  "fixloop", "test"}
    for obj in render(*sets, kube=kube):
        labels = obj["metadata"]["labels"]
        where = f"{obj['kind']}/{obj['metadata']['name']}"
        assert {k: labels.get(k) for k in expected} == expected, where
        assert labels.get("app.kubernetes.io/component") in components, where
        if obj["kind"] == "Deployment":
            pod_labels = obj["spec"]["template"]["metadata"]["labels"]
            assert {k: pod_labels.get(k) for k in expected} == expected
        if obj["kind"] != "MutatingWebhookConfiguration":
            assert obj["metadata"].get("namespace"), where
        else:
            assert "namespace" not in obj["metadata"]


def test_packaged_chart_renders_the_same(tmp_path: Path) -> None:
    """`helm package` keeps everything the templates read (.helmignore drops nothing needed):
    the packaged chart renders the same kinds and names, monitoring files included."""
    _helm("package", str(CHART), "--destination", str(tmp_path))
    (tgz,) = tmp_path.glob("repeat-failure-0.1.0.tgz")
    sets = ("monitoring.prometheusRule.enabled=true", "monitoring.grafanaDashboard.enabled=true")
    packaged = [d for d in yaml.safe_load_all(_helm(
        *_template_args(sets, KUBE_NEW, NAMESPACE)[:2], str(tgz),
        *_template_args(sets, KUBE_NEW, NAMESPACE)[3:]).stdout) if d]
    names = lambda objs: sorted((o["kind"], o["metadata"]["name"]) for o in objs)  # noqa: E731
    assert names(packaged) == names(render(*sets))


def test_kube_version_floor() -> None:
    """The chart declares Kubernetes >= 1.25 (NetworkPolicy endPort ranges); an older cluster is
    refused with helm's own message rather than half-installed."""
    assert "incompatible with Kubernetes v1.24.0" in render_fails(kube="1.24.0")


# --- the injector -------------------------------------------------------------------------------

def test_injector_config_default_exact() -> None:
    """The injector ConfigMap `<fullname>-injector` holds exactly the keys docs/kubernetes.md
    lists, with the defaults: off, the chart's image, native sidecar on 1.31."""
    assert injector_config(render()) == {
        "enabled": False,
        "image": "ghcr.io/hive/repeat-failure:0.1.0",
        "imagePullPolicy": "IfNotPresent",
        "nativeSidecar": True,
        "configMap": "repeat-failure-config",
        "runAsUser": 10001,
        "runAsGroup": 10001,
        "resources": {"requests": {"cpu": "10m", "memory": "48Mi"}, "limits": {"memory": "96Mi"}},
    }


def test_injector_config_keys_are_the_contracts() -> None:
    """The rendered injector config has the same keys as the example in docs/kubernetes.md
    ("The injector's config"), so the chart and the injector cannot drift apart silently."""
    text = CONTRACT.read_text()
    block = text.split("## The injector's config", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    assert set(injector_config(render())) == set(yaml.safe_load(block))


@pytest.mark.parametrize("reference", [
    "registry.example/rf:1.2.3", "localhost:5000/team/rf:dev_1",
    "registry.example/rf@sha256:" + "c" * 64, "registry.example/rf:1.2.3@sha256:" + "d" * 64,
])
def test_image_is_one_reference(reference: str) -> None:
    """Issue 17: the image is one value, `image.reference`, used as given by the injector, the
    sidecar it injects and the fixloop (a tag, a digest, or both; a registry with a port)."""
    objs = render("image.reference=" + reference, *FIXLOOP_TOKEN)
    assert injector_config(objs)["image"] == reference
    deployments = [o for o in objs if o["kind"] == "Deployment"]
    assert len(deployments) == 2
    for dep in deployments:
        (container,) = dep["spec"]["template"]["spec"]["containers"]
        assert container["image"] == reference


def test_default_image_is_the_released_version() -> None:
    """The default `image.reference` is the published image of this version: its tag is the
    chart's appVersion, the package version (``repeat_failure.__version__``, written once:
    issue 29) and the Dockerfile's VERSION, so a release bumps them together (docs/image.md
    "Versions"; tests/test_version.py holds every copy to it)."""
    from repeat_failure import __version__
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    dockerfile = re.search(r"^ARG VERSION=(\S+)$", (REPO / "Dockerfile").read_text(), re.M)
    assert values_yaml()["image"] == {"reference": f"ghcr.io/hive/repeat-failure:{chart['appVersion']}",
                                 "pullPolicy": "IfNotPresent"}
    assert chart["appVersion"] == __version__ == dockerfile.group(1)


def test_readme_explains_the_image() -> None:
    """The chart README says where the image comes from and what `image.reference` takes,
    pointing at docs/image.md for building, tagging and pushing it."""
    section = README.read_text().split("## The image\n", 1)[1].split("\n## ", 1)[0]
    for needle in ("`image.reference`", "docs/image.md", "docker build", "docker push",
                   "@sha256:", "10001", "9466", "8443", "readOnlyRootFilesystem"):
        assert needle in section, needle


def test_injector_config_follows_values() -> None:
    """Values reach the injector config: the on switch, a pinned digest, pull policy, the
    sidecar's user, group and resources; big UIDs stay integers (no 1e+09)."""
    cfg = injector_config(render(
        "repeatFailure.enabled=true", "image.reference=registry.example/rf@sha256:" + "a" * 64,
        "image.pullPolicy=Always",
        "sidecar.runAsUser=1000680000", "sidecar.runAsGroup=1000680000",
        "sidecar.resources.requests.cpu=50m", "injector.nativeSidecar=false"))
    assert cfg["enabled"] is True
    assert cfg["image"] == "registry.example/rf@sha256:" + "a" * 64
    assert cfg["imagePullPolicy"] == "Always"
    assert cfg["runAsUser"] == 1000680000 and cfg["runAsGroup"] == 1000680000
    assert cfg["resources"]["requests"] == {"cpu": "50m", "memory": "48Mi"}
    assert cfg["nativeSidecar"] is False
    assert injector_config(render("image.reference=ghcr.io/hive/repeat-failure:0.2.0-rc1"))[
        "image"] == "ghcr.io/hive/repeat-failure:0.2.0-rc1"


@pytest.mark.parametrize(("kube", "setting", "expected"), [
    ("1.28.0", "auto", False),
    ("1.29.0", "auto", True),
    ("1.31.0", "auto", True),
    ("v1.29.1-gke.1589018", "auto", True),  # provider suffixes are prereleases to semver
    (KUBE_NEWEST, "auto", True),
    ("1.28.0", "true", True),
    ("1.31.0", "false", False),
])
def test_native_sidecar_resolved_per_kube_version(kube: str, setting: str, expected: bool) -> None:
    """`injector.nativeSidecar: auto` resolves to true from Kubernetes 1.29 on and false below;
    an explicit true/false is taken as it is (true from 1.28, where the feature gate exists)."""
    cfg = injector_config(render(f"injector.nativeSidecar={setting}", kube=kube))
    assert cfg["nativeSidecar"] is expected


def test_native_sidecar_true_refused_below_1_28() -> None:
    """On 1.27 a `restartPolicy: Always` init container would be an init container that never
    ends (every injected pod stuck in Init): an explicit true fails the render, naming the value."""
    err = render_fails("injector.nativeSidecar=true", kube="1.27.0")
    assert "injector.nativeSidecar: true needs Kubernetes 1.28" in err


def test_injector_deployment_hardened() -> None:
    """The injector runs `repeat-failure inject-webhook` with the contract's flags and paths,
    non-root with a numeric UID, read-only root, no capabilities, RuntimeDefault seccomp, no
    service account token, HTTPS probes on /healthz:8443; the config and the certificate are
    mounted where the flags point, and the only pod annotation is the TLS checksum (the config is
    hot-reloaded, so it has none)."""
    objs = render()
    dep = one(objs, "Deployment", INJECTOR)
    pod = dep["spec"]["template"]["spec"]
    assert dep["spec"]["replicas"] == 2
    assert pod["automountServiceAccountToken"] is False
    assert pod["serviceAccountName"] == INJECTOR
    assert one(objs, "ServiceAccount", INJECTOR)["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (c,) = pod["containers"]
    assert c["image"] == "ghcr.io/hive/repeat-failure:0.1.0"
    assert c["args"] == ["inject-webhook",
                         "--config", "/etc/repeat-failure-injector/injector.yaml",
                         "--listen", "0.0.0.0:8443",
                         "--tls-cert", "/etc/repeat-failure-injector/tls/tls.crt",
                         "--tls-key", "/etc/repeat-failure-injector/tls/tls.key",
                         "--metrics-listen", "0.0.0.0:9468"]
    assert c["ports"] == [{"name": "https", "containerPort": 8443, "protocol": "TCP"},
                          {"name": "rf-inj-metrics", "containerPort": 9468, "protocol": "TCP"}]
    sc = c["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["runAsUser"] == 10001 and sc["runAsGroup"] == 10001
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    for probe in ("readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"] == {"path": "/healthz", "port": "https", "scheme": "HTTPS"}
    # The files the flags name come from one projected volume mounted at the directory.
    (mount,) = [m for m in c["volumeMounts"] if m["mountPath"] == "/etc/repeat-failure-injector"]
    (vol,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    paths = {}
    for source in vol["projected"]["sources"]:
        (kind, ref), = source.items()
        for item in ref["items"]:
            paths[item["path"]] = (kind, ref["name"], item["key"])
    assert paths == {
        "injector.yaml": ("configMap", INJECTOR, "injector.yaml"),
        "tls/tls.crt": ("secret", f"{INJECTOR}-tls", "tls.crt"),
        "tls/tls.key": ("secret", f"{INJECTOR}-tls", "tls.key"),
    }
    assert set(dep["spec"]["template"]["metadata"]["annotations"]) == {"checksum/tls"}
    svc = one(objs, "Service", INJECTOR)
    assert svc["spec"]["ports"] == [{"name": "https", "port": 443, "targetPort": "https",
                                     "protocol": "TCP"}]
    assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]


def test_injector_config_change_does_not_restart_injector() -> None:
    """Turning the check on changes the injector ConfigMap but not the Deployment's pod
    template (the injector re-reads its config; a restart would be needless churn)."""
    def template(objs: list[dict[str, Any]]) -> dict[str, Any]:
        tpl = copy.deepcopy(one(objs, "Deployment")["spec"]["template"])
        tpl["metadata"]["annotations"].pop("checksum/tls")  # a fresh CA per render
        return tpl
    off, on = render(), render("repeatFailure.enabled=true")
    assert injector_config(off) != injector_config(on)
    assert template(off) == template(on)


def test_pod_disruption_budget_only_with_replicas() -> None:
    """A PDB (maxUnavailable 1, selecting the injector pods; unhealthy pods always evictable) is
    rendered with 2 replicas and not with 1, where it would block every drain."""
    objs = render()
    pdb = one(objs, "PodDisruptionBudget", INJECTOR)
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == \
        one(objs, "Deployment")["spec"]["selector"]["matchLabels"]
    assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    assert not of_kind(render("injector.replicas=1"), "PodDisruptionBudget")
    assert not of_kind(render("injector.podDisruptionBudget.enabled=false"), "PodDisruptionBudget")


def test_webhook_configuration_exact() -> None:
    """The MutatingWebhookConfiguration: v1 reviews, no side effects, failurePolicy Ignore, 5 s,
    never reinvoked, pod CREATE only, the agent namespaces by their name label, the injector's
    own pods excluded by label, and the injector Service's /mutate on 443."""
    objs = render()
    mwc = one(objs, "MutatingWebhookConfiguration")
    assert mwc["metadata"]["name"] == f"{INJECTOR}-{NAMESPACE}"
    (hook,) = mwc["webhooks"]
    assert hook["admissionReviewVersions"] == ["v1"]
    assert hook["sideEffects"] == "None"
    assert hook["failurePolicy"] == "Ignore"
    assert hook["timeoutSeconds"] == 5
    assert hook["reinvocationPolicy"] == "Never"
    assert hook["rules"] == [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                              "resources": ["pods"], "scope": "Namespaced"}]
    assert hook["namespaceSelector"] == {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [NAMESPACE]}]}
    assert hook["objectSelector"] == {"matchExpressions": [
        {"key": "repeat-failure.hive.dev/injector", "operator": "DoesNotExist"}]}
    injector_pod_labels = one(objs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert injector_pod_labels["repeat-failure.hive.dev/injector"] == "true"
    assert hook["clientConfig"]["service"] == {"name": INJECTOR, "namespace": NAMESPACE,
                                               "path": "/mutate", "port": 443}
    assert "annotations" not in mwc["metadata"]


def test_webhook_follows_values() -> None:
    """Several agent namespaces land in the namespaceSelector in their order; failurePolicy and
    timeoutSeconds come from the values."""
    (hook,) = one(render("agentNamespaces={team-b,team-a}", "injector.failurePolicy=Fail",
                         "injector.timeoutSeconds=10"), "MutatingWebhookConfiguration")["webhooks"]
    assert hook["namespaceSelector"]["matchExpressions"][0]["values"] == ["team-b", "team-a"]
    assert hook["failurePolicy"] == "Fail" and hook["timeoutSeconds"] == 10


# --- TLS ----------------------------------------------------------------------------------------

def _load_pem(pem: bytes) -> Any:
    from cryptography import x509
    return x509.load_pem_x509_certificate(pem)


def test_helm_issued_tls_verifies() -> None:
    """Helm's genCA/genSignedCert: the webhook's caBundle is exactly the Secret's ca.crt; the
    serving certificate is signed by that CA, names `<svc>`, `<svc>.<ns>`, `<svc>.<ns>.svc`
    (CN `<svc>.<ns>.svc`), is valid for 3650 days for server auth and matches tls.key; the
    Deployment's checksum is of these three PEMs (one CA per render, shared by all three)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    objs = render()
    secret = one(objs, "Secret", f"{INJECTOR}-tls")
    assert secret["type"] == "kubernetes.io/tls"
    data = {k: base64.b64decode(v) for k, v in secret["data"].items()}
    assert set(data) == {"ca.crt", "tls.crt", "tls.key"}
    (hook,) = one(objs, "MutatingWebhookConfiguration")["webhooks"]
    assert hook["clientConfig"]["caBundle"] == base64.b64encode(data["ca.crt"]).decode()

    ca, cert = _load_pem(data["ca.crt"]), _load_pem(data["tls.crt"])
    cert.verify_directly_issued_by(ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    hosts = [INJECTOR, f"{INJECTOR}.{NAMESPACE}", f"{INJECTOR}.{NAMESPACE}.svc"]
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == hosts
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == hosts[2]
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == timedelta(days=3650)
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in eku
    key = serialization.load_pem_private_key(data["tls.key"], password=None)
    assert key.public_key().public_numbers() == cert.public_key().public_numbers()

    annotations = one(objs, "Deployment")["spec"]["template"]["metadata"]["annotations"]
    digest = hashlib.sha256(data["ca.crt"] + data["tls.crt"] + data["tls.key"]).hexdigest()
    assert annotations["checksum/tls"] == digest
    assert secret["metadata"]["annotations"]["repeat-failure.hive.dev/tls-hosts"] == ",".join(hosts)


def test_helm_issued_tls_handshake_as_the_api_server_does(tmp_path: Path) -> None:
    """A TLS server on 127.0.0.1 with the rendered certificate and key is accepted by a client
    that trusts only the caBundle and checks the host name `<svc>.<ns>.svc`, which is what the
    API server does when it calls the webhook; a wrong host name is refused."""
    objs = render()
    data = {k: base64.b64decode(v) for k, v in one(objs, "Secret")["data"].items()}
    (hook,) = one(objs, "MutatingWebhookConfiguration")["webhooks"]
    (tmp_path / "tls.crt").write_bytes(data["tls.crt"])
    (tmp_path / "tls.key").write_bytes(data["tls.key"])
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    client_ctx = ssl.create_default_context(
        cadata=base64.b64decode(hook["clientConfig"]["caBundle"]).decode())

    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def serve(n: int) -> None:
            for _ in range(n):
                conn, _ = listener.accept()
                try:
                    with server_ctx.wrap_socket(conn, server_side=True) as tls:
                        tls.sendall(b"ok")
                except (ssl.SSLError, OSError):
                    pass

        thread = threading.Thread(target=serve, args=(2,), daemon=True)
        thread.start()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with client_ctx.wrap_socket(raw, server_hostname=f"{INJECTOR}.{NAMESPACE}.svc") as tls:
                assert tls.recv(2) == b"ok"
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with pytest.raises(ssl.SSLCertVerificationError):
                client_ctx.wrap_socket(raw, server_hostname="elsewhere.example")
        thread.join(10)


def test_upgrade_reuses_the_existing_certificate(tmp_path: Path) -> None:
    """`helm upgrade` keeps the certificate: when `lookup` finds the release's Secret with all
    three keys and the same Service hosts, the Secret, the caBundle and the checksum reuse it;
    a Secret issued for other hosts, one missing a key, or none at all gets a new CA.
    `lookup` needs a cluster, so a copy of the chart reads the "existing" Secret from a file
    instead (the one line changed is asserted); everything after the lookup is the chart's."""
    chart = tmp_path / "repeat-failure"
    shutil.copytree(CHART, chart)
    helpers = chart / "templates" / "_helpers.tpl"
    call = 'lookup "v1" "Secret" .Release.Namespace (include "repeat-failure.tlsSecretName" .)'
    assert helpers.read_text().count(call) == 1
    helpers.write_text(helpers.read_text().replace(
        call, '(.Files.Get "existing-secret.json" | fromJson)'))

    def upgrade(existing: dict[str, Any]) -> tuple[dict[str, bytes], str, str]:
        (chart / "existing-secret.json").write_text(json.dumps(existing))
        objs = [d for d in yaml.safe_load_all(_helm(
            "template", RELEASE, str(chart), "--namespace", NAMESPACE,
            "--kube-version", KUBE_NEW).stdout) if d]
        data = {k: base64.b64decode(v) for k, v in one(objs, "Secret")["data"].items()}
        (hook,) = one(objs, "MutatingWebhookConfiguration")["webhooks"]
        checksum = one(objs, "Deployment")["spec"]["template"]["metadata"]["annotations"]
        return data, hook["clientConfig"]["caBundle"], checksum["checksum/tls"]

    installed = one(render(), "Secret")
    old = {k: base64.b64decode(v) for k, v in installed["data"].items()}
    data, bundle, checksum = upgrade(installed)
    assert data == old
    assert bundle == base64.b64encode(old["ca.crt"]).decode()
    assert checksum == hashlib.sha256(old["ca.crt"] + old["tls.crt"] + old["tls.key"]).hexdigest()

    other_hosts = copy.deepcopy(installed)
    other_hosts["metadata"]["annotations"]["repeat-failure.hive.dev/tls-hosts"] = "old-svc"
    missing_key = copy.deepcopy(installed)
    del missing_key["data"]["tls.key"]
    for existing in (other_hosts, missing_key, {}):
        data, bundle, _ = upgrade(existing)
        assert data["ca.crt"] != old["ca.crt"] and data["tls.crt"] != old["tls.crt"]
        assert bundle == base64.b64encode(data["ca.crt"]).decode()
        _load_pem(data["tls.crt"]).verify_directly_issued_by(_load_pem(data["ca.crt"]))


def test_cert_manager_self_signed_chain() -> None:
    """With cert-manager: self-signed Issuer -> CA Certificate -> CA Issuer -> serving
    Certificate into the Secret the Deployment mounts; the webhook has the inject-ca-from
    annotation naming that Certificate and no caBundle; no Helm-made Secret and no checksum."""
    objs = render("injector.certManager.enabled=true")
    assert not of_kind(objs, "Secret")
    issuers = {o["metadata"]["name"]: o["spec"] for o in of_kind(objs, "Issuer")}
    assert issuers == {f"{INJECTOR}-selfsigned": {"selfSigned": {}},
                       f"{INJECTOR}-ca": {"ca": {"secretName": f"{INJECTOR}-ca"}}}
    ca = one(objs, "Certificate", f"{INJECTOR}-ca")["spec"]
    assert ca["isCA"] is True and ca["secretName"] == f"{INJECTOR}-ca"
    assert ca["issuerRef"] == {"name": f"{INJECTOR}-selfsigned", "kind": "Issuer",
                               "group": "cert-manager.io"}
    serving = one(objs, "Certificate", INJECTOR)["spec"]
    assert serving["secretName"] == f"{INJECTOR}-tls"
    assert serving["dnsNames"] == [INJECTOR, f"{INJECTOR}.{NAMESPACE}",
                                   f"{INJECTOR}.{NAMESPACE}.svc"]
    assert "server auth" in serving["usages"]
    assert serving["issuerRef"] == {"name": f"{INJECTOR}-ca", "kind": "Issuer",
                                    "group": "cert-manager.io"}
    mwc = one(objs, "MutatingWebhookConfiguration")
    assert mwc["metadata"]["annotations"] == {
        "cert-manager.io/inject-ca-from": f"{NAMESPACE}/{INJECTOR}"}
    assert "caBundle" not in mwc["webhooks"][0]["clientConfig"]
    template = one(objs, "Deployment")["spec"]["template"]
    assert "annotations" not in template["metadata"]
    secrets = {s["secret"]["name"] for v in template["spec"]["volumes"] if "projected" in v
               for s in v["projected"]["sources"] if "secret" in s}
    assert secrets == {serving["secretName"]}


def test_cert_manager_issuer_ref() -> None:
    """With `injector.certManager.issuerRef` the serving Certificate uses that issuer (kind and
    group defaulted when not given) and the chart makes no Issuer of its own."""
    objs = render("injector.certManager.enabled=true", "injector.certManager.issuerRef.name=corp",
                  "injector.certManager.issuerRef.kind=ClusterIssuer")
    assert not of_kind(objs, "Issuer")
    assert one(objs, "Certificate")["spec"]["issuerRef"] == {
        "name": "corp", "kind": "ClusterIssuer", "group": "cert-manager.io"}
    objs = render("injector.certManager.enabled=true", "injector.certManager.issuerRef.name=corp")
    assert one(objs, "Certificate")["spec"]["issuerRef"]["kind"] == "Issuer"


# --- the sidecar's config, RBAC, network policy -------------------------------------------------

def test_sidecar_config_in_each_agent_namespace_validates_with_the_sidecar() -> None:
    """The ConfigMap `repeat-failure-config` (the name the injector mounts) is rendered into each
    agent namespace (empty agentNamespaces: the release namespace), its config.yaml is exactly
    `repeat_failure:` with the values, off by default, and the sidecar's own validator
    (repeat_failure.config.parse_config) accepts it, default and changed."""
    from repeat_failure.config import parse_config

    objs = render()
    (cm,) = sidecar_configs(objs)
    assert cm["metadata"]["namespace"] == NAMESPACE
    doc = yaml.safe_load(cm["data"]["config.yaml"])
    assert doc == {"repeat_failure": values_yaml()["repeatFailure"]}
    assert doc["repeat_failure"]["enabled"] is False
    assert parse_config(doc, "config.yaml").enabled is False
    assert injector_config(objs)["configMap"] == cm["metadata"]["name"]

    objs = render(f"agentNamespaces={{{','.join(TEAMS)}}}", "repeatFailure.enabled=true",
                  "repeatFailure.threshold=3", "json:repeatFailure.collect_grace_s=0.5",
                  "repeatFailure.exclude={make watch}", "json:repeatFailure.preview_timeout_s=2.5")
    cms = sidecar_configs(objs)
    assert [c["metadata"]["namespace"] for c in cms] == list(TEAMS)
    for c in cms:
        section = yaml.safe_load(c["data"]["config.yaml"])["repeat_failure"]
        assert (section["enabled"], section["threshold"], section["collect_grace_s"],
                section["exclude"], section["preview_timeout_s"]) == (
            True, 3, 0.5, ["make watch"], 2.5)
        parsed = parse_config(yaml.safe_load(c["data"]["config.yaml"]), "config.yaml")
        assert (parsed.enabled, parsed.threshold, parsed.exclude, parsed.preview_timeout_s) == (
            True, 3, ("make watch",), 2.5)


def test_values_schema_mirrors_the_sidecar_schema() -> None:
    """values.schema.json's repeatFailure has the sidecar's keys (repeat_failure/config.py) with the
    same types and limits, so a value the sidecar would refuse fails at `helm install` instead of
    in every pod. Not mirrored: `agents` (per pod, it cannot live in a namespace-wide
    ConfigMap); `events` is the chart's and, once the sidecar knows it, must match too."""
    from repeat_failure import config as sidecar_config
    ours = json.loads(SCHEMA.read_text())["properties"]["repeatFailure"]
    theirs = sidecar_config._SCHEMA["properties"]["repeat_failure"]
    assert ours["additionalProperties"] is False
    expected_keys = (set(theirs["properties"]) - {"agents"}) | {"events"}
    assert set(ours["properties"]) == expected_keys
    for key, rule in theirs["properties"].items():
        if key != "agents":
            assert ours["properties"][key] == rule, key
    assert ours["properties"]["events"] == {"type": "boolean"}
    assert set(values_yaml()["repeatFailure"]) == expected_keys


def test_events_role_only_with_events() -> None:
    """No RBAC by default. With `repeatFailure.events`, each agent namespace gets a Role allowing
    exactly create on core events (what repeat_failure/events.py does: one POST per Event; the
    `patch` and events.k8s.io it granted before were never used) and a RoleBinding of that Role
    to each of `agentServiceAccounts` in that namespace."""
    objs = render()
    assert not of_kind(objs, "Role") and not of_kind(objs, "RoleBinding")
    objs = render(f"agentNamespaces={{{','.join(TEAMS)}}}", "repeatFailure.events=true",
                  "agentServiceAccounts={default,runner}")
    roles = of_kind(objs, "Role")
    assert [r["metadata"]["namespace"] for r in roles] == list(TEAMS)
    for role in roles:
        assert role["rules"] == [{"apiGroups": [""], "resources": ["events"],
                                  "verbs": ["create"]}]
    for binding in of_kind(objs, "RoleBinding"):
        ns = binding["metadata"]["namespace"]
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                      "name": f"{FULLNAME}-events"}
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": sa, "namespace": ns} for sa in ("default", "runner")]
    assert len(of_kind(objs, "RoleBinding")) == len(TEAMS)
    assert not of_kind(objs, "ClusterRole") and not of_kind(objs, "ClusterRoleBinding")


def test_network_policy_ports_exact() -> None:
    """Per agent namespace, pods labelled injected: TCP 9466 only from the Prometheus namespace
    (by its name label), ingress only. By default nothing else is allowed (policies add up: an
    open rule would widen a namespace that denies by default); with openOtherPorts every other
    port is open from anywhere (TCP 1-9465 and 9467-65535, all UDP, all SCTP)."""
    metrics_rule = {"from": [{"namespaceSelector": {"matchLabels": {
        "kubernetes.io/metadata.name": "monitoring"}}}],
        "ports": [{"protocol": "TCP", "port": 9466}]}
    open_rule = {"ports": [{"protocol": "TCP", "port": 1, "endPort": 9465},
                           {"protocol": "TCP", "port": 9467, "endPort": 65535},
                           {"protocol": "UDP"}, {"protocol": "SCTP"}]}
    for extra, ingress in (((), [metrics_rule]),
                           (("networkPolicy.openOtherPorts=true",), [metrics_rule, open_rule])):
        objs = render(f"agentNamespaces={{{','.join(TEAMS)}}}", "networkPolicy.enabled=true",
                      *extra)
        policies = of_kind(objs, "NetworkPolicy")
        assert [p["metadata"]["namespace"] for p in policies] == list(TEAMS)
        for policy in policies:
            assert policy["spec"] == {
                "podSelector": {"matchLabels": {"repeat-failure.hive.dev/injected": "true"}},
                "policyTypes": ["Ingress"], "ingress": ingress}
    objs = render("networkPolicy.enabled=true", "networkPolicy.prometheusNamespace=prom",
                  "networkPolicy.prometheusPodSelector.app=prometheus")
    peer = one(objs, "NetworkPolicy")["spec"]["ingress"][0]["from"][0]
    assert peer == {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "prom"}},
                    "podSelector": {"matchLabels": {"app": "prometheus"}}}
    assert not of_kind(render(), "NetworkPolicy")


def test_injector_disabled_keeps_the_rest() -> None:
    """`injector.enabled: false` installs no webhook, Deployment, Service, Secret or injector
    config, but still the sidecar config (for pods that add the sidecar themselves), the Events
    RBAC and the NetworkPolicy."""
    kinds = {(o["kind"], o["metadata"]["name"]) for o in render(
        "injector.enabled=false", "repeatFailure.events=true", "networkPolicy.enabled=true")}
    assert kinds == {("ConfigMap", "repeat-failure-config"), ("Role", f"{FULLNAME}-events"),
                     ("RoleBinding", f"{FULLNAME}-events"),
                     ("NetworkPolicy", f"{FULLNAME}-metrics")}


# --- monitoring ---------------------------------------------------------------------------------

def test_pod_monitor() -> None:
    """The PodMonitor selects pods labelled `repeat-failure.hive.dev/injected: "true"` in the
    agent namespaces and scrapes port `rf-metrics` at /metrics; extra labels are added."""
    objs = render("monitoring.podMonitor.enabled=true", "monitoring.podMonitor.interval=15s",
                  "monitoring.podMonitor.labels.release=prom",
                  f"agentNamespaces={{{','.join(TEAMS)}}}")
    pm = one(objs, "PodMonitor", FULLNAME)
    assert pm["metadata"]["namespace"] == NAMESPACE
    assert pm["metadata"]["labels"]["release"] == "prom"
    assert pm["spec"] == {
        "selector": {"matchLabels": {"repeat-failure.hive.dev/injected": "true"}},
        "namespaceSelector": {"matchNames": list(TEAMS)},
        "podMetricsEndpoints": [{"port": "rf-metrics", "path": "/metrics", "interval": "15s"}]}
    assert not of_kind(render(), "PodMonitor")


def test_prometheus_rule_is_the_rules_file() -> None:
    """The PrometheusRule's spec.groups are exactly the groups of files/prometheus-rules.yaml
    (the file promtool tests), with the extra labels from the values; the fixloop's group
    (`repeat-failure-fixloop`) only with `fixloop.enabled`, so with the fixloop off the rule is
    what it was before the fixloop existed; the injector's (`repeat-failure-injector`) only
    with the injector and its PodMonitor."""
    if not RULES_FILE.is_file():
        pytest.skip(f"{RULES_FILE.relative_to(REPO)} is not written yet")
    groups = yaml.safe_load(RULES_FILE.read_text())["groups"]
    assert [g["name"] for g in groups] == ["repeat-failure", "repeat-failure-fixloop",
                                           "repeat-failure-injector"]
    objs = render("monitoring.prometheusRule.enabled=true",
                  "monitoring.prometheusRule.labels.release=prom")
    rule = one(objs, "PrometheusRule")
    assert rule["spec"]["groups"] == groups[:1]
    assert rule["metadata"]["labels"]["release"] == "prom"
    rule = one(render(*FIXLOOP_TOKEN, "monitoring.prometheusRule.enabled=true"), "PrometheusRule")
    assert rule["spec"]["groups"] == groups[:2]
    # Issue 29: the injector's group with the injector and its PodMonitor (whose targets'
    # `up` the injector-down alert watches), not with the injector off.
    rule = one(render(*FIXLOOP_TOKEN, "monitoring.prometheusRule.enabled=true",
                      "monitoring.podMonitor.enabled=true"), "PrometheusRule")
    assert rule["spec"]["groups"] == groups
    rule = one(render("monitoring.prometheusRule.enabled=true",
                      "monitoring.podMonitor.enabled=true", "injector.enabled=false"),
               "PrometheusRule")
    assert rule["spec"]["groups"] == groups[:1]
    assert not of_kind(render(), "PrometheusRule")


def test_prometheus_rule_alert_for_overrides() -> None:
    """``monitoring.prometheusRule.alertFor`` replaces the ``for`` of the alerts it names and no
    other (the real-node test uses it to see an alert fire within a test's time, issue 18); a
    name no rule has, or a value that is not a Prometheus duration, fails the install."""
    groups = yaml.safe_load(RULES_FILE.read_text())["groups"]
    rule = one(render("monitoring.prometheusRule.enabled=true",
                      "monitoring.prometheusRule.alertFor.RepeatFailureRepeatingFailure=15s"),
               "PrometheusRule")
    fors = {r["alert"]: r.get("for") for g in rule["spec"]["groups"] for r in g["rules"]}
    expected = {r["alert"]: r.get("for") for r in groups[0]["rules"]}
    expected["RepeatFailureRepeatingFailure"] = "15s"
    assert fors == expected
    assert "no alert named RepeatFailureNope in files/prometheus-rules.yaml" in render_fails(
        "monitoring.prometheusRule.enabled=true",
        "monitoring.prometheusRule.alertFor.RepeatFailureNope=1m")
    assert "does not match pattern" in render_fails(
        "monitoring.prometheusRule.enabled=true",
        "monitoring.prometheusRule.alertFor.RepeatFailureRepeatingFailure=soon")
    # Any unknown name gets the message naming the known alerts: a schema `propertyNames`
    # pattern made helm report a name outside it at an unrelated path of the values (seen
    # with helm v3.22: "at '/fullnameOverride/nativeSidecar/limits': invalid propertyName").
    err = render_fails("monitoring.prometheusRule.enabled=true",
                       "monitoring.prometheusRule.alertFor.RepeatingFailure=30m")
    assert ("no alert named RepeatingFailure in files/prometheus-rules.yaml (known: "
            "RepeatFailureRepeatingFailure, ") in err, err


def test_grafana_dashboard_is_the_json_file() -> None:
    """The dashboard ConfigMap carries files/dashboard.json byte for byte under
    `repeat-failure.json`, labelled `grafana_dashboard: "1"`, in the configured namespace."""
    if not DASHBOARD_FILE.is_file():
        pytest.skip(f"{DASHBOARD_FILE.relative_to(REPO)} is not written yet")
    objs = render("monitoring.grafanaDashboard.enabled=true",
                  "monitoring.grafanaDashboard.namespace=grafana",
                  "monitoring.grafanaDashboard.annotations.grafana_folder=Agents")
    cm = one(objs, "ConfigMap", f"{FULLNAME}-dashboard")
    assert cm["data"] == {"repeat-failure.json": DASHBOARD_FILE.read_text()}
    json.loads(cm["data"]["repeat-failure.json"])
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["namespace"] == "grafana"
    assert cm["metadata"]["annotations"] == {"grafana_folder": "Agents"}
    default_ns = one(render("monitoring.grafanaDashboard.enabled=true"), "ConfigMap",
                     f"{FULLNAME}-dashboard")["metadata"]["namespace"]
    assert default_ns == NAMESPACE


# --- the fix-loop escalation Deployment (issue 9) ------------------------------------------------

def fixloop_config(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return yaml.safe_load(one(objs, "ConfigMap", FIXLOOP)["data"]["fixloop.yaml"])


def fixloop_pod(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return one(objs, "Deployment", FIXLOOP)["spec"]["template"]


def _mask_tls(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The objects with what Helm's genCA makes anew on every render blanked out."""
    objs = copy.deepcopy(objs)
    for obj in objs:
        if obj["kind"] == "Secret" and obj["metadata"]["name"] == f"{INJECTOR}-tls":
            obj["data"] = {}
        if obj["kind"] == "MutatingWebhookConfiguration":
            for hook in obj["webhooks"]:
                hook["clientConfig"].pop("caBundle", None)
        if obj["kind"] == "Deployment":
            obj["spec"]["template"]["metadata"].get("annotations", {}).pop("checksum/tls", None)
    return objs


def test_fixloop_off_renders_nothing_of_it() -> None:
    """`fixloop.enabled: false` (the default) renders no fixloop object in any combination, and
    every other fixloop value changes nothing while it is off: the same objects as without
    them (apart from the certificate Helm issues anew on each render)."""
    for combo, (sets, kube) in COMBOS.items():
        if "fixloop.enabled=true" in sets:
            continue
        for obj in render(*sets, kube=kube):
            assert obj["metadata"]["labels"]["app.kubernetes.io/component"] != "fixloop", combo
            assert "fixloop" not in obj["metadata"]["name"], combo
    everything = COMBOS["fixloop-everything"][0]
    fixloop_values = [v for v in everything if v.startswith(("fixloop.", "json:fixloop."))
                      and v != "fixloop.enabled=true"]
    others = [v for v in everything if v not in fixloop_values and v != "fixloop.enabled=true"]
    assert _mask_tls(render(*others, *fixloop_values)) == _mask_tls(render(*others))


def test_fixloop_config_loads_in_the_fixloop() -> None:
    """The ConfigMap `<fullname>-fixloop` holds fixloop.yaml: exactly `fixloop:` with the
    `fixloop.config` values plus the two paths the chart owns (token_file, ledger: the
    fixloop's own defaults, where the Deployment mounts the token and the volume), and the
    fixloop's own loader (repeat_failure.fixloop.config.parse_fixloop_config) accepts it, default and
    with every value changed."""
    from repeat_failure.fixloop.config import DEFAULT_LEDGER, DEFAULT_TOKEN_FILE, parse_fixloop_config

    doc = fixloop_config(render(*FIXLOOP_TOKEN))
    assert doc == {"fixloop": {**values_yaml()["fixloop"]["config"],
                               "repositories": ["hive/app", "hive/web"],
                               "token_file": DEFAULT_TOKEN_FILE, "ledger": DEFAULT_LEDGER}}
    cfg = parse_fixloop_config(doc, "fixloop.yaml")
    assert (cfg.repositories, cfg.token_file, cfg.ledger, cfg.events, cfg.threshold,
            cfg.interval_s, cfg.label, cfg.agents, cfg.fixer_url) == (
        ("hive/app", "hive/web"), "/var/run/secrets/repeat-failure-fixloop/token",
        "/data/fixloop.sqlite", True, 3, 300.0, "needs-human", (), None)

    sets, kube = COMBOS["fixloop-everything"]
    changed = parse_fixloop_config(fixloop_config(render(
        *sets, "fixloop.config.api_url=https://ghe.example/api/v3", "fixloop.config.threshold=5",
        "json:fixloop.config.interval_s=60.5", "fixloop.config.stale_after_s=7200",
        "fixloop.config.max_reengagements=2", "fixloop.config.shared_breakage_prs=4",
        "fixloop.config.label=escalated", "fixloop.config.bots={renovate[bot]}",
        "fixloop.config.prune_after_s=0", "fixloop.config.request_timeout_s=10",
        "fixloop.config.events=false", kube=kube)), "fixloop.yaml")
    assert (changed.api_url, changed.threshold, changed.interval_s, changed.stale_after_s,
            changed.max_reengagements, changed.shared_breakage_prs, changed.label, changed.bots,
            changed.prune_after_s, changed.request_timeout_s, changed.events) == (
        "https://ghe.example/api/v3", 5, 60.5, 7200.0, 2, 4, "escalated", ("renovate[bot]",),
        0.0, 10.0, False)
    assert (changed.notifier_timeout_s, changed.fixer_url) == (
        2.5, "http://fixer.agents.svc:8080/kick")
    assert [(a.login, a.url, a.cadence_s) for a in changed.agents] == [
        ("hive-coder", "http://coder.agents.svc:8080/kick", 900.0)]
    # Whole numbers stay integers (the loader refuses 3.0 for a count).
    assert isinstance(fixloop_config(render(*FIXLOOP_TOKEN))["fixloop"]["threshold"], int)


def test_values_schema_mirrors_the_fixloop_schema() -> None:
    """values.schema.json's fixloop.config has the fixloop's own keys (repeat_failure/fixloop/config.py
    `_SCHEMA`) with the same types and limits, so a value the fixloop would refuse fails at
    `helm install` instead of in a crash-looping pod. Not values: `token_file`, `ledger` and
    `github_app` (the chart sets them from its mounts and `fixloop.github`; the schema refuses
    them). `repositories` may be empty
    (the default, with the fixloop off): the chart fails the render when the fixloop is on
    without one; otherwise the rule is the fixloop's."""
    from repeat_failure.fixloop import config as fixloop_config_module

    ours = json.loads(SCHEMA.read_text())["properties"]["fixloop"]["properties"]["config"]
    theirs = fixloop_config_module._SCHEMA["properties"]["fixloop"]
    assert ours["additionalProperties"] is False and theirs["additionalProperties"] is False
    expected_keys = set(theirs["properties"]) - {"token_file", "ledger", "github_app"}
    assert set(ours["properties"]) == expected_keys
    for key in expected_keys:
        rule = copy.deepcopy(theirs["properties"][key])
        if key == "repositories":
            assert rule.pop("minItems") == 1
        assert ours["properties"][key] == rule, key
    assert set(values_yaml()["fixloop"]["config"]) == expected_keys
    # The defaults in values.yaml are the fixloop's, except `events` (the chart turns it on) and
    # `repositories` (none until you name them).
    defaults = fixloop_config_module.FixloopConfig(repositories=())
    values = values_yaml()["fixloop"]["config"]
    for key in expected_keys - {"repositories", "events", "notifier", "bots", "authors"}:
        assert values[key] == getattr(defaults, key), key
    assert tuple(values["bots"]) == defaults.bots
    assert values["notifier"] == {"timeout_s": defaults.notifier_timeout_s, "agents": []}
    assert (values["events"], defaults.events) == (True, False)


def test_fixloop_deployment_exact() -> None:
    """The Deployment `<fullname>-fixloop`: one replica, Recreate (one SQLite writer: the old
    pod stops before the new one opens the ledger), the chart's image running `fixloop
    --config /etc/repeat-failure-fixloop/fixloop.yaml --listen 0.0.0.0:9467`, the Downward
    API env POD_NAME/POD_NAMESPACE/POD_UID, port 9467 `metrics` with readiness /readyz and
    liveness /healthz, the injector's hardening (non-root 10001, read-only root, no
    capabilities, RuntimeDefault), fsGroup 10001 for the volume, the resources from the values,
    and the mounts the config's paths point at."""
    from repeat_failure.fixloop.config import DEFAULT_LEDGER, DEFAULT_TOKEN_FILE

    objs = render(*FIXLOOP_TOKEN)
    dep = one(objs, "Deployment", FIXLOOP)
    assert dep["spec"]["replicas"] == 1
    assert dep["spec"]["strategy"] == {"type": "Recreate"}
    assert dep["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/name": "repeat-failure", "app.kubernetes.io/instance": RELEASE,
        "app.kubernetes.io/component": "fixloop"}
    pod = dep["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == FIXLOOP
    assert pod["automountServiceAccountToken"] is True  # Events on by default
    assert pod["enableServiceLinks"] is False
    assert pod["securityContext"] == {
        "runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001, "fsGroup": 10001,
        "fsGroupChangePolicy": "OnRootMismatch", "seccompProfile": {"type": "RuntimeDefault"}}
    (c,) = pod["containers"]
    assert c["name"] == "repeat-failure-fixloop"
    assert c["image"] == "ghcr.io/hive/repeat-failure:0.1.0"
    assert c["imagePullPolicy"] == "IfNotPresent"
    assert "command" not in c  # the image's ENTRYPOINT, repeat-failure
    assert c["args"] == ["fixloop", "--config", "/etc/repeat-failure-fixloop/fixloop.yaml",
                         "--listen", "0.0.0.0:9467"]
    assert c["env"] == [
        {"name": name, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": path}}}
        for name, path in (("POD_NAME", "metadata.name"), ("POD_NAMESPACE", "metadata.namespace"),
                           ("POD_UID", "metadata.uid"))]
    assert c["ports"] == [{"name": "metrics", "containerPort": 9467, "protocol": "TCP"}]
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert "startupProbe" not in c
    assert c["securityContext"] == {
        "runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001,
        "readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False, "privileged": False,
        "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}
    assert c["resources"] == {"requests": {"cpu": "50m", "memory": "64Mi"},
                              "limits": {"memory": "128Mi"}}
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert set(mounts) == {"/etc/repeat-failure-fixloop", "/var/run/secrets/repeat-failure-fixloop",
                           "/data", "/tmp"}

    def source(path: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """The mount and volume a file path is on."""
        directory = str(Path(path).parent)
        return mounts[directory], volumes[mounts[directory]["name"]]

    mount, vol = source(c["args"][2])
    assert mount["readOnly"] is True
    assert vol["configMap"] == {"name": FIXLOOP, "items": [{"key": "fixloop.yaml",
                                                            "path": "fixloop.yaml"}]}
    mount, vol = source(DEFAULT_TOKEN_FILE)
    assert mount["readOnly"] is True and "subPath" not in mount  # a rotated token arrives
    assert vol["secret"] == {"secretName": FIXLOOP, "defaultMode": 0o440,
                             "items": [{"key": "token", "path": Path(DEFAULT_TOKEN_FILE).name}]}
    mount, vol = source(DEFAULT_LEDGER)
    assert mount.get("readOnly") is not True
    assert vol["persistentVolumeClaim"] == {"claimName": FIXLOOP}
    assert volumes[mounts["/tmp"]["name"]]["emptyDir"] == {"sizeLimit": "64Mi"}
    assert set(dep["spec"]["template"]["metadata"]["annotations"]) == {"checksum/config",
                                                                       "checksum/secret"}


def test_fixloop_args_parse_with_the_cli() -> None:
    """The Deployment's args are a `repeat-failure fixloop` command line the real CLI parser
    (repeat_failure.cli) takes: the config file the ConfigMap is mounted as, and 0.0.0.0:9467, the
    port the probes, Service and PodMonitor use."""
    from repeat_failure import cli
    parser = cli.build_parser()
    subcommands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    if "fixloop" not in subcommands.choices:
        pytest.skip("repeat_failure.cli has no fixloop subcommand yet")
    (c,) = fixloop_pod(render(*FIXLOOP_TOKEN))["spec"]["containers"]
    args = parser.parse_args(c["args"])
    assert args.func is cli.cmd_fixloop
    assert (args.config, args.listen, args.once) == (
        "/etc/repeat-failure-fixloop/fixloop.yaml", "0.0.0.0:9467", False)
    assert args.listen.rpartition(":")[2] == str(c["ports"][0]["containerPort"])


def test_fixloop_deployment_follows_values() -> None:
    """Image, pull policy and pull secrets are the chart's; resources, pod annotations,
    priority class, node selector, tolerations and affinity come from `fixloop.*`."""
    objs = render(*FIXLOOP_TOKEN, "image.reference=registry.example/rf@sha256:" + "b" * 64,
                  "image.pullPolicy=Always",
                  "imagePullSecrets[0].name=regcred", "fixloop.resources.limits.memory=256Mi",
                  "fixloop.podAnnotations.team=platform", "fixloop.priorityClassName=low",
                  "fixloop.nodeSelector.pool=system", "fixloop.tolerations[0].key=dedicated",
                  "fixloop.tolerations[0].operator=Exists",
                  "fixloop.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
                  "[0].weight=1",
                  "fixloop.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
                  "[0].preference.matchExpressions[0].key=zone",
                  "fixloop.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
                  "[0].preference.matchExpressions[0].operator=Exists")
    template = fixloop_pod(objs)
    pod = template["spec"]
    (c,) = pod["containers"]
    assert c["image"] == "registry.example/rf@sha256:" + "b" * 64
    assert c["imagePullPolicy"] == "Always"
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert c["resources"]["limits"] == {"memory": "256Mi"}
    assert template["metadata"]["annotations"]["team"] == "platform"
    assert pod["priorityClassName"] == "low"
    assert pod["nodeSelector"] == {"pool": "system"}
    assert pod["tolerations"] == [{"key": "dedicated", "operator": "Exists"}]
    assert pod["affinity"]["nodeAffinity"]
    for obj in objs:
        assert validate_object(obj)


def test_fixloop_checksums_roll_the_pod() -> None:
    """The pod carries a checksum of fixloop.yaml and, when the chart makes the Secret, of the
    token: a config or token change rolls the pod (the fixloop reads both at start). With
    existingSecret there is no token checksum (the chart cannot see that Secret)."""
    def annotations(*sets: str) -> dict[str, str]:
        return fixloop_pod(render(*sets))["metadata"]["annotations"]

    base = annotations(*FIXLOOP_TOKEN)
    config = fixloop_config(render(*FIXLOOP_TOKEN))
    text = one(render(*FIXLOOP_TOKEN), "ConfigMap", FIXLOOP)["data"]["fixloop.yaml"]
    assert base["checksum/config"] == hashlib.sha256(text.rstrip("\n").encode()).hexdigest()
    assert base["checksum/secret"] == hashlib.sha256(b"ghp_0123456789abcdef").hexdigest()
    assert config["fixloop"]["threshold"] == 3
    other_config = annotations(*FIXLOOP_TOKEN, "fixloop.config.threshold=4")
    assert other_config["checksum/config"] != base["checksum/config"]
    assert other_config["checksum/secret"] == base["checksum/secret"]
    other_token = annotations(*FIXLOOP_ON, "fixloop.github.token=ghp_rotated")
    assert other_token["checksum/secret"] != base["checksum/secret"]
    assert other_token["checksum/config"] == base["checksum/config"]
    assert set(annotations(*FIXLOOP_ON, "fixloop.github.existingSecret=gh-bot")) == {
        "checksum/config"}
    # Nothing outside the fixloop's pod changes with its config.
    def others(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [o for o in _mask_tls(objs) if o["metadata"]["name"] != FIXLOOP]
    assert others(render(*FIXLOOP_TOKEN)) == others(render(*FIXLOOP_TOKEN,
                                                           "fixloop.config.threshold=4"))


def test_fixloop_token_secret_or_existing_secret() -> None:
    """`fixloop.github.token`: an Opaque Secret `<fullname>-fixloop` with the key `token`,
    mounted as the file `token`. `existingSecret`: no Secret of the chart's; the volume maps
    the key `existingSecretKey` (default `token`) of that Secret to the same file."""
    objs = render(*FIXLOOP_TOKEN)
    secret = one(objs, "Secret", FIXLOOP)
    assert secret["type"] == "Opaque"
    assert secret["data"] == {"token": base64.b64encode(b"ghp_0123456789abcdef").decode()}
    assert secret["metadata"]["labels"]["app.kubernetes.io/component"] == "fixloop"

    def token_volume(objs: list[dict[str, Any]]) -> dict[str, Any]:
        (vol,) = [v for v in fixloop_pod(objs)["spec"]["volumes"] if "secret" in v]
        return vol["secret"]

    assert token_volume(objs)["secretName"] == FIXLOOP
    for extra, key in ((("fixloop.github.existingSecretKey=pat",), "pat"), ((), "token")):
        objs = render(*FIXLOOP_ON, "fixloop.github.existingSecret=gh-bot", *extra)
        assert not [o for o in of_kind(objs, "Secret") if o["metadata"]["name"] == FIXLOOP]
        assert token_volume(objs) == {"secretName": "gh-bot", "defaultMode": 0o440,
                                      "items": [{"key": key, "path": "token"}]}


def test_fixloop_persistence() -> None:
    """The ledger's PersistentVolumeClaim `<fullname>-fixloop`: ReadWriteOnce, 1Gi by default,
    the cluster's default storage class unless one is named; with existingClaim the chart makes
    none and the pod mounts that claim at /data."""
    pvc = one(render(*FIXLOOP_TOKEN), "PersistentVolumeClaim", FIXLOOP)
    assert pvc["spec"] == {"accessModes": ["ReadWriteOnce"],
                           "resources": {"requests": {"storage": "1Gi"}}}
    pvc = one(render(*FIXLOOP_TOKEN, "fixloop.persistence.size=5Gi",
                     "fixloop.persistence.storageClassName=fast"), "PersistentVolumeClaim")
    assert pvc["spec"]["storageClassName"] == "fast"
    assert pvc["spec"]["resources"]["requests"]["storage"] == "5Gi"
    objs = render(*FIXLOOP_TOKEN, "fixloop.persistence.existingClaim=ledger")
    assert not of_kind(objs, "PersistentVolumeClaim")
    (vol,) = [v for v in fixloop_pod(objs)["spec"]["volumes"] if "persistentVolumeClaim" in v]
    assert vol["persistentVolumeClaim"] == {"claimName": "ledger"}


def test_fixloop_events_rbac_only_with_events() -> None:
    """With `fixloop.config.events` (on in the chart's values) a Role `<fullname>-fixloop` in
    the release namespace allows exactly `create` on core `events`, bound to the fixloop's
    ServiceAccount only, and the pod mounts its token; off: no Role, no RoleBinding, no token.
    The ServiceAccount itself never automounts; no ClusterRole ever."""
    objs = render(*FIXLOOP_TOKEN, f"agentNamespaces={{{','.join(TEAMS)}}}")
    role = one(objs, "Role", FIXLOOP)
    assert role["metadata"]["namespace"] == NAMESPACE
    assert role["rules"] == [{"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]
    binding = one(objs, "RoleBinding", FIXLOOP)
    assert binding["metadata"]["namespace"] == NAMESPACE
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": FIXLOOP}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": FIXLOOP,
                                    "namespace": NAMESPACE}]
    assert one(objs, "ServiceAccount", FIXLOOP)["automountServiceAccountToken"] is False
    assert fixloop_pod(objs)["spec"]["automountServiceAccountToken"] is True
    assert fixloop_config(objs)["fixloop"]["events"] is True
    objs = render(*FIXLOOP_TOKEN, "fixloop.config.events=false")
    assert not of_kind(objs, "Role") and not of_kind(objs, "RoleBinding")
    assert fixloop_pod(objs)["spec"]["automountServiceAccountToken"] is False
    assert fixloop_config(objs)["fixloop"]["events"] is False
    for combo in ("fixloop-token", "fixloop-everything"):
        objs = render(*COMBOS[combo][0], kube=COMBOS[combo][1])
        assert not of_kind(objs, "ClusterRole") and not of_kind(objs, "ClusterRoleBinding")


def test_fixloop_service_podmonitor_networkpolicy() -> None:
    """The Service `<fullname>-fixloop` (9467 `metrics`) selects the fixloop's pod; with the
    PodMonitor toggle a second PodMonitor `<fullname>-fixloop` scrapes that pod's `metrics`
    port in the release namespace (the sidecars' PodMonitor is unchanged); with the
    NetworkPolicy toggle a policy lets only the Prometheus namespace reach 9467 (ingress only,
    like the sidecars'); neither without its toggle."""
    sets, _ = COMBOS["fixloop-everything"]
    objs = render(*sets, "monitoring.podMonitor.labels.release=prom",
                  "networkPolicy.prometheusPodSelector.app=prometheus")
    selector = one(objs, "Deployment", FIXLOOP)["spec"]["selector"]["matchLabels"]
    svc = one(objs, "Service", FIXLOOP)
    assert svc["spec"]["selector"] == selector
    assert svc["spec"]["ports"] == [{"name": "metrics", "port": 9467, "targetPort": "metrics",
                                     "protocol": "TCP"}]
    pm = one(objs, "PodMonitor", FIXLOOP)
    assert pm["metadata"]["namespace"] == NAMESPACE
    assert pm["metadata"]["labels"]["release"] == "prom"
    assert pm["spec"] == {"selector": {"matchLabels": selector},
                          "namespaceSelector": {"matchNames": [NAMESPACE]},
                          "podMetricsEndpoints": [{"port": "metrics", "path": "/metrics",
                                                   "interval": "30s"}]}
    sidecars = one(objs, "PodMonitor", FULLNAME)
    assert sidecars["spec"]["selector"] == {
        "matchLabels": {"repeat-failure.hive.dev/injected": "true"}}
    policy = one(objs, "NetworkPolicy", FIXLOOP)
    assert policy["metadata"]["namespace"] == NAMESPACE
    assert policy["spec"] == {
        "podSelector": {"matchLabels": selector}, "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {
            "kubernetes.io/metadata.name": "monitoring"}},
            "podSelector": {"matchLabels": {"app": "prometheus"}}}],
            "ports": [{"protocol": "TCP", "port": 9467}]}]}
    objs = render(*FIXLOOP_TOKEN)
    assert not of_kind(objs, "PodMonitor") and not of_kind(objs, "NetworkPolicy")
    # The pod's port is the one the Service, PodMonitor and NetworkPolicy name.
    (c,) = fixloop_pod(objs)["spec"]["containers"]
    assert c["ports"] == [{"name": "metrics", "containerPort": 9467, "protocol": "TCP"}]


@pytest.mark.parametrize(("sets", "message"), [
    # No repository while on: the chart's own message.
    (("fixloop.enabled=true", "fixloop.github.token=t"),
     "fixloop.enabled: true needs fixloop.config.repositories: at least one GitHub repository"),
    (("fixloop.enabled=true", "fixloop.config.repositories=null", "fixloop.github.token=t"),
     "fixloop.enabled: true needs fixloop.config.repositories"),
    # Exactly one token source.
    ((*FIXLOOP_ON,), "fixloop.enabled: true needs a GitHub token: set fixloop.github.token"),
    ((*FIXLOOP_ON, "fixloop.github.token=t", "fixloop.github.existingSecret=gh-bot"),
     "fixloop.github: give the token either as fixloop.github.token"),
    # The same repository twice in another case: the fixloop's loader would refuse it.
    (("fixloop.enabled=true", "fixloop.config.repositories={hive/app,Hive/App}",
      "fixloop.github.token=t"),
     "fixloop.config.repositories: hive/app and Hive/App are the same repository"),
])
def test_fixloop_refused_by_the_chart(sets: tuple[str, ...], message: str) -> None:
    """With the fixloop on, a render without a repository, with a repository twice in another
    case, or without exactly one of `fixloop.github.token` and `fixloop.github.existingSecret`,
    fails with a message naming the values (the schema cannot say "only when enabled", nor
    compare names case-insensitively)."""
    err = render_fails(*sets)
    assert message in err, err
    assert "execution error" in err


@pytest.mark.parametrize(("setting", "message"), [
    ("fixloop.config.repositories={not a repository}", "/fixloop/config/repositories/0"),
    ("fixloop.config.repositories={hive}", "/fixloop/config/repositories/0"),
    ("fixloop.config.repositories={hive/app,hive/app}", "/fixloop/config/repositories"),
    ("fixloop.config.ledger=/tmp/x.sqlite", "additional properties 'ledger' not allowed"),
    ("fixloop.config.token_file=/tmp/t", "additional properties 'token_file' not allowed"),
    ("fixloop.config.threshold=0", "/fixloop/config/threshold"),
    ("fixloop.config.interval_s=5", "/fixloop/config/interval_s"),
    ("fixloop.config.api_url=ftp://github.example", "/fixloop/config/api_url"),
    ("fixloop.config.label=", "/fixloop/config/label"),
    ("fixloop.config.events=yes", "/fixloop/config/events"),
    ("fixloop.config.notifier.retries=3", "additional properties 'retries' not allowed"),
    ("fixloop.config.notifier.agents[0].login=x", "/fixloop/config/notifier/agents/0"),  # no url
    ("fixloop.github.existingSecret=Not_A_Name", "/fixloop/github/existingSecret"),
    ("fixloop.github.existingSecretKey=a/b", "/fixloop/github/existingSecretKey"),
    ("fixloop.persistence.size=lots", "/fixloop/persistence/size"),
    ("fixloop.persistence.existingClaim=Bad_Claim", "/fixloop/persistence/existingClaim"),
    ("fixloop.replicas=2", "additional properties 'replicas' not allowed"),
])
def test_fixloop_values_schema_rejects(setting: str, message: str) -> None:
    """values.schema.json refuses a fixloop value the fixloop (or Kubernetes) would refuse, on or
    off, naming where: a repository that is not `owner/name`, a duplicate, the chart-owned
    paths, out-of-range numbers, a non-HTTP URL, unknown keys, a bad Secret or claim name, a
    size that is no quantity, and a replica count (one writer, so none to set)."""
    err = render_fails(*FIXLOOP_TOKEN, setting)
    assert "don't meet the specifications of the schema" in err
    assert message in err, err


def test_fixloop_documented() -> None:
    """docs/kubernetes.md ("The fix-loop Deployment") and the chart README ("Fix-loop
    escalation") give the Deployment's arguments, the token and ledger paths, the one-writer
    rule and the RBAC as rendered; the README's object table lists the fixloop's objects."""
    from repeat_failure.fixloop.config import DEFAULT_LEDGER, DEFAULT_TOKEN_FILE

    (c,) = fixloop_pod(render(*FIXLOOP_TOKEN))["spec"]["containers"]
    args = " ".join(c["args"])
    contract = CONTRACT.read_text()
    section = contract[contract.index("## The fix-loop Deployment"):]
    readme = README.read_text()
    readme_section = readme[readme.index("## Fix-loop escalation"):]
    for text in (section, readme_section):
        for needle in (DEFAULT_TOKEN_FILE, DEFAULT_LEDGER, "Recreate", "`create`",
                       "fixloop.github.existingSecret", "fixloop.persistence.existingClaim"):
            assert needle in text, needle
    assert f"repeat-failure {args}" in section and f"repeat-failure {args}" in readme_section
    objects = _table_after(readme, "| object | where | when |")
    assert any("`<fullname>-fixloop`" in row and "`fixloop.enabled`" in row for row in objects)


def test_notes_fixloop(tmp_path: Path) -> None:
    """NOTES.txt lists the swept repositories and how to watch the fixloop when it is on, and
    says nothing of it when it is off."""
    assert "fixloop" not in _notes(tmp_path)
    notes = _notes(tmp_path / "2", *FIXLOOP_TOKEN)
    assert "  - hive/app\n  - hive/web" in notes
    assert f"rollout status deploy/{FIXLOOP}" in notes and '"needs-human"' in notes


# --- values.schema.json -------------------------------------------------------------------------

@pytest.mark.parametrize(("setting", "message"), [
    ("repeatFailure.threshold=five", "/repeatFailure/threshold"),   # wrong type
    ("repeatFailure.enabled=yes", "/repeatFailure/enabled"),        # a string is not a bool
    ("repeatFailure.thresold=5", "'thresold' not allowed"),         # unknown key (typo)
    ("injector.replica=3", "'replica' not allowed"),
    ("unknownTopLevel=1", "'unknownTopLevel' not allowed"),
    ("repeatFailure.threshold=0", "/repeatFailure/threshold"),       # below the minimum
    ("repeatFailure.collect_interval_s=31", "/repeatFailure/collect_interval_s"),
    ("json:repeatFailure.collect_grace_s=0.1", "/repeatFailure/collect_grace_s"),  # minimum 0.5
    ("json:repeatFailure.preview_timeout_s=0.4", "/repeatFailure/preview_timeout_s"),  # min 0.5
    ("repeatFailure.preview_timeout_s=31", "/repeatFailure/preview_timeout_s"),  # max 30
    ("repeatFailure.window_s=0", "/repeatFailure/window_s"),
    ("injector.failurePolicy=Maybe", "/injector/failurePolicy"),    # not in the enum
    ("injector.nativeSidecar=sometimes", "/injector/nativeSidecar"),
    ("injector.timeoutSeconds=31", "/injector/timeoutSeconds"),
    ("image.pullPolicy=Sometimes", "/image/pullPolicy"),
    ("image.reference=ghcr.io/hive/repeat-failure", "/image/reference"),  # no tag, no digest
    ("image.reference=GHCR.io/hive/repeat-failure:0.1.0", "/image/reference"),  # not lowercase
    ("image.reference=registry.example/rf@sha256:abc", "/image/reference"),  # short digest
    ("image.tag=0.1.0", "/image"),  # the old split values are gone: one reference
    ("sidecar.runAsUser=0", "/sidecar/runAsUser"),                  # root: runAsNonRoot fails
    ("agentNamespaces={Team_A}", "/agentNamespaces/0"),
    ("agentNamespaces={team-a,team-a}", "/agentNamespaces"),       # duplicates
    ("repeatFailure.collect_grace_s=0.5", "/repeatFailure/collect_grace_s"),  # --set: a string
    ("monitoring.podMonitor.interval=30 seconds", "/monitoring/podMonitor/interval"),
    ("injector.resources.requests.cpu=lots", "/injector/resources/requests/cpu"),
])
def test_values_schema_rejects(setting: str, message: str) -> None:
    """values.schema.json (additionalProperties false, types, enums, limits) makes `helm template`
    fail on a wrong type, an unknown key or an out-of-range value, naming where."""
    err = render_fails(setting)
    assert "don't meet the specifications of the schema" in err
    assert message in err, err


# --- documentation ------------------------------------------------------------------------------

def test_every_value_documented_in_values_yaml() -> None:
    """Every key of values.yaml is a `# --`-documented leaf or a map of such keys;
    values.schema.json describes each of them, has no key values.yaml lacks, and refuses
    unknown keys in every map it describes key by key."""
    schema = json.loads(SCHEMA.read_text())
    leaves = values_leaves()
    assert leaves
    for path, _, doc in leaves:
        assert doc, path
        schema_type(schema, path)  # raises KeyError when the schema lacks the key
    # ... and the schema has no key values.yaml lacks (besides Helm's `global`), and closes
    # every map it descends into.
    leaf_paths = {path for path, _, _ in leaves}

    def same_keys(node: dict[str, Any], value: dict[str, Any], prefix: str) -> None:
        assert node.get("additionalProperties") is False, prefix or "(top level)"
        assert set(node["properties"]) - {"global"} == set(value), prefix or "(top level)"
        for key, child in value.items():
            if f"{prefix}{key}" not in leaf_paths:
                same_keys(node["properties"][key], child, f"{prefix}{key}.")

    same_keys(schema, values_yaml(), "")


def test_readme_values_table_lists_every_leaf() -> None:
    """The README's values table has one row per leaf of values.yaml and nothing else, each with
    the schema's type, the values.yaml default (as JSON) and its `# --` description."""
    schema = json.loads(SCHEMA.read_text())
    table = readme_values_table()
    leaves = values_leaves()
    assert list(table) == [path for path, _, _ in leaves]
    for path, default, doc in leaves:
        typ, shown, desc = table[path]
        assert typ == schema_type(schema, path), path
        assert json.loads(shown) == default, path
        assert desc.replace("\\|", "|") == doc, path


def _table_after(text: str, header: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index(header)
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows


def test_readme_annotations_table_is_the_contracts() -> None:
    """The README's pod annotation table is the one in docs/kubernetes.md, row for row."""
    header = "| pod annotation (`repeat-failure.hive.dev/…`) | meaning | default |"
    assert _table_after(README.read_text(), header) == _table_after(CONTRACT.read_text(), header)


def _readme_snippets() -> dict[str, dict[str, Any]]:
    text = README.read_text()
    found = {}
    for name, body in re.findall(r"<!-- static-snippet: (\S+) -->\s*```yaml\n(.*?)```", text, re.S):
        found[name] = yaml.safe_load(body)
    return found


@pytest.mark.parametrize("form", ["native", "plain"])
def test_readme_static_snippet(form: str) -> None:
    """The README's pod specs for teams without the injector are valid Pods (kubernetes-validate,
    strict; native form from 1.29, plain form on 1.28 too) and follow docs/kubernetes.md "What the
    injector adds": sidecar name, args, env, port, probe, mounts, hardening, the config ConfigMap
    (optional) and the emptyDir, the label PodMonitor and NetworkPolicy select, and the agent's
    BASH_ENV/SHELL/SHLVL and shared mount."""
    pod = _readme_snippets()[form]
    if kubernetes_validate is not None:
        for version in ((KUBE_NEWEST,) if form == "native" else (KUBE_OLD, KUBE_NEWEST)):
            kubernetes_validate.validate(pod, version, strict=True)
    spec = pod["spec"]
    assert pod["metadata"]["labels"]["repeat-failure.hive.dev/injected"] == "true"
    if form == "native":
        sidecar = spec["initContainers"][0]
        assert sidecar["restartPolicy"] == "Always"
        agents = spec["containers"]
    else:
        assert "initContainers" not in spec
        (sidecar,) = [c for c in spec["containers"] if c["name"] == "repeat-failure"]
        assert "restartPolicy" not in sidecar
        agents = [c for c in spec["containers"] if c["name"] != "repeat-failure"]
    assert sidecar["name"] == "repeat-failure"
    assert sidecar["image"] == "ghcr.io/hive/repeat-failure:0.1.0"
    assert sidecar["args"] == ["run", "--config-optional"]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in sidecar["env"]}
    assert env["REPEAT_FAILURE_CONFIG"] == "/etc/repeat-failure/config.yaml"
    assert env["REPEAT_FAILURE_SHARED_DIR"] == "/var/run/repeat-failure"
    assert env["REPEAT_FAILURE_LISTEN"] == "0.0.0.0:9466"
    assert env["REPEAT_FAILURE_AGENT_HOME"] == "/var/run/repeat-failure-home"
    assert env["POD_NAME"] == {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}
    assert env["POD_NAMESPACE"] == {"fieldRef": {"apiVersion": "v1",
                                                 "fieldPath": "metadata.namespace"}}
    assert env["POD_UID"] == {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.uid"}}
    agent = env["REPEAT_FAILURE_AGENT"]
    assert {"REPEAT_FAILURE_AGENT", "REPEAT_FAILURE_BACKEND"} <= set(env)
    assert sidecar["ports"] == [{"name": "rf-metrics", "containerPort": 9466, "protocol": "TCP"}]
    assert sidecar["livenessProbe"]["httpGet"]["path"] == "/healthz"
    # Issue 29: the startup probe holds the agent until the hook is rendered (a native
    # sidecar's startup probe gates the next containers); no readiness probe.
    assert sidecar["startupProbe"] == {"httpGet": {"path": "/startupz", "port": "rf-metrics"},
                                       "periodSeconds": 1, "timeoutSeconds": 1,
                                       "failureThreshold": 120}
    assert "readinessProbe" not in sidecar
    assert sidecar["securityContext"] == {
        "runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001,
        "readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}
    mounts = {m["mountPath"]: m for m in sidecar["volumeMounts"]}
    assert mounts["/var/run/repeat-failure"]["name"] == "repeat-failure-shared"
    assert mounts["/etc/repeat-failure"] == {"name": "repeat-failure-config",
                                             "mountPath": "/etc/repeat-failure", "readOnly": True}
    assert mounts["/var/run/repeat-failure-home"]["readOnly"] is True
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["repeat-failure-shared"] == {"name": "repeat-failure-shared", "emptyDir": {}}
    assert volumes["repeat-failure-config"]["configMap"] == {"name": "repeat-failure-config",
                                                              "optional": True}
    (agent_c,) = agents
    agent_env = {e["name"]: e["value"] for e in agent_c["env"]}
    assert agent_env["BASH_ENV"] == f"/var/run/repeat-failure/hook/{agent}.sh"
    assert agent_env["SHELL"] == "/bin/bash" and agent_env["SHLVL"] == "1"
    assert {"name": "repeat-failure-shared", "mountPath": "/var/run/repeat-failure"} in \
        agent_c["volumeMounts"]
    # The agent's home is the volume the sidecar mounts read-only as its home.
    home_volume = mounts["/var/run/repeat-failure-home"]["name"]
    assert any(m["name"] == home_volume and m["mountPath"] == agent_env["HOME"]
               for m in agent_c["volumeMounts"])
    # Agent and sidecar share the record files: same user, or a shared fsGroup.
    assert spec.get("securityContext", {}).get("fsGroup") == 10001 or \
        agent_c.get("securityContext", {}).get("runAsUser") == 10001


def _apply_json_patch(doc: Any, ops: list[dict[str, Any]]) -> Any:
    """RFC 6902 `add` and `replace` (all the injector emits) applied to a copy of `doc`."""
    doc = copy.deepcopy(doc)
    for op in ops:
        assert op["op"] in ("add", "replace"), op
        parts = op["path"].split("/")[1:]
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in parts]
        target = doc
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        value = copy.deepcopy(op["value"])
        if isinstance(target, list):
            if last == "-":
                target.append(value)
            elif op["op"] == "add":
                target.insert(int(last), value)
            else:
                target[int(last)] = value
        else:
            assert op["op"] == "add" or last in target, op
            target[last] = value
    return doc


def _without_sidecar(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod as its team would write it before the sidecar: no repeat-failure container,
    volumes, mounts, hook env or label."""
    pod = copy.deepcopy(pod)
    spec = pod["spec"]
    spec.pop("initContainers", None)
    spec["containers"] = [c for c in spec["containers"] if c["name"] != "repeat-failure"]
    spec["volumes"] = [v for v in spec["volumes"] if not v["name"].startswith("repeat-failure")]
    for c in spec["containers"]:
        c["env"] = [e for e in c["env"] if e["name"] not in ("BASH_ENV", "SHELL", "SHLVL")]
        c["volumeMounts"] = [m for m in c["volumeMounts"] if m["name"] != "repeat-failure-shared"]
    del pod["metadata"]["labels"]["repeat-failure.hive.dev/injected"]
    return pod


@pytest.mark.parametrize("form", ["native", "plain"])
def test_readme_static_snippet_is_what_the_injector_adds(form: str) -> None:
    """Each README snippet equals what the injector (repeat_failure.kube.injector, fed the injector config the
    chart renders: native sidecar on 1.31, plain on 1.28) makes of the same pod written without
    the sidecar and annotated inject/agent/backend, apart from the injector's status annotation:
    the static route and the injected one cannot drift apart."""
    from repeat_failure.kube.injector import admission_response, parse_injector_config

    snippet = _readme_snippets()[form]
    kube = KUBE_NEW if form == "native" else KUBE_OLD
    config = parse_injector_config(
        {**injector_config(render(kube=kube)), "enabled": True}, "injector.yaml")
    bare = _without_sidecar(snippet)
    sidecar_env = {e["name"]: e.get("value") for c in snippet["spec"].get("initContainers", [])
                   + snippet["spec"]["containers"] if c["name"] == "repeat-failure"
                   for e in c["env"]}
    bare["metadata"]["annotations"] = {
        "repeat-failure.hive.dev/inject": "true",
        "repeat-failure.hive.dev/agent": sidecar_env["REPEAT_FAILURE_AGENT"],
        "repeat-failure.hive.dev/backend": sidecar_env["REPEAT_FAILURE_BACKEND"]}
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": {"uid": "u1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                          "resource": {"group": "", "version": "v1", "resource": "pods"},
                          "operation": "CREATE", "namespace": NAMESPACE, "object": bare}}
    response = admission_response(review, config)["response"]
    assert response["allowed"] is True and "warnings" not in response, response
    injected = _apply_json_patch(bare, json.loads(base64.b64decode(response["patch"])))
    assert injected["metadata"].pop("annotations")["repeat-failure.hive.dev/status"] == "injected"
    assert injected == snippet


def test_rendered_injector_config_loads_in_the_injector() -> None:
    """The injector's own loader (repeat_failure.kube.injector.parse_injector_config) accepts the injector
    config the chart renders, default and with every value changed, and reads back the values."""
    from repeat_failure.kube.injector import parse_injector_config

    default = parse_injector_config(injector_config(render()), "injector.yaml")
    assert (default.enabled, default.native_sidecar, default.config_map) == \
        (False, True, "repeat-failure-config")
    changed = parse_injector_config(injector_config(render(
        "repeatFailure.enabled=true", "injector.nativeSidecar=false",
        "image.reference=ghcr.io/hive/repeat-failure:9.9.9",
        "image.pullPolicy=Always", "sidecar.runAsUser=2000", "sidecar.runAsGroup=3000",
        "sidecar.resources.limits.memory=1Gi")), "injector.yaml")
    assert (changed.enabled, changed.native_sidecar, changed.image, changed.image_pull_policy,
            changed.run_as_user, changed.run_as_group) == \
        (True, False, "ghcr.io/hive/repeat-failure:9.9.9", "Always", 2000, 3000)
    assert changed.resources["limits"]["memory"] == "1Gi"


def _notes(tmp_path: Path, *sets: str) -> str:
    """NOTES.txt as `helm install` would print it: a copy of the chart gets one extra template
    that includes NOTES.txt into a ConfigMap (helm template itself never renders the notes)."""
    chart = tmp_path / "repeat-failure"
    shutil.copytree(CHART, chart)
    (chart / "templates" / "zz-notes-probe.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes-probe\ndata:\n"
        '  notes: {{ include (print $.Template.BasePath "/NOTES.txt") . | toJson }}\n')
    args = ["template", RELEASE, str(chart), "--namespace", NAMESPACE, "--kube-version", KUBE_NEW,
            "--show-only", "templates/zz-notes-probe.yaml"]
    for s in sets:
        args += ["--set", s]
    return yaml.safe_load(_helm(*args).stdout)["data"]["notes"]


def test_notes(tmp_path: Path) -> None:
    """NOTES.txt says whether the check is on, lists the agent namespaces, shows the opt-in
    annotation, and tells an injector-less install to add the sidecar itself."""
    notes = _notes(tmp_path)
    assert "The check is OFF" in notes and "repeat-failure.hive.dev/inject: \"true\"" in notes
    assert f"  - {NAMESPACE}" in notes
    assert f"mutatingwebhookconfiguration {INJECTOR}-{NAMESPACE}" in notes
    notes = _notes(tmp_path / "2", "repeatFailure.enabled=true", "injector.enabled=false",
                   "agentNamespaces={team-a,team-b}")
    assert "The check is ON" in notes and "  - team-a\n  - team-b" in notes
    assert "Without the injector" in notes and "mutatingwebhookconfiguration" not in notes


def test_scripts_test_installs_pinned_helm() -> None:
    """scripts/test installs the pinned helm into the cache path this module looks in, and puts
    it on PATH, so CI runs these tests instead of skipping them."""
    text = (REPO / "scripts" / "test").read_text()
    assert 'helm_bin="$HOME/.cache/repeat-failure/bin"' in text
    assert 'GOBIN="$helm_bin" "$go" install helm.sh/helm/v3/cmd/helm@v3.22.0' in text
    assert 'export PATH="$HOME/.cache/repeat-failure/bin:$PATH"' in text


def _iter_strings(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for v in node.values():
            yield from _iter_strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from _iter_strings(v)
    elif isinstance(node, str):
        yield node


def test_no_leftover_template_markers() -> None:
    """No rendered value of the fullest combinations (without and with the fixloop) still holds
    `{{`, `<no value>` or `%!` (a template bug that renders text instead of failing)."""
    objs = [obj for combo in ("everything-kube-1.28", "fixloop-everything")
            for obj in render(*COMBOS[combo][0], kube=COMBOS[combo][1])]
    for obj in objs:
        if obj["kind"] == "PrometheusRule":
            continue  # alert annotations use Prometheus's own {{ $labels.x }} templates
        for s in _iter_strings(obj):
            assert "<no value>" not in s and "%!" not in s, (obj["kind"], s)
            if obj["kind"] != "ConfigMap" or "repeat-failure.json" not in obj.get("data", {}):
                assert "{{" not in s, (obj["kind"], s)


def test_fixloop_github_app_renders_config_secret_and_mount() -> None:
    """With `fixloop.github.app.id` the fixloop authenticates as a GitHub App (issue 20):
    fixloop.yaml carries `github_app` (the id as a string, the installation id when given, the
    path the key is mounted at) instead of `token_file`, and the fixloop's loader takes it; the
    chart's Secret holds the private key as `private-key.pem`, mounted read-only where
    `private_key_file` points, and the pod rolls when it changes. With `existingSecret` the key
    comes from that Secret (`app.existingSecretKey`) and the chart makes none."""
    from repeat_failure.fixloop.config import DEFAULT_PRIVATE_KEY_FILE, GitHubApp, parse_fixloop_config

    key_text = "-----BEGIN RSA PRIVATE KEY-----"  # only passed through: never parsed here
    objs = render(*FIXLOOP_ON, "fixloop.github.app.id=4242",
                  f"fixloop.github.app.privateKey={key_text}",
                  "fixloop.github.app.installationId=77")
    doc = fixloop_config(objs)
    assert doc["fixloop"]["github_app"] == {"app_id": "4242", "installation_id": 77,
                                            "private_key_file": DEFAULT_PRIVATE_KEY_FILE}
    assert "token_file" not in doc["fixloop"]
    cfg = parse_fixloop_config(doc, "fixloop.yaml")
    assert cfg.github_app == GitHubApp("4242", DEFAULT_PRIVATE_KEY_FILE, 77)
    secret = one(objs, "Secret", FIXLOOP)
    assert secret["data"] == {"private-key.pem": base64.b64encode(key_text.encode()).decode()}
    pod = fixloop_pod(objs)
    (c,) = pod["spec"]["containers"]
    mount = next(m for m in c["volumeMounts"]
                 if m["mountPath"] == str(Path(DEFAULT_PRIVATE_KEY_FILE).parent))
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == mount["name"])
    assert mount["readOnly"] is True
    assert volume["secret"] == {"secretName": FIXLOOP, "defaultMode": 0o440, "items": [
        {"key": "private-key.pem", "path": Path(DEFAULT_PRIVATE_KEY_FILE).name}]}
    assert "checksum/secret" in pod["metadata"]["annotations"]

    objs = render(*FIXLOOP_ON, "fixloop.github.app.id=Iv23liAbCdEf",
                  "fixloop.github.existingSecret=gh-app",
                  "fixloop.github.app.existingSecretKey=app.pem")
    assert FIXLOOP not in {o["metadata"]["name"] for o in of_kind(objs, "Secret")}
    assert fixloop_config(objs)["fixloop"]["github_app"] == {
        "app_id": "Iv23liAbCdEf", "private_key_file": DEFAULT_PRIVATE_KEY_FILE}
    volume = next(v for v in fixloop_pod(objs)["spec"]["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] == "gh-app"
    assert volume["secret"]["items"] == [{"key": "app.pem", "path": "private-key.pem"}]
    assert "checksum/secret" not in fixloop_pod(objs)["metadata"]["annotations"]


@pytest.mark.parametrize("sets, message", [
    (("fixloop.github.app.id=1", "fixloop.github.token=t"),
     "fixloop.github: give either a token (fixloop.github.token) or a GitHub App "
     "(fixloop.github.app.id), not both"),
    (("fixloop.github.app.id=1",), "fixloop.github.app.id needs the App's private key"),
    (("fixloop.github.app.privateKey=k", "fixloop.github.token=t"),
     "fixloop.github.app.privateKey is set without fixloop.github.app.id"),
    (("fixloop.github.app.installationId=5", "fixloop.github.token=t"),
     "fixloop.github.app.installationId is set without fixloop.github.app.id"),
    (("fixloop.github.app.id=1", "fixloop.github.app.privateKey=k",
      "fixloop.github.existingSecret=s"),
     "fixloop.github.app: give the private key either as fixloop.github.app.privateKey"),
    (("fixloop.github.app.id=a b", "fixloop.github.app.privateKey=k"),
     "at '/fixloop/github/app/id'"),
])
def test_fixloop_github_app_values_are_checked(sets: tuple[str, ...], message: str) -> None:
    """Exactly one credential: a token, or an App id with one source of its private key (an
    App's key or installation id without its id is refused, not silently ignored); an App id
    GitHub could not have is refused by the values schema."""
    assert message in render_fails(*FIXLOOP_ON, *sets)


# --- issue 28 and 29: the injector watched, spread and reachable only by the API server ---------

def test_injector_pod_monitor() -> None:
    """Issue 29: with the PodMonitor on, a second one scrapes the injector's pods (its selector
    labels) on port rf-inj-metrics at /metrics in the release namespace; none with the injector
    off."""
    objs = render("monitoring.podMonitor.enabled=true", "monitoring.podMonitor.labels.release=prom")
    pm = one(objs, "PodMonitor", INJECTOR)
    dep = one(objs, "Deployment", INJECTOR)
    assert pm["metadata"]["labels"]["release"] == "prom"
    assert pm["spec"] == {
        "selector": {"matchLabels": dep["spec"]["selector"]["matchLabels"]},
        "namespaceSelector": {"matchNames": [NAMESPACE]},
        "podMetricsEndpoints": [{"port": "rf-inj-metrics", "path": "/metrics",
                                 "interval": "30s"}]}
    assert {"name": "rf-inj-metrics", "containerPort": 9468, "protocol": "TCP"} in \
        dep["spec"]["template"]["spec"]["containers"][0]["ports"]
    assert [p["metadata"]["name"] for p in of_kind(render(
        "monitoring.podMonitor.enabled=true", "injector.enabled=false"), "PodMonitor")] == [
        FULLNAME]


def test_injector_replicas_spread_one_per_node_by_default() -> None:
    """Issue 29: two replicas could share a node. By default they are spread over nodes
    (hostname, maxSkew 1, DoNotSchedule, untolerated taints left out); your own
    topologySpreadConstraints or affinity replaces it."""
    dep = one(render(), "Deployment", INJECTOR)
    pod = dep["spec"]["template"]["spec"]
    assert pod["topologySpreadConstraints"] == [{
        "maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
        "whenUnsatisfiable": "DoNotSchedule", "nodeTaintsPolicy": "Honor",
        "labelSelector": {"matchLabels": dep["spec"]["selector"]["matchLabels"]}}]
    assert "affinity" not in pod
    own = one(render("json:injector.topologySpreadConstraints=[{\"maxSkew\":2,"
                     "\"topologyKey\":\"topology.kubernetes.io/zone\","
                     "\"whenUnsatisfiable\":\"ScheduleAnyway\"}]"), "Deployment", INJECTOR)
    assert own["spec"]["template"]["spec"]["topologySpreadConstraints"] == [
        {"maxSkew": 2, "topologyKey": "topology.kubernetes.io/zone",
         "whenUnsatisfiable": "ScheduleAnyway"}]
    affine = one(render("injector.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuring"
                        "Execution.nodeSelectorTerms[0].matchExpressions[0].key=pool",
                        "injector.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuring"
                        "Execution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists"),
                 "Deployment", INJECTOR)["spec"]["template"]["spec"]
    assert "topologySpreadConstraints" not in affine and "nodeAffinity" in affine["affinity"]


@pytest.mark.parametrize("sets", [
    ("agentNamespaces={team-a,kube-system}",), ()], ids=["listed", "release-namespace"])
def test_kube_system_is_refused_as_an_agent_namespace(sets: tuple[str, ...]) -> None:
    """Issue 29: kube-system is never an agent namespace, listed or as the release namespace
    with no list: the install fails saying so."""
    if sets:
        err = render_fails(*sets)
        assert "kube-system" in err
        return
    proc = _helm(*_template_args((), KUBE_NEW, "kube-system"), check=False)
    assert proc.returncode != 0
    assert "kube-system cannot be an agent namespace" in proc.stderr


def test_injector_network_policy_admits_only_the_api_server() -> None:
    """Issue 28: any pod could reach the injector. With injector.networkPolicy on, its pods
    take the webhook port only from the API server's CIDRs (and the chart's `helm test` pod,
    labelled as its own test-injector pod is) and the metrics port only from the Prometheus
    namespace; without CIDRs the install fails saying what to set; off by default."""
    sets = ("injector.networkPolicy.enabled=true",
            "injector.networkPolicy.apiServerCIDRs={10.0.0.0/24,fd00:10::/64}",
            "networkPolicy.prometheusNamespace=observability")
    objs = render(*sets)
    policy = one(objs, "NetworkPolicy", INJECTOR)
    assert policy["metadata"]["namespace"] == NAMESPACE
    assert policy["spec"] == {
        "podSelector": {"matchLabels": one(objs, "Deployment", INJECTOR)["spec"]["selector"][
            "matchLabels"]},
        "policyTypes": ["Ingress"],
        "ingress": [
            {"from": [{"ipBlock": {"cidr": "10.0.0.0/24"}}, {"ipBlock": {"cidr": "fd00:10::/64"}},
                      # the chart's `helm test` pod, which calls the webhook as the API server
                      {"podSelector": {"matchLabels": {
                          "app.kubernetes.io/name": "repeat-failure",
                          "app.kubernetes.io/instance": RELEASE,
                          "app.kubernetes.io/component": "test"}}}],
             "ports": [{"protocol": "TCP", "port": 8443}]},
            {"from": [{"namespaceSelector": {"matchLabels": {
                "kubernetes.io/metadata.name": "observability"}}}],
             "ports": [{"protocol": "TCP", "port": 9468}]}]}
    assert not [p for p in of_kind(render(), "NetworkPolicy")]
    test_pod = one(objs, "Pod", f"{FULLNAME}-test-injector")
    assert policy["spec"]["ingress"][0]["from"][2]["podSelector"]["matchLabels"].items() <= \
        test_pod["metadata"]["labels"].items()
    err = render_fails("injector.networkPolicy.enabled=true")
    assert "injector.networkPolicy.enabled needs injector.networkPolicy.apiServerCIDRs" in err


def test_prometheus_rule_runbook_base_url() -> None:
    """``monitoring.prometheusRule.runbookBaseUrl`` points every alert's ``runbook_url`` at the
    operator's copy of the runbook, the alert's name lower-cased as the anchor (the section ids
    docs/runbook.md has); empty keeps the rules file's URLs; a value that is not an http(s) URL
    without a fragment fails the install."""
    groups = yaml.safe_load(RULES_FILE.read_text())["groups"]
    rule = one(render("monitoring.prometheusRule.enabled=true",
                      "monitoring.prometheusRule.runbookBaseUrl=https://wiki.example.test/rf/"),
               "PrometheusRule")
    urls = {r["alert"]: r["annotations"]["runbook_url"]
            for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r}
    assert urls == {r["alert"]: f"https://wiki.example.test/rf#{r['alert'].lower()}"
                    for r in groups[0]["rules"] if "alert" in r}
    assert urls["RepeatFailureSidecarDown"] == \
        "https://wiki.example.test/rf#repeatfailuresidecardown"
    kept = one(render("monitoring.prometheusRule.enabled=true"), "PrometheusRule")
    assert [r["annotations"]["runbook_url"] for g in kept["spec"]["groups"] for r in g["rules"]
            if "alert" in r] == [r["annotations"]["runbook_url"] for r in groups[0]["rules"]
                                 if "alert" in r]
    assert "does not match pattern" in render_fails(
        "monitoring.prometheusRule.enabled=true",
        "monitoring.prometheusRule.runbookBaseUrl=wiki page#x")


@pytest.mark.parametrize("doc", ["docs/operations.md", "charts/repeat-failure/README.md"])
def test_the_documented_before_install_check_of_the_injector_config_runs(tmp_path, doc) -> None:
    """docs/operations.md and the chart README tell how to check the injector config the chart
    renders before installing (`helm template … --show-only templates/injector-config.yaml`, its
    `injector.yaml` key, `check-config --injector`): the block runs as written (helm, python3
    and repeat-failure this checkout's) and prints the valid summary of the chart's defaults."""
    import sys

    from repeat_failure import __version__

    text = (REPO / doc).read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```sh\n(.*?)```", text, re.S)
                 if "--show-only templates/injector-config.yaml" in b)
    tool = tmp_path / "bin"
    tool.mkdir()
    for name, target in (("helm", HELM), ("python3", sys.executable)):
        (tool / name).write_text(f'#!/bin/sh\nexec {target} "$@"\n')
    (tool / "repeat-failure").write_text(
        f'#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m repeat_failure "$@"\n')
    for path in tool.iterdir():
        path.chmod(0o755)
    script = block.replace("<namespace>", "team-a").replace(" charts/repeat-failure ",
                                                           f" {CHART} ")
    out = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120, env={"PATH": f"{tool}:/usr/bin:/bin", "HOME": str(tmp_path)})
    assert (out.returncode, out.stderr) == (0, "")
    assert out.stdout == (
        "injector.yaml: valid injector config (injection off, image "
        f"ghcr.io/hive/repeat-failure:{__version__} (IfNotPresent), native sidecar, ConfigMap "
        "repeat-failure-config, user 10001:10001, resources limits memory 96Mi; requests cpu "
        "10m, memory 48Mi)\n")
