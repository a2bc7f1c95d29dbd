"""Configuration: the ``repeat_failure:`` YAML section, validated against a JSON Schema.

Contract (README.md "Configuration"): one YAML file, usually mounted from a ConfigMap. Unknown keys,
wrong types and out-of-range values are rejected with one message that names the key. The file
is re-read when it changes; a change that does not validate is refused and the last good
configuration stays in force, so a typo in a ConfigMap never turns the check off or on by itself.
"""

from __future__ import annotations

import math
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    import jsonschema

#: Agent names become file names under the shared directory and JSON text baked into the hook.
AGENT_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
#: Backend names are baked into the hook's JSON prefix.
BACKEND_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")

DEFAULT_EXCLUDE = ("gh pr checks", "gh run watch")
MAX_COLLECT_INTERVAL_S = 30

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "repeat_failure": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "enabled": {"type": "boolean"},
                "threshold": {"type": "integer", "minimum": 1, "maximum": 10000},
                "window_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 7 * 86400},
                # "The same result" (C6) includes the output where a route knows it (issue 26).
                "match_output": {"type": "boolean"},
                "no_data_after_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 7 * 86400},
                "exclude": {
                    "type": "array",
                    "items": {"type": "string", "minLength": 1, "pattern": r"\S"},
                },
                "collect_interval_s": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "maximum": MAX_COLLECT_INTERVAL_S,
                },
                # A writer that opened the file before the rename must still be read: > 0.
                "collect_grace_s": {"type": "number", "minimum": 0.5, "maximum": 60},
                "top_commands": {"type": "integer", "minimum": 1, "maximum": 1000},
                # Kubernetes Events on the sidecar's pod, per raised note and per broken preview (repeat_failure.events).
                "events": {"type": "boolean"},
                # Turn verdicts and the preview probe (seed ard-0038), on their own switch:
                # independent of `enabled`, the repeat-failure check's (issue 31).
                "turn_health": {"type": "boolean"},
                # The preview probe's whole budget: entry document and its assets (repeat_failure.turns.probe).
                "preview_timeout_s": {"type": "number", "minimum": 0.5, "maximum": 30},
                "agents": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["name", "backend"],
                        "properties": {
                            "name": {"type": "string", "pattern": AGENT_NAME_RE.pattern},
                            "backend": {"type": "string", "pattern": BACKEND_NAME_RE.pattern},
                            "home": {"type": "string", "minLength": 1},
                            "preview_url": {"type": "string", "minLength": 1},
                            "session_env": {
                                "type": "object",
                                "propertyNames": {"pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
                                "additionalProperties": {"type": "string", "minLength": 1},
                            },
                        },
                    },
                },
            },
        }
    },
}


class ConfigError(ValueError):
    """The configuration file cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class AgentSpec:
    """One agent the sidecar watches: its name (file names under the shared dir), its backend,
    and ``home``: the agent's home directory as the sidecar sees it (an absolute path, usually a
    read-only mount), where the backend's session log is read (C12, C3); ``None`` when the
    sidecar cannot see it (then no shell-activity signal)."""

    name: str
    backend: str
    home: str | None = None
    #: ``(VAR, path relative to home)`` pairs where the agent moves its session files
    #: (``CODEX_HOME``, ``XDG_DATA_HOME``, ...); see :func:`repeat_failure.sessions.tail.expand_globs`.
    session_env: tuple[tuple[str, str], ...] = ()
    #: The agent's web-app preview origin (``http://127.0.0.1:5173/``), probed after a turn
    #: that edited files (:mod:`repeat_failure.turns.probe`); ``None``: no probe.
    preview_url: str | None = None


@dataclass(frozen=True)
class Config:
    """The validated ``repeat_failure:`` section. Durations are in seconds.

    ``exclude`` holds the entries with whitespace collapsed, so they compare against normalized
    commands. ``agents`` is empty unless the file lists them (multi-agent pods). ``events``
    turns on Kubernetes Events, one per raised note and one per broken preview (off by default).
    """

    enabled: bool = False
    threshold: int = 5
    window_s: float = 600.0
    no_data_after_s: float = 900.0
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    collect_interval_s: float = 30.0
    collect_grace_s: float = 5.0
    top_commands: int = 20
    agents: tuple[AgentSpec, ...] = field(default_factory=tuple)
    #: Kubernetes Events on the sidecar's own pod, per raised note and per broken preview
    #: (:mod:`repeat_failure.events`).
    events: bool = False
    #: Seconds one preview probe may take in all (entry document and assets).
    preview_timeout_s: float = 5.0
    #: Turn verdicts and the preview probe (seed ard-0038), whatever ``enabled`` says: they
    #: read the agent's session log and fetch its preview, and add nothing to its environment
    #: or home (C14 is the check's switch; issue 31). On by default.
    turn_health: bool = True

    @property
    def reads_sessions(self) -> bool:
        """True when the agents' session logs are read: for the check (the C12 safeguard, the
        session-log route) or for turn health (verdicts, the preview probe)."""
        return self.enabled or self.turn_health
    #: "The same result" (C6) is the same exit and, where a route knows the failure's output,
    #: the same output after normalization (issue 26); ``False``: the exit alone.
    match_output: bool = True


def _key_path(error: jsonschema.ValidationError) -> str:
    parts = [str(p) if not isinstance(p, int) else f"[{p}]" for p in error.absolute_path]
    text = ".".join(parts).replace(".[", "[")
    if error.validator == "additionalProperties":
        # jsonschema reports the parent; name the offending key itself.
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))  # type: ignore[arg-type, union-attr]
        text = ".".join(filter(None, [text, extra[0] if extra else ""]))
        return text
    return text or "(top level)"


#: The keys of the ``repeat_failure:`` section (a file that has them at the top level lacks its
#: wrapper; the error says so).
SECTION_KEYS = frozenset(_SCHEMA["properties"]["repeat_failure"]["properties"])


def _describe(error: jsonschema.ValidationError) -> str:
    key = _key_path(error)
    if error.validator == "additionalProperties":
        unwrapped = (sorted(set(error.instance) & SECTION_KEYS)  # type: ignore[arg-type]
                     if not error.absolute_path else [])
        if unwrapped:  # `enabled: true` written without its `repeat_failure:` wrapper
            return (f"{unwrapped[0]}: unknown key at the top level (the sidecar's keys belong "
                    "under `repeat_failure:`)")
        return f"{key}: unknown key"
    if error.validator == "exclusiveMinimum":
        return f"{key}: must be greater than {error.validator_value:g}"
    if error.validator == "pattern" and isinstance(error.instance, str):
        return f"{key}: {error.instance!r} is not allowed (must match {error.validator_value})"
    return f"{key}: {error.message}"


def parse_listen(listen: str, example: str) -> tuple[str, int]:
    """``(host, port)`` of a ``--listen HOST:PORT`` value (``[::1]:9466`` for IPv6; an empty
    host is ``0.0.0.0``; port 0 picks a free one). Raises ``ValueError`` naming the flag and
    ``example`` (``0.0.0.0:9466``) for anything else."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"--listen {listen!r}: expected HOST:PORT, e.g. {example}")
    return host.strip("[]") or "0.0.0.0", int(port)


def check_backend(backend: str, where: str = "backend") -> None:
    """Raise :class:`ConfigError` unless ``backend`` is in the coverage table
    (:data:`repeat_failure.backends.coverage.COVERAGE`): a typo would otherwise show as "not available"."""
    from repeat_failure.backends.coverage import COVERAGE

    if backend not in COVERAGE:
        raise ConfigError(f"{where}: unknown backend {backend!r} (known: {', '.join(COVERAGE)})")


def check_preview_url(url: str, where: str = "preview_url") -> None:
    """Raise :class:`ConfigError` naming ``where`` unless ``url`` is a preview origin the probe
    can use (:func:`repeat_failure.turns.probe.validate_preview_url`: http or https, a host, no credentials,
    no fragment)."""
    from repeat_failure.turns.probe import validate_preview_url

    try:
        validate_preview_url(url)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _is_number(value: Any) -> bool:
    """A finite ``int`` or ``float`` that is not a ``bool``."""
    return (isinstance(value, int) and not isinstance(value, bool)) or \
        (isinstance(value, float) and math.isfinite(value))


#: JSON Schema type name -> the strict check :func:`_surely_valid` applies.
_TYPES: dict[str, Any] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": _is_number,
}


def _surely_valid(schema: dict[str, Any], instance: Any) -> bool:
    """True only when ``instance`` is certainly valid against ``schema`` (JSON Schema draft
    2020-12 as :mod:`jsonschema` applies it); False means "not sure", never "invalid".

    A fast path that spares importing :mod:`jsonschema` for a valid config: it knows only the
    keywords :data:`_SCHEMA` uses (an unknown keyword gives False), and wherever jsonschema is
    lenient in a way a config has no use for (a float for an ``integer``, NaN, a keyword applied
    to a value of another type, a non-string property name) it gives False too, so
    :func:`parse_config` then asks jsonschema, which decides and words the error exactly as
    before. Never raises for data ``yaml.safe_load`` can return.
    """
    for keyword, value in schema.items():
        if keyword == "type":
            if not isinstance(value, str) or value not in _TYPES or not _TYPES[value](instance):
                return False
        elif keyword == "properties":
            if not isinstance(instance, dict) or not all(
                    _surely_valid(sub, instance[name])
                    for name, sub in value.items() if name in instance):
                return False
        elif keyword == "additionalProperties":
            if not isinstance(instance, dict):
                return False
            extras = [name for name in instance if name not in schema.get("properties", {})]
            if value is False:
                if extras:
                    return False
            elif not isinstance(value, dict) or not all(
                    _surely_valid(value, instance[name]) for name in extras):
                return False
        elif keyword == "required":
            if not isinstance(instance, dict) or not all(name in instance for name in value):
                return False
        elif keyword == "items":
            if not isinstance(instance, list) or not isinstance(value, dict) or not all(
                    _surely_valid(value, item) for item in instance):
                return False
        elif keyword == "propertyNames":
            if not isinstance(instance, dict) or not all(
                    isinstance(name, str) and _surely_valid(value, name) for name in instance):
                return False
        elif keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            if not _is_number(instance) or not _is_number(value):
                return False
            ok = {"minimum": instance >= value, "maximum": instance <= value,
                  "exclusiveMinimum": instance > value,
                  "exclusiveMaximum": instance < value}[keyword]
            if not ok:
                return False
        elif keyword in ("minLength", "maxLength"):
            if not isinstance(instance, str) or not isinstance(value, int):
                return False
            if (len(instance) < value) if keyword == "minLength" else (len(instance) > value):
                return False
        elif keyword == "pattern":
            if not isinstance(instance, str) or not re.search(value, instance):
                return False
        else:
            return False
    return True


def parse_config(data: Any, source: str = "<config>") -> Config:
    """Validate a parsed YAML document and return a :class:`Config`.

    ``data`` is what ``yaml.safe_load`` returned (``None`` for an empty file means all defaults).
    Raises :class:`ConfigError` naming ``source`` and the first bad key, e.g.
    ``"config.yaml: repeat_failure.threshold: 0 is less than the minimum of 1"``.
    """
    if data is None:
        data = {}
    if not _surely_valid(_SCHEMA, data):
        # Only now import jsonschema (about 6 MiB of resident memory a long-running sidecar
        # would otherwise carry for nothing): it decides, and words the error.
        import jsonschema

        validator = jsonschema.Draft202012Validator(_SCHEMA)
        errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
        if errors:
            raise ConfigError(f"{source}: {_describe(errors[0])}")
    section = data.get("repeat_failure") or {}
    for key in ("threshold", "top_commands"):
        # JSON Schema's "integer" accepts 5.0; a count written as a float is a mistake.
        if isinstance(section.get(key), float):
            raise ConfigError(f"{source}: repeat_failure.{key}: must be a whole number")
    exclude = section.get("exclude")
    agents = tuple(AgentSpec(a["name"], a["backend"], a.get("home"),
                             tuple(sorted((a.get("session_env") or {}).items())),
                             a.get("preview_url"))
                   for a in section.get("agents", ()))
    for i, agent in enumerate(agents):
        where = f"{source}: repeat_failure.agents[{i}]"
        if agent.home is not None and not os.path.isabs(agent.home):
            raise ConfigError(f"{where}.home: {agent.home!r} must be an absolute path (the "
                              "agent's home as mounted in the sidecar)")
        if agent.preview_url is not None:
            check_preview_url(agent.preview_url, f"{where}.preview_url")
        for var, value in agent.session_env:
            if os.path.isabs(value) or ".." in Path(value).parts:
                raise ConfigError(f"{where}.session_env.{var}: {value!r} must be a path inside "
                                  "the agent's home, relative to it (e.g. .codex-work)")
    for i, agent in enumerate(agents):
        check_backend(agent.backend, f"{source}: repeat_failure.agents[{i}].backend")
    names = [a.name for a in agents]
    if len(set(names)) != len(names):
        raise ConfigError(f"{source}: repeat_failure.agents: agent names must be unique")
    return Config(
        enabled=section.get("enabled", False),
        threshold=section.get("threshold", 5),
        window_s=float(section.get("window_s", 600)),
        match_output=section.get("match_output", True),
        no_data_after_s=float(section.get("no_data_after_s", 900)),
        exclude=DEFAULT_EXCLUDE if exclude is None else tuple(" ".join(e.split()) for e in exclude),
        collect_interval_s=float(section.get("collect_interval_s", 30)),
        collect_grace_s=float(section.get("collect_grace_s", 5)),
        top_commands=section.get("top_commands", 20),
        agents=agents,
        events=section.get("events", False),
        preview_timeout_s=float(section.get("preview_timeout_s", 5)),
        turn_health=section.get("turn_health", True),
    )


#: Nesting deeper than this in a YAML document is refused (no config of ours nests past 6
#: levels). PyYAML composes nodes recursively, two stack frames a level: a document nested 494
#: levels deep (``exclude: [[[[…]]]]``, 1 KB) raised RecursionError out of ``yaml.safe_load``
#: instead of a YAML error (issue 17), and less deep from a deeper call stack.
MAX_YAML_DEPTH = 64
#: A YAML document whose aliases expand it past this many nodes is refused (issue 28 item 15:
#: a 511-byte alias bomb, nine anchors of nine aliases each, took 13 s and 1.1 GB on reload:
#: PyYAML builds it cheaply, sharing what an alias names, but validating it walks every
#: expanded node). No config of ours has more than a few thousand nodes.
MAX_YAML_NODES = 100_000
#: The most characters of scalar text a document may expand to, aliases counted as copies: a
#: few aliases of one large value cost what that many copies cost (a break-it run: 40,000
#: aliases of a 2 MiB string passed the node bound and took 90 s of CPU; 90,000 took 10 GB).
MAX_YAML_CHARS = 16 << 20
#: A YAML config file over this many bytes is refused before it is parsed (a ConfigMap, where
#: every config of ours lives in a cluster, holds at most 1 MiB; the second break-it run's
#: 50 MB file took 17 s and 135 MB to parse, a comment but for two lines).
MAX_YAML_BYTES = 1 << 20


class _Loader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a document nested deeper than :data:`MAX_YAML_DEPTH`
    with a ``ComposerError`` marked at the node that goes too deep, before the recursion gets
    near Python's limit."""

    _depth = 0

    def compose_document(self) -> Any:  # noqa: D102 (PyYAML's hook)
        node = super().compose_document()
        _check_expansion(node)
        return node

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:  # noqa: D102
        # A key written twice in one mapping is refused (YAML 1.2: keys are unique; PyYAML kept
        # the last, so ``enabled: true`` then ``enabled: false`` was silently off). Keys a
        # merge (``<<: *anchor``) brings in may still be overridden.
        seen: set = set()
        for key, _ in node.value:
            if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                if (key.tag, key.value) in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key.value!r}", key.start_mark)
                seen.add((key.tag, key.value))
        return super().construct_mapping(node, deep)

    def compose_node(self, parent: Any, index: Any) -> Any:  # noqa: D102 (PyYAML's hook)
        if self._depth >= MAX_YAML_DEPTH:
            raise yaml.composer.ComposerError(
                None, None, f"nested deeper than {MAX_YAML_DEPTH} levels",
                self.peek_event().start_mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _check_expansion(root: Any) -> None:
    """Raise a ``ComposerError`` (marked at the document's start) when the node graph ``root``
    expands past :data:`MAX_YAML_NODES` nodes or :data:`MAX_YAML_CHARS` characters of scalar
    text, each alias counted as a copy of what it names.
    Stops counting at the bound, so the time it takes is bounded too; a recursive alias, which
    would expand for ever, is refused the same way."""
    count, chars, stack = 0, 0, [root]
    while stack:
        node = stack.pop()
        count += 1
        if count > MAX_YAML_NODES:
            raise yaml.composer.ComposerError(
                None, None, f"its aliases expand it past {MAX_YAML_NODES:,} nodes",
                root.start_mark)
        if isinstance(node, yaml.ScalarNode):
            chars += len(node.value)
            if chars > MAX_YAML_CHARS:
                raise yaml.composer.ComposerError(
                    None, None, f"its aliases expand it past {MAX_YAML_CHARS:,} characters of "
                    "text", root.start_mark)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack.append(key)
                stack.append(value)


def open_regular(path: str | os.PathLike[str]) -> int:
    """A read-only descriptor of the regular file at ``path`` (a symlink is followed). Opened
    non-blocking, so a FIFO planted or named there is refused at once instead of blocking the
    caller until a writer comes (issue 17: the sidecar's main loop hung, deaf to SIGTERM); a
    directory, FIFO, socket or device is refused too (``/dev/zero`` would be read for ever).
    Raises ``OSError``, its ``strerror`` saying what the path is instead ("it is a FIFO, not a
    regular file")."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
                    else "a socket" if stat.S_ISSOCK(mode) else "a device")
            raise OSError(0, f"it is {kind}, not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular_file(path: str | os.PathLike[str], what: str,
                      max_bytes: int | None = None) -> bytes:
    """The bytes of the regular file at ``path`` (:func:`open_regular`: a ConfigMap's symlink
    is followed; a directory, FIFO, socket or device is refused). Raises :class:`ConfigError`
    naming ``path`` and ``what`` it is, also for a file over ``max_bytes`` (None: no limit)."""
    try:
        fd = open_regular(path)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    try:
        chunks, size = [], 0
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
            size += len(chunk)
            if max_bytes is not None and size > max_bytes:
                raise ConfigError(f"{path}: cannot read {what}: over {max_bytes:,} bytes (a "
                                  "ConfigMap holds at most 1 MiB)")
        return b"".join(chunks)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def read_yaml(path: str | os.PathLike[str], what: str) -> object:
    """The YAML document in the file at ``path`` (``None`` for an empty file). Raises
    :class:`ConfigError` naming ``path`` (and ``what`` it is) when the file cannot be read, is
    not a regular file (:func:`read_regular_file`), or is not valid YAML, with the line and
    column of the problem; a file over :data:`MAX_YAML_BYTES`, a document nested deeper than
    :data:`MAX_YAML_DEPTH` levels, whose aliases expand it past :data:`MAX_YAML_NODES` nodes,
    or a mapping with a key written twice, is not valid YAML here."""
    try:
        text = read_regular_file(path, what, MAX_YAML_BYTES).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: cannot read {what}: {exc}") from exc
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{path}: not valid YAML{at}: {problem}") from exc
    except RecursionError:  # a last resort: the depth bound should make this unreachable
        raise ConfigError(f"{path}: not valid YAML: nested too deeply") from None


def check_sidecar_config(data: Any, source: str) -> list[str]:
    """``repeat-failure check-config`` on a parsed YAML document read as the sidecar's config:
    the lines printed for a valid one, a one-line summary then one line per agent of
    ``repeat_failure.agents`` (none when it lists none). Raises :class:`ConfigError` naming
    ``source`` and the first bad key (:func:`parse_config`); a lone top-level ``enabled``, all
    an injector config may also hold, adds how to check it as one (``--injector``)."""
    try:
        config = parse_config(data, source)
    except ConfigError as exc:
        if isinstance(data, dict) and set(data) == {"enabled"}:
            raise ConfigError(f"{exc}; if it is the injector's config: check-config --injector "
                              "FILE") from None
        raise
    lines = [f"{source}: valid (check {'on' if config.enabled else 'off'}, threshold "
             f"{config.threshold}, window {config.window_s:g} s, "
             f"{'exit and output' if config.match_output else 'exit alone'} matched, not "
             f"receiving data after {config.no_data_after_s:g} s)"]
    for agent in config.agents:
        where = f"home {agent.home}" if agent.home else "no home (no session log read)"
        preview = f", preview {agent.preview_url}" if agent.preview_url else ""
        lines.append(f"  agent {agent.name}: backend {agent.backend}, {where}{preview}")
    return lines


def load_config(path: str | os.PathLike[str] | None, allow_empty: bool = True) -> Config:
    """Read and validate the YAML file at ``path``; ``None`` means all defaults (check off).

    ``allow_empty=False`` refuses a file with no YAML document (used on reload: an editor or a
    non-atomic write that truncates the file must not turn the check off and drop its state).
    Raises :class:`ConfigError` when the file is missing, unreadable, not YAML, or invalid.
    """
    if path is None:
        return Config()
    data = read_yaml(path, "config file")
    if not allow_empty and (data is None or (isinstance(data, dict)
                                             and data.get("repeat_failure", {}) is None)):
        raise ConfigError(f"{path}: the file is empty; write `repeat_failure: {{enabled: false}}` "
                          "to turn the check off")
    return parse_config(data, str(path))
