"""The injector's admission decision (split from :mod:`repeat_failure.kube.injector`).

:func:`decide` / :func:`admission_response`: pure functions from an ``AdmissionReview``
(``admission.k8s.io/v1``, as the API server sends it for a Pod ``CREATE``) and an
:class:`~repeat_failure.kube.injector_config.InjectorConfig` to the ``AdmissionReview``
response: ``allowed: true`` always, and a JSONPatch (RFC 6902 operations, RFC 6901 JSON
Pointers) only when something is added. The rules are ``docs/kubernetes.md``'s ("Opting a pod
in", "What the injector adds", "Off means off").
"""

from __future__ import annotations

import base64
import copy
import json
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from repeat_failure.backends import session_reader
from repeat_failure.backends.coverage import COVERAGE
from repeat_failure.config import ConfigError, check_preview_url
from repeat_failure.kube.injector_config import (
    ADMISSION_API_VERSION, AGENT_RE, ANN_AGENT, ANN_AGENT_HOME, ANN_BACKEND, ANN_CONTAINERS,
    ANN_INJECT, ANN_PREVIEW_URL, ANN_SESSION_LOGS, ANN_STATUS, CHAIN_PATH_RE, CONFIG_DIR,
    CONFIG_FILE, CONFIG_VOLUME, DEFAULT_AGENT, DEFAULT_BACKEND, HOME_MOUNT, LABEL_AGENT,
    LABEL_APP_NAME, LABEL_BACKEND, LABEL_INJECTED, MAX_CONTAINERS, MAX_PREVIEW_REASON,
    METRICS_PORT, METRICS_PORT_NAME, SESSION_LOGS_HOME_UNKNOWN, SESSION_LOGS_NOT_COVERED,
    SHARED_DIR, SHARED_VOLUME, SIDECAR_NAME, STATUS_INJECTED, InjectorConfig,
)


class AdmissionError(ValueError):
    """The request body is not an ``admission.k8s.io/v1`` ``AdmissionReview`` with a
    ``request.uid``; the message says what is missing (the server answers 400 with it)."""




def pointer(*parts: str | int) -> str:
    """An RFC 6901 JSON Pointer from its reference tokens: ``~`` becomes ``~0`` and ``/``
    becomes ``~1`` in each token, e.g. ``pointer("metadata", "annotations", "a/b~c")`` →
    ``"/metadata/annotations/a~1b~0c"``."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


@dataclass(frozen=True)
class Decision:
    """What the injector does with one admission request.

    ``patch``: RFC 6902 operations (``add``/``replace``), empty when the pod is left unchanged.
    ``warnings``: texts for the AdmissionReview response's ``warnings``. ``outcome``: a short
    reason for logs and tests (``injected``, ``not a pod creation``, ``not annotated``,
    ``already injected``, ``check off``, ``system namespace``, ``windows``, ``invalid``). ``agent``, ``backend``: the names the pod
    resolved to (None before they are known). ``hooked``: the agent containers given the hook.
    """

    patch: tuple[dict, ...] = ()
    warnings: tuple[str, ...] = ()
    outcome: str = ""
    agent: str | None = None
    backend: str | None = None
    hooked: tuple[str, ...] = ()


def _str_map(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


def _dicts(value: Any) -> list[dict]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _last_env(container: dict, name: str) -> tuple[int, dict] | None:
    """The index and entry of the last ``env`` entry named ``name`` (the one in force: a later
    definition of a name overrides an earlier one), or None."""
    found = None
    env = container.get("env")
    for i, entry in enumerate(env if isinstance(env, list) else ()):
        if isinstance(entry, dict) and entry.get("name") == name:
            found = (i, entry)
    return found


def _literal(entry: dict | None) -> str | None:
    """The literal ``value`` of an env entry; None for ``valueFrom`` or a value that refers to
    other variables (``$(VAR)``, expanded by the kubelet in the agent's context only)."""
    if entry is None or "valueFrom" in entry:
        return None
    value = entry.get("value", "")
    if not isinstance(value, str) or "$(" in value:
        return None
    return value


def _env_from_bash_env(container: dict) -> list[str]:
    """The ``envFrom`` sources of ``container`` that may define ``BASH_ENV`` (a ConfigMap or
    Secret whose keys are unknown at admission, with no ``prefix`` or one ``BASH_ENV`` starts
    with), as ``configMap NAME`` / ``secret NAME``."""
    found = []
    for source in _dicts(container.get("envFrom")):
        raw = source.get("prefix")
        prefix = raw if isinstance(raw, str) else ""
        if prefix == "BASH_ENV" or not "BASH_ENV".startswith(prefix):
            continue
        for key, kind in (("configMapRef", "configMap"), ("secretRef", "secret")):
            ref = source.get(key)
            if isinstance(ref, dict):
                ref_name = ref.get("name")
                found.append(f"{kind} {ref_name[:63] if isinstance(ref_name, str) else '?'}")
    return found


def _is_pod_create(request: Mapping) -> bool:
    kind = request.get("kind") or {}
    resource = request.get("resource") or {}
    return (request.get("operation") == "CREATE" and isinstance(kind, dict)
            and kind.get("group", "") == "" and kind.get("kind") == "Pod"
            and isinstance(resource, dict) and resource.get("resource") == "pods"
            and not request.get("subResource"))


def _covering_mount(container: dict, home: str) -> tuple[dict, str] | None:
    """The volume mount of ``container`` that covers ``home`` (its ``mountPath`` equals it or is
    a parent of it; the deepest one when several do) and the ``subPath`` that points at the home
    inside that volume ("" for the volume's root). A mount using ``subPathExpr`` is skipped (its
    expansion depends on the agent container's environment)."""
    best = None
    for mount in _dicts(container.get("volumeMounts")):
        mount_path = mount.get("mountPath")
        if not isinstance(mount_path, str) or not mount_path.startswith("/") \
                or not isinstance(mount.get("name"), str) or mount.get("subPathExpr"):
            continue
        mount_path = posixpath.normpath(mount_path)
        if mount_path == "/" or home == mount_path or home.startswith(mount_path + "/"):
            if best is None or len(mount_path) > len(best[1]):
                best = (mount, mount_path)
    if best is None:
        return None
    mount, mount_path = best
    rel = posixpath.relpath(home, mount_path)
    sub = mount.get("subPath") if isinstance(mount.get("subPath"), str) else ""
    parts = [p for p in (sub, "" if rel == "." else rel) if p]
    return mount, posixpath.normpath(posixpath.join(*parts)) if parts else ""


def _run_as(agent: dict, spec: dict, key: str, default: int) -> int:
    """The agent container's ``key`` (container ``securityContext``, else the pod's) when set,
    else ``default``. A ``runAsUser`` of 0 is not copied: the sidecar runs with
    ``runAsNonRoot: true``, which the kubelet refuses with uid 0."""
    for context in (agent.get("securityContext"), spec.get("securityContext")):
        if isinstance(context, dict):
            value = context.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                if key == "runAsUser" and value == 0:
                    return default
                return value
    return default


def _unchanged(outcome: str, *warnings: str, agent: str | None = None,
               backend: str | None = None) -> Decision:
    return Decision(warnings=tuple(warnings), outcome=outcome, agent=agent, backend=backend)


def decide(request: Mapping[str, Any], config: InjectorConfig) -> Decision:
    """Decide what to add to the pod of one admission request (``AdmissionReview.request``).

    ``request`` is the ``request`` object of an ``admission.k8s.io/v1`` AdmissionReview; only a
    Pod ``CREATE`` (``kind`` ``{group: "", kind: Pod}``, resource ``pods``, no subresource) is
    considered, every other request is left unchanged. The rules are docs/kubernetes.md's:
    the pod is injected only when annotated ``repeat-failure.hive.dev/inject: "true"``, not yet
    injected (the ``status`` annotation, or a container or init container named
    ``repeat-failure``) and ``config.enabled``; a pod in ``kube-system``
    (:data:`SYSTEM_NAMESPACES`), a Windows pod (``spec.os.name: windows``), an invalid agent name, an unknown backend, a
    ``preview-url`` annotation the sidecar would refuse (:func:`repeat_failure.config.check_preview_url`),
    a ``containers`` annotation naming no container of the pod, or names the patch would collide
    with leave it unchanged with a warning. Never raises for a malformed pod: it is left
    unchanged. The patch creates ``/metadata/labels``, ``/spec/volumes``,
    ``/spec/initContainers`` and a container's ``env``/``volumeMounts`` when absent (RFC 6902
    ``add`` needs the parent to exist; keys are escaped as RFC 6901 JSON Pointer tokens, see
    :func:`pointer`). The sidecar is a native sidecar (first init container, ``restartPolicy:
    Always``; KEP-753, beta and on by default from Kubernetes 1.29) when
    ``config.native_sidecar``, else the last entry of ``containers``.
    """
    if not _is_pod_create(request):
        return _unchanged("not a pod creation")
    pod = request.get("object")
    if not isinstance(pod, dict) or not isinstance(pod.get("spec"), dict):
        return _unchanged("not a pod creation")
    meta = pod.get("metadata") if isinstance(pod.get("metadata"), dict) else {}
    annotations = _str_map(meta.get("annotations"))  # type: ignore[union-attr]
    labels = _str_map(meta.get("labels"))  # type: ignore[union-attr]
    spec = pod["spec"]
    containers = spec.get("containers")
    if annotations.get(ANN_INJECT) != "true":
        return _unchanged("not annotated")
    init_containers = spec.get("initContainers")
    if ANN_STATUS in annotations or any(  # generators: no copies of a huge hostile list
            isinstance(c, dict) and c.get("name") == SIDECAR_NAME
            for part in (containers, init_containers) if isinstance(part, list) for c in part):
        return _unchanged("already injected")
    if not config.enabled:
        return _unchanged("check off")
    namespace = request.get("namespace") or (meta or {}).get("namespace")
    if namespace in SYSTEM_NAMESPACES:
        return _unchanged("system namespace", f"repeat-failure: namespace {namespace} is never an "
                          "agent namespace; not injected")
    os_spec = spec.get("os")
    if isinstance(os_spec, dict) and os_spec.get("name") == "windows":
        return _unchanged("windows", "repeat-failure: a Windows pod (spec.os.name: windows) "
                          "cannot run the sidecar (its securityContext is Linux-only, the hook "
                          "is bash); not injected")
    if (not isinstance(containers, list) or not containers
            or not all(isinstance(c, dict) for c in containers)
            or (init_containers is not None and not isinstance(init_containers, list))
            or not isinstance(spec.get("volumes") or [], list)):
        return _unchanged("invalid", "repeat-failure: pod spec not understood; not injected")
    count = len(containers) + len(init_containers or ())
    if count > MAX_CONTAINERS:
        return _unchanged("invalid", f"repeat-failure: the pod has {count} containers and init "
                          f"containers, more than {MAX_CONTAINERS}; not injected")

    agent = annotations.get(ANN_AGENT, labels.get(LABEL_AGENT, labels.get(LABEL_APP_NAME,
                                                                          DEFAULT_AGENT)))
    backend = annotations.get(ANN_BACKEND, labels.get(LABEL_BACKEND, DEFAULT_BACKEND))
    if not AGENT_RE.fullmatch(agent):
        return _unchanged("invalid", f"repeat-failure: agent name {agent[:64]!r} is not a "
                          "lowercase DNS-1123-style label (a-z, 0-9, '-', '.', '_'; at most 63); "
                          "not injected", backend=backend)
    if backend not in COVERAGE:
        return _unchanged("invalid", f"repeat-failure: unknown backend {backend[:64]!r} "
                          "(`repeat-failure coverage` lists them); not injected", agent=agent)
    # The sidecar refuses to start with a preview URL it cannot probe (exit 2, a crash loop),
    # like with a bad agent or backend: the pod is left unchanged and told why. The reason
    # never quotes the URL (a token in its query would reach logs and kubectl's output).
    preview_url = annotations.get(ANN_PREVIEW_URL)
    if preview_url is not None:
        try:
            check_preview_url(preview_url, "the preview-url annotation")
        except ConfigError as exc:
            return _unchanged("invalid", f"repeat-failure: {str(exc)[:MAX_PREVIEW_REASON]}; "
                              "not injected", agent=agent, backend=backend)

    names = [c.get("name") for c in containers]
    if ANN_CONTAINERS in annotations:
        wanted = list(dict.fromkeys(n.strip() for n in annotations[ANN_CONTAINERS].split(",")
                                    if n.strip()))
        known = {n for n in names if isinstance(n, str)}
        missing = [n for n in wanted if n not in known]
        if not wanted or missing:
            return _unchanged("invalid", "repeat-failure: the containers annotation names "
                              + (f"no container of this pod: {', '.join(missing)[:100]}"
                                 if missing else "no container")
                              + "; not injected", agent=agent, backend=backend)
        agent_indexes = [names.index(n) for n in wanted]
    else:
        agent_indexes = list(range(len(containers)))
    first = containers[agent_indexes[0]]

    volumes = _dicts(spec.get("volumes"))
    clash = [v["name"] for v in volumes if v.get("name") in (SHARED_VOLUME, CONFIG_VOLUME)]
    clash += [f"{c.get('name')}: mountPath {SHARED_DIR}" for i in agent_indexes
              for c in [containers[i]] for m in _dicts(c.get("volumeMounts"))
              if isinstance(m.get("mountPath"), str)
              and posixpath.normpath(m["mountPath"]) == SHARED_DIR]
    clash += [f"{c.get('name')}: port {METRICS_PORT}" for c in _dicts(containers)
              + _dicts(init_containers) for p in _dicts(c.get("ports"))
              if p.get("containerPort") == METRICS_PORT]
    if clash:
        return _unchanged("invalid", "repeat-failure: the pod already uses what the sidecar "
                          f"needs ({'; '.join(clash)[:120]}); not injected",
                          agent=agent, backend=backend)

    warnings: list[str] = []
    host_network = spec.get("hostNetwork") is True
    if host_network:
        warnings.append(f"repeat-failure: a hostNetwork pod: the sidecar's metrics port "
                        f"{METRICS_PORT} is bound on the node's address (status.podIP) only, "
                        "not on every interface of the node; the scheduler keeps a second such "
                        "pod off the node (its port becomes a hostPort)")
    # The agent's home, and the mount of the first agent container that covers it.
    home = annotations.get(ANN_AGENT_HOME)
    if home is None:
        home = _literal((_last_env(first, "HOME") or (None, None))[1]) or None
    elif not home.startswith("/"):
        warnings.append("repeat-failure: the agent-home annotation must be an absolute path; "
                        "session logs not read")
        home = None
    home_mount = None
    if home is not None:
        home = posixpath.normpath(home)
        covered = _covering_mount(first, home)
        if covered is not None:
            mount, sub_path = covered
            home_mount = {"name": mount["name"], "mountPath": HOME_MOUNT, "readOnly": True}
            if sub_path:
                home_mount["subPath"] = sub_path
    reader = session_reader(backend)
    if home_mount is None and reader is not None and reader.route_records:
        warnings.append(f"repeat-failure: backend {backend} is recorded from its session log "
                        "in the agent home, which the sidecar cannot see: nothing is recorded")

    # Which agent containers get the hook, and the BASH_ENV the hook chains.
    hook_file = f"{SHARED_DIR}/hook/{agent}.sh"
    chain: str | None = None
    hooked: list[int] = []
    for i in agent_indexes:
        container = containers[i]
        name = container.get("name")
        found = _last_env(container, "BASH_ENV")
        sources = _env_from_bash_env(container)
        if found is None and sources:
            warnings.append(f"repeat-failure: container {name}: BASH_ENV may come from envFrom "
                            f"({', '.join(sources)[:120]}), unknown at admission; left as it is "
                            "(not hooked). Set BASH_ENV in env (an empty value if none) to have "
                            "it hooked and chained")
            continue
        if found is not None:
            value = _literal(found[1])
            if value is None:
                warnings.append(f"repeat-failure: container {name}: BASH_ENV comes from "
                                "valueFrom or refers to $(VAR); left as it is (not hooked)")
                continue
            if value and value != hook_file:  # our own hook is not chained to itself
                if not CHAIN_PATH_RE.fullmatch(value):
                    warnings.append(f"repeat-failure: container {name}: BASH_ENV is not an "
                                    "absolute path of letters, digits and ._/@+-; left as it "
                                    "is (not hooked)")
                    continue
                if chain is not None and value != chain:
                    warnings.append(f"repeat-failure: container {name}: BASH_ENV differs from "
                                    "another agent container's; left as it is (not hooked)")
                    continue
                chain = value
        hooked.append(i)

    ops: list[dict] = []
    for key, value in [(ANN_STATUS, STATUS_INJECTED)] + (
            [] if home_mount is not None else
            [(ANN_SESSION_LOGS, SESSION_LOGS_NOT_COVERED if home else SESSION_LOGS_HOME_UNKNOWN)]):
        ops.append({"op": "add", "path": pointer("metadata", "annotations", key), "value": value})
    if isinstance(meta.get("labels"), dict):  # type: ignore[union-attr]
        ops.append({"op": "add", "path": pointer("metadata", "labels", LABEL_INJECTED),
                    "value": "true"})
    else:
        ops.append({"op": "add", "path": "/metadata/labels", "value": {LABEL_INJECTED: "true"}})
    new_volumes = [{"name": SHARED_VOLUME, "emptyDir": {}},
                   {"name": CONFIG_VOLUME,
                    "configMap": {"name": config.config_map, "optional": True}}]
    if isinstance(spec.get("volumes"), list):
        ops += [{"op": "add", "path": "/spec/volumes/-", "value": v} for v in new_volumes]
    else:
        ops.append({"op": "add", "path": "/spec/volumes", "value": new_volumes})

    sidecar = sidecar_container(config, agent, backend, chain, home_mount,
                                _run_as(first, spec, "runAsUser", config.run_as_user),
                                _run_as(first, spec, "runAsGroup", config.run_as_group),
                                _token_mount(first), preview_url, host_network)
    if config.native_sidecar:
        if isinstance(init_containers, list):
            ops.append({"op": "add", "path": "/spec/initContainers/0", "value": sidecar})
        else:
            ops.append({"op": "add", "path": "/spec/initContainers", "value": [sidecar]})
    else:
        ops.append({"op": "add", "path": "/spec/containers/-", "value": sidecar})

    for i in hooked:
        ops += _hook_container_ops(i, containers[i], hook_file)
    return Decision(patch=tuple(ops), warnings=tuple(warnings), outcome="injected", agent=agent,
                    backend=backend, hooked=tuple(containers[i].get("name") for i in hooked))


#: Namespaces never injected (issue 29): a sidecar there would watch cluster components.
SYSTEM_NAMESPACES = frozenset({"kube-system"})
#: The sidecar's startup probe runs every second; this many failures (2 minutes) and the
#: kubelet restarts it.
STARTUP_FAILURE_THRESHOLD = 120

#: Where the API server's ServiceAccount admission plugin mounts a pod's token.
TOKEN_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def _token_mount(container: dict) -> dict | None:
    """The service-account token mount of ``container`` (the agent's), read-only, or None.

    The ServiceAccount admission plugin adds that mount to every container before mutating
    webhooks run, so a container a webhook adds never gets it (kubernetes/kubernetes#69733):
    the sidecar needs a copy to create Kubernetes Events."""
    for mount in container.get("volumeMounts") or ():
        if isinstance(mount, dict) and mount.get("mountPath") == TOKEN_DIR \
                and isinstance(mount.get("name"), str):
            return {"name": mount["name"], "mountPath": TOKEN_DIR, "readOnly": True}
    return None


def sidecar_container(config: InjectorConfig, agent: str, backend: str, chain: str | None,
                      home_mount: dict | None, run_as_user: int, run_as_group: int,
                      token_mount: dict | None = None, preview_url: str | None = None,
                      host_network: bool = False) -> dict:
    """The ``repeat-failure`` container (a ``core/v1`` Container dict) as docs/kubernetes.md
    lists it: ``args: [run, --config-optional]``, its env (``POD_NAME``/``POD_NAMESPACE``/``POD_UID``
    from the Downward API ``fieldRef``; ``REPEAT_FAILURE_CHAIN_BASH_ENV`` when ``chain``;
    ``REPEAT_FAILURE_AGENT_HOME`` when ``home_mount``; ``REPEAT_FAILURE_PREVIEW_URL`` when
    ``preview_url``, already validated), port 9466 ``rf-metrics`` (bound on ``0.0.0.0``, or with
    ``host_network`` on the pod's IP only: ``POD_IP`` from ``status.podIP``), a startup probe on
    ``/startupz`` (the agent's hook rendered and ``records/`` writable: a native sidecar's
    startup probe holds the agent container until it passes), a liveness probe on ``/healthz``,
    the shared, config and home mounts and a copy of the agent's
    service-account token mount (``token_mount``, for Events), a restricted ``securityContext``
    and ``restartPolicy: Always`` when ``config.native_sidecar`` (a native sidecar, KEP-753)."""
    env = [
        {"name": "REPEAT_FAILURE_CONFIG", "value": CONFIG_FILE},
        {"name": "REPEAT_FAILURE_SHARED_DIR", "value": SHARED_DIR},
        {"name": "REPEAT_FAILURE_AGENT", "value": agent},
        {"name": "REPEAT_FAILURE_BACKEND", "value": backend},
        {"name": "REPEAT_FAILURE_LISTEN", "value": f"0.0.0.0:{METRICS_PORT}"},
        {"name": "POD_NAME",
         "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
        {"name": "POD_NAMESPACE",
         "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}},
        # `kubectl describe pod` finds a pod's Events by its UID (involvedObject.uid).
        {"name": "POD_UID",
         "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.uid"}}},
    ]
    if host_network:  # the kubelet expands $(POD_IP): it is defined before the entry using it
        env[4] = {"name": "POD_IP",
                  "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}}
        env.insert(5, {"name": "REPEAT_FAILURE_LISTEN", "value": f"$(POD_IP):{METRICS_PORT}"})
    if chain is not None:
        env.append({"name": "REPEAT_FAILURE_CHAIN_BASH_ENV", "value": chain})
    if home_mount is not None:
        env.append({"name": "REPEAT_FAILURE_AGENT_HOME", "value": HOME_MOUNT})
    if preview_url is not None:
        env.append({"name": "REPEAT_FAILURE_PREVIEW_URL", "value": preview_url})
    mounts = [{"name": SHARED_VOLUME, "mountPath": SHARED_DIR},
              {"name": CONFIG_VOLUME, "mountPath": CONFIG_DIR, "readOnly": True}]
    if home_mount is not None:
        mounts.append(dict(home_mount))
    if token_mount is not None:
        mounts.append(dict(token_mount))
    container = {
        "name": SIDECAR_NAME,
        "image": config.image,
        "imagePullPolicy": config.image_pull_policy,
        "args": ["run", "--config-optional"],
        "env": env,
        "ports": [{"name": METRICS_PORT_NAME, "containerPort": METRICS_PORT, "protocol": "TCP"}],
        "startupProbe": {"httpGet": {"path": "/startupz", "port": METRICS_PORT_NAME},
                         "periodSeconds": 1, "timeoutSeconds": 1,
                         "failureThreshold": STARTUP_FAILURE_THRESHOLD},
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": METRICS_PORT_NAME}},
        "resources": copy.deepcopy({k: dict(v) for k, v in config.resources.items()}),
        "volumeMounts": mounts,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": run_as_user,
            "runAsGroup": run_as_group,
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    if config.native_sidecar:
        container["restartPolicy"] = "Always"
    return container


def _hook_container_ops(index: int, container: dict, hook_file: str) -> list[dict]:
    """The operations that give agent container ``index`` the shared mount and the hook's env:
    ``BASH_ENV`` (a literal one is replaced: the sidecar chains it), ``SHELL=/bin/bash``
    (replacing another value), ``SHLVL=1`` unless the container sets ``SHLVL``."""
    base = ("spec", "containers", index)
    ops: list[dict] = []
    mount = {"name": SHARED_VOLUME, "mountPath": SHARED_DIR}
    if isinstance(container.get("volumeMounts"), list):
        ops.append({"op": "add", "path": pointer(*base, "volumeMounts", "-"), "value": mount})
    else:
        ops.append({"op": "add", "path": pointer(*base, "volumeMounts"), "value": [mount]})
    wanted = [("BASH_ENV", hook_file, True), ("SHELL", "/bin/bash", True), ("SHLVL", "1", False)]
    appended = []
    for name, value, override in wanted:
        found = _last_env(container, name)
        if found is None:
            appended.append({"name": name, "value": value})
        elif override and (found[1].get("value") != value or "valueFrom" in found[1]):
            ops.append({"op": "replace", "path": pointer(*base, "env", found[0]),
                        "value": {"name": name, "value": value}})
    if isinstance(container.get("env"), list):
        ops += [{"op": "add", "path": pointer(*base, "env", "-"), "value": e} for e in appended]
    elif appended:
        ops.append({"op": "add", "path": pointer(*base, "env"), "value": appended})
    return ops


def _brief(value: Any) -> str:
    """A short quote of a JSON value from the request for an error message: a string's first 64
    characters, else its type (``str()`` of a 2 MiB or deeply nested value would be expensive or
    raise RecursionError)."""
    if isinstance(value, str):
        return repr(value[:64])
    if value is None:
        return "null"
    kinds = {dict: "object", list: "array", bool: "boolean", int: "number", float: "number"}
    return f"a JSON {kinds.get(type(value), type(value).__name__)}"


def review_response(review: Any, config: InjectorConfig) -> tuple[dict, Decision]:
    """:func:`admission_response` plus the :class:`Decision` behind it (for the server's log)."""
    if not isinstance(review, dict):
        raise AdmissionError("expected a JSON object: an admission.k8s.io/v1 AdmissionReview")
    if review.get("kind") != "AdmissionReview":
        raise AdmissionError(f"expected kind AdmissionReview, got {_brief(review.get('kind'))}")
    if review.get("apiVersion") != ADMISSION_API_VERSION:
        raise AdmissionError(f"expected apiVersion {ADMISSION_API_VERSION}, got "
                             f"{_brief(review.get('apiVersion'))} (set the webhook's "
                             "admissionReviewVersions to [v1])")
    request = review.get("request")
    if not isinstance(request, dict):
        raise AdmissionError("AdmissionReview has no request object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise AdmissionError("AdmissionReview request has no uid")
    decision = decide(request, config)
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    if decision.patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(
            json.dumps(list(decision.patch), separators=(",", ":")).encode()).decode("ascii")
    if decision.warnings:
        response["warnings"] = list(decision.warnings)
    return {"apiVersion": ADMISSION_API_VERSION, "kind": "AdmissionReview",
            "response": response}, decision


def admission_response(review: Any, config: InjectorConfig) -> dict:
    """The AdmissionReview v1 response for an AdmissionReview v1 request (a parsed JSON dict).

    Returns ``{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response":
    {"uid": <the request's uid>, "allowed": true[, "patchType": "JSONPatch", "patch": <base64
    of the RFC 6902 operations>][, "warnings": [...]]}}``: the pod is never rejected, the patch
    is present only when something is added (:func:`decide`). Raises :class:`AdmissionError`
    when ``review`` is not an ``admission.k8s.io/v1`` AdmissionReview with a ``request.uid``.
    Source: Kubernetes docs, "Dynamic Admission Control" (the AdmissionReview v1 request and
    response; ``patchType`` ``JSONPatch`` is RFC 6902; ``warnings`` are shown to the client).
    """
    return review_response(review, config)[0]
