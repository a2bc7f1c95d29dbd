"""The injector's names and config (split from :mod:`repeat_failure.kube.injector`).

The names the injector shares with the chart and the sidecar (annotations, labels, volumes,
paths, the metrics port; ``docs/kubernetes.md``), and the injector's YAML config
(``docs/kubernetes.md``, "The injector's config"): :func:`parse_injector_config` /
:func:`load_injector_config` validate it with a JSON Schema, :class:`ConfigSource` re-reads it
when the file changes (the last good config stays on a bad edit).
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from repeat_failure import __version__
from repeat_failure.config import SECTION_KEYS, ConfigError, read_yaml
from repeat_failure.serving import file_stamp as _file_stamp

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
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))  # type: ignore[arg-type, union-attr]
        key = ".".join(filter(None, [path, extra[0] if extra else ""]))
        return f"{key}: unknown key"
    if error.validator == "propertyNames":
        return f"{path}: {error.instance!r} is not a resource name"
    if error.validator == "pattern" and error.schema is _QUANTITIES["additionalProperties"]:
        return f"{path}: {error.instance!r} is not a Kubernetes quantity (e.g. 100m, 64Mi)"
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


#: The injector's top-level keys that the sidecar's ``repeat_failure:`` section does not have:
#: ``check-config`` reads a file as the injector's only with one of them (``enabled`` alone is
#: both, and ``run`` refuses it at the top level).
INJECTOR_ONLY_KEYS = frozenset(_CONFIG_SCHEMA["properties"]) - SECTION_KEYS


def check_injector_config(data: Any, source: str, forced: bool = False) -> str | None:
    """``repeat-failure check-config`` on a parsed YAML document: None when it is not the
    injector's config (not ``forced``, i.e. no ``--injector``, and not a mapping with one of
    :data:`INJECTOR_ONLY_KEYS` and neither ``repeat_failure`` nor ``fixloop``), else the one line
    printed for a valid one. Raises :class:`repeat_failure.config.ConfigError` naming ``source``
    and the first bad key (:func:`parse_injector_config`), or, without ``forced``, the keys of
    both the injector's config and another program's (``enabled`` and ``repeat_failure``)."""
    keys = set(data) if isinstance(data, dict) else set()
    own, other = keys & set(_CONFIG_SCHEMA["properties"]), keys & {"repeat_failure", "fixloop"}
    if not forced and keys & INJECTOR_ONLY_KEYS and other:
        raise ConfigError(f"{source}: holds keys of the injector's config ({', '.join(sorted(own))})"
                          f" and of another ({', '.join(sorted(other))}): one file is one "
                          "program's config (--injector checks it as the injector's)")
    if not forced and not keys & INJECTOR_ONLY_KEYS:
        return None
    cfg = parse_injector_config(data, source)
    resources = "; ".join(f"{kind} " + ", ".join(f"{name} {value}" for name, value in
                                                 sorted(values.items()))
                          for kind, values in sorted(cfg.resources.items()))
    return (f"{source}: valid injector config (injection {'on' if cfg.enabled else 'off'}, "
            f"image {cfg.image} ({cfg.image_pull_policy}), "
            f"{'native sidecar' if cfg.native_sidecar else 'sidecar in containers'}, ConfigMap "
            f"{cfg.config_map}, user {cfg.run_as_user}:{cfg.run_as_group}, "
            f"resources {resources or 'none'})")
