"""Config validation (README.md "Configuration"): defaults, clear errors naming the key, CLI exit codes."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from repeat_failure.cli import main
from repeat_failure.config import DEFAULT_EXCLUDE, AgentSpec, Config, ConfigError, load_config, parse_config


def test_defaults_are_off() -> None:
    """C14: with no file, or an empty one, the check is off with the spec's defaults."""
    assert parse_config(None) == Config()
    cfg = Config()
    assert (cfg.enabled, cfg.threshold, cfg.window_s, cfg.no_data_after_s) == (False, 5, 600.0, 900.0)
    assert cfg.exclude == DEFAULT_EXCLUDE == ("gh pr checks", "gh run watch")
    assert (cfg.collect_interval_s, cfg.collect_grace_s) == (30.0, 5.0)


def test_full_config() -> None:
    """Every key is read; exclude replaces the default list and is whitespace-collapsed."""
    cfg = parse_config({"repeat_failure": {
        "enabled": True, "threshold": 3, "window_s": 120, "no_data_after_s": 60,
        "exclude": ["make   wait"], "collect_interval_s": 1, "collect_grace_s": 0.5,
        "agents": [{"name": "a1", "backend": "claude", "home": "/agent-home"},
                   {"name": "a2", "backend": "codex", "home": "/h2",
                    "session_env": {"CODEX_HOME": ".codex-work"}},
                   {"name": "a3", "backend": "pi"}]}})
    assert cfg == Config(True, 3, 120.0, 60.0, ("make wait",), 1.0, 0.5, 20,
                         (AgentSpec("a1", "claude", "/agent-home"),
                          AgentSpec("a2", "codex", "/h2", (("CODEX_HOME", ".codex-work"),)),
                          AgentSpec("a3", "pi")))
    assert cfg.match_output is True  # issue 26: the same exit and output, by default


def test_match_output_switches_to_exit_only_matching() -> None:
    """Issue 26: `match_output: false` is the one key back to matching by exit alone."""
    assert parse_config({"repeat_failure": {"match_output": False}}).match_output is False
    with pytest.raises(ConfigError, match="repeat_failure.match_output: 'no' is not of type "
                                          "'boolean'"):
        parse_config({"repeat_failure": {"match_output": "no"}})


@pytest.mark.parametrize("section, message", [
    ({"treshold": 5}, "repeat_failure.treshold: unknown key"),
    ({"threshold": 0}, "repeat_failure.threshold: 0 is less than the minimum of 1"),
    ({"threshold": "5"}, "repeat_failure.threshold: '5' is not of type 'integer'"),
    ({"threshold": 5.0}, "repeat_failure.threshold: must be a whole number"),
    ({"enabled": "yes"}, "repeat_failure.enabled: 'yes' is not of type 'boolean'"),
    ({"window_s": 0}, "repeat_failure.window_s: must be greater than 0"),
    ({"collect_interval_s": -1}, "repeat_failure.collect_interval_s: must be greater than 0"),
    ({"collect_interval_s": 31},
     "repeat_failure.collect_interval_s: 31 is greater than the maximum of 30"),
    ({"exclude": "gh pr checks"}, "repeat_failure.exclude: 'gh pr checks' is not of type 'array'"),
    ({"exclude": [""]}, "repeat_failure.exclude[0]: '' should be non-empty"),
    ({"agents": [{"name": "../x", "backend": "claude"}]},
     "repeat_failure.agents[0].name: '../x' is not allowed"),
    ({"agents": [{"name": "a", "backend": "bash"}, {"name": "a", "backend": "pi"}]},
     "repeat_failure.agents: agent names must be unique"),
    ({"agents": [{"name": "a", "backend": "pi", "home": "home/agent"}]},
     "repeat_failure.agents[0].home: 'home/agent' must be an absolute path (the agent's home as "
     "mounted in the sidecar)"),
    ({"agents": [{"name": "a", "backend": "codex", "home": "/h", "session_env": {"CODEX_HOME":
                                                                                "/root/.codex"}}]},
     "repeat_failure.agents[0].session_env.CODEX_HOME: '/root/.codex' must be a path inside the "
     "agent's home, relative to it (e.g. .codex-work)"),
    ({"agents": [{"name": "a", "backend": "codex", "home": "/h",
                  "session_env": {"CODEX_HOME": "../x"}}]},
     "repeat_failure.agents[0].session_env.CODEX_HOME: '../x' must be a path inside"),
    ({"agents": [{"name": "a", "backend": "codex", "session_env": {"1X": "a"}}]},
     "repeat_failure.agents[0].session_env: '1X' is not allowed"),
])
def test_invalid_values_name_the_key(section: dict, message: str) -> None:
    """Unknown keys, wrong types and out-of-range values are rejected naming the key."""
    with pytest.raises(ConfigError) as err:
        parse_config({"repeat_failure": section}, "c.yaml")
    assert str(err.value).startswith(f"c.yaml: {message}")


def test_unknown_top_level_key() -> None:
    """A misspelt section is not silently ignored."""
    with pytest.raises(ConfigError, match=r"^c.yaml: repeat_failures: unknown key$"):
        parse_config({"repeat_failures": {}}, "c.yaml")


def test_file_errors(tmp_path) -> None:
    """Missing files and broken YAML are errors naming the file."""
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("repeat_failure: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)


def test_check_config_exit_codes(tmp_path, capsys) -> None:
    """`repeat-failure check-config`: 0 valid, 2 invalid with the reason on stderr."""
    good = tmp_path / "good.yaml"
    good.write_text("repeat_failure:\n  enabled: true\n  threshold: 3\n  agents:\n"
                    "    - {name: a1, backend: claude, home: /agent-home}\n"
                    "    - {name: a2, backend: bash}\n")
    assert main(["check-config", str(good)]) == 0
    assert capsys.readouterr().out == (
        f"{good}: valid (check on, threshold 3, window 600 s, exit and output matched, not "
        "receiving data after 900 s)\n"
        "  agent a1: backend claude, home /agent-home\n"
        "  agent a2: backend bash, no home (no session log read)\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("repeat_failure:\n  threshold: -1\n")
    assert main(["check-config", str(bad)]) == 2
    assert capsys.readouterr().err == (
        f"repeat-failure: {bad}: repeat_failure.threshold: -1 is less than the minimum of 1\n")


INJECTOR_DEFAULTS = ("injection off, image ghcr.io/hive/repeat-failure:{v} (IfNotPresent), "
                     "native sidecar, ConfigMap repeat-failure-config, user 10001:10001, "
                     "resources limits memory 96Mi; requests cpu 10m, memory 48Mi")


def test_check_config_reads_the_injectors_config(tmp_path, capsys) -> None:
    """`check-config` on the injector's config (the file inject-webhook --config reads): told
    by its own top-level keys, or forced with --injector; before, every such file was refused
    as a sidecar config (`enabled: unknown key`)."""
    from repeat_failure import __version__

    inj = tmp_path / "injector.yaml"
    inj.write_text("enabled: true\nimage: registry.example/rf:1.2\nimagePullPolicy: Always\n"
                   "nativeSidecar: false\nconfigMap: rf-config\nrunAsUser: 2000\n"
                   "runAsGroup: 3000\nresources: {requests: {cpu: 1}, limits: {memory: 64Mi}}\n")
    for argv in (["check-config", str(inj)], ["check-config", "--injector", str(inj)]):
        assert main(argv) == 0
        assert capsys.readouterr().out == (
            f"{inj}: valid injector config (injection on, image registry.example/rf:1.2 "
            "(Always), sidecar in containers, ConfigMap rf-config, user 2000:3000, resources "
            "limits memory 64Mi; requests cpu 1)\n")
    empty = tmp_path / "empty.yaml"  # all defaults: the injector's only when told
    empty.write_text("")
    assert main(["check-config", "--injector", str(empty)]) == 0
    assert capsys.readouterr().out == (
        f"{empty}: valid injector config ({INJECTOR_DEFAULTS.format(v=__version__)})\n")
    assert main(["check-config", str(empty)]) == 0
    assert capsys.readouterr().out.startswith(f"{empty}: valid (check off, ")


@pytest.mark.parametrize("text, flag, error", [
    ("enabled: true\nnativeSidecar: 1\n", False, "nativeSidecar: 1 is not of type 'boolean'"),
    ("image: x\nnativeSidecars: true\n", False, "nativeSidecars: unknown key"),
    ("runAsUser: 0\n", False, "runAsUser: 0 is less than the minimum of 1"),
    ("runAsUser: 10001.0\n", False, "runAsUser: must be a whole number"),
    ("enabled: yes please\n", True, "enabled: 'yes please' is not of type 'boolean'"),
    ("imagePullPolicy: Sometimes\n", False,
     "imagePullPolicy: 'Sometimes' is not one of ['Always', 'IfNotPresent', 'Never']"),
    ("resources: {limits: {memory: 1x}}\n", False,
     "resources.limits.memory: '1x' is not a Kubernetes quantity (e.g. 100m, 64Mi)"),
    ("resources: {limit: {memory: 1Mi}}\n", False, "resources.limit: unknown key"),
    # --injector: the file is the injector's whatever its keys (a sidecar file is refused).
    ("repeat_failure: {enabled: true}\n", True, "repeat_failure: unknown key"),
    ("nativeSidecars: true\n", True, "nativeSidecars: unknown key"),
    ("enabled: true\nnativeSidecars: true\n", True, "nativeSidecars: unknown key"),
])
def test_check_config_names_the_injectors_bad_key(tmp_path, capsys, text, flag, error) -> None:
    """A bad injector config: exit 2, one line on stderr naming the file and the key."""
    inj = tmp_path / "injector.yaml"
    inj.write_text(text)
    assert main(["check-config", *(["--injector"] if flag else []), str(inj)]) == 2
    out = capsys.readouterr()
    assert (out.out, out.err) == ("", f"repeat-failure: {inj}: {error}\n")


@pytest.mark.parametrize("text, error", [
    # `enabled` is a key of both configs: alone it never makes a file the injector's.
    ("enabled: true\n", "enabled: unknown key at the top level (the sidecar's keys belong "
                         "under `repeat_failure:`); if it is the injector's config: check-config "
                         "--injector FILE"),
    ("enabled: true\nthreshold: 3\n", "enabled: unknown key at the top level (the sidecar's "
                                        "keys belong under `repeat_failure:`)"),
    ("threshold: 3\nwindow_s: 60\n", "threshold: unknown key at the top level (the sidecar's "
                                       "keys belong under `repeat_failure:`)"),
    ("enabled: true\nnativeSidecars: true\n", "enabled: unknown key at the top level (the "
                                               "sidecar's keys belong under `repeat_failure:`)"),
])
def test_sidecar_keys_without_their_wrapper_are_refused_as_run_refuses_them(
        tmp_path, capsys, text, error) -> None:
    """A sidecar config written without its `repeat_failure:` wrapper passed check-config as a
    valid injector config (exit 0) while `run --config` refused it (exit 2): now both exit 2,
    naming the key and where it belongs."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text(text)
    assert main(["check-config", str(cfg)]) == 2
    out = capsys.readouterr()
    assert (out.out, out.err) == ("", f"repeat-failure: {cfg}: {error}\n")
    assert main(["run", "--config", str(cfg), "--shared-dir", str(tmp_path / "s"), "--agent",
                 "a1", "--backend", "bash", "--listen", "127.0.0.1:0"]) == 2
    assert capsys.readouterr().err == f"repeat-failure: {cfg}: {error.split('; if')[0]}\n"


def test_check_config_refuses_a_file_of_both_sidecar_and_fixloop(tmp_path, capsys) -> None:
    """`repeat_failure:` and `fixloop:` in one file: no program reads it (run refuses `fixloop`,
    fixloop refuses `repeat_failure`), so check-config refuses it as ambiguous, exit 2."""
    both = tmp_path / "both.yaml"
    both.write_text("repeat_failure: {enabled: true}\nfixloop: {repositories: [o/r]}\n")
    assert main(["check-config", str(both)]) == 2
    out = capsys.readouterr()
    assert (out.out, out.err) == ("", f"repeat-failure: {both}: both `repeat_failure:` (the "
                                      "sidecar's config) and `fixloop:` (the fix loop's) at the "
                                      "top level; each program reads its own file, so split it "
                                      "in two\n")


def test_unknown_backend_is_refused() -> None:
    """A backend name not in the coverage table is a typo, not a silent "not available" row."""
    with pytest.raises(ConfigError, match=r"^c.yaml: repeat_failure.agents\[0\].backend: "
                                          r"unknown backend 'clade' \(known: bash, claude,"):
        parse_config({"repeat_failure": {"agents": [{"name": "a", "backend": "clade"}]}}, "c.yaml")


def test_yaml_error_names_file_and_line(tmp_path) -> None:
    """A YAML syntax error names the file, line and column."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("repeat_failure:\n  enabled: [true\n")
    with pytest.raises(ConfigError) as err:
        load_config(bad)
    assert str(err.value).startswith(f"{bad}: not valid YAML at line 3, column 1: ")


def test_run_refuses_agent_flag_with_agent_list(tmp_path, capsys) -> None:
    """--agent with repeat_failure.agents in the config is an error, not a silent override."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text("repeat_failure:\n  agents: [{name: a1, backend: bash}]\n")
    code = main(["run", "--config", str(cfg), "--shared-dir", str(tmp_path / "s"),
                 "--agent", "me", "--backend", "bash", "--listen", "127.0.0.1:0"])
    assert code == 2
    assert capsys.readouterr().err == (
        f"repeat-failure: {cfg}: repeat_failure.agents lists the agents, so do not also pass "
        "--agent/--backend (or REPEAT_FAILURE_AGENT/REPEAT_FAILURE_BACKEND)\n")


def test_run_refuses_agent_home_with_agent_list(tmp_path, capsys) -> None:
    """--agent-home with repeat_failure.agents: each agent's home belongs in the list."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text("repeat_failure:\n  agents: [{name: a1, backend: bash}]\n")
    code = main(["run", "--config", str(cfg), "--shared-dir", str(tmp_path / "s"),
                 "--agent-home", "/home/agent", "--listen", "127.0.0.1:0"])
    assert code == 2
    assert capsys.readouterr().err == (
        f"repeat-failure: {cfg}: repeat_failure.agents lists the agents; give each its `home` "
        "there instead of --agent-home (or REPEAT_FAILURE_AGENT_HOME)\n")


def test_run_refuses_relative_agent_home(tmp_path, capsys) -> None:
    code = main(["run", "--shared-dir", str(tmp_path / "s"), "--agent", "a1", "--backend", "pi",
                 "--agent-home", "home", "--listen", "127.0.0.1:0"])
    assert code == 2
    assert capsys.readouterr().err == (
        "repeat-failure: --agent-home (or REPEAT_FAILURE_AGENT_HOME) 'home': expected an "
        "absolute path, the agent's home as mounted in the sidecar\n")


@pytest.mark.parametrize("agent", ["../evil", "a/b", ".hidden", "abc\n", ""])
def test_run_refuses_a_bad_agent_name_at_start(tmp_path, capsys, agent: str) -> None:
    """An --agent that cannot name a hook or record file is refused before the sidecar starts
    (it used to start and fail at its first collection pass)."""
    code = main(["run", "--shared-dir", str(tmp_path / "s"), "--agent", agent,
                 "--backend", "bash", "--listen", "127.0.0.1:0"])
    err = capsys.readouterr().err
    if agent:
        assert code == 2
        assert err == (f"repeat-failure: --agent (or REPEAT_FAILURE_AGENT) {agent!r}: expected a "
                       "name matching ^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$ (it names the hook and "
                       "record files)\n")
    else:  # empty means unset: the usual "name the agent" error
        assert code == 2 and "name the agent" in err
    assert not (tmp_path / "s").exists()


def test_hook_env_off_explains_on_stderr(tmp_path, capsys) -> None:
    """`hook env` with the check off prints nothing on stdout and says why on stderr."""
    assert main(["hook", "env", "--shared-dir", str(tmp_path), "--agent", "a1"]) == 0
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err == ("repeat-failure: the check is off (no --config: repeat_failure.enabled is "
                       "not true); nothing to export\n")


@pytest.mark.parametrize("agent, backend, chain", [
    ("abc\n", "bash", None), ("abc", "bash\n", None), ("abc", "bash", "/etc/x.sh\n")])
def test_hook_refuses_names_and_paths_with_a_trailing_newline(tmp_path, agent, backend,
                                                              chain) -> None:
    """A name or chained path with a trailing newline (which `$` in a regular expression lets
    through) would break the rendered hook in every agent shell: refused."""
    from repeat_failure.sidecar import hook
    with pytest.raises(hook.HookError):
        hook.render(tmp_path, agent, backend, chain)
    assert not (tmp_path / "hook").exists() or list((tmp_path / "hook").iterdir()) == []


# -- issue 17: nesting and non-regular files ------------------------------------------------------

def _nested(depth: int) -> str:
    """``exclude:`` nested ``depth`` arrays deep (about 2 bytes a level)."""
    return "[" * depth + "]" * depth


DEEP = 500  # issue 17: RecursionError out of yaml.safe_load from 494 levels on


@pytest.mark.parametrize("depth", [DEEP, 100_000])
def test_deeply_nested_yaml_is_refused_as_invalid(tmp_path, capsys, depth) -> None:
    """A config nested hundreds of levels deep (1 KB) is invalid YAML, named with its line and
    column: check-config and run exit 2 with one line, the fixloop's and the injector's loaders
    raise ConfigError; no RecursionError, no traceback."""
    from repeat_failure.fixloop.config import load_fixloop_config
    from repeat_failure.kube.injector import load_injector_config

    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"repeat_failure:\n  exclude: {_nested(depth)}\n")
    message = (f"repeat-failure: {cfg}: not valid YAML at line 2, column 74: nested deeper "
               "than 64 levels\n")
    assert main(["check-config", str(cfg)]) == 2
    assert capsys.readouterr().err == message
    assert main(["run", "--config", str(cfg), "--shared-dir", str(tmp_path / "s"), "--agent",
                 "a1", "--backend", "bash", "--listen", "127.0.0.1:0"]) == 2
    assert capsys.readouterr().err == message
    fix = tmp_path / "fixloop.yaml"
    fix.write_text(f"fixloop:\n  repositories: {_nested(depth)}\n")
    assert main(["check-config", str(fix)]) == 2
    assert capsys.readouterr().err == (f"repeat-failure: {fix}: not valid YAML at line 2, "
                                       "column 79: nested deeper than 64 levels\n")
    with pytest.raises(ConfigError, match="nested deeper than 64 levels"):
        load_fixloop_config(fix)
    inj = tmp_path / "injector.yaml"
    inj.write_text(f"enabled: true\nresources: {{limits: {{memory: {_nested(depth)}}}}}\n")
    with pytest.raises(ConfigError, match=r"not valid YAML at line 2, column 91: nested deeper "
                                          r"than 64 levels"):
        load_injector_config(inj)


def test_nesting_up_to_the_bound_is_parsed() -> None:
    """64 levels are read (and then validated as usual); 65 are not."""
    from repeat_failure.config import MAX_YAML_DEPTH, _Loader
    import yaml

    assert MAX_YAML_DEPTH == 64
    assert yaml.load(_nested(64), Loader=_Loader) == eval(_nested(64))  # noqa: S307
    with pytest.raises(yaml.YAMLError, match="nested deeper than 64 levels"):
        yaml.load(_nested(65), Loader=_Loader)


def test_a_running_sidecar_keeps_its_config_when_a_deep_one_is_written(tmp_path, caplog) -> None:
    """Written while running, the deeply nested config is refused ("keeping the previous
    config") and the check stays on."""
    from repeat_failure.sidecar.app import Sidecar

    cfg = tmp_path / "c.yaml"
    cfg.write_text("repeat_failure:\n  enabled: true\n")
    sc = Sidecar(tmp_path / "s", [AgentSpec("a1", "bash")], cfg)
    cfg.write_text(f"repeat_failure:\n  enabled: false\n  exclude: {_nested(DEEP)}\n")
    assert sc.reload_config(force=True) is False
    assert sc.config.enabled is True
    (refused,) = [r for r in caplog.records if r.getMessage().startswith("config change refused")]
    assert refused.error == (f"{cfg}: not valid YAML at line 3, column 74: nested deeper than 64 "
                             "levels")


def test_injector_keeps_its_config_when_a_deep_one_is_written(tmp_path, caplog) -> None:
    from repeat_failure.kube.injector import ConfigSource

    inj = tmp_path / "injector.yaml"
    inj.write_text("enabled: true\n")
    source = ConfigSource(inj, check_interval_s=0)
    inj.write_text(f"enabled: false\nimage: {_nested(DEEP)}\n")
    assert source.current().enabled is True
    assert [r.error for r in caplog.records if getattr(r, "event", "") == "injector_config_refused"
            ] == [f"{inj}: not valid YAML at line 2, column 71: nested deeper than 64 levels"]


def _fifo(path) -> None:
    os.mkfifo(path)


@pytest.mark.parametrize("what", ["check-config", "run"])
def test_a_fifo_or_directory_at_the_config_path_is_refused_at_once(tmp_path, capsys, what) -> None:
    """A FIFO at the config path is refused without waiting for a writer (exit 2), as is a
    directory."""
    fifo = tmp_path / "fifo.yaml"
    _fifo(fifo)
    for path, kind in ((fifo, "a FIFO"), (tmp_path, "a directory")):
        argv = (["check-config", str(path)] if what == "check-config" else
                ["run", "--config", str(path), "--shared-dir", str(tmp_path / "s"), "--agent",
                 "a1", "--backend", "bash", "--listen", "127.0.0.1:0"])
        done = _in_thread(lambda: main(argv))
        assert done == 2
        assert capsys.readouterr().err == (f"repeat-failure: {path}: cannot read config file: "
                                           f"it is {kind}, not a regular file\n")


def _in_thread(call, timeout: float = 10.0):
    """``call()``'s result (or its exception), run in a thread; fails (instead of hanging the
    suite) if it has not returned within ``timeout`` seconds."""
    import threading

    out: list = []

    def run() -> None:
        try:
            out.append((call(), None))
        except Exception as exc:  # noqa: BLE001 - handed to the test's thread
            out.append((None, exc))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), "blocked"
    value, error = out[0]
    if error is not None:
        raise error
    return value


def test_a_fifo_written_at_the_config_path_of_a_running_sidecar(tmp_path) -> None:
    """A real `repeat-failure run`: a FIFO moved to its config path is refused ("keeping the
    previous config"), the loop goes on collecting, and SIGTERM stops it (before, the main loop
    blocked opening the FIFO: nothing collected and SIGTERM ignored)."""
    import signal
    import subprocess
    import sys
    import time

    import orjson

    from repeat_failure.sidecar import hook
    from waiting import free_port, wait_until

    cfg = tmp_path / "c.yaml"
    cfg.write_text("repeat_failure:\n  enabled: true\n  collect_interval_s: 0.2\n")
    shared = tmp_path / "s"
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "repeat_failure", "run", "--config", str(cfg), "--shared-dir",
         str(shared), "--agent", "a1", "--backend", "bash", "--listen", f"127.0.0.1:{port}"],
        stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: hook.hook_path(shared, "a1").is_file())
        _fifo(tmp_path / "fifo")
        os.replace(tmp_path / "fifo", cfg)
        time.sleep(1.0)
        live = hook.records_path(shared, "a1")
        with open(live, "ab") as f:
            f.write(orjson.dumps({"v": 1, "ts": time.time(), "agent": "a1", "backend": "bash",
                                  "route": "bash_env", "exit": 1, "cmd": "false"}) + b"\n")
        wait_until(lambda: not live.exists(), timeout=10)  # still collecting
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    refused = [json.loads(line) for line in proc.stderr.read().splitlines()
               if "config change refused" in line]
    assert refused and refused[0]["error"] == (f"{cfg}: cannot read config file: it is a FIFO, "
                                               "not a regular file")


def test_a_fifo_at_the_fixloop_token_path_is_refused_at_once(tmp_path) -> None:
    """The fix loop reads its GitHub token file the same way: a FIFO there is an error, not a
    sweep blocked for good."""
    from repeat_failure.fixloop.app import read_token
    from repeat_failure.fixloop.config import parse_fixloop_config

    token = tmp_path / "token"
    _fifo(token)
    config = parse_fixloop_config({"fixloop": {"repositories": ["acme/web"],
                                               "token_file": str(token)}})
    with pytest.raises(ConfigError) as err:
        _in_thread(lambda: read_token(config, {}))
    assert str(err.value) == (f"{token}: cannot read the GitHub token: it is a FIFO, not a "
                              "regular file")


def _bomb(levels: int, key: str = "exclude") -> str:
    """A billion-laughs config: each anchor a list of 9 aliases of the one before, the last
    one used under ``repeat_failure.<key>`` (9**levels strings, a few hundred bytes)."""
    lines = ['x0: &x0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        lines.append(f"x{i}: &x{i} [" + ",".join([f"*x{i - 1}"] * 9) + "]")
    return "\n".join(lines) + f"\nrepeat_failure:\n  {key}: *x{levels - 1}\n"


def test_a_yaml_alias_bomb_is_refused_before_it_is_expanded(tmp_path, capsys) -> None:
    """Issue 28 item 15: a 511-byte alias bomb took 13 s and 1.1 GB on reload (the depth bound
    does not see aliases). A document whose aliases expand it past MAX_YAML_NODES nodes is
    invalid YAML, refused before anything walks the expansion; check-config exits 2 naming it,
    and a running sidecar keeps its config."""
    from repeat_failure.config import MAX_YAML_NODES
    from repeat_failure.sidecar.app import Sidecar

    assert MAX_YAML_NODES == 100_000
    cfg = tmp_path / "c.yaml"
    cfg.write_text(_bomb(6))  # 9**6 = 531,441 strings
    assert main(["check-config", str(cfg)]) == 2
    assert capsys.readouterr().err == (
        f"repeat-failure: {cfg}: not valid YAML at line 1, column 1: its aliases expand it past "
        "100,000 nodes\n")
    cfg.write_text("repeat_failure:\n  enabled: true\n")
    sc = Sidecar(tmp_path / "s", [AgentSpec("a1", "bash")], cfg)
    cfg.write_text(_bomb(9).replace("exclude", "enabled: false\n  exclude"))
    assert len(cfg.read_bytes()) < 600
    assert sc.reload_config(force=True) is False
    assert sc.config.enabled is True


def test_aliases_that_stay_within_the_bound_are_read() -> None:
    import yaml

    from repeat_failure.config import _Loader

    data = yaml.load(_bomb(4), Loader=_Loader)  # 6,561 strings, twice, and their lists
    assert len(data["repeat_failure"]["exclude"]) == 9
    with pytest.raises(yaml.YAMLError, match="expand it past 100,000 nodes"):
        yaml.load("a: &a [*a]\n", Loader=_Loader)  # a recursive alias never ends


def test_aliases_of_one_large_value_are_refused(tmp_path, capsys) -> None:
    """A break-it run: 40,000 aliases of one 2 MiB string stay under the node bound yet expand to
    80 GB of text (90 s of CPU, then 10 GB resident with 90,000). A document whose scalar text,
    aliases counted as copies, passes MAX_YAML_CHARS is refused as invalid YAML."""
    from repeat_failure.config import MAX_YAML_CHARS

    assert MAX_YAML_CHARS == 16 << 20
    cfg = tmp_path / "c.yaml"
    value = "x" * 1_000_000  # the file under MAX_YAML_BYTES (1 MiB), its expansion over
    cfg.write_text("repeat_failure:\n  exclude:\n    - &a '" + value + "'\n"
                   + "    - *a\n" * 17)
    started = time.monotonic()
    assert main(["check-config", str(cfg)]) == 2
    assert time.monotonic() - started < 10
    assert capsys.readouterr().err == (
        f"repeat-failure: {cfg}: not valid YAML at line 1, column 1: its aliases expand it past "
        "16,777,216 characters of text\n")
    cfg.write_text("repeat_failure:\n  exclude:\n    - &a '" + "y" * 1000 + "'\n"
                   + "    - *a\n" * 15)
    assert main(["check-config", str(cfg)]) == 0


def _subcommand_actions(parser):
    """``(subcommand words, action)`` of every option of every subcommand of ``parser``."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for word, sub in action.choices.items():
                for words, inner in _subcommand_actions(sub):
                    yield (word, *words), inner
        elif action.option_strings:
            yield (), action


def test_every_flag_read_from_the_environment_names_its_variable_in_help(monkeypatch) -> None:
    """Each flag whose default comes from a ``REPEAT_FAILURE_*`` variable names it in its
    `--help` (run's --config, --shared-dir, --agent, --backend, --listen, --chain-bash-env and
    --agent-home did not): every variable the command line reads (its ``_env("…")`` calls) is
    set to "1", and the flag whose default it changed must name it."""
    import repeat_failure.cli as cli

    names = set(re.findall(r'_env(?:_flag)?\("([A-Z_]+)"', Path(cli.__file__).read_text()))
    assert {"CONFIG", "SHARED_DIR", "AGENT", "BACKEND", "LISTEN", "CHAIN_BASH_ENV", "AGENT_HOME",
            "PREVIEW_URL", "CONFIG_OPTIONAL", "INJECTOR_CONFIG", "FIXLOOP_CONFIG"} <= names
    before = {(words, a.dest): a.default for words, a in _subcommand_actions(cli.build_parser())}
    for name in sorted(names):
        monkeypatch.setenv(f"REPEAT_FAILURE_{name}", "1")
        changed = [(words, a) for words, a in _subcommand_actions(cli.build_parser())
                   if a.default != before[(words, a.dest)]]
        monkeypatch.delenv(f"REPEAT_FAILURE_{name}")
        assert changed, name
        for words, action in changed:
            assert f"REPEAT_FAILURE_{name}" in action.help, (words, action.option_strings)


def test_run_and_hook_env_help_say_when_agent_may_be_left_out(capsys) -> None:
    """`run --help` says --agent/--backend are left out when the config lists
    repeat_failure.agents; `hook env --help` that --agent may be left out for one listed agent."""
    helps = {}
    for argv in (["run", "--help"], ["hook", "env", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
        helps[argv[0]] = " ".join(capsys.readouterr().out.split())
    assert "Leave --agent and --backend out when the config lists the agents" in helps["run"]
    assert ("--agent AGENT agent name; leave it out when the config lists repeat_failure.agents "
            "(REPEAT_FAILURE_AGENT)") in helps["run"]
    assert ("--agent AGENT agent name; may be left out when the config's repeat_failure.agents "
            "lists one agent (REPEAT_FAILURE_AGENT)") in helps["hook"]
