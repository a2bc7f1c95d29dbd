"""The sidecar injector (repeat_failure.kube.injector) against docs/kubernetes.md.

The fixtures under tests/fixtures/admission/ are AdmissionReview v1 requests as the API server
sends them for a Pod CREATE: the object decoded and defaulted, the built-in mutating plugins
already applied (the ServiceAccount plugin's kube-api-access volume, DefaultTolerationSeconds),
and a pod created by a ReplicaSet or a Job carrying ``generateName`` and no ``name`` yet.

Each injected case applies the returned JSONPatch with the ``jsonpatch`` library and compares
the WHOLE resulting pod with the expected pod (the original plus exactly what the contract
lists, written out literally here), then validates it against the Pod schema of
``kubernetes-validate`` (strict: unknown fields fail). Native sidecars (``restartPolicy: Always``
on an init container, KEP-753) are beta and on by default from Kubernetes 1.29, so those results
are validated for 1.29 and the newest version the package ships; the plain-container variant for
1.28 and the newest. (The 1.28 schema already has ``restartPolicy`` on containers: the field
existed as alpha behind the SidecarContainers feature gate, off by default, so a 1.28 schema
check could not tell whether a native sidecar works there; the 1.27 schema rejects it.)
"""

from __future__ import annotations

import base64
import copy
import datetime
import http.client
import io
import ipaddress
import json
import os
import re
import socket
import ssl
import threading
import time
from pathlib import Path

import jsonpatch
import kubernetes_validate
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from repeat_failure.sidecar import hook
from repeat_failure.jsonlog import configure_logging
from repeat_failure.config import AGENT_NAME_RE, ConfigError
from repeat_failure.kube.injector import (
    AGENT_RE, CHAIN_PATH_RE, MAX_BODY_BYTES, AdmissionError, ConfigSource, InjectorConfig, InjectorServer,
    TLSFiles, admission_response, decide, load_injector_config, parse_injector_config, pointer,
)

FIXTURES = Path(__file__).parent / "fixtures" / "admission"
DOCS = Path(__file__).resolve().parent.parent / "docs" / "kubernetes.md"
NEWEST = kubernetes_validate.utils.latest_version()

#: The injector config as the chart renders it with the check on (docs/kubernetes.md).
CONFIG_YAML = """\
enabled: true
image: ghcr.io/hive/repeat-failure:0.1.0
imagePullPolicy: IfNotPresent
nativeSidecar: {native}
configMap: repeat-failure-config
runAsUser: 10001
runAsGroup: 10001
resources: {{requests: {{cpu: 10m, memory: 48Mi}}, limits: {{memory: 96Mi}}}}
"""


def config(native: bool = True, enabled: bool = True) -> InjectorConfig:
    text = CONFIG_YAML.format(native=str(native).lower())
    text = text.replace("enabled: true", f"enabled: {str(enabled).lower()}")
    return parse_injector_config(yaml.safe_load(text), "injector.yaml")


def load(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def run(review: dict, cfg: InjectorConfig) -> tuple[dict, list | None, dict]:
    """(response, patch operations or None, the pod after the patch)."""
    answer = admission_response(review, cfg)
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    response = answer["response"]
    assert response["uid"] == review["request"]["uid"]
    assert response["allowed"] is True
    pod = review["request"]["object"]
    if "patch" not in response:
        assert "patchType" not in response
        return response, None, pod
    assert response["patchType"] == "JSONPatch"
    ops = json.loads(base64.b64decode(response["patch"], validate=True))
    assert isinstance(ops, list) and ops
    return response, ops, jsonpatch.apply_patch(pod, ops)


def validate(pod: dict, native: bool) -> None:
    for version in (["1.29", NEWEST] if native else ["1.28", NEWEST]):
        kubernetes_validate.validate(pod, version, strict=True)


# -- what the contract lists, written out --------------------------------------------------------

SHARED_MOUNT = {"name": "repeat-failure-shared", "mountPath": "/var/run/repeat-failure"}
VOLUMES = [{"name": "repeat-failure-shared", "emptyDir": {}},
           {"name": "repeat-failure-config",
            "configMap": {"name": "repeat-failure-config", "optional": True}}]


def expected_sidecar(agent: str, backend: str, uid: int, gid: int, native: bool,
                     chain: str | None = None, home: dict | None = None,
                     token: str | None = None, preview: str | None = None) -> dict:
    """The sidecar container the contract lists; ``token`` is the name of the agent's
    service-account token volume, whose mount the sidecar gets a read-only copy of;
    ``preview`` the preview-url annotation (env ``REPEAT_FAILURE_PREVIEW_URL``, last)."""
    env = [{"name": "REPEAT_FAILURE_CONFIG", "value": "/etc/repeat-failure/config.yaml"},
           {"name": "REPEAT_FAILURE_SHARED_DIR", "value": "/var/run/repeat-failure"},
           {"name": "REPEAT_FAILURE_AGENT", "value": agent},
           {"name": "REPEAT_FAILURE_BACKEND", "value": backend},
           {"name": "REPEAT_FAILURE_LISTEN", "value": "0.0.0.0:9466"},
           {"name": "POD_NAME",
            "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
           {"name": "POD_NAMESPACE",
            "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}},
           {"name": "POD_UID",
            "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.uid"}}}]
    if chain:
        env.append({"name": "REPEAT_FAILURE_CHAIN_BASH_ENV", "value": chain})
    mounts = [{"name": "repeat-failure-shared", "mountPath": "/var/run/repeat-failure"},
              {"name": "repeat-failure-config", "mountPath": "/etc/repeat-failure",
               "readOnly": True}]
    if home:
        env.append({"name": "REPEAT_FAILURE_AGENT_HOME", "value": "/var/run/repeat-failure-home"})
        mounts.append({"name": home["volume"], "mountPath": "/var/run/repeat-failure-home",
                       "readOnly": True, **({"subPath": home["subPath"]} if "subPath" in home
                                            else {})})
    if preview:
        env.append({"name": "REPEAT_FAILURE_PREVIEW_URL", "value": preview})
    if token:
        mounts.append({"name": token, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                       "readOnly": True})
    container = {
        "name": "repeat-failure",
        "image": "ghcr.io/hive/repeat-failure:0.1.0",
        "imagePullPolicy": "IfNotPresent",
        "args": ["run", "--config-optional"],
        "env": env,
        "ports": [{"name": "rf-metrics", "containerPort": 9466, "protocol": "TCP"}],
        # Issue 29: a native sidecar's startup probe holds the agent container until the
        # sidecar has rendered the hook and can be written to.
        "startupProbe": {"httpGet": {"path": "/startupz", "port": "rf-metrics"},
                         "periodSeconds": 1, "timeoutSeconds": 1, "failureThreshold": 120},
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "rf-metrics"}},
        "resources": {"requests": {"cpu": "10m", "memory": "48Mi"}, "limits": {"memory": "96Mi"}},
        "volumeMounts": mounts,
        "securityContext": {"runAsNonRoot": True, "runAsUser": uid, "runAsGroup": gid,
                            "readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"}},
    }
    if native:
        container["restartPolicy"] = "Always"
    return container


def hook_env(agent: str) -> list[dict]:
    return [{"name": "BASH_ENV", "value": f"/var/run/repeat-failure/hook/{agent}.sh"},
            {"name": "SHELL", "value": "/bin/bash"}, {"name": "SHLVL", "value": "1"}]


def expected_pod(original: dict, sidecar: dict, native: bool, session_logs: str | None = None,
                 hooked: dict[int, dict] | None = None) -> dict:
    """The original pod plus the status annotation (and session-logs), the injected label, the
    two volumes, the sidecar first among init containers (native) or last among containers, and
    each hooked container replaced by the dict given for its index."""
    pod = copy.deepcopy(original)
    meta = pod["metadata"]
    meta["annotations"]["repeat-failure.hive.dev/status"] = "injected"
    if session_logs is not None:
        meta["annotations"]["repeat-failure.hive.dev/session-logs"] = session_logs
    meta.setdefault("labels", {})["repeat-failure.hive.dev/injected"] = "true"
    pod["spec"]["volumes"] = pod["spec"].get("volumes", []) + copy.deepcopy(VOLUMES)
    for index, container in (hooked or {}).items():
        pod["spec"]["containers"][index] = container
    if native:
        pod["spec"]["initContainers"] = [sidecar] + pod["spec"].get("initContainers", [])
    else:
        pod["spec"]["containers"].append(sidecar)
    return pod


def with_hook(container: dict, agent: str, env: list[dict] | None = None) -> dict:
    """``container`` with the shared mount and the hook's env appended (``env`` replaces the
    whole env list when given)."""
    c = copy.deepcopy(container)
    c["volumeMounts"] = c.get("volumeMounts", []) + [dict(SHARED_MOUNT)]
    c["env"] = env if env is not None else c.get("env", []) + hook_env(agent)
    return c


NATIVE = pytest.mark.parametrize("native", [True, False], ids=["native-sidecar", "container"])


# -- injected pods --------------------------------------------------------------------------------


@NATIVE
def test_deployment_pod_one_container_home_mounted_exactly(native: bool) -> None:
    """A ReplicaSet's pod (generateName, no name): agent from app.kubernetes.io/name, backend
    from the annotation, pod-level runAsUser/runAsGroup, the home volume mounted at HOME exactly
    (no subPath); labels and volumes exist, so keys and items are added to them."""
    review = load("deployment-one-container")
    original = review["request"]["object"]
    assert "name" not in original["metadata"] and original["metadata"]["generateName"]
    response, ops, pod = run(review, config(native))
    assert "warnings" not in response
    agent = original["spec"]["containers"][0]
    assert pod == expected_pod(
        original, expected_sidecar("claude-agent", "claude", 1000, 1000, native,
                                   home={"volume": "home"}, token="kube-api-access-x7k2p"),
        native, hooked={0: with_hook(agent, "claude-agent")})
    assert {"op": "add", "path": "/metadata/annotations/repeat-failure.hive.dev~1status",
            "value": "injected"} in ops
    assert {"op": "add", "path": "/metadata/labels/repeat-failure.hive.dev~1injected",
            "value": "true"} in ops
    # Native: the first init container (none before it: /spec/initContainers is created).
    assert [op["path"] for op in ops if "initContainers" in op["path"]] == (
        ["/spec/initContainers"] if native else [])
    validate(pod, native)


@NATIVE
def test_several_containers_container_level_ids_and_parent_mount_with_subpath(native) -> None:
    """Every container is an agent container by default; the first one's container-level
    runAsUser/runAsGroup win over the pod's; HOME /home/codex under a mount of /home with
    subPath users → the sidecar mounts subPath users/codex. A container with neither env nor
    volumeMounts gets both created; the native sidecar goes before the existing init container."""
    review = load("pod-several-containers")
    original = review["request"]["object"]
    response, ops, pod = run(review, config(native))
    assert "warnings" not in response
    agent, tools = original["spec"]["containers"]
    assert "env" not in tools and "volumeMounts" not in tools
    assert pod == expected_pod(
        original, expected_sidecar("pair", "codex", 2000, 3000, native,
                                   home={"volume": "work", "subPath": "users/codex"}),
        native, hooked={0: with_hook(agent, "pair"), 1: with_hook(tools, "pair")})
    if native:
        assert [c["name"] for c in pod["spec"]["initContainers"]] == ["repeat-failure",
                                                                      "init-workspace"]
    assert {"op": "add", "path": "/spec/containers/1/env", "value": hook_env("pair")} in ops
    assert {"op": "add", "path": "/spec/containers/1/volumeMounts",
            "value": [SHARED_MOUNT]} in ops
    validate(pod, native)


@NATIVE
def test_containers_annotation_names_the_agent_container(native: bool) -> None:
    """`containers: " agent "` hooks only that container (the proxy stays as it is); the agent
    annotation wins over the labels; HOME with a trailing slash matches the mount of exactly
    that path with subPath oc-1; no runAs ids anywhere → the config's 10001."""
    review = load("containers-annotation")
    original = review["request"]["object"]
    response, ops, pod = run(review, config(native))
    assert "warnings" not in response
    agent = original["spec"]["containers"][1]
    assert pod == expected_pod(
        original, expected_sidecar("oc-1", "opencode", 10001, 10001, native,
                                   home={"volume": "home", "subPath": "oc-1"},
                                   token="kube-api-access-m4q9z"),
        native, hooked={1: with_hook(agent, "oc-1")})
    assert pod["spec"]["containers"][0] == original["spec"]["containers"][0]
    validate(pod, native)


@NATIVE
def test_job_pod_literal_bash_env_is_chained(native: bool) -> None:
    """A Job's pod: the literal BASH_ENV is replaced by the hook and handed to the sidecar as
    REPEAT_FAILURE_CHAIN_BASH_ENV; SHELL=/bin/sh becomes /bin/bash in place; the container's own
    SHLVL stays; the agent-home annotation under a mount of /home without subPath → subPath
    agent."""
    review = load("job-bash-env-literal")
    original = review["request"]["object"]
    assert original["spec"]["restartPolicy"] == "Never"
    response, ops, pod = run(review, config(native))
    assert "warnings" not in response
    agent = original["spec"]["containers"][0]
    hooked_env = [{"name": "BASH_ENV", "value": "/var/run/repeat-failure/hook/gemini-run.sh"},
                  {"name": "SHELL", "value": "/bin/bash"}, {"name": "SHLVL", "value": "2"}]
    assert pod == expected_pod(
        original, expected_sidecar("gemini-run", "gemini", 10001, 10001, native,
                                   chain="/etc/agent/bash_env.sh",
                                   home={"volume": "homes", "subPath": "agent"},
                                   token="kube-api-access-b8n3w"),
        native, hooked={0: with_hook(agent, "gemini-run", env=hooked_env)})
    assert {"op": "replace", "path": "/spec/containers/0/env/0",
            "value": hooked_env[0]} in ops
    validate(pod, native)


@NATIVE
def test_bash_env_from_value_from_is_left_alone_with_a_warning(native: bool) -> None:
    """A container whose BASH_ENV comes from valueFrom is left exactly as it is and named in the
    warnings; the other container is hooked. No HOME anywhere: no home mount, and the pod says
    why in the session-logs annotation."""
    review = load("bash-env-value-from")
    original = review["request"]["object"]
    response, ops, pod = run(review, config(native))
    assert response["warnings"] == [
        "repeat-failure: container agent: BASH_ENV comes from valueFrom or refers to $(VAR); "
        "left as it is (not hooked)"]
    helper = original["spec"]["containers"][1]
    assert pod == expected_pod(
        original, expected_sidecar("pi-agent", "pi", 10001, 10001, native,
                                   token="kube-api-access-r2d2c"), native,
        session_logs="agent home unknown", hooked={1: with_hook(helper, "pi-agent")})
    assert pod["spec"]["containers"][0] == original["spec"]["containers"][0]
    validate(pod, native)


@NATIVE
def test_home_not_covered_creates_labels_and_volumes(native: bool) -> None:
    """HOME /home/dev with no mount covering it: the sidecar runs without the home and the pod
    gets session-logs "no volume mount covers the agent home". A pod with no labels, no volumes
    and a container without volumeMounts: each is created by the patch."""
    review = load("home-not-covered")
    original = review["request"]["object"]
    assert "labels" not in original["metadata"] and "volumes" not in original["spec"]
    response, ops, pod = run(review, config(native))
    assert "warnings" not in response
    agent = original["spec"]["containers"][0]
    assert pod == expected_pod(
        original, expected_sidecar("copilot-dev", "copilot", 10001, 10001, native), native,
        session_logs="no volume mount covers the agent home",
        hooked={0: with_hook(agent, "copilot-dev")})
    assert {"op": "add", "path": "/metadata/labels",
            "value": {"repeat-failure.hive.dev/injected": "true"}} in ops
    assert {"op": "add", "path": "/spec/volumes", "value": VOLUMES} in ops
    validate(pod, native)


@NATIVE
def test_root_agent_sidecar_takes_the_configs_user(native: bool) -> None:
    """An agent running as uid 0: a sidecar with runAsNonRoot cannot run as 0, so it takes the
    config's runAsUser (the group, 0, is copied). A backend the coverage table lists but does
    not cover (aider) is injected: the sidecar's row says "not available"."""
    review = load("root-agent")
    original = review["request"]["object"]
    response, ops, pod = run(review, config(native))
    assert "warnings" not in response
    agent = original["spec"]["containers"][0]
    assert pod == expected_pod(
        original, expected_sidecar("aider", "aider", 10001, 0, native,
                                   token="kube-api-access-q1w2e"), native,
        session_logs="agent home unknown", hooked={0: with_hook(agent, "aider")})
    validate(pod, native)


@NATIVE
def test_preview_url_annotation_reaches_the_sidecar_env(native: bool) -> None:
    """A web-app agent whose dev server runs in a second container of the pod (the sidecar
    shares the pod's network, so 127.0.0.1:5173 is the same server for it): the preview-url
    annotation becomes the sidecar's REPEAT_FAILURE_PREVIEW_URL, exactly as written and last in
    its env; nothing else changes (the dev-server container, not named by `containers`, is not
    hooked). HOME /workspace/home under the mount of /workspace → subPath home."""
    review = load("preview-url")
    original = review["request"]["object"]
    assert original["metadata"]["annotations"]["repeat-failure.hive.dev/preview-url"] == \
        "http://127.0.0.1:5173/"
    response, ops, pod = run(review, config(native))
    assert "warnings" not in response
    agent, dev_server = original["spec"]["containers"]
    assert pod == expected_pod(
        original, expected_sidecar("web-agent", "claude", 1000, 1000, native,
                                   home={"volume": "workspace", "subPath": "home"},
                                   token="kube-api-access-w5e6b",
                                   preview="http://127.0.0.1:5173/"),
        native, hooked={0: with_hook(agent, "web-agent")})
    assert pod["spec"]["containers"][1] == dev_server
    sidecar_op = next(op for op in ops if op["path"] in ("/spec/initContainers",
                                                          "/spec/containers/-"))
    sidecar = sidecar_op["value"][0] if native else sidecar_op["value"]
    assert sidecar["env"][-1] == {"name": "REPEAT_FAILURE_PREVIEW_URL",
                                  "value": "http://127.0.0.1:5173/"}
    # Without the annotation the same pod's sidecar has no such entry.
    del original["metadata"]["annotations"]["repeat-failure.hive.dev/preview-url"]
    _, _, plain = run(review, config(native))
    sidecars = plain["spec"]["initContainers" if native else "containers"]
    assert all(e["name"] != "REPEAT_FAILURE_PREVIEW_URL"
               for c in sidecars if c["name"] == "repeat-failure" for e in c["env"])
    validate(pod, native)


@pytest.mark.parametrize("url", [
    "https://preview.agents.svc.cluster.local/app/?tab=1",
    "http://[::1]:3000",
    "HTTP://127.0.0.1:8080/index.html",
])
def test_preview_url_forms_the_sidecar_accepts_are_passed_unchanged(url: str) -> None:
    """Any URL the sidecar's own check accepts (https, a path and query, an IPv6 literal, an
    upper-case scheme) is injected and handed over byte for byte, never normalised."""
    from repeat_failure.config import check_preview_url

    check_preview_url(url)
    response, ops, pod = run(variant(annotate(preview_url=url)), config())
    assert "warnings" not in response
    assert pod["spec"]["initContainers"][0]["env"][-1] == {
        "name": "REPEAT_FAILURE_PREVIEW_URL", "value": url}


# -- pods left unchanged --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["not-annotated", "inject-false", "already-injected-status",
                                  "already-injected-container"])
def test_left_alone_without_a_word(name: str) -> None:
    """Not annotated, inject "false", already injected (the status annotation, or a container
    named repeat-failure): allowed, no patch, no warning."""
    response, ops, _ = run(load(name), config())
    assert ops is None and "warnings" not in response
    assert response == {"uid": load(name)["request"]["uid"], "allowed": True}


def test_check_off_adds_nothing() -> None:
    """Off means off: with enabled: false in the injector config an annotated pod gets nothing,
    not even a warning for an invalid name."""
    for name in ("deployment-one-container", "pod-several-containers", "invalid-agent",
                 "preview-url", "invalid-preview-url"):
        response, ops, _ = run(load(name), config(enabled=False))
        assert ops is None and "warnings" not in response


@pytest.mark.parametrize("name, warning", [
    ("invalid-agent", "repeat-failure: agent name 'Claude Agent' is not a lowercase "
                      "DNS-1123-style label (a-z, 0-9, '-', '.', '_'; at most 63); not injected"),
    ("unknown-backend", "repeat-failure: unknown backend 'gpt-shell' (`repeat-failure coverage` "
                        "lists them); not injected"),
    # "localhost:5173" (the scheme forgotten) parses as the scheme "localhost".
    ("invalid-preview-url", "repeat-failure: the preview-url annotation: preview URL must be "
                            "http:// or https:// (scheme 'localhost'); not injected"),
])
def test_invalid_names_leave_the_pod_unchanged_with_a_warning(name: str, warning: str) -> None:
    """An invalid agent, an unknown backend or a preview URL the sidecar would refuse (it would
    exit 2 at start, again and again): allowed unchanged, one warning, never rejected."""
    response, ops, _ = run(load(name), config())
    assert ops is None and response["warnings"] == [warning]


@NATIVE
@pytest.mark.parametrize("name", ["deployment-one-container", "pod-several-containers",
                                  "containers-annotation", "job-bash-env-literal",
                                  "bash-env-value-from", "home-not-covered", "root-agent",
                                  "preview-url"])
def test_injecting_twice_adds_nothing(name: str, native: bool) -> None:
    """Idempotency: the patched pod sent again gets no patch (its status annotation), and so does
    one that lost the annotation but carries the repeat-failure container."""
    review = load(name)
    _, _, pod = run(review, config(native))
    again = copy.deepcopy(review)
    again["request"]["object"] = pod
    assert run(again, config(native))[1] is None
    del again["request"]["object"]["metadata"]["annotations"]["repeat-failure.hive.dev/status"]
    assert run(again, config(native))[1] is None


def test_agent_name_with_a_trailing_newline_is_invalid() -> None:
    """`$` matches before a trailing newline: "abc\\n" would be injected and break the hook in
    every shell. It is refused like any other invalid name: unchanged, one warning."""
    response, ops, _ = run(variant(annotate(agent="abc\n")),
                           config())
    assert ops is None and response["warnings"] == [
        "repeat-failure: agent name 'abc\\n' is not a lowercase DNS-1123-style label (a-z, 0-9, "
        "'-', '.', '_'; at most 63); not injected"]


def test_more_than_128_containers_is_left_unchanged() -> None:
    """The patch grows with each agent container: a pod of 129 containers and init containers
    gets a warning and no patch (a 2 MiB review of `{}` containers once built gigabytes); 128
    is injected."""
    def containers(n: int, init: int = 0):
        def edit(pod: dict) -> None:
            first = pod["spec"]["containers"][0]
            pod["spec"]["containers"] = [first] + [{"name": f"c{i}", "image": "x"}
                                                   for i in range(n - 1)]
            pod["spec"]["initContainers"] = [{"name": f"i{i}", "image": "x"}
                                             for i in range(init)]
        return edit
    response, ops, _ = run(variant(containers(100, 29)), config())
    assert ops is None and response["warnings"] == [
        "repeat-failure: the pod has 129 containers and init containers, more than 128; "
        "not injected"]
    assert decide(variant(containers(128))["request"], config()).outcome == "injected"
    hostile = variant(lambda pod: pod["spec"].update(containers=[{}] * 100_000))
    assert decide(hostile["request"], config()).outcome == "invalid"


def test_error_messages_quote_strings_only() -> None:
    """An error quotes at most 64 characters of a string, and only names the type of another
    value (str() of a deeply nested one raised RecursionError)."""
    nested: list = []
    for _ in range(5000):
        nested = [nested]
    for kind, got in (("x" * 100, repr("x" * 64)), (nested, "a JSON array"),
                      ({"a": 1}, "a JSON object"), (None, "null"), (3, "a JSON number")):
        with pytest.raises(AdmissionError) as info:
            admission_response({"kind": kind}, config())
        assert str(info.value) == f"expected kind AdmissionReview, got {got}"


def test_native_sidecar_field_is_versioned_in_the_schema() -> None:
    """The schema check does see restartPolicy: Kubernetes 1.27's Pod schema rejects it on an
    init container (1.28 has it as alpha, off by default; the contract emits it from 1.29)."""
    _, _, pod = run(load("deployment-one-container"), config(native=True))
    with pytest.raises(kubernetes_validate.ValidationError, match="restartPolicy"):
        kubernetes_validate.validate(pod, "1.27", strict=True)
    validate(pod, native=True)


# -- rules in detail (pure function) --------------------------------------------------------------


def variant(edit) -> dict:
    review = load("deployment-one-container")
    edit(review["request"]["object"])
    return review


def annotate(**pairs: str):
    def edit(pod: dict) -> None:
        pod["metadata"]["annotations"].update(
            {f"repeat-failure.hive.dev/{k.replace('_', '-')}": v for k, v in pairs.items()})
    return edit


def test_json_pointer_escaping() -> None:
    """RFC 6901: '~' → '~0' and '/' → '~1' in each reference token, and jsonpatch reads the key
    back exactly."""
    assert pointer("metadata", "annotations", "a/b~c") == "/metadata/annotations/a~1b~0c"
    assert pointer("spec", "containers", 3, "env", "-") == "/spec/containers/3/env/-"
    doc = jsonpatch.apply_patch({"m": {}}, [{"op": "add", "path": pointer("m", "x~/y~1"),
                                             "value": 1}])
    assert doc == {"m": {"x~/y~1": 1}}


@pytest.mark.parametrize("edit", [
    lambda r: r.update(operation="UPDATE"),
    lambda r: r.update(kind={"group": "apps", "version": "v1", "kind": "Deployment"}),
    lambda r: r.update(subResource="ephemeralcontainers"),
    lambda r: r.update(object=None),
], ids=["update", "deployment", "subresource", "no-object"])
def test_only_pod_creations_are_considered(edit) -> None:
    """An UPDATE, another kind, a subresource or a request without an object: no patch."""
    review = load("deployment-one-container")
    edit(review["request"])
    response, ops, _ = run(review, config())
    assert ops is None and "warnings" not in response


@pytest.mark.parametrize("review, message", [
    ([], "expected a JSON object"),
    ({"apiVersion": "v1", "kind": "Pod"}, "expected kind AdmissionReview"),
    ({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview",
      "request": {"uid": "x"}}, "admissionReviewVersions"),
    ({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}, "no request"),
    ({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}, "no uid"),
])
def test_not_an_admission_review_is_an_error(review, message: str) -> None:
    with pytest.raises(AdmissionError, match=message):
        admission_response(review, config())


def test_containers_annotation_naming_no_container_is_refused() -> None:
    for value, text in (("agent,sidecar-x", "no container of this pod: sidecar-x"),
                        (" , ", "names no container")):
        response, ops, _ = run(variant(annotate(containers=value)), config())
        assert ops is None and text in response["warnings"][0]


@pytest.mark.parametrize("edit, text", [
    (lambda p: p["spec"]["volumes"].append({"name": "repeat-failure-shared", "emptyDir": {}}),
     "repeat-failure-shared"),
    (lambda p: p["spec"]["containers"][0]["volumeMounts"].append(
        {"name": "home", "mountPath": "/var/run/repeat-failure/"}),
     "agent: mountPath /var/run/repeat-failure"),
    (lambda p: p["spec"]["containers"][0].setdefault("ports", []).append(
        {"containerPort": 9466, "protocol": "TCP"}), "agent: port 9466"),
], ids=["volume-name", "mount-path", "port"])
def test_collisions_leave_the_pod_unchanged(edit, text: str) -> None:
    """What the API server would reject (a duplicate volume name or mountPath) or what would
    crash the sidecar (port 9466 taken): unchanged, with a warning naming it."""
    response, ops, _ = run(variant(edit), config())
    assert ops is None and text in response["warnings"][0]


@pytest.mark.parametrize("value", ["etc/bashrc", "/etc/my bashrc", "$(HOME)/.bashenv",
                                   "/etc/x.sh\n"])
def test_unchainable_literal_bash_env_is_left_alone(value: str) -> None:
    """A relative path, a path the hook renderer refuses, or one with $(VAR) (expanded in the
    agent's container only): that container is not hooked, and the warning says so."""
    def edit(pod: dict) -> None:
        pod["spec"]["containers"][0]["env"].append({"name": "BASH_ENV", "value": value})
    review = variant(edit)
    response, ops, pod = run(review, config())
    assert response["warnings"] == [
        "repeat-failure: container agent: BASH_ENV " + (
            "comes from valueFrom or refers to $(VAR)" if "$(" in value else
            "is not an absolute path of letters, digits and ._/@+-") + "; left as it is "
        "(not hooked)"]
    assert pod["spec"]["containers"][0] == review["request"]["object"]["spec"]["containers"][0]
    assert not any(op["path"].startswith("/spec/containers/0/") for op in ops)


def test_chain_path_rule_matches_the_hook_renderer() -> None:
    """Every BASH_ENV the injector chains, the sidecar's hook renderer accepts, and the ones it
    refuses, the renderer refuses too."""
    for value in ("/etc/agent/bash_env.sh", "/opt/x-y/.env@1+2"):
        assert CHAIN_PATH_RE.match(value)
        hook.render_text("/var/run/repeat-failure", "a1", "bash", value)
    for value in ("etc/bashrc", "/etc/my bashrc", "/a;b", "/a$b", "/etc/x.sh\n"):
        assert not CHAIN_PATH_RE.match(value)
        with pytest.raises(hook.HookError):
            hook.render_text("/var/run/repeat-failure", "a1", "bash", value)


def test_two_different_literal_bash_envs() -> None:
    """The sidecar chains one BASH_ENV: a second agent container with a different one is left
    as it is (warned); the same one in both is chained once."""
    review = load("pod-several-containers")
    containers = review["request"]["object"]["spec"]["containers"]
    containers[0]["env"].append({"name": "BASH_ENV", "value": "/etc/a.sh"})
    containers[1]["env"] = [{"name": "BASH_ENV", "value": "/etc/b.sh"}]
    response, ops, pod = run(review, config())
    assert response["warnings"] == ["repeat-failure: container tools: BASH_ENV differs from "
                                    "another agent container's; left as it is (not hooked)"]
    assert pod["spec"]["containers"][1] == containers[1]
    assert {"name": "REPEAT_FAILURE_CHAIN_BASH_ENV", "value": "/etc/a.sh"} in \
        pod["spec"]["initContainers"][0]["env"]
    containers[1]["env"] = [{"name": "BASH_ENV", "value": "/etc/a.sh"}]
    response, ops, pod = run(review, config())
    assert "warnings" not in response
    assert pod["spec"]["containers"][1]["env"][0]["value"] == "/var/run/repeat-failure/hook/pair.sh"


@pytest.mark.parametrize("url, secret", [
    ("ftp://127.0.0.1:5173/", None),
    ("http://dev:hunter2@127.0.0.1:5173/", "hunter2"),       # credentials: never echoed
    ("http://127.0.0.1:5173/#/login?token=s3cr3t", "s3cr3t"),  # a fragment is never sent
    ("http:///index.html", None),                             # no host
    ("http://127.0.0.1:99999/", None),                        # bad port
    ("http://127.0.0.1:5173/ ", None),                        # whitespace
    ("", None),                                               # present but empty
], ids=["ftp", "userinfo", "fragment", "no-host", "bad-port", "whitespace", "empty"])
def test_invalid_preview_url_leaves_the_pod_unchanged(url: str, secret: str | None) -> None:
    """Every preview URL repeat_failure.config.check_preview_url refuses leaves the pod unchanged with
    one warning giving the check's reason, the same reason the sidecar would exit 2 with, and
    never the URL's credentials or fragment; the decision still names agent and backend (the
    injector's log line)."""
    from repeat_failure.config import check_preview_url

    with pytest.raises(ConfigError) as refused:
        check_preview_url(url, "the preview-url annotation")
    review = variant(annotate(preview_url=url))
    response, ops, _ = run(review, config())
    assert ops is None
    assert response["warnings"] == [f"repeat-failure: {refused.value}; not injected"]
    assert response["warnings"][0].startswith("repeat-failure: the preview-url annotation: ")
    if secret is not None:
        assert secret not in response["warnings"][0]
    decision = decide(review["request"], config())
    assert (decision.outcome, decision.agent, decision.backend) == (
        "invalid", "claude-agent", "claude")


def test_preview_url_warning_is_bounded() -> None:
    """A long bad scheme (what the check quotes of a URL) is cut: the warning stays short."""
    response, ops, _ = run(variant(annotate(preview_url="x" * 5000 + "://a/")), config())
    assert ops is None
    (warning,) = response["warnings"]
    assert warning.endswith("; not injected") and len(warning) < 260


def test_agent_home_annotation_must_be_absolute() -> None:
    response, ops, pod = run(variant(annotate(agent_home="home/agent")), config())
    assert response["warnings"] == ["repeat-failure: the agent-home annotation must be an "
                                    "absolute path; session logs not read"]
    assert pod["metadata"]["annotations"]["repeat-failure.hive.dev/session-logs"] == \
        "agent home unknown"


def test_deepest_covering_mount_wins_and_subpath_expr_is_skipped() -> None:
    def edit(pod: dict) -> None:
        c = pod["spec"]["containers"][0]
        c["env"][0]["value"] = "/data/homes/agent/x"
        c["volumeMounts"] = [{"name": "a", "mountPath": "/data"},
                             {"name": "b", "mountPath": "/data/homes", "subPath": "s"},
                             {"name": "c", "mountPath": "/data/homes/agent",
                              "subPathExpr": "$(POD_NAME)"}]
    decision = decide(variant(edit)["request"], config())
    sidecar = next(op["value"] for op in decision.patch if op["path"] == "/spec/initContainers")[0]
    assert sidecar["volumeMounts"][-1] == {"name": "b", "mountPath": "/var/run/repeat-failure-home",
                                           "readOnly": True, "subPath": "s/agent/x"}


def test_session_log_route_without_home_warns() -> None:
    """omp is recorded from its session log only: without the home in the sidecar nothing is
    recorded, and the response says so (the pod is still injected)."""
    def edit(pod: dict) -> None:
        annotate(backend="omp")(pod)
        pod["spec"]["containers"][0]["env"][0]["value"] = "/root"
    response, ops, _ = run(variant(edit), config())
    assert ops and response["warnings"] == [
        "repeat-failure: backend omp is recorded from its session log in the agent home, which "
        "the sidecar cannot see: nothing is recorded"]


def test_agent_defaults_and_name_rule() -> None:
    """agent: the annotation, else the label repeat-failure.hive.dev/agent, else
    app.kubernetes.io/name, else "agent"; backend: annotation, else label, else bash. Every name
    the injector accepts, the sidecar accepts too."""
    def names(edit) -> tuple[str, str]:
        d = decide(variant(edit)["request"], config())
        return d.agent, d.backend

    def labels(pod, **kv):
        pod["metadata"]["labels"].update(kv)

    def drop(pod):
        pod["metadata"]["labels"] = {}
        pod["metadata"]["annotations"].pop("repeat-failure.hive.dev/backend")

    assert names(lambda p: None) == ("claude-agent", "claude")
    assert names(lambda p: labels(p, **{"repeat-failure.hive.dev/agent": "a2",
                                        "repeat-failure.hive.dev/backend": "codex"})) == \
        ("a2", "claude")
    assert names(drop) == ("agent", "bash")
    for ok in ("a", "agent-1", "x.y_z", "9" * 63):
        assert AGENT_RE.match(ok) and AGENT_NAME_RE.match(ok)
    for bad in ("", "-a", ".a", "A", "a b", "a/b", "9" * 64, "é", "abc\n"):
        assert not AGENT_RE.match(bad)


def test_injected_sidecar_env_and_args_parse_as_the_cli_expects(monkeypatch) -> None:
    """The container the injector writes is a valid `repeat-failure run` invocation: its args
    and REPEAT_FAILURE_* env give the CLI exactly the flags the contract means."""
    args = _injected_cli_args(monkeypatch, "job-bash-env-literal")
    assert (args.command, args.config, args.config_optional, args.shared_dir, args.agent,
            args.backend, args.listen, args.chain_bash_env, args.agent_home,
            args.preview_url) == (
        "run", "/etc/repeat-failure/config.yaml", True, "/var/run/repeat-failure", "gemini-run",
        "gemini", "0.0.0.0:9466", "/etc/agent/bash_env.sh", "/var/run/repeat-failure-home", None)


def _injected_cli_args(monkeypatch, fixture: str):
    """The `repeat-failure` arguments the injected sidecar of the admission fixture ``fixture``
    runs with: its args parsed with its literal env values set (and no other
    REPEAT_FAILURE_* variable)."""
    from repeat_failure.cli import build_parser

    _, _, pod = run(load(fixture), config())
    sidecar = pod["spec"]["initContainers"][0]
    for key in [k for k in os.environ if k.startswith("REPEAT_FAILURE_")]:
        monkeypatch.delenv(key)
    for entry in sidecar["env"]:
        if "value" in entry:
            monkeypatch.setenv(entry["name"], entry["value"])
    return build_parser().parse_args(sidecar["args"])


def test_injected_preview_url_env_is_the_clis_preview_url(monkeypatch) -> None:
    """REPEAT_FAILURE_PREVIEW_URL as injected is `run --preview-url` for the CLI, and passes the
    sidecar's own check (tests/test_cli_inject.py starts the real process with it)."""
    from repeat_failure.config import check_preview_url

    args = _injected_cli_args(monkeypatch, "preview-url")
    assert (args.agent, args.backend, args.agent_home, args.preview_url) == (
        "web-agent", "claude", "/var/run/repeat-failure-home", "http://127.0.0.1:5173/")
    check_preview_url(args.preview_url)


# -- the injector config --------------------------------------------------------------------------


def test_docs_example_config_is_valid_and_the_defaults() -> None:
    """The YAML block in docs/kubernetes.md parses, and equals the built-in defaults."""
    text = DOCS.read_text()
    block = re.search(r"## The injector's config.*?```yaml\n(.*?)```", text, re.S).group(1)
    assert parse_injector_config(yaml.safe_load(block), "docs") == InjectorConfig()


@pytest.mark.parametrize("text, message", [
    ("enabled: true\nnativeSidecars: true\n", "injector.yaml: nativeSidecars: unknown key"),
    ("enabled: 'yes please'\n", "injector.yaml: enabled: 'yes please' is not of type 'boolean'"),
    ("runAsUser: '1000'\n", "injector.yaml: runAsUser: '1000' is not of type 'integer'"),
    ("runAsUser: 0\n", "injector.yaml: runAsUser: 0 is less than the minimum of 1"),
    ("runAsGroup: 10001.0\n", "injector.yaml: runAsGroup: must be a whole number"),
    ("imagePullPolicy: Sometimes\n", "injector.yaml: imagePullPolicy: 'Sometimes' is not one of"),
    ("configMap: Bad_Name\n", "injector.yaml: configMap: 'Bad_Name' does not match"),
    ("resources: {requests: {cpu: lots}}\n", "injector.yaml: resources.requests.cpu: 'lots' "
                                              "is not a Kubernetes quantity (e.g. 100m, 64Mi)"),
    ("resources: {request: {cpu: 1}}\n", "injector.yaml: resources.request: unknown key"),
    ("- enabled\n", "injector.yaml: (top level): ['enabled'] is not of type 'object'"),
    ("enabled: [\n", "injector.yaml: not valid YAML at line 2"),
])
def test_config_errors_name_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "injector.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_injector_config(path)
    assert str(info.value).startswith(str(tmp_path / message.split(": ", 1)[0])), str(info.value)
    assert message.split(": ", 1)[1] in str(info.value)


def test_config_quantities_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "injector.yaml"
    path.write_text("resources: {requests: {cpu: 1, memory: 64Mi}, limits: {cpu: 0.5}}\n")
    assert load_injector_config(path).resources == {"requests": {"cpu": "1", "memory": "64Mi"},
                                                    "limits": {"cpu": "0.5"}}
    with pytest.raises(ConfigError, match="cannot read injector config"):
        load_injector_config(tmp_path / "absent.yaml")
    path.write_text("")
    assert load_injector_config(path) == InjectorConfig()
    with pytest.raises(ConfigError, match="empty"):
        load_injector_config(path, allow_empty=False)


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def capture_logs() -> io.StringIO:
    stream = io.StringIO()
    configure_logging(stream)
    return stream


def test_config_source_reloads_on_change_and_keeps_last_good(tmp_path: Path) -> None:
    """Re-read when the file changes (checked at most once per interval); a bad edit is logged
    once and the last good config stays; a good edit then applies; on → off takes effect."""
    path = tmp_path / "injector.yaml"
    path.write_text("enabled: true\n")
    clock = Clock()
    source = ConfigSource(path, check_interval_s=1.0, monotonic=clock)
    logs = capture_logs()
    assert source.current().enabled is True
    path.write_text("enabled: false\n")
    assert source.current().enabled is True  # not checked again within the interval
    clock.t += 1.0
    assert source.current().enabled is False
    path.write_text("enabled: true\nimage: [x]\n")
    for _ in range(3):
        clock.t += 1.0
        assert source.current() == InjectorConfig(enabled=False)
    refused = [json.loads(line) for line in logs.getvalue().splitlines()
               if "refused" in line]
    assert len(refused) == 1 and "image" in refused[0]["error"]
    os.replace(tmp_path / "injector.yaml", tmp_path / "old.yaml")  # deleted: kept, logged once
    clock.t += 1.0
    assert source.current().enabled is False
    path.write_text("enabled: true\nnativeSidecar: false\n")
    clock.t += 1.0
    assert source.current() == InjectorConfig(enabled=True, native_sidecar=False)
    with pytest.raises(ConfigError):
        ConfigSource(tmp_path / "absent.yaml")


# -- HTTPS ----------------------------------------------------------------------------------------


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


class PKI:
    """A throwaway CA and server certificates for 127.0.0.1 (EC P-256)."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.ca_key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        ski = x509.SubjectKeyIdentifier.from_public_key(self.ca_key.public_key())
        self.ca = (x509.CertificateBuilder().subject_name(_name("repeat-failure test CA"))
                   .issuer_name(_name("repeat-failure test CA"))
                   .public_key(self.ca_key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                   .add_extension(x509.KeyUsage(False, False, False, False, False, True, True,
                                                False, False), critical=True)
                   .add_extension(ski, critical=False)
                   .sign(self.ca_key, hashes.SHA256()))
        self.ca_file = directory / "ca.crt"
        self.ca_file.write_bytes(self.ca.public_bytes(serialization.Encoding.PEM))
        self.cert_file = directory / "tls.crt"
        self.key_file = directory / "tls.key"

    def issue(self, cn: str = "injector") -> bytes:
        """Write a new server certificate and key (atomically, each by a rename); return the
        certificate's DER."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(self.ca.subject)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(hours=1))
                .add_extension(x509.SubjectAlternativeName(
                    [x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                     x509.DNSName("localhost")]), critical=False)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                               critical=False)
                .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                    self.ca_key.public_key()), critical=False)
                .sign(self.ca_key, hashes.SHA256()))
        for path, data in ((self.key_file, key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption())),
                (self.cert_file, cert.public_bytes(serialization.Encoding.PEM))):
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        return cert.public_bytes(serialization.Encoding.DER)

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))


@pytest.fixture
def served(tmp_path: Path):
    """An InjectorServer on 127.0.0.1 (free port) with the check on; yields a namespace with
    the server, the PKI, the config path and a request helper."""
    pki = PKI(tmp_path)
    first_der = pki.issue()
    cfg_path = tmp_path / "injector.yaml"
    cfg_path.write_text(CONFIG_YAML.format(native="true"))
    server = InjectorServer("127.0.0.1:0", ConfigSource(cfg_path, check_interval_s=0),
                            TLSFiles(pki.cert_file, pki.key_file, check_interval_s=0)).start()

    def request(method: str, path: str, body: bytes | None = None,
                headers: dict | None = None) -> tuple[int, bytes, bytes]:
        conn = http.client.HTTPSConnection("127.0.0.1", server.port,
                                           context=pki.client_context(), timeout=10)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            peer = conn.sock.getpeercert(binary_form=True)
            response = conn.getresponse()
            return response.status, response.read(), peer
        finally:
            conn.close()

    class Served:
        pass

    s = Served()
    s.server, s.pki, s.config_path, s.request, s.first_der = (server, pki, cfg_path, request,
                                                              first_der)
    server.pki = pki  # for tls_connect
    yield s
    server.stop()


JSON = {"Content-Type": "application/json"}


def test_https_valid_review_same_as_the_pure_function(served) -> None:
    """POST /mutate?timeout=5s (as the API server calls it) → 200 and exactly the pure
    function's response; one JSON log line for the injected pod with its namespace,
    generateName, agent and backend, and no env value."""
    logs = capture_logs()
    review = load("deployment-one-container")
    status, body, _ = served.request("POST", "/mutate?timeout=5s", json.dumps(review).encode(),
                                     JSON)
    assert status == 200
    assert json.loads(body) == admission_response(review, config(native=True))
    lines = [json.loads(line) for line in logs.getvalue().splitlines()]
    injected = [line for line in lines if line.get("event") == "pod_injected"]
    assert len(injected) == 1
    assert {k: injected[0][k] for k in ("namespace", "generate_name", "pod", "agent",
                                        "backend")} == {
        "namespace": "agents", "generate_name": "claude-agent-6b8f9c7d4-", "pod": None,
        "agent": "claude-agent", "backend": "claude"}
    assert "litellm" not in logs.getvalue() and "/home/agent" not in logs.getvalue()


@pytest.mark.parametrize("headers, status, error", [
    ({"Content-Length": "1, 2"}, 400, "bad Content-Length: differing values"),
    ({"Content-Length": "+1"}, 400, "bad Content-Length"),
    ({"Transfer-Encoding": "chunked", "Content-Length": "0"}, 400,
     "bad framing: Transfer-Encoding with Content-Length"),
    ({"Transfer-Encoding": "chunked"}, 411, "send the body with a Content-Length"),
])
def test_https_framing_is_checked_on_get_healthz(served, headers, status, error) -> None:
    """RFC 9112 section 6.3 on the injector's own GET /healthz (its handler reads no body): a
    bad or conflicting Content-Length, or Transfer-Encoding, is an error with the layer's JSON
    body, not the 200 it was."""
    got, body, _ = served.request("GET", "/healthz", headers=headers)
    assert (got, json.loads(body)) == (status, {"error": error, "status": status})


def test_https_errors(served) -> None:
    """Bad JSON → 400, JSON that is not an AdmissionReview → 400, another Content-Type → 415,
    an unknown path → 404, GET /healthz → ok."""
    status, body, _ = served.request("POST", "/mutate", b"{not json", JSON)
    assert status == 400 and body.startswith(b"request body is not JSON")
    status, body, _ = served.request("POST", "/mutate", b'{"kind": "Pod"}', JSON)
    assert status == 400 and b"not an AdmissionReview: expected kind AdmissionReview" in body
    status, _, _ = served.request("POST", "/mutate", b"{}", {"Content-Type": "text/plain"})
    assert status == 415
    assert served.request("GET", "/metrics")[0] == 404
    assert served.request("GET", "/healthz")[:2] == (200, b"ok\n")


def test_https_oversize_body_is_413_unread(served) -> None:
    """A Content-Length over 4 MiB is answered 413 before the body is read."""
    raw = socket.create_connection(("127.0.0.1", served.server.port), timeout=10)
    with served.pki.client_context().wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        tls.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n{" % (5 << 20))
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = tls.recv(4096)
            if not chunk:
                break
            data += chunk
    assert data.startswith(b"HTTP/1.1 413 ")


def test_https_keep_alive_serves_several_reviews(served) -> None:
    """The API server reuses connections: two reviews on one connection both answer 200."""
    conn = http.client.HTTPSConnection("127.0.0.1", served.server.port,
                                       context=served.pki.client_context(), timeout=10)
    try:
        for name in ("deployment-one-container", "not-annotated"):
            conn.request("POST", "/mutate", json.dumps(load(name)).encode(), JSON)
            response = conn.getresponse()
            assert response.status == 200
            assert json.loads(response.read())["response"]["uid"] == load(name)["request"]["uid"]
    finally:
        conn.close()


def test_https_config_change_applies_to_the_next_review(served) -> None:
    """Off means off: after the injector config turns the check off, the next review gets no
    patch."""
    served.config_path.write_text(CONFIG_YAML.format(native="true")
                                  .replace("enabled: true", "enabled: false"))
    status, body, _ = served.request("POST", "/mutate", json.dumps(
        load("deployment-one-container")).encode(), JSON)
    assert status == 200 and "patch" not in json.loads(body)["response"]


def test_https_rotated_certificate_is_served(served) -> None:
    """cert-manager renews the certificate into the same files: new connections get it."""
    assert served.request("GET", "/healthz")[2] == served.first_der
    second = served.pki.issue("injector-renewed")
    assert second != served.first_der
    status, body, peer = served.request("GET", "/healthz")
    assert (status, body, peer) == (200, b"ok\n", second)


def test_tls_files_reload_rules(tmp_path: Path) -> None:
    """Checked at most once per interval; a pair that does not load (a key that does not match
    the certificate, as mid-rotation) keeps the previous context, logged once; TLS >= 1.2."""
    pki = PKI(tmp_path)
    pki.issue()
    clock = Clock()
    tls = TLSFiles(pki.cert_file, pki.key_file, check_interval_s=5.0, monotonic=clock)
    first = tls.context()
    assert first.minimum_version == ssl.TLSVersion.TLSv1_2
    old_key = pki.key_file.read_bytes()
    pki.issue()
    clock.t += 1.0
    assert tls.context() is first
    clock.t += 5.0
    second = tls.context()
    assert second is not first
    logs = capture_logs()
    pki.key_file.write_bytes(old_key)  # mismatched pair
    for _ in range(3):
        clock.t += 5.0
        assert tls.context() is second
    assert logs.getvalue().count("tls_reload_failed") == 1
    pki.issue()
    clock.t += 5.0
    assert tls.context() is not second


def test_tls_1_2_client_is_served_and_plain_http_is_not(served) -> None:
    ctx = served.pki.client_context()
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    raw = socket.create_connection(("127.0.0.1", served.server.port), timeout=10)
    with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        assert tls.version() == "TLSv1.2"
    with socket.create_connection(("127.0.0.1", served.server.port), timeout=10) as plain:
        plain.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert b"ok" not in plain.recv(4096)
    assert served.request("GET", "/healthz")[0] == 200  # the server still serves


def test_many_concurrent_reviews(served) -> None:
    """Concurrent admissions (a Deployment scaled up) are answered independently."""
    results: list[int] = []

    def one(i: int) -> None:
        review = load("deployment-one-container")
        review["request"]["uid"] = f"uid-{i}"
        status, body, _ = served.request("POST", "/mutate", json.dumps(review).encode(), JSON)
        results.append(status if json.loads(body)["response"]["uid"] == f"uid-{i}" else -1)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert results == [200] * 16


# -- limits against hostile clients ---------------------------------------------------------------


@pytest.fixture
def serve(tmp_path: Path):
    """A factory for InjectorServers on 127.0.0.1 with limits tuned for a test (keyword arguments
    of InjectorServer); each is stopped at the end."""
    pki = PKI(tmp_path)
    pki.issue()
    cfg_path = tmp_path / "injector.yaml"
    cfg_path.write_text(CONFIG_YAML.format(native="true"))
    servers = []

    def make(**limits) -> InjectorServer:
        server = InjectorServer("127.0.0.1:0", ConfigSource(cfg_path, check_interval_s=0),
                                TLSFiles(pki.cert_file, pki.key_file), **limits).start()
        server.pki = pki
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


def tls_connect(server: InjectorServer, timeout: float = 10) -> ssl.SSLSocket:
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=timeout)
    return server.pki.client_context().wrap_socket(raw, server_hostname="127.0.0.1")


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a reset counts as closed)."""
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionError, ssl.SSLError):
            return data
        if not chunk:
            return data
        data += chunk


def head(length: int, extra: bytes = b"") -> bytes:
    return (b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n%s\r\n" % (length, extra))


def wait_for(predicate, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_body_limit_is_2_mib_and_a_body_at_it_is_read(served) -> None:
    """2 MiB (a Pod CREATE review holds one object, etcd's limit is 1.5 MiB): one byte more is
    413 unread; a body of exactly 2 MiB is read and parsed (not an AdmissionReview: 400)."""
    assert MAX_BODY_BYTES == 2 * 1024 * 1024
    with tls_connect(served.server) as tls:
        tls.sendall(head(MAX_BODY_BYTES + 1) + b"{")
        assert read_until_closed(tls).startswith(b"HTTP/1.1 413 ")
    body = b"[" + b"0," * ((MAX_BODY_BYTES - 4) // 2) + b"0 ]"
    assert len(body) == MAX_BODY_BYTES
    status, answer, _ = served.request("POST", "/mutate", body, JSON)
    assert (status, answer) == (400, b"not an AdmissionReview: expected a JSON object: an "
                                     b"admission.k8s.io/v1 AdmissionReview\n")


def test_deeply_nested_json_is_400(served) -> None:
    """100000 nested arrays raise RecursionError in the JSON parser: a 400 saying so, and the
    server goes on serving."""
    status, body, _ = served.request("POST", "/mutate", b"[" * 100000 + b"]" * 100000, JSON)
    assert (status, body) == (400, b"request body is not JSON: nested too deeply\n")
    assert served.request("GET", "/healthz")[:2] == (200, b"ok\n")


def test_a_deep_value_the_parser_accepts_is_answered(served) -> None:
    """Issue 17: a review carrying a value nested 900 levels deep (an annotation, a container
    field, an env entry's valueFrom) parses, and the decision never walks it: answered 200 like
    the review without it, no RecursionError, no 500."""
    deep: object = "x"
    for _ in range(900):
        deep = [deep]
    for place in ("annotation", "container", "env"):
        review = load("preview-url")
        plain = served.request("POST", "/mutate", json.dumps(review).encode(), JSON)
        pod = review["request"]["object"]
        if place == "annotation":
            pod["metadata"]["annotations"]["zz"] = deep
        elif place == "container":
            pod["spec"]["containers"][0]["zz"] = deep
        else:
            pod["spec"]["containers"][0].setdefault("env", []).append(
                {"name": "OTHER", "valueFrom": deep})
        status, body, _ = served.request("POST", "/mutate", json.dumps(review).encode(), JSON)
        assert status == 200, place
        assert json.loads(body)["response"]["uid"] == json.loads(plain[1])["response"]["uid"]
        assert json.loads(body)["response"]["allowed"] is True


def test_busy_parse_slots_answer_503_with_retry_after(serve) -> None:
    """With every parse slot taken, a review whose body has arrived waits busy_wait_s and gets
    503 with Retry-After: 1 and the connection closed; once the slot frees, reviews are
    answered again."""
    server = serve(max_parsing=1, busy_wait_s=0.3)
    review = json.dumps(load("not-annotated")).encode()
    logs = capture_logs()
    server.parsing.acquire()  # a parse in progress
    try:
        with tls_connect(server) as other:
            started = time.monotonic()
            other.sendall(head(len(review)) + review)
            answer = read_until_closed(other)
            assert time.monotonic() - started >= 0.25
    finally:
        server.parsing.release()
    assert answer.startswith(b"HTTP/1.1 503 ")
    assert b"\r\nRetry-After: 1\r\n" in answer and b"\r\nConnection: close\r\n" in answer
    assert answer.endswith(b"\r\n\r\nbusy: too many admission reviews at once; retry\n")
    lines = [json.loads(line) for line in logs.getvalue().splitlines()]
    assert [(line["event"], line["count"]) for line in lines
            if line.get("event") == "reviews_busy"] == [("reviews_busy", 1)]
    with tls_connect(server) as again:
        again.sendall(head(len(review)) + review)
        assert again.recv(65536).startswith(b"HTTP/1.1 200 ")
    assert 'outcome="error",reason="busy"} 1.0' in server.metrics.scrape().decode()


def test_slow_clients_hold_no_parse_slot(serve) -> None:
    """Issue 28: three clients trickling their bodies (the default 2 parse slots, and one more)
    held every slot, so the API server's review got 503 and its pod went uninjected. A body is
    now read before it takes a slot: the review is answered 200 while they trickle, and theirs
    are answered too once complete."""
    server = serve(busy_wait_s=0.3)
    review = json.dumps(load("deployment-one-container")).encode()
    slow = [tls_connect(server) for _ in range(3)]
    for sock in slow:
        sock.sendall(head(len(review)) + review[:100])
    time.sleep(0.3)
    with tls_connect(server) as tls:  # before: 503 after busy_wait_s, slots all held
        tls.sendall(head(len(review)) + review)
        answer = tls.recv(65536)
    assert answer.startswith(b"HTTP/1.1 200 ")
    for sock in slow:
        sock.sendall(review[100:])
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
        sock.close()


def test_large_slow_bodies_are_bounded_per_client(serve) -> None:
    """Bodies over small_body draw on the body budget, of which one client holds at most
    max_client_buffered bytes: a client holding its share gets 503 for one more large body
    (after busy_wait_s), while a small review from it, and a large one from another address,
    are answered."""
    server = serve(small_body=4000, max_buffered=30000, max_client_buffered=20000,
                   busy_wait_s=0.2)
    big = b'{"pad": "' + b"x" * 9980 + b'"}'  # 9991 bytes: not an AdmissionReview, 400
    held = [tls_connect(server) for _ in range(2)]
    for sock in held:
        sock.sendall(head(len(big)) + big[:10])
    wait_for(lambda: server.budget.used == 2 * len(big))
    with tls_connect(server) as tls:
        tls.sendall(head(len(big)) + big)
        answer = read_until_closed(tls)
    assert answer.startswith(b"HTTP/1.1 503 ")
    assert answer.endswith(b"busy: too many large admission reviews being read; retry\n")
    review = json.dumps(load("not-annotated")).encode()
    assert len(review) < 4000
    with tls_connect(server) as tls:
        tls.sendall(head(len(review)) + review)
        assert tls.recv(65536).startswith(b"HTTP/1.1 200 ")
    raw = socket.socket()
    raw.settimeout(10)
    raw.bind(("127.0.0.2", 0))  # another client address (all of 127/8 is loopback)
    raw.connect(("127.0.0.1", server.port))
    with server.pki.client_context().wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        tls.sendall(head(len(big)) + big)
        assert tls.recv(65536).startswith(b"HTTP/1.1 400 ")
    for sock in held:
        sock.sendall(big[10:])
        assert sock.recv(65536).startswith(b"HTTP/1.1 400 ")
        sock.close()
    wait_for(lambda: server.budget.used == 0)


def test_silent_handshakes_do_not_lock_the_cap(serve) -> None:
    """Issue 28: 64 connections that never send a TLS hello filled the cap until their
    handshake deadline. A new connection past the cap now evicts the oldest one still in its
    handshake: a real client is served at once."""
    server = serve(max_connections=4)
    logs = capture_logs()
    silent = [socket.create_connection(("127.0.0.1", server.port), timeout=10)
              for _ in range(4)]
    wait_for(lambda: server.connections == 4)
    with tls_connect(server) as tls:
        tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert tls.recv(4096).startswith(b"HTTP/1.1 200 ")
    assert read_until_closed(silent[0]) == b""  # the oldest was closed for it
    assert "connections_evicted" in logs.getvalue()
    assert "connections_refused" not in logs.getvalue()
    for sock in silent:
        sock.close()
    wait_for(lambda: server.connections == 0)


def test_one_client_holds_at_most_its_share(serve) -> None:
    """max_client_connections per client address: one more busy connection from a client at
    its share is refused, while another address is served."""
    server = serve(max_connections=8, max_client_connections=2)
    busy = [tls_connect(server) for _ in range(2)]
    for sock in busy:
        sock.sendall(b"POST /mutate HTTP/1.1\r\n")  # a request being read: not evictable
    wait_for(lambda: server.connections == 2)
    time.sleep(0.1)
    with pytest.raises((ConnectionError, ssl.SSLError)):
        tls_connect(server).recv(1)
    raw = socket.socket()
    raw.settimeout(10)
    raw.bind(("127.0.0.2", 0))
    raw.connect(("127.0.0.1", server.port))
    with server.pki.client_context().wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert tls.recv(4096).startswith(b"HTTP/1.1 200 ")
    for sock in busy:
        sock.close()


def test_connections_over_the_cap_are_closed_at_accept(serve) -> None:
    """max_connections served at once; when each is busy (a request being read), more are
    closed before their handshake, counted in one log line a minute at most; a freed place
    serves again."""
    server = serve(max_connections=3)
    logs = capture_logs()
    held = [tls_connect(server) for _ in range(3)]
    for sock in held:
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")
    wait_for(lambda: server.connections == 3)
    time.sleep(0.1)
    for _ in range(2):
        with pytest.raises((ConnectionError, ssl.SSLError)):
            tls_connect(server).recv(1)
    assert server.connections == 3
    refused = [json.loads(line) for line in logs.getvalue().splitlines()
               if "connections_refused" in line]
    assert [(r["count"], r["limit"]) for r in refused] == [(1, 3)]
    held.pop().close()
    wait_for(lambda: server.connections == 2)
    with tls_connect(server) as tls:
        tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert tls.recv(4096).startswith(b"HTTP/1.1 200 ")
    for sock in held:
        sock.close()


def test_a_trickled_request_is_cut_at_its_deadline(serve) -> None:
    """request_timeout_s counts from the first byte of the request line: a client sending a
    header byte every 0.2 s (each well within any per-recv timeout) is disconnected when it
    passes, and the cut is logged."""
    server = serve(request_timeout_s=1.0)
    logs = capture_logs()
    with tls_connect(server) as tls:
        started = time.monotonic()
        closed_after = None
        for byte in head(10) * 10:
            try:
                tls.sendall(bytes([byte]))
                time.sleep(0.2)
                if time.monotonic() - started > 1.3 and not tls.recv(1):
                    break
            except (ConnectionError, ssl.SSLError, OSError):
                break
        closed_after = time.monotonic() - started
    assert 1.0 <= closed_after < 3.0
    wait_for(lambda: "connections_timed_out" in logs.getvalue())
    line = next(json.loads(line) for line in logs.getvalue().splitlines()
                if "connections_timed_out" in line)
    assert (line["count"], line["phase"]) == (1, "request")


def test_a_trickled_body_is_cut_at_the_same_deadline(serve) -> None:
    """The deadline runs to the end of the body: a body trickled byte by byte is cut too, and
    its parse slot is freed."""
    server = serve(request_timeout_s=1.0, max_parsing=1, busy_wait_s=0.1)
    review = json.dumps(load("not-annotated")).encode()
    with tls_connect(server) as tls:
        started = time.monotonic()
        tls.sendall(head(len(review)))
        for byte in review:
            try:
                tls.sendall(bytes([byte]))
            except (ConnectionError, ssl.SSLError, OSError):
                break
            time.sleep(0.1)
            if time.monotonic() - started > 3:
                break
        assert read_until_closed(tls) == b""
        assert 1.0 <= time.monotonic() - started < 3.0
    with tls_connect(server) as tls:
        tls.sendall(head(len(review)) + review)
        assert tls.recv(65536).startswith(b"HTTP/1.1 200 ")


def test_idle_keep_alive_and_silent_handshake_are_closed(serve) -> None:
    """A kept-alive connection waiting over idle_timeout_s for its next request is closed; so is
    a TCP connection that never starts its TLS handshake (handshake_timeout_s)."""
    server = serve(idle_timeout_s=0.5, handshake_timeout_s=0.5)
    with tls_connect(server) as tls:
        tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = b""
        while not answer.endswith(b"ok\n"):
            answer += tls.recv(4096)
        assert answer.startswith(b"HTTP/1.1 200 ")
        started = time.monotonic()
        assert read_until_closed(tls) == b""
        assert 0.4 <= time.monotonic() - started < 2.5
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as plain:
        started = time.monotonic()
        assert read_until_closed(plain) == b""
        assert 0.4 <= time.monotonic() - started < 2.5
    wait_for(lambda: server.connections == 0)


def test_request_head_over_32_kib_is_431(served) -> None:
    """Request line and headers together are capped at 32 KiB (http.server alone would take
    100 headers of 64 KiB): 431; a long request line alone too."""
    with tls_connect(served.server) as tls:
        tls.sendall(head(2, b"".join(b"X-%d: %s\r\n" % (i, b"a" * 1000) for i in range(40))))
        assert read_until_closed(tls).startswith(b"HTTP/1.1 431 ")
    with tls_connect(served.server) as tls:
        tls.sendall(b"GET /" + b"a" * 40000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = read_until_closed(tls)
    assert answer.startswith(b"HTTP/1.1 431 ")
    assert b"request line and headers over 32768 bytes" in answer
    assert served.request("GET", "/healthz")[:2] == (200, b"ok\n")


def test_many_idle_connections_hold_at_most_their_share_of_threads(served) -> None:
    """200 idle TCP connections from one address: its share, 32, are held (one thread each),
    each new one evicting the oldest; a real client is still served."""
    before = threading.active_count()
    socks = [socket.create_connection(("127.0.0.1", served.server.port), timeout=10)
             for _ in range(200)]
    try:
        wait_for(lambda: served.server.connections == 32)
        time.sleep(0.3)
        assert served.server.connections == 32
        assert threading.active_count() - before <= 32 + 3  # + parse and deadline threads
        assert served.request("GET", "/healthz")[:2] == (200, b"ok\n")
    finally:
        for sock in socks:
            sock.close()
    wait_for(lambda: served.server.connections == 0)
    assert served.request("GET", "/healthz")[:2] == (200, b"ok\n")


# -- issue 28 items 2-4, issue 29 items 2-3: pods the injector cannot serve as it would --------


def test_windows_pod_is_allowed_unchanged_with_a_warning() -> None:
    """Issue 28: an annotated Windows pod got the sidecar, whose Linux-only securityContext the
    API server refuses for Windows pods, so the pod was rejected. It is allowed unchanged, with
    a warning."""
    def windows(pod: dict) -> None:
        pod["spec"]["os"] = {"name": "windows"}
    response, ops, pod = run(variant(windows), config())
    assert ops is None
    assert response["allowed"] is True
    assert response["warnings"] == [
        "repeat-failure: a Windows pod (spec.os.name: windows) cannot run the sidecar (its "
        "securityContext is Linux-only, the hook is bash); not injected"]
    assert decide(variant(windows)["request"], config()).outcome == "windows"
    def linux(pod: dict) -> None:
        pod["spec"]["os"] = {"name": "linux"}
    assert decide(variant(linux)["request"], config()).outcome == "injected"


def test_kube_system_is_never_injected() -> None:
    """Issue 29: kube-system is refused as an agent namespace, also by the injector itself."""
    review = load("deployment-one-container")
    review["request"]["namespace"] = "kube-system"
    response, ops, _ = run(review, config())
    assert ops is None
    assert response["warnings"] == [
        "repeat-failure: namespace kube-system is never an agent namespace; not injected"]
    assert decide(review["request"], config()).outcome == "system namespace"


@pytest.mark.parametrize("prefix, hooked", [
    (None, False), ("", False), ("BASH_", False), ("B", False),
    ("APP_", True), ("BASH_ENV", True), ("BASH_ENVX", True)])
def test_bash_env_that_may_come_from_env_from_is_not_replaced(prefix, hooked) -> None:
    """Issue 28: a BASH_ENV from envFrom (a ConfigMap or Secret: unknown at admission) was
    overridden by the injector's env entry and never chained. A container whose envFrom may
    define it (no prefix, or a prefix BASH_ENV starts with) is left as it is, with a warning
    saying how to have it hooked; a prefix that cannot make BASH_ENV changes nothing."""
    def env_from(pod: dict) -> None:
        source: dict = {"configMapRef": {"name": "agent-env"}}
        if prefix is not None:
            source["prefix"] = prefix
        pod["spec"]["containers"][0]["envFrom"] = [source, {"secretRef": {"name": "keys"},
                                                            "prefix": "APP_"}]
    review = variant(env_from)
    decision = decide(review["request"], config())
    assert decision.outcome == "injected"
    name = review["request"]["object"]["spec"]["containers"][0]["name"]
    if hooked:
        assert decision.hooked == (name,) and not decision.warnings
        return
    assert decision.hooked == ()
    assert decision.warnings == (
        f"repeat-failure: container {name}: BASH_ENV may come from envFrom (configMap "
        "agent-env), unknown at admission; left as it is (not hooked). Set BASH_ENV in env (an "
        "empty value if none) to have it hooked and chained",)
    assert not any(op["path"].startswith("/spec/containers/0/") for op in decision.patch)


def test_bash_env_in_env_wins_over_env_from_and_is_chained() -> None:
    """An env entry overrides envFrom (the kubelet's rule), so a literal BASH_ENV in env is
    known: chained as always, whatever envFrom holds."""
    def both(pod: dict) -> None:
        container = pod["spec"]["containers"][0]
        container["envFrom"] = [{"configMapRef": {"name": "agent-env"}}]
        container.setdefault("env", []).append({"name": "BASH_ENV", "value": "/etc/agent.sh"})
    decision = decide(variant(both)["request"], config())
    assert decision.outcome == "injected" and not decision.warnings
    added = next(op["value"] for op in decision.patch if op["path"].startswith(
        "/spec/initContainers"))
    sidecar = added[0] if isinstance(added, list) else added
    assert {"name": "REPEAT_FAILURE_CHAIN_BASH_ENV", "value": "/etc/agent.sh"} in sidecar["env"]


@NATIVE
def test_host_network_pod_binds_the_pod_ip_only_with_a_warning(native: bool) -> None:
    """Issue 28: a hostNetwork pod's sidecar listened on the node's 0.0.0.0:9466. It now binds
    the pod's IP (the node's address) only, from status.podIP, and the pod is warned."""
    def host(pod: dict) -> None:
        pod["spec"]["hostNetwork"] = True
    response, ops, pod = run(variant(host), config(native))
    assert response["warnings"] == [
        "repeat-failure: a hostNetwork pod: the sidecar's metrics port 9466 is bound on the "
        "node's address (status.podIP) only, not on every interface of the node; the "
        "scheduler keeps a second such pod off the node (its port becomes a hostPort)"]
    sidecar = next(c for c in pod["spec"]["initContainers" if native else "containers"]
                   if c["name"] == "repeat-failure")
    names = [e["name"] for e in sidecar["env"]]
    assert sidecar["env"][names.index("POD_IP")] == {
        "name": "POD_IP",
        "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}}
    assert sidecar["env"][names.index("REPEAT_FAILURE_LISTEN")] == {
        "name": "REPEAT_FAILURE_LISTEN", "value": "$(POD_IP):9466"}
    assert names.index("POD_IP") < names.index("REPEAT_FAILURE_LISTEN")  # $(POD_IP) expands
    assert names.count("REPEAT_FAILURE_LISTEN") == 1
    validate(pod, native)


def test_metrics_count_reviews_and_pods_not_injected(serve) -> None:
    """Issue 29: GET /metrics on the metrics port counts reviews by outcome and reason, their
    latency, annotated pods not injected and why, with the certificate's expiry and process_*
    series; every outcome/reason pair is exported from 0."""
    server = serve(metrics_listen="127.0.0.1:0")
    def windows(pod: dict) -> None:
        pod["spec"]["os"] = {"name": "windows"}
    for review in (load("deployment-one-container"), load("not-annotated"), variant(windows)):
        with tls_connect(server) as tls:
            body = json.dumps(review).encode()
            tls.sendall(head(len(body)) + body)
            assert tls.recv(65536).startswith(b"HTTP/1.1 200 ")
    with tls_connect(server) as tls:
        tls.sendall(head(5) + b"{nope")
        assert tls.recv(65536).startswith(b"HTTP/1.1 400 ")
    conn = http.client.HTTPConnection("127.0.0.1", server.metrics_port, timeout=10)
    conn.request("GET", "/metrics")
    response = conn.getresponse()
    text = response.read().decode()
    conn.close()
    assert response.status == 200
    samples = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
               for line in text.splitlines() if line and not line.startswith("#")}
    reviews = {k: v for k, v in samples.items()
               if k.startswith("hive_repeat_failure_injector_admission_reviews_total{")}
    assert {k: v for k, v in reviews.items() if v} == {
        'hive_repeat_failure_injector_admission_reviews_total{outcome="injected",reason="injected"}': 1.0,
        'hive_repeat_failure_injector_admission_reviews_total{outcome="unchanged",reason="not_annotated"}': 1.0,
        'hive_repeat_failure_injector_admission_reviews_total{outcome="unchanged",reason="windows"}': 1.0,
        'hive_repeat_failure_injector_admission_reviews_total{outcome="error",reason="bad_request"}': 1.0}
    assert len(reviews) == 12
    assert samples["hive_repeat_failure_injector_admission_duration_seconds_count"] == 4.0
    assert {k: v for k, v in samples.items()
            if k.startswith("hive_repeat_failure_injector_pods_not_injected_total")} == {
        f'hive_repeat_failure_injector_pods_not_injected_total{{reason="{r}"}}':
            (1.0 if r == "windows" else 0.0)
        for r in ("check_off", "invalid", "windows", "system_namespace", "decision_error")}
    expiry = x509.load_pem_x509_certificate(server.pki.cert_file.read_bytes()).not_valid_after_utc
    assert samples["hive_repeat_failure_injector_certificate_expiry_timestamp_seconds"] == \
        expiry.timestamp()
    assert samples["process_resident_memory_bytes"] > 0
    assert "process_start_time_seconds" in samples
