"""The sidecar injector: a Kubernetes mutating admission webhook for pod creations.

The contract is ``docs/kubernetes.md`` ("Opting a pod in", "What the injector adds", "Off means
off", "The injector's config", "TLS"). Three parts:

- :func:`decide` / :func:`admission_response`: pure functions from an ``AdmissionReview``
  (``admission.k8s.io/v1``, as the API server sends it for a Pod ``CREATE``) and an
  :class:`InjectorConfig` to the ``AdmissionReview`` response: ``allowed: true`` always, and a
  JSONPatch (RFC 6902 operations, RFC 6901 JSON Pointers) only when something is added.
- :func:`load_injector_config` and :class:`ConfigSource`: the injector's YAML config, validated
  with a JSON Schema and re-read when the file changes (the last good config stays on a bad
  edit).
- :class:`InjectorServer`: ``POST /mutate`` and ``GET /healthz`` over HTTPS (TLS >= 1.2) with
  :class:`http.server.ThreadingHTTPServer`; the certificate and key are re-read when their files
  change (:class:`TLSFiles`, cert-manager rotation).

Nothing here talks to the Kubernetes API: the injector needs no RBAC.
"""

from __future__ import annotations

import base64
import concurrent.futures
import copy
import http.client
import json
import logging
import os
import posixpath
import re
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jsonschema

from repeat_failure import __version__
from repeat_failure.backends import session_reader
from repeat_failure.config import ConfigError, check_preview_url, parse_listen, read_yaml
from repeat_failure.backends.coverage import COVERAGE

log = logging.getLogger("repeat_failure")

# -- names shared with the chart and the sidecar (docs/kubernetes.md) ----------------------------

PREFIX = "repeat-failure.hive.dev/"
ANN_INJECT = PREFIX + "inject"
ANN_AGENT = PREFIX + "agent"
ANN_BACKEND = PREFIX + "backend"
ANN_CONTAINERS = PREFIX + "containers"
ANN_AGENT_HOME = PREFIX + "agent-home"
ANN_PREVIEW_URL = PREFIX + "preview-url"
ANN_STATUS = PREFIX + "status"
ANN_SESSION_LOGS = PREFIX + "session-logs"
LABEL_AGENT = PREFIX + "agent"
LABEL_BACKEND = PREFIX + "backend"
LABEL_INJECTED = PREFIX + "injected"
LABEL_APP_NAME = "app.kubernetes.io/name"

STATUS_INJECTED = "injected"
#: ``session-logs`` annotation values: why the sidecar runs without the session readers.
SESSION_LOGS_NOT_COVERED = "no volume mount covers the agent home"
SESSION_LOGS_HOME_UNKNOWN = "agent home unknown"

SIDECAR_NAME = "repeat-failure"
SHARED_VOLUME = "repeat-failure-shared"
CONFIG_VOLUME = "repeat-failure-config"
SHARED_DIR = "/var/run/repeat-failure"
CONFIG_DIR = "/etc/repeat-failure"
CONFIG_FILE = CONFIG_DIR + "/config.yaml"
HOME_MOUNT = "/var/run/repeat-failure-home"
METRICS_PORT = 9466
METRICS_PORT_NAME = "rf-metrics"
DEFAULT_AGENT = "agent"
DEFAULT_BACKEND = "bash"

#: Agent names: a DNS-1123-style label (lowercase letters, digits, ``-``, ``.``, ``_``; a letter
#: or digit first; at most 63). A subset of :data:`repeat_failure.config.AGENT_NAME_RE`, so every name
#: the injector accepts is one the sidecar accepts too. Anchored with ``\Z``, not ``$``: ``$``
#: also matches before a trailing newline, and ``"abc\n"`` would break the hook in every shell.
AGENT_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}\Z")
#: A chained ``BASH_ENV`` must be a path the sidecar's hook renderer accepts
#: (``repeat_failure.sidecar.hook``: an absolute path of letters, digits and ``._/@+-``; no trailing newline).
CHAIN_PATH_RE = re.compile(r"^/[A-Za-z0-9._/@+-]*\Z")
#: Characters of a preview URL's validation message quoted in a warning (the message never
#: echoes the URL itself: its query may hold a token).
MAX_PREVIEW_REASON = 200
#: Pods with more containers and init containers than this are left unchanged with a warning:
#: the patch grows with each agent container (a 2 MiB review of ``{}`` containers would
#: otherwise build a patch of gigabytes).
MAX_CONTAINERS = 128

ADMISSION_API_VERSION = "admission.k8s.io/v1"


class AdmissionError(ValueError):
    """The request body is not an ``admission.k8s.io/v1`` ``AdmissionReview`` with a
    ``request.uid``; the message says what is missing (the server answers 400 with it)."""


# -- config ---------------------------------------------------------------------------------------

_QUANTITY = r"^(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$"
_QUANTITIES = {
    "type": "object",
    "propertyNames": {"pattern": r"^[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?$"},
    "additionalProperties": {"type": ["string", "number"], "pattern": _QUANTITY, "minimum": 0},
}
_CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "enabled": {"type": "boolean"},
        "image": {"type": "string", "pattern": r"^\S+$"},
        "imagePullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
        "nativeSidecar": {"type": "boolean"},
        # A ConfigMap name: a DNS-1123 subdomain.
        "configMap": {"type": "string", "maxLength": 253,
                      "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"},
        # The sidecar runs with runAsNonRoot: true, so its own default user cannot be 0.
        "runAsUser": {"type": "integer", "minimum": 1, "maximum": 2147483647},
        "runAsGroup": {"type": "integer", "minimum": 0, "maximum": 2147483647},
        "resources": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"requests": _QUANTITIES, "limits": _QUANTITIES},
        },
    },
}


@dataclass(frozen=True)
class InjectorConfig:
    """The validated injector config (``docs/kubernetes.md``, "The injector's config").

    ``enabled``: the check is on (``repeatFailure.enabled``); off, nothing is ever added.
    ``image``/``image_pull_policy``: the sidecar's image (the injector's own).
    ``native_sidecar``: emit a native sidecar (an init container with ``restartPolicy: Always``,
    KEP-753, on by default from Kubernetes 1.29) instead of appending to ``containers``.
    ``config_map``: the sidecar config's ConfigMap in the pod's namespace.
    ``run_as_user``/``run_as_group``: the sidecar's ids when the agent container sets none.
    ``resources``: the sidecar's ``resources`` (``requests``/``limits`` maps of quantity strings).
    """

    enabled: bool = False
    image: str = f"ghcr.io/hive/repeat-failure:{__version__}"
    image_pull_policy: str = "IfNotPresent"
    native_sidecar: bool = True
    config_map: str = "repeat-failure-config"
    run_as_user: int = 10001
    run_as_group: int = 10001
    resources: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: {
        "requests": {"cpu": "10m", "memory": "48Mi"}, "limits": {"memory": "96Mi"}})


def _error_text(error: jsonschema.ValidationError) -> str:
    path = ".".join(str(p) for p in error.absolute_path)
    if error.validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        key = ".".join(filter(None, [path, extra[0] if extra else ""]))
        return f"{key}: unknown key"
    if error.validator == "propertyNames":
        return f"{path}: {error.instance!r} is not a resource name"
    return f"{path or '(top level)'}: {error.message}"


def parse_injector_config(data: Any, source: str = "<injector config>") -> InjectorConfig:
    """Validate a parsed YAML document (``None``: an empty file, all defaults) and return an
    :class:`InjectorConfig`. Quantities written as YAML numbers become strings (``1`` → ``"1"``).

    Raises :class:`repeat_failure.config.ConfigError` naming ``source`` and the first bad key, e.g.
    ``"injector.yaml: runAsUser: 'x' is not of type 'integer'"`` or
    ``"injector.yaml: nativeSidecars: unknown key"``.
    """
    if data is None:
        data = {}
    validator = jsonschema.Draft202012Validator(_CONFIG_SCHEMA)
    errors = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        raise ConfigError(f"{source}: {_error_text(errors[0])}")
    for key in ("runAsUser", "runAsGroup"):
        if isinstance(data.get(key), float):  # JSON Schema's "integer" accepts 10001.0
            raise ConfigError(f"{source}: {key}: must be a whole number")
    defaults = InjectorConfig()
    resources = data.get("resources")
    if resources is None:
        resources = defaults.resources
    else:
        resources = {kind: {name: _quantity(value) for name, value in values.items()}
                     for kind, values in resources.items()}
    return InjectorConfig(
        enabled=data.get("enabled", defaults.enabled),
        image=data.get("image", defaults.image),
        image_pull_policy=data.get("imagePullPolicy", defaults.image_pull_policy),
        native_sidecar=data.get("nativeSidecar", defaults.native_sidecar),
        config_map=data.get("configMap", defaults.config_map),
        run_as_user=data.get("runAsUser", defaults.run_as_user),
        run_as_group=data.get("runAsGroup", defaults.run_as_group),
        resources=resources,
    )


def _quantity(value: str | int | float) -> str:
    if isinstance(value, str):
        return value
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def load_injector_config(path: str | os.PathLike[str], allow_empty: bool = True) -> InjectorConfig:
    """Read and validate the injector's YAML config at ``path``.

    ``allow_empty=False`` refuses a file with no YAML document (used on reload: a truncated
    file must not turn injection off by itself). Raises :class:`repeat_failure.config.ConfigError` when
    the file is missing, unreadable, not YAML, or invalid; the message names the file and key.
    """
    data = read_yaml(path, "injector config")
    if data is None and not allow_empty:
        raise ConfigError(f"{path}: the file is empty; write `enabled: false` to turn "
                          "injection off")
    return parse_injector_config(data, str(path))


def _file_stamp(*paths: str | os.PathLike[str]) -> tuple | None:
    """(inode, mtime ns, size) of each path, following symlinks (a ConfigMap or Secret volume
    swaps a ``..data`` symlink); None when one is missing."""
    stamp = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            return None
        stamp.append((st.st_ino, st.st_mtime_ns, st.st_size))
    return tuple(stamp)


class ConfigSource:
    """The injector config at ``path``, re-read when the file's inode, mtime or size changes
    (checked at most once per ``check_interval_s`` seconds, on :meth:`current`).

    The constructor loads the file and raises :class:`repeat_failure.config.ConfigError` if it cannot
    be used (the CLI exits 2). A later edit that does not validate is logged once and the last
    good config stays in force; thread-safe.
    """

    def __init__(self, path: str | os.PathLike[str], check_interval_s: float = 1.0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self.check_interval_s = check_interval_s
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._stamp = _file_stamp(path)
        self._config = load_injector_config(path)
        self._checked = monotonic()

    def current(self) -> InjectorConfig:
        """The config in force, re-read first if the file changed since the last check."""
        now = self._monotonic()
        if now - self._checked < self.check_interval_s:
            return self._config
        with self._lock:
            self._checked = now
            stamp = _file_stamp(self.path)
            if stamp == self._stamp:
                return self._config
            self._stamp = stamp
            try:
                new = load_injector_config(self.path, allow_empty=False)
            except ConfigError as exc:
                log.error("injector config change refused, keeping the previous config",
                          extra={"event": "injector_config_refused", "error": str(exc)})
                return self._config
            if new != self._config:
                log.info("injector config reloaded",
                         extra={"event": "injector_config_reloaded", "enabled": new.enabled,
                                "native_sidecar": new.native_sidecar, "image": new.image})
            self._config = new
            return new


# -- the admission decision -----------------------------------------------------------------------


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
    ``already injected``, ``check off``, ``invalid``). ``agent``, ``backend``: the names the pod
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
    ``repeat-failure``) and ``config.enabled``; an invalid agent name, an unknown backend, a
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
    annotations = _str_map(meta.get("annotations"))
    labels = _str_map(meta.get("labels"))
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
    if isinstance(meta.get("labels"), dict):
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
                                _token_mount(first), preview_url)
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
                      token_mount: dict | None = None, preview_url: str | None = None) -> dict:
    """The ``repeat-failure`` container (a ``core/v1`` Container dict) as docs/kubernetes.md
    lists it: ``args: [run, --config-optional]``, its env (``POD_NAME``/``POD_NAMESPACE``/``POD_UID``
    from the Downward API ``fieldRef``; ``REPEAT_FAILURE_CHAIN_BASH_ENV`` when ``chain``;
    ``REPEAT_FAILURE_AGENT_HOME`` when ``home_mount``; ``REPEAT_FAILURE_PREVIEW_URL`` when
    ``preview_url``, already validated), port 9466 ``rf-metrics``, a liveness
    probe on ``/healthz``, the shared, config and home mounts and a copy of the agent's
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


# -- TLS ------------------------------------------------------------------------------------------


class TLSFiles:
    """The serving certificate and key, re-read when either file changes.

    :meth:`context` returns an :class:`ssl.SSLContext` (server side, TLS >= 1.2) for the files'
    current contents, checking their (inode, mtime, size) at most once per
    ``check_interval_s`` seconds; a change builds a new context, so new connections get the
    rotated certificate (cert-manager renews into the same Secret; the kubelet swaps the mounted
    files). The constructor raises ``OSError``/``ssl.SSLError`` if the files cannot be loaded.
    A later pair that does not load (a key written before its certificate) is logged once and
    the previous context stays until a check finds a pair that loads.
    """

    def __init__(self, cert_file: str | os.PathLike[str], key_file: str | os.PathLike[str],
                 check_interval_s: float = 5.0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.cert_file, self.key_file = cert_file, key_file
        self.check_interval_s = check_interval_s
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._stamp = _file_stamp(cert_file, key_file)
        self._context = self._load()
        self._checked = monotonic()
        self._refused: tuple | None = None

    def _load(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.set_alpn_protocols(["http/1.1"])
        context.load_cert_chain(self.cert_file, self.key_file)
        return context

    def context(self) -> ssl.SSLContext:
        """The context for a new connection (re-loaded first if the files changed)."""
        now = self._monotonic()
        if now - self._checked < self.check_interval_s:
            return self._context
        with self._lock:
            self._checked = now
            stamp = _file_stamp(self.cert_file, self.key_file)
            if stamp is None or stamp == self._stamp:
                return self._context
            try:
                context = self._load()
            except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
                if stamp != self._refused:
                    self._refused = stamp
                    log.error("TLS certificate or key not loaded, serving the previous one",
                              extra={"event": "tls_reload_failed", "error": str(exc)})
                return self._context
            self._stamp, self._context = stamp, context
            log.info("TLS certificate reloaded", extra={"event": "tls_reloaded",
                                                        "cert": str(self.cert_file)})
            return context


# -- the HTTPS server -----------------------------------------------------------------------------

#: Largest request body read (bytes); a larger ``Content-Length`` is answered 413 unread. A Pod
#: ``CREATE`` review carries the pod once (``request.object``; ``oldObject`` is null) plus a few
#: KiB of metadata (uid, kind, resource, userInfo, options), and etcd refuses an object over
#: 1.5 MiB (its default ``--max-request-bytes``), so 2 MiB holds any pod that can be created,
#: with room for JSON's escaping. Not the API server's 3 MiB: parsing costs up to ~25 bytes of
#: memory per body byte (``[{},{},...]``).
MAX_BODY_BYTES = 2 << 20
#: Bodies read and parsed at once. A review that finds no free slot within
#: :data:`BUSY_WAIT_S` seconds gets 503 with ``Retry-After: 1`` (its body unread). Measured
#: worst case with 2 (VmHWM of a real ``repeat-failure inject-webhook``, Python 3.11, x86-64):
#: 36 MB idle; 153 MB with 56 connections holding 30 KiB request heads while 8 clients at a
#: time post 2 MiB hostile bodies (``[{},{},...]`` and an AdmissionReview of ``{}``
#: containers), 10 rounds; 4 MiB bodies before this limit: 142 MB for one, 234-380 MB for 8.
#: Hence the chart's ``injector.resources.limits.memory`` of 256Mi (it was 128Mi).
MAX_PARSING = 2
BUSY_WAIT_S = 1.0
#: Connections served at once (one thread each); more are closed at accept, counted in a log
#: line at most once a minute.
MAX_CONNECTIONS = 64
#: Seconds from accept to the end of the TLS handshake.
HANDSHAKE_TIMEOUT_S = 10.0
#: Seconds from the first byte of a request line to the end of its body; the response then has
#: as long again (waiting for a parse slot, deciding, writing).
REQUEST_TIMEOUT_S = 10.0
#: Seconds a connection may wait for its next request (keep-alive) before it is closed.
IDLE_TIMEOUT_S = 30.0
#: Bytes of request line and headers together; more is answered 431 (the API server sends well
#: under 1 KiB; http.server alone would accept 100 headers of 64 KiB).
MAX_HEAD_BYTES = 32 << 10

_TEXT = "text/plain; charset=utf-8"


class _Tally:
    """Counts an event and logs it as a warning at most once per ``interval_s`` seconds, with
    the count since the previous line (the first occurrence is logged at once)."""

    def __init__(self, message: str, event: str, interval_s: float = 60.0,
                 **fields: Any) -> None:
        self.message, self.event, self.interval_s, self.fields = message, event, interval_s, fields
        self._lock = threading.Lock()
        self._count = 0
        self._logged_at = -1e9
        self.total = 0

    def add(self, **fields: Any) -> None:
        with self._lock:
            self._count += 1
            self.total += 1
            now = time.monotonic()
            if now - self._logged_at < self.interval_s:
                return
            count, self._count, self._logged_at = self._count, 0, now
        log.warning(self.message, extra={"event": self.event, "count": count, **self.fields,
                                         **fields})


class _Deadlines:
    """The connections' deadlines, enforced by one thread: when a connection's deadline passes,
    its socket is shut down (both ways), so whatever its thread is blocked in (the TLS handshake,
    a read, a write) returns or fails at once. A per-``recv`` timeout would not do: a client
    trickling a byte at a time would reset it forever.

    :meth:`arm` sets or moves a socket's deadline, :meth:`disarm` drops it; the socket must be
    disarmed before it is closed (the shutdown happens under the same lock, so a closed
    socket's reused descriptor is never shut down). ``on_expired(phase)`` is called for each
    expiry, outside the lock.
    """

    def __init__(self, on_expired: Callable[[str], None]) -> None:
        self._cond = threading.Condition()
        self._due: dict[socket.socket, tuple[float, str]] = {}
        self._stopped = False
        self._on_expired = on_expired
        self._thread = threading.Thread(target=self._run, name="injector-deadlines",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def arm(self, sock: socket.socket, seconds: float, phase: str) -> None:
        with self._cond:
            self._due[sock] = (time.monotonic() + seconds, phase)
            self._cond.notify()

    def disarm(self, sock: socket.socket) -> None:
        with self._cond:
            self._due.pop(sock, None)

    def _run(self) -> None:
        while True:
            expired: list[str] = []
            with self._cond:
                if self._stopped:
                    return
                now = time.monotonic()
                for sock, (due, phase) in list(self._due.items()):
                    if due <= now:
                        del self._due[sock]
                        try:  # the plain socket's shutdown: SSLSocket's drops its TLS state
                            socket.socket.shutdown(sock, socket.SHUT_RDWR)
                        except OSError:
                            pass
                        expired.append(phase)
                if not expired:
                    nxt = min((due for due, _ in self._due.values()), default=None)
                    self._cond.wait(None if nxt is None else nxt - now)
            for phase in expired:
                try:
                    self._on_expired(phase)
                except Exception:  # a logging failure must not stop the deadlines
                    pass


class _HeadReader:
    """The connection's reader as http.server reads the request line and headers through it:
    raises :class:`http.client.LineTooLong` once they exceed ``limit`` bytes in all (http.server
    itself accepts 100 header lines of 64 KiB each, 6.5 MB per request)."""

    def __init__(self, stream: Any, limit: int) -> None:
        self._stream, self._limit, self._left = stream, limit, limit

    def readline(self, size: int | None = -1) -> bytes:
        cap = self._left + 1 if size is None or size < 0 else min(size, self._left + 1)
        line = self._stream.readline(cap)
        self._left -= len(line)
        if self._left < 0:
            raise http.client.LineTooLong(f"request line and headers over {self._limit} bytes")
        return line


def _handler(server: "InjectorServer") -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "repeat-failure-injector"
        protocol_version = "HTTP/1.1"  # the API server keeps connections alive
        # A backstop per socket operation; the deadlines (_Deadlines) are what bound a
        # connection's handshake, each request and each keep-alive wait.
        timeout = 60

        def setup(self) -> None:
            super().setup()
            self._stream = self.rfile
            self.request.do_handshake()  # under the handshake deadline armed at accept

        def handle_one_request(self) -> None:
            deadlines = self.server.deadlines
            deadlines.arm(self.request, server.idle_timeout_s, "idle")
            try:
                first = self._stream.peek(1)  # wait for the next request's first byte
            except OSError:
                first = b""
            if not first:
                self.close_connection = True
                return
            deadlines.arm(self.request, server.request_timeout_s, "request")
            self.rfile = _HeadReader(self._stream, server.max_head_bytes)
            try:
                super().handle_one_request()
            except http.client.LineTooLong as exc:  # the request line itself (headers: 431
                self.requestline = self.request_version = self.command = ""  # by http.server)
                self.close_connection = True
                self.send_error(431, str(exc))
            finally:
                self.rfile = self._stream

        def _send(self, code: int, body: bytes, ctype: str, close: bool = False,
                  headers: Mapping[str, str] | None = None) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            if close:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(body)

        def _fail(self, code: int, message: str, close: bool = False,
                  headers: Mapping[str, str] | None = None) -> None:
            self._send(code, (message + "\n").encode(), _TEXT, close, headers)

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            if self.path.split("?", 1)[0] == "/healthz":
                self._send(200, b"ok\n", _TEXT)
            else:
                self._fail(404, "not found: POST /mutate, GET /healthz")

        def do_POST(self) -> None:  # noqa: N802
            if self.path.split("?", 1)[0] != "/mutate":  # the API server adds ?timeout=5s
                self._fail(404, "not found: POST /mutate, GET /healthz", close=True)
                return
            if self.headers.get_content_type() != "application/json":
                self._fail(415, "Content-Type must be application/json", close=True)
                return
            if self.headers.get("Transfer-Encoding"):
                self._fail(411, "send the body with a Content-Length", close=True)
                return
            length_text = self.headers.get("Content-Length")
            if length_text is None:
                self._fail(411, "Content-Length required", close=True)
                return
            try:
                length = int(length_text)
                if length < 0:
                    raise ValueError
            except ValueError:
                self._fail(400, "bad Content-Length", close=True)
                return
            if length > server.max_body:
                self._fail(413, f"request body over {server.max_body} bytes", close=True)
                return
            # The body is read only with a slot: the bodies held at once, raw and parsed, are
            # at most max_parsing. They are read and parsed by the max_parsing long-lived
            # threads of server.parser, not this connection's: glibc gives each new thread its
            # own malloc arena, and freed memory stays in it, so parses spread over ever new
            # connection threads measured 200 MB peak and growing where two threads hold 143.
            if not server.parsing.acquire(timeout=server.busy_wait_s):
                self.server.busy.add()
                self._fail(503, "busy: too many admission reviews at once; retry", close=True,
                           headers={"Retry-After": "1"})
                return
            try:
                answer = server.parser.submit(self._answer, length).result()
            finally:
                server.parsing.release()
            if answer is None:  # the client hung up or its deadline passed: no one to answer
                self.close_connection = True
                return
            self._send(*answer)

        def _answer(self, length: int) -> tuple[int, bytes, str] | None:
            body = self._stream.read(length)
            if len(body) < length:
                return None
            self.server.deadlines.arm(self.request, server.request_timeout_s, "response")
            try:
                review = json.loads(body)
            except RecursionError:
                return 400, b"request body is not JSON: nested too deeply\n", _TEXT
            except (ValueError, UnicodeDecodeError) as exc:
                return 400, f"request body is not JSON: {exc}\n".encode(), _TEXT
            del body
            try:
                answer = server.review(review)
            except AdmissionError as exc:
                return 400, f"not an AdmissionReview: {exc}\n".encode(), _TEXT
            except Exception:  # review() allows the pod on a decision bug; this is a last resort
                log.exception("injector error answering a review", extra={
                    "event": "injector_error"})
                return 500, b"injector error\n", _TEXT
            return 200, json.dumps(answer, separators=(",", ":")).encode(), "application/json"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass  # the admission decisions are logged; access lines would only add noise

    return Handler


class _HTTPSServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 tls: TLSFiles, family: int, max_connections: int,
                 handshake_timeout_s: float) -> None:
        self.address_family = family
        self.tls = tls
        self.max_connections = max_connections
        self.handshake_timeout_s = handshake_timeout_s
        self._errors_logged_at = -1e9
        self._count_lock = threading.Lock()
        self.active = 0
        self.refused = _Tally("connections refused: too many at once", "connections_refused",
                              limit=max_connections)
        self.timed_out = _Tally("connections closed past their deadline",
                                "connections_timed_out")
        self.busy = _Tally("admission reviews answered 503: all parse slots busy",
                           "reviews_busy")
        self.deadlines = _Deadlines(self._expired)
        super().__init__(address, handler)

    def _expired(self, phase: str) -> None:
        if phase != "idle":  # an idle keep-alive connection closing is routine
            self.timed_out.add(phase=phase)

    def get_request(self) -> tuple[socket.socket, Any]:
        # The handshake runs in the connection's own thread (Handler.setup), never in the
        # accept loop, with the context current at accept time (a rotated cert for new ones).
        sock, address = self.socket.accept()
        try:
            return self.tls.context().wrap_socket(sock, server_side=True,
                                                  do_handshake_on_connect=False), address
        except Exception:
            sock.close()
            raise

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._count_lock:
            full = self.active >= self.max_connections
            if not full:
                self.active += 1
        if full:  # closed before its handshake: no thread, no TLS state
            self.refused.add()
            self.shutdown_request(request)
            return
        self.deadlines.arm(request, self.handshake_timeout_s, "handshake")
        try:
            super().process_request(request, client_address)
        except BaseException:  # no thread started (the caller closes the socket)
            self._release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release()

    def _release(self) -> None:
        with self._count_lock:
            self.active -= 1

    def shutdown_request(self, request: Any) -> None:
        self.deadlines.disarm(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that fails the handshake or hangs up: one line a minute at most.
        now = time.monotonic()
        if now - self._errors_logged_at >= 60.0:
            self._errors_logged_at = now
            exc = sys.exc_info()[1]
            log.warning("connection failed (TLS handshake or client hang-up)",
                        extra={"event": "connection_failed", "error": repr(exc)[:200]})


def _text(value: Any, limit: int = 253) -> str | None:
    """A request field for a log line: a string cut to ``limit`` characters, else None."""
    return value[:limit] if isinstance(value, str) else None


class InjectorServer:
    """``POST /mutate`` and ``GET /healthz`` over HTTPS, served from a daemon thread.

    ``listen`` is ``HOST:PORT`` (``[::]:8443`` for IPv6; port 0 picks a free port, :attr:`port`
    tells which). ``config`` supplies the config per request (:class:`ConfigSource`), ``tls``
    the certificate (:class:`TLSFiles`). ``POST /mutate`` (query string ignored: the API server
    adds ``?timeout=5s``) with ``Content-Type: application/json`` answers 200 and the
    AdmissionReview response (:func:`admission_response`); 400 for a body that is not JSON
    (nested too deeply included) or not an AdmissionReview, 411 without a Content-Length, 413
    over ``max_body`` bytes (not read), 415 for another Content-Type, 431 for a request line and
    headers over ``max_head_bytes``, 503 with ``Retry-After: 1`` when ``max_parsing`` bodies
    are being read and parsed and no slot frees within ``busy_wait_s`` seconds.

    Limits (the module constants are the defaults): at most ``max_connections`` connections at
    once (more are closed at accept, logged at most once a minute); a connection is closed when
    its TLS handshake takes over ``handshake_timeout_s`` seconds, a request over
    ``request_timeout_s`` from the first byte of its request line to the end of its body (and as
    long again to answer), or when it waits over ``idle_timeout_s`` for its next request.

    One JSON log line per injected pod (namespace, pod name or generateName, agent, backend;
    never env values). Raises ``ValueError`` for a malformed ``listen``, ``OSError`` if the port
    cannot be bound.
    """

    def __init__(self, listen: str, config: ConfigSource, tls: TLSFiles,
                 max_body: int = MAX_BODY_BYTES, *, max_parsing: int = MAX_PARSING,
                 busy_wait_s: float = BUSY_WAIT_S, max_connections: int = MAX_CONNECTIONS,
                 handshake_timeout_s: float = HANDSHAKE_TIMEOUT_S,
                 request_timeout_s: float = REQUEST_TIMEOUT_S,
                 idle_timeout_s: float = IDLE_TIMEOUT_S,
                 max_head_bytes: int = MAX_HEAD_BYTES) -> None:
        host, port = parse_listen(listen, "0.0.0.0:8443")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.config = config
        self.max_body = max_body
        self.parsing = threading.BoundedSemaphore(max_parsing)
        self.parser = concurrent.futures.ThreadPoolExecutor(max_parsing,
                                                            thread_name_prefix="injector-parse")
        self.busy_wait_s = busy_wait_s
        self.request_timeout_s = request_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.max_head_bytes = max_head_bytes
        try:
            self._httpd = _HTTPSServer((host, port), _handler(self), tls, family,
                                       max_connections, handshake_timeout_s)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot listen on {listen}: {exc.strerror}") from None
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="injector",
                                        daemon=True)

    @property
    def port(self) -> int:
        """The TCP port actually bound."""
        return self._httpd.server_address[1]

    @property
    def connections(self) -> int:
        """The connections being served now (at most ``max_connections``)."""
        return self._httpd.active

    def review(self, review: Any) -> dict:
        """Answer one parsed AdmissionReview with the current config and log the decision.
        Raises :class:`AdmissionError` for a body that is not one. A bug in the decision never
        blocks a pod: it is logged and the pod allowed unchanged with a warning."""
        config = self.config.current()
        try:
            answer, decision = review_response(review, config)
        except AdmissionError:
            raise
        except Exception:
            log.exception("injector error; pod allowed without injection",
                          extra={"event": "injector_error"})
            uid = review["request"]["uid"]  # review_response checked it before deciding
            return {"apiVersion": ADMISSION_API_VERSION, "kind": "AdmissionReview",
                    "response": {"uid": uid, "allowed": True, "warnings": [
                        "repeat-failure: injector error; pod not injected"]}}
        request = review["request"]
        if decision.outcome == "injected" or decision.warnings:
            pod = request.get("object") if isinstance(request.get("object"), dict) else {}
            meta = pod.get("metadata") if isinstance(pod.get("metadata"), dict) else {}
            extra = {"event": "pod_injected" if decision.outcome == "injected"
                     else "pod_not_injected",
                     "namespace": _text(request.get("namespace")) or _text(meta.get("namespace")),
                     "pod": _text(meta.get("name")) or _text(request.get("name")) or None,
                     "generate_name": _text(meta.get("generateName")),
                     "agent": _text(decision.agent), "backend": _text(decision.backend),
                     "uid": _text(request.get("uid")), "dry_run": bool(request.get("dryRun"))}
            if decision.outcome == "injected":
                extra.update(native_sidecar=config.native_sidecar,
                             containers=[_text(name) for name in decision.hooked])
            if decision.warnings:
                extra["warnings"] = list(decision.warnings)
            (log.info if decision.outcome == "injected" else log.warning)(
                "pod injected" if decision.outcome == "injected" else "pod not injected",
                extra=extra)
        return answer

    def start(self) -> "InjectorServer":
        """Start serving in the background; returns self."""
        self._httpd.deadlines.start()
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the listening socket."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._httpd.deadlines.stop()
        self.parser.shutdown(wait=False)
