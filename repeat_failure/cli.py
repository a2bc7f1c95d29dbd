"""``repeat-failure`` command line: run, demo, hook env, check-config, coverage, inject-webhook,
verdict, fixloop, replay.

Flags of ``run`` and ``hook env`` may also come from environment variables
(``REPEAT_FAILURE_CONFIG``, ``REPEAT_FAILURE_SHARED_DIR``, ``REPEAT_FAILURE_AGENT``,
``REPEAT_FAILURE_BACKEND``, ``REPEAT_FAILURE_LISTEN``, ``REPEAT_FAILURE_CHAIN_BASH_ENV``,
``REPEAT_FAILURE_AGENT_HOME``, ``REPEAT_FAILURE_PREVIEW_URL``,
``REPEAT_FAILURE_CONFIG_OPTIONAL=1``) so a pod can set them from the Downward API; those of
``inject-webhook`` from ``REPEAT_FAILURE_INJECTOR_CONFIG``, ``REPEAT_FAILURE_INJECTOR_LISTEN``,
``REPEAT_FAILURE_INJECTOR_METRICS_LISTEN``, ``REPEAT_FAILURE_INJECTOR_TLS_CERT`` and
``REPEAT_FAILURE_INJECTOR_TLS_KEY``; ``fixloop``'s from ``REPEAT_FAILURE_FIXLOOP_*``. Exit codes:
0 success, 2 bad usage or invalid config, 1 a runtime failure; ``verdict`` adds 3, 4 and 5,
one per failed verdict (:data:`repeat_failure.turns.verdict.EXIT_CODES`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import signal
import sys
import threading
from collections.abc import Sequence

from repeat_failure import __version__

from repeat_failure.sidecar import hook
from repeat_failure.jsonlog import configure_logging
from repeat_failure.config import (AGENT_NAME_RE, AgentSpec, Config, ConfigError, check_backend,
                            check_preview_url, load_config)

DEFAULT_SHARED_DIR = "/var/run/repeat-failure"
DEFAULT_LISTEN = "0.0.0.0:9466"
DEFAULT_INJECTOR_LISTEN = "0.0.0.0:8443"
DEFAULT_INJECTOR_METRICS_LISTEN = "0.0.0.0:9468"
DEFAULT_FIXLOOP_LISTEN = "0.0.0.0:9467"


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(f"REPEAT_FAILURE_{name}", default)


def _env_flag(name: str) -> bool:
    """A boolean flag's default from ``REPEAT_FAILURE_<name>``: ``1``, ``true`` or ``yes``."""
    return (_env(name) or "").strip().lower() in ("1", "true", "yes")


def _config_missing(args: argparse.Namespace) -> bool:
    """True when ``run --config-optional`` names a config file that does not exist (yet)."""
    return bool(getattr(args, "config_optional", False) and args.config
                and not os.path.exists(args.config))


def _agents(args: argparse.Namespace) -> list[AgentSpec]:
    config = Config() if _config_missing(args) else load_config(args.config)
    if config.agents:
        if args.agent or args.backend:
            raise ConfigError(
                f"{args.config}: repeat_failure.agents lists the agents, so do not also pass "
                "--agent/--backend (or REPEAT_FAILURE_AGENT/REPEAT_FAILURE_BACKEND)")
        if args.preview_url:
            raise ConfigError(
                f"{args.config}: repeat_failure.agents lists the agents; give each its "
                "`preview_url` there instead of --preview-url (or REPEAT_FAILURE_PREVIEW_URL)")
        if args.agent_home:
            raise ConfigError(
                f"{args.config}: repeat_failure.agents lists the agents; give each its `home` "
                "there instead of --agent-home (or REPEAT_FAILURE_AGENT_HOME)")
        return list(config.agents)
    if not args.agent or not args.backend:
        raise ConfigError("name the agent: --agent NAME --backend NAME (or REPEAT_FAILURE_AGENT "
                          "and REPEAT_FAILURE_BACKEND), or list repeat_failure.agents in the config")
    if not AGENT_NAME_RE.fullmatch(args.agent):
        raise ConfigError(f"--agent (or REPEAT_FAILURE_AGENT) {args.agent!r}: expected a name "
                          f"matching {AGENT_NAME_RE.pattern} (it names the hook and record files)")
    check_backend(args.backend, "--backend")
    home = args.agent_home or None  # an empty REPEAT_FAILURE_AGENT_HOME means unset
    if home is not None and not os.path.isabs(home):
        raise ConfigError(f"--agent-home (or REPEAT_FAILURE_AGENT_HOME) {home!r}: expected an "
                          "absolute path, the agent's home as mounted in the sidecar")
    preview = args.preview_url or None
    if preview is not None:
        check_preview_url(preview, "--preview-url (or REPEAT_FAILURE_PREVIEW_URL)")
    return [AgentSpec(args.agent, args.backend, home, preview_url=preview)]


def _stop_on_signals() -> threading.Event:
    """An event SIGTERM and SIGINT set (the handlers installed now, in the main thread): a
    long-running command waits on it and then stops cleanly, exit 0."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    return stop


def cmd_run(args: argparse.Namespace) -> int:
    """Run the sidecar: render the agent's hook (check on), collect its records, detect repeating
    failures and serve /metrics and /status until SIGTERM or SIGINT. With --config-optional a
    config file that does not exist yet means the built-in defaults (check off) until it
    appears (the injected sidecar's ConfigMap is optional); without it, a missing file is an
    error (exit 2). Leave --agent and --backend out when the config lists the agents
    (repeat_failure.agents). Each flag may come from the environment variable its help names."""
    from prometheus_client import CollectorRegistry, ProcessCollector

    from repeat_failure.sidecar.app import Sidecar
    from repeat_failure.sidecar.exporter import Server
    from repeat_failure.malloc import tune_malloc

    configure_logging()
    tune_malloc()  # big transient buffers go back to the system when freed (issue 6)
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)  # process_* (CPU, memory, descriptors; issue 29)
    sidecar = Sidecar(args.shared_dir, _agents(args), args.config, args.chain_bash_env,
                      registry=registry, config_optional=args.config_optional)
    # The handlers before the server: a SIGTERM that comes once /healthz answers must stop the
    # sidecar cleanly (exit 0), not kill it (a loaded CI machine sent one in between).
    stop = _stop_on_signals()
    server = Server(sidecar, args.listen).start()
    logging.getLogger("repeat_failure").info(
        "sidecar started", extra={"listen": args.listen, "port": server.port,
                                  "enabled": sidecar.config.enabled,
                                  "turn_health": sidecar.config.turn_health,
                                  "agents": sorted(sidecar.agents)})
    try:
        sidecar.run_forever(stop)
    finally:
        server.stop()
    return 0


def cmd_inject_webhook(args: argparse.Namespace) -> int:
    """Serve the sidecar injector, a Kubernetes mutating admission webhook: POST /mutate answers
    an admission.k8s.io/v1 AdmissionReview for a Pod CREATE with a JSONPatch that adds the
    repeat-failure sidecar (docs/kubernetes.md), GET /healthz answers ok; HTTPS only (TLS >= 1.2).
    GET /metrics (the injector's series, docs/metrics.md) is served over plain HTTP on
    --metrics-listen. The config and the certificate and key are re-read when their files change. Runs until
    SIGTERM or SIGINT. Exit 2 for a missing or invalid config, 1 when the certificate or key
    cannot be loaded or the port bound."""
    from repeat_failure.kube.injector import ConfigSource, InjectorServer, TLSFiles

    missing = [flag for flag, value in (("--config", args.config), ("--tls-cert", args.tls_cert),
                                        ("--tls-key", args.tls_key)) if not value]
    if missing:
        raise ConfigError(f"inject-webhook needs {', '.join(missing)} (or "
                          "REPEAT_FAILURE_INJECTOR_CONFIG / _TLS_CERT / _TLS_KEY)")
    configure_logging()
    config = ConfigSource(args.config)
    try:
        tls = TLSFiles(args.tls_cert, args.tls_key)
    except (OSError, ValueError) as exc:
        print(f"repeat-failure: cannot load the TLS certificate {args.tls_cert} and key "
              f"{args.tls_key}: {exc}", file=sys.stderr)
        return 1
    stop = _stop_on_signals()  # before the server answers (see cmd_run)
    server = InjectorServer(args.listen, config, tls,
                            metrics_listen=args.metrics_listen or None).start()
    current = config.current()
    logging.getLogger("repeat_failure").info(
        "injector started", extra={"listen": args.listen, "port": server.port,
                                   "metrics_port": server.metrics_port,
                                   "enabled": current.enabled,
                                   "native_sidecar": current.native_sidecar,
                                   "image": current.image})
    try:
        stop.wait()
    finally:
        server.stop()
    return 0


def cmd_hook_env(args: argparse.Namespace) -> int:
    """Print the export lines (BASH_ENV, SHELL, and SHLVL=1 when the environment's SHLVL is unset
    or below 1) that make an agent's shells load its hook; print nothing on stdout when the check
    is off. --agent may be left out when the config's repeat_failure.agents lists one agent (it
    must be one of those listed). Each flag may come from the environment variable its help
    names."""
    config = load_config(args.config)
    if not config.enabled:
        print(f"repeat-failure: the check is off ({args.config or 'no --config'}: "
              "repeat_failure.enabled is not true); nothing to export", file=sys.stderr)
        return 0
    names = [a.name for a in config.agents]
    agent = args.agent or (names[0] if len(names) == 1 else None)
    if not agent:
        raise ConfigError("name the agent: --agent NAME (or REPEAT_FAILURE_AGENT)")
    if names and agent not in names:
        raise ConfigError(f"{args.config}: agent {agent!r} is not in repeat_failure.agents "
                          f"({', '.join(names)})")
    shared_dir = os.path.abspath(args.shared_dir)  # BASH_ENV is read from the agent's cwd
    env = hook.launch_env(shared_dir, agent)
    if not hook.hook_path(shared_dir, agent).is_file():
        print(f"repeat-failure: note: {env['BASH_ENV']} does not exist yet; it appears when "
              "`repeat-failure run` starts with the check on", file=sys.stderr)
    for key, value in env.items():
        print(f"export {key}={shlex.quote(value)}")
    return 0


def cmd_check_config(args: argparse.Namespace) -> int:
    """Validate a config file: the sidecar's (`repeat_failure:`), the fix-loop ledger's
    (`fixloop:`) or the injector's (--injector, or a top-level key only it has, `image`,
    `nativeSidecar`, ...; docs/kubernetes.md): exit 0 when valid, 2 with the reason (the bad key)
    when not; a file with both `repeat_failure:` and `fixloop:` is refused (docs/operations.md)."""
    from repeat_failure.config import check_sidecar_config, read_yaml
    from repeat_failure.fixloop.config import check_fixloop_config
    from repeat_failure.kube.injector_config import check_injector_config

    data, source = read_yaml(args.file, "config file"), str(args.file)
    line = check_injector_config(data, source, args.injector)
    if line is None:
        line = check_fixloop_config(data, source)
    print(line if line is not None else "\n".join(check_sidecar_config(data, source)))
    return 0


def cmd_coverage(args: argparse.Namespace) -> int:
    """Print the backend coverage tables as Markdown (the same tables as
    docs/backend-support.md): Hive's backends, then the agent CLIs beyond Hive's list."""
    from repeat_failure.backends.coverage import TABLE_HEADER, table_rows

    for hive in (True, False):
        if not hive:
            print("\nBeyond Hive's list:\n")
        print("| " + " | ".join(TABLE_HEADER) + " |")
        print("|" + "---|" * len(TABLE_HEADER))
        for row in table_rows(hive):
            print("| " + " | ".join(row) + " |")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Watch a note appear and clear: a sidecar and a bash "agent" on a temporary directory."""
    from repeat_failure.sidecar.demo import run_demo

    configure_logging()
    # SIGTERM ends the demo as Ctrl-C does, so its temporary directory is removed (a new user's
    # trial: a `kill` left /tmp/repeat-failure-demo-* behind).
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        return run_demo(serve=args.serve, listen=args.listen, window_s=args.window)
    except KeyboardInterrupt:
        print("demo stopped", file=sys.stderr)
        return 130


def cmd_verdict(args: argparse.Namespace) -> int:
    """Classify one agent run from its stream-json transcript, for CI
    jobs: exit 0 for ok, 3 agent_no_output (no text and no tool call), 4 agent_error (the stream
    ended on an error, or stopped before its terminal result), 5 nonzero_exit (the
    --exit-status given is not 0 and the stream shows no error, or the transcript cannot be
    read at all: an agent that crashed before writing anything); the verdict's name is the one
    line on stderr. --exit-status 0 with an empty transcript is agent_no_output. 1: the
    transcript cannot be read (empty, not JSON, or its format is not known) and no exit status
    was given, or it was 0 and the transcript holds other output (also: over 1 GiB read,
    MAX_TRANSCRIPT_BYTES, so an endless stream ends); 2: bad usage. --json writes control and
    bidi characters as \\u escapes, never raw. Formats: claude (Claude Code `-p --output-format stream-json --verbose`; Qwen Code's
    stream-json has the same shape), gemini (Gemini CLI `--output-format stream-json`), codex
    (Codex `exec --json`). Never probes a preview (batch mode). Example:
    `status=0; claude -p "$TASK" --output-format stream-json --verbose > t.jsonl || status=$?;
    repeat-failure verdict --exit-status "$status" t.jsonl`. Source: design ard-0038 §1, §2,
    §4."""
    from repeat_failure.turns.verdict import EXIT_CODES, TranscriptError, bounded_lines, read_transcript

    source = args.file
    try:
        if source == "-":
            result = read_transcript(bounded_lines(sys.stdin.buffer), args.exit_status,
                                     args.format)
        else:
            with open(source, "rb") as stream:
                result = read_transcript(bounded_lines(stream), args.exit_status, args.format)
    except TranscriptError as exc:
        print(f"repeat-failure verdict: {source}: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"repeat-failure verdict: {source}: cannot read: {exc.strerror or exc}",
              file=sys.stderr)
        return 1
    if args.json:
        # No control or bidi character raw (issue 28 item 19): each is written as its \\u escape,
        # the same JSON value.
        from repeat_failure.rules.terminal import json_text

        sys.stdout.write(json_text(json.dumps(result.to_json(), ensure_ascii=False)) + "\n")
    print(result.verdict, file=sys.stderr)
    return EXIT_CODES[result.verdict]


def cmd_fixloop(args: argparse.Namespace) -> int:
    """Run the CI fix-loop escalation ledger (design adr-0010; docs/fixloop.md): sweep the open
    pull requests of the configured GitHub repositories every interval_s, escalate PRs whose CI
    stayed red on `threshold` distinct head trees (a comment and the needs-human label),
    re-engage stale red PRs through their agents' webhooks, and serve /metrics, /healthz and
    /readyz until SIGTERM or SIGINT. --once: one sweep, then exit (0 when every repository was
    listed, 1 otherwise). Exit 2: bad config."""
    from repeat_failure.fixloop.app import FixloopApp
    from repeat_failure.fixloop.config import load_fixloop_config

    if not args.config:
        raise ConfigError("fixloop needs --config FILE (or REPEAT_FAILURE_FIXLOOP_CONFIG)")
    configure_logging()
    config = load_fixloop_config(args.config)
    events = None
    if config.events:
        from repeat_failure.events import EventPublisher, EventStats

        events = EventPublisher(EventStats()).start()
    app = FixloopApp(config, events=events)
    if args.once:
        return 0 if app.run_once() == "complete" else 1
    stop = _stop_on_signals()  # before the server answers (see cmd_run)
    port = app.serve(args.listen)
    logging.getLogger("repeat_failure").info("fixloop started", extra={
        "listen": args.listen, "port": port, "repositories": list(config.repositories)})
    try:
        app.run_forever(stop)
    finally:
        app.stop_serving()
        if events is not None:
            events.close(timeout=2.0)
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    """Replay agent session logs (or homes, searched as the sidecar searches an agent's home; a
    directory that is not one is searched home by home, up to 4 levels below it) and
    mini-swe-agent / SWE-agent trajectories (*.traj.json, *.traj) through the sidecar's own
    readers, scrub, normalize, exclude and detector, at each record's own time, and print the
    notes the check would have raised (per session: command as exported, exit, count, minutes,
    whether the output was the same each time, when) and a summary table (sessions, commands,
    failures, sessions with a note, notes; one row per --threshold/--window combination),
    with the calls whose log gives no result and the session logs in which the shell tool is
    called but no shell call is recognised (issue 26) said before the table. The
    check ships off (spec C14): this shows what it would say before it is turned on. Files
    that cannot be read are reported by name and skipped. Exit 0 when every path was read, 1
    when some file was skipped or none was found, 2 for bad usage or an invalid config. Issue 19;
    docs/operations.md "Replay before enabling"."""
    from repeat_failure.config import Config
    from repeat_failure.replay.run import MAX_SETTINGS, BadFile, Setting, replay
    from repeat_failure.replay.report import MATCH_EXIT, MATCH_OUTPUT, Progress, format_text
    from repeat_failure.replay.sources import find_sources
    from repeat_failure.rules.terminal import json_text

    config = load_config(args.config) if args.config else Config()
    thresholds = args.threshold or [config.threshold]
    windows = args.window or [config.window_s]
    matches = args.match or [MATCH_OUTPUT if config.match_output else MATCH_EXIT]
    settings = sorted({Setting(t, w, m) for t in thresholds for w in windows for m in matches})
    if len(settings) > MAX_SETTINGS:
        raise ValueError(f"replay: --threshold, --window and --match make {len(settings)} "
                         "combinations, "
                         f"more than the {MAX_SETTINGS} a sweep judges (one detector each per "
                         "session); give fewer values")
    bad: list[BadFile] = []
    sources = find_sources(args.paths, args.backend, bad)
    total = 0
    for source in sources:
        try:
            total += os.stat(source.path).st_size
        except OSError:
            pass
    progress = Progress(total)
    try:
        result = replay(sources, settings, config.exclude, bad, progress)
    finally:
        progress.close()
    if args.json:
        # json_text: json.dumps escapes C0 controls only; a C1 control (U+009B, CSI), DEL or
        # a bidi override in a command would reach the terminal raw (issue 16).
        sys.stdout.write(json_text(json.dumps(result.to_json(), ensure_ascii=False)) + "\n")
    else:
        sys.stdout.write(format_text(result))
    if not sources and not result.bad:
        print("repeat-failure replay: no session file or trajectory found under the paths "
              "given (a directory is searched as an agent's home, or for homes up to 4 levels "
              "below it: docs/operations.md)",
              file=sys.stderr)
        return 1
    return 1 if result.bad else 0


def _numbers(kind: type, low: float, high: float, what: str):
    """An argparse type: a comma-separated list of ``kind`` values within [low, high] (the
    config's own bounds for ``what``)."""
    def parse(text: str) -> list:
        out = []
        for part in text.split(","):
            try:
                value = kind(part)
            except ValueError:
                raise argparse.ArgumentTypeError(
                    f"{part!r} is not {'an integer' if kind is int else 'a number'}") from None
            if not (low <= value <= high) or (kind is float and value <= 0):
                raise argparse.ArgumentTypeError(
                    f"{part}: {what} must be {'above 0' if kind is float else f'at least {low:g}'}"
                    f" and at most {high:g} (as in the config)")
            out.append(value)
        return out
    return parse


def _choices(allowed: tuple[str, ...], what: str):
    """An argparse type: a comma-separated list of words, each one of ``allowed`` (``what``
    names it in the error)."""
    def parse(text: str) -> list[str]:
        out = []
        for part in text.split(","):
            if part not in allowed:
                raise argparse.ArgumentTypeError(
                    f"{part!r}: {what} must be one of {', '.join(allowed)}")
            out.append(part)
        return out
    return parse


def _exit_status(text: str) -> int:
    """``--exit-status``: an exit status 0-255 (what ``$?`` holds)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value <= 255:
        raise argparse.ArgumentTypeError(f"{value} is not an exit status (0-255, what $? holds)")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every subcommand."""
    parser = argparse.ArgumentParser(
        prog="repeat-failure",
        description="Notice an AI coding agent running the same failing shell command again "
                    "and again, and export it as Prometheus metrics. Monitor only.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def common(p: argparse.ArgumentParser, agent: str) -> None:
        p.add_argument("--config", default=_env("CONFIG"), help="YAML config file (default: "
                       "built-in defaults, check off; REPEAT_FAILURE_CONFIG)")
        p.add_argument("--shared-dir", default=_env("SHARED_DIR", DEFAULT_SHARED_DIR),
                       help=f"shared volume (default {DEFAULT_SHARED_DIR}); a relative path "
                            "is taken from the current directory (REPEAT_FAILURE_SHARED_DIR)")
        p.add_argument("--agent", default=_env("AGENT"),
                       help=f"agent name; {agent} (REPEAT_FAILURE_AGENT)")

    run = sub.add_parser("run", help="run the sidecar", description=cmd_run.__doc__)
    common(run, "leave it out when the config lists repeat_failure.agents")
    run.add_argument("--backend", default=_env("BACKEND"), help="the agent's backend (see "
                     "`repeat-failure coverage`), e.g. bash; leave it out when the config lists "
                     "repeat_failure.agents (REPEAT_FAILURE_BACKEND)")
    run.add_argument("--listen", default=_env("LISTEN", DEFAULT_LISTEN), help=f"HOST:PORT for "
                     f"/metrics and /status (default {DEFAULT_LISTEN}; REPEAT_FAILURE_LISTEN)")
    run.add_argument("--chain-bash-env", default=_env("CHAIN_BASH_ENV"),
                     help="the agent's original BASH_ENV, sourced by the rendered hook (never a "
                          "file under the shared dir's hook/: exit 2; "
                          "REPEAT_FAILURE_CHAIN_BASH_ENV)")
    run.add_argument("--agent-home", default=_env("AGENT_HOME"),
                     help="the agent's home as mounted in the sidecar, an absolute path "
                          "(read-only is enough): "
                          "where the backend's session log is read for the 'not receiving "
                          "data' safeguard and the session-log route (REPEAT_FAILURE_AGENT_HOME)")
    run.add_argument("--preview-url", default=_env("PREVIEW_URL"),
                     help="the agent's web-app preview origin, e.g. http://127.0.0.1:5173/: "
                          "after a turn that edited files it is fetched once (entry document "
                          "and its scripts, stylesheets and module preloads) and a blank page "
                          "or broken asset counts as a preview error; needs --agent-home "
                          "(turns are seen in the session log) (REPEAT_FAILURE_PREVIEW_URL)")
    run.add_argument("--config-optional", action="store_true",
                     default=_env_flag("CONFIG_OPTIONAL"),
                     help="a --config file that does not exist yet is not an error: run with "
                          "the built-in defaults (check off) until it appears "
                          "(REPEAT_FAILURE_CONFIG_OPTIONAL=1)")
    run.set_defaults(func=cmd_run)

    demo = sub.add_parser("demo", help="watch a note appear and clear on real bash commands",
                          description=cmd_demo.__doc__)
    demo.add_argument("--serve", action="store_true",
                      help="keep /metrics up after the demo until Ctrl-C")
    demo.add_argument("--listen", default="127.0.0.1:0",
                      help="HOST:PORT for the demo's endpoint (default: a free loopback port)")
    demo.add_argument("--window", type=float, default=15.0,
                      help="the demo's window in seconds (default 15; production default 600)")
    demo.set_defaults(func=cmd_demo)

    hook_p = sub.add_parser("hook", help="the neutral route's hook")
    hook_sub = hook_p.add_subparsers(dest="hook_command", metavar="{env}", required=True)
    env = hook_sub.add_parser("env", help="print the export lines for an agent's environment",
                              description=cmd_hook_env.__doc__)
    common(env, "may be left out when the config's repeat_failure.agents lists one agent")
    env.set_defaults(func=cmd_hook_env)

    check = sub.add_parser("check-config", help="validate a config file",
                           description=cmd_check_config.__doc__)
    check.add_argument("file")
    check.add_argument("--injector", action="store_true",
                       help="FILE is the injector's config (inject-webhook --config)")
    check.set_defaults(func=cmd_check_config)

    cov = sub.add_parser("coverage", help="print the backend coverage table",
                         description=cmd_coverage.__doc__)
    cov.set_defaults(func=cmd_coverage)

    inject = sub.add_parser("inject-webhook",
                            help="serve the sidecar injector (a mutating admission webhook)",
                            description=cmd_inject_webhook.__doc__)
    inject.add_argument("--config", default=_env("INJECTOR_CONFIG"),
                        help="the injector's YAML config (REPEAT_FAILURE_INJECTOR_CONFIG)")
    inject.add_argument("--listen", default=_env("INJECTOR_LISTEN", DEFAULT_INJECTOR_LISTEN),
                        help=f"HOST:PORT for HTTPS (default {DEFAULT_INJECTOR_LISTEN}; "
                             "REPEAT_FAILURE_INJECTOR_LISTEN)")
    inject.add_argument("--metrics-listen",
                        default=_env("INJECTOR_METRICS_LISTEN", DEFAULT_INJECTOR_METRICS_LISTEN),
                        help=f"HOST:PORT for GET /metrics over plain HTTP (default "
                             f"{DEFAULT_INJECTOR_METRICS_LISTEN}; empty: not served; "
                             "REPEAT_FAILURE_INJECTOR_METRICS_LISTEN)")
    inject.add_argument("--tls-cert", default=_env("INJECTOR_TLS_CERT"),
                        help="PEM certificate chain (REPEAT_FAILURE_INJECTOR_TLS_CERT)")
    inject.add_argument("--tls-key", default=_env("INJECTOR_TLS_KEY"),
                        help="PEM private key (REPEAT_FAILURE_INJECTOR_TLS_KEY)")
    inject.set_defaults(func=cmd_inject_webhook)

    from repeat_failure.backends import stream_readers

    verdict = sub.add_parser("verdict", help="classify an agent run from its stream-json "
                                             "transcript (exit 0 ok, 3/4/5 by verdict)",
                             description=cmd_verdict.__doc__)
    verdict.add_argument("file", nargs="?", default="-",
                         help="the transcript file, or - for standard input (the default)")
    verdict.add_argument("--exit-status", type=_exit_status, default=None, metavar="N",
                         help="the agent CLI's exit status ($?), when known: not 0 makes the "
                              "verdict nonzero_exit unless the stream itself ended on an error")
    verdict.add_argument("--format", choices=sorted(stream_readers()), default=None,
                         help="the transcript's format (default: recognised from its first "
                              "JSON line)")
    verdict.add_argument("--json", action="store_true",
                         help="also print the verdict and what it was decided from as one JSON "
                              "object on stdout")
    verdict.set_defaults(func=cmd_verdict)

    fixloop = sub.add_parser("fixloop", help="run the CI fix-loop escalation ledger "
                                             "(docs/fixloop.md)",
                             description=cmd_fixloop.__doc__)
    fixloop.add_argument("--config", default=_env("FIXLOOP_CONFIG"),
                         help="the fixloop YAML config (REPEAT_FAILURE_FIXLOOP_CONFIG)")
    fixloop.add_argument("--listen", default=_env("FIXLOOP_LISTEN", DEFAULT_FIXLOOP_LISTEN),
                         help=f"HOST:PORT for /metrics, /healthz, /readyz (default "
                              f"{DEFAULT_FIXLOOP_LISTEN}; REPEAT_FAILURE_FIXLOOP_LISTEN)")
    fixloop.add_argument("--once", action="store_true",
                         help="one sweep, then exit (0: every repository listed)")
    fixloop.set_defaults(func=cmd_fixloop)

    from repeat_failure.replay.sources import formats

    replay_p = sub.add_parser("replay", help="what the check would have said on session logs "
                                              "and trajectories (offline)",
                              description=cmd_replay.__doc__)
    replay_p.add_argument("paths", nargs="+", metavar="PATH",
                          help="a session file, a trajectory, or a directory (an agent's home, "
                               "a directory of homes, or a tree of trajectories)")
    replay_p.add_argument("--backend", choices=formats(), default=None,
                          help="the files' format (default: told by each file's path, as the "
                               "sidecar finds them in a home)")
    replay_p.add_argument("--config", default=None,
                          help="the sidecar's YAML config: its threshold, window_s, match_output "
                               "and exclude (default: the built-in defaults, threshold 5, window "
                               "600 s, output matching)")
    replay_p.add_argument("--threshold", type=_numbers(int, 1, 10000, "a threshold"),
                          action="extend", metavar="N[,N...]",
                          help="failures that raise a note; repeat the flag or give a comma "
                               "list to sweep (one summary row per combination)")
    replay_p.add_argument("--window", type=_numbers(float, 0, 7 * 86400, "a window"),
                          action="extend", metavar="S[,S...]",
                          help="the window in seconds; repeat or comma list to sweep")
    replay_p.add_argument("--match", type=_choices(("output", "exit"), "a match"),
                          action="extend", metavar="M[,M...]",
                          help="what the same result is: 'output' (the same exit and output "
                               "where the log has it; the default, issue 26) or 'exit' (the exit "
                               "alone: match_output: false); a comma list sweeps both")
    replay_p.add_argument("--json", action="store_true",
                          help="print the same as one JSON document")
    replay_p.set_defaults(func=cmd_replay)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``repeat-failure`` console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ConfigError, hook.HookError, ValueError) as exc:
        print(f"repeat-failure: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"repeat-failure: {exc}", file=sys.stderr)
        return 1
