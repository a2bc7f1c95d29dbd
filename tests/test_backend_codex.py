"""Codex CLI's shells (spec C7, C8, C-AC4), on the harness's real records.

What reaches the records (``harness/evidence/codex.json``, Codex 0.171.0): per session two
helper shells (the snapshot writer and the snapshot check), and each agent command *bare*: Codex
runs it either as ``/bin/bash -lc <cmd>`` or as a long snapshot wrapper ending in
``exec '/bin/bash' -c '<cmd>'``, whose exec'd shell (same PID) records ``<cmd>`` itself. The
wrapper text never reaches a record then, but the stripper still takes a command back out of it;
:func:`wrap` builds it exactly as Codex 0.171.0 does, with the snapshot path taken from the
evidence (for every command in ``CASES`` it was checked byte for byte against the script a real
Codex 0.171.0 run handed to bash, captured with a BASH_ENV that saved $BASH_EXECUTION_STRING).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sidecar.backends.codex import strip
from sidecar.normalize import normalize
from sidecar.scrub import scrub

EVIDENCE = json.loads((Path(__file__).resolve().parent.parent / "harness" / "evidence"
                       / "codex.json").read_text())
RECORDS = [r for run in EVIDENCE["runs"] for r in run["records"]]
COMMANDS = {run["command"] for run in EVIDENCE["runs"]}
HELPERS = [r for r in RECORDS if r["raw"] not in COMMANDS]
EXITS = {"ls /nonexistent": 2, "false": 1, "echo harness-ok": 0}
_CHECK = re.compile(r'set -e; \. "(?P<dir>[^"]*/shell_snapshots)/(?P<id>[^"/]+)\.tmp-(?P<n>\d+)"')

# The variables Codex 0.171.0 saves before sourcing the snapshot and restores after it (in this
# order), as its wrapper lists them.
_OVERRIDES = ("CODEX_APPLY_PATCH_PRESERVE_LINE_ENDINGS", "CODEX_PERMISSION_PROFILE",
              "CODEX_PLUGIN_METRICS_OUTPUT", "CODEX_SESSION_ID", "CODEX_THREAD_ID",
              "CODEX_TOOL_CALL_ID", "CODEX_VERSION")
_PROXY = (
    "ALL_PROXY", "BUNDLE_HTTPS_PROXY", "BUNDLE_HTTP_PROXY", "BUNDLE_NO_PROXY",
    "BUNDLE_SSL_CA_CERT", "CARGO_HTTP_CAINFO", "CODEX_CA_CERTIFICATE",
    "CODEX_NETWORK_ALLOW_LOCAL_BINDING", "CODEX_NETWORK_PROXY_ACTIVE",
    "CODEX_NETWORK_PROXY_ATTRIBUTION", "CODEX_NETWORK_PROXY_BROKERED_CREDENTIALS",
    "CODEX_NETWORK_PROXY_CREDENTIAL_BROKER_ACTIVE", "CURL_CA_BUNDLE", "DOCKER_HTTPS_PROXY",
    "DOCKER_HTTP_PROXY", "ELECTRON_GET_USE_PROXY", "FTP_PROXY", "GIT_SSL_CAINFO", "HTTPS_PROXY",
    "HTTP_PROXY", "NODE_EXTRA_CA_CERTS", "NODE_USE_ENV_PROXY", "NO_PROXY", "NPM_CONFIG_CAFILE",
    "NPM_CONFIG_HTTPS_PROXY", "NPM_CONFIG_HTTP_PROXY", "NPM_CONFIG_NOPROXY", "NPM_CONFIG_PROXY",
    "PIP_CERT", "PIP_PROXY", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "WSS_PROXY", "WS_PROXY",
    "YARN_HTTPS_PROXY", "YARN_HTTP_PROXY", "YARN_NO_PROXY", "all_proxy", "ftp_proxy",
    "http_proxy", "https_proxy", "no_proxy", "npm_config_cafile", "npm_config_http_proxy",
    "npm_config_https_proxy", "npm_config_noproxy", "npm_config_proxy", "ws_proxy", "wss_proxy")
CODEX_PATH = ("/root/.cache/repeat-failure-harness/codex-0.171.0/node_modules/@openai/"
              "codex-linux-x64/vendor/x86_64-unknown-linux-musl/codex-path")


def _quote(text: str) -> str:
    """Codex's quoting: always single quotes, each ``'`` written ``'"'"'``."""
    return "'" + text.replace("'", "'\"'\"'") + "'"


def _saves(prefix: str, names: tuple[str, ...]) -> list[str]:
    return [line for i, name in enumerate(names)
            for line in (f'__CODEX_SNAPSHOT_{prefix}_SET_{i}="${{{name}+x}}"',
                         f'__CODEX_SNAPSHOT_{prefix}_{i}="${{{name}-}}"')]


def _restores(prefix: str, names: tuple[str, ...]) -> list[str]:
    out = []
    for i, name in enumerate(names):
        flag, value = f"__CODEX_SNAPSHOT_{prefix}_SET_{i}", f"__CODEX_SNAPSHOT_{prefix}_{i}"
        out += [f'if [ -n "${{{flag}}}" ]; then',
                f'  if [ -z "${{{name}+x}}" ] || [ "${{{name}-}}" != "${{{value}}}" ]; then '
                f'export {name}="${{{value}}}"; else export {name}; fi',
                f"else builtin unset {name} 2>/dev/null || command unset {name}; fi",
                f"builtin unset {flag} {value} 2>/dev/null || command unset {flag} {value}"]
    return out


def snapshot_path() -> str:
    """The snapshot a tool wrapper sources, from the evidence's snapshot-check record: the check
    reads ``<dir>/<id>.tmp-<n>``, which Codex then renames to ``<dir>/<id>.<n>.sh``."""
    match = next(m for m in (_CHECK.fullmatch(r["raw"]) for r in RECORDS) if m)
    return f"{match['dir']}/{match['id']}.{match['n']}.sh"


def wrap(command: str, snapshot: str | None = None, codex_path: str = CODEX_PATH) -> str:
    """The ``bash -c`` script Codex 0.171.0 runs for ``exec_command`` once a shell snapshot
    exists (about 38,000 characters for a short command)."""
    snapshot = snapshot or snapshot_path()
    lines = [*_saves("OVERRIDE", _OVERRIDES), *_saves("PROXY_OVERRIDE", _PROXY),
             '__CODEX_SNAPSHOT_PROXY_ENV_SET="${CODEX_NETWORK_PROXY_ACTIVE+x}"', "",
             f"if . {_quote(snapshot)} >/dev/null 2>&1; then :; fi", "",
             *_restores("OVERRIDE", _OVERRIDES),
             'if [ -n "$__CODEX_SNAPSHOT_PROXY_ENV_SET" ] || '
             '[ -n "${CODEX_NETWORK_PROXY_ACTIVE+x}" ]; then',
             *_restores("PROXY_OVERRIDE", _PROXY), "fi",
             f'if [ -n "${{PATH:-}}" ]; then export PATH={_quote(codex_path)}:"$PATH"; '
             f"else export PATH={_quote(codex_path)}; fi", "",
             f"exec '/bin/bash' -c {_quote(command)}"]
    return "\n".join(lines)


# -- the real records ------------------------------------------------------------------------------

def test_every_failing_command_is_recorded_once_per_request() -> None:
    """C-AC1: each run's command appears as a record whose normalized form is the bare command,
    once per time the stub asked for it, with the command's real exit status."""
    for run in EVIDENCE["runs"]:
        got = [(normalize(r["raw"], "codex"), r["exit"]) for r in run["records"]
               if normalize(r["raw"], "codex")]
        assert got == [(run["command"], EXITS[run["command"]])] * run["repeat"], run["command"]


def test_failing_runs_show_exit_2_and_1() -> None:
    """The two failing scenarios: `ls /nonexistent` exit 2, `false` exit 1, raw text bare."""
    first, second = EVIDENCE["runs"][0], EVIDENCE["runs"][1]
    assert [(r["raw"], r["exit"]) for r in first["records"] if r["raw"] in COMMANDS] == \
        [("ls /nonexistent", 2)]
    assert [(r["raw"], r["exit"]) for r in second["records"] if r["raw"] in COMMANDS] == \
        [("false", 1)]


def test_repeat_raised_the_note() -> None:
    """The five repeats of `ls /nonexistent` raised the note in the real sidecar pipeline."""
    assert EVIDENCE["runs"][-1]["note"] == \
        "Repeating failure: ls /nonexistent failed 5 times in 1 min (exit 2)"


def test_helper_shells_never_reach_the_detector() -> None:
    """C8: every session's snapshot writer and snapshot check normalize to the empty command."""
    kinds = {"writer" if "__codex_snapshot_command" in r["raw"] else
             "check" if _CHECK.fullmatch(r["raw"]) else r["raw"] for r in HELPERS}
    assert kinds == {"writer", "check"}
    assert len(HELPERS) == 2 * len(EVIDENCE["runs"])
    for record in HELPERS:
        assert normalize(record["raw"], "codex") == ""


# -- the wrapper -----------------------------------------------------------------------------------

CASES = [
    "ls /nonexistent",
    "false",
    "",
    """echo 'it'"'"'s' "double \\"q\\"" && ls /nonexistent""",
    "make && make test || echo 'failed: it'\\''s over'",
    "printf 'a\\nb\\n' && echo \"x\"\necho second line; false",
    "cat <<'EOF'\nhello 'world' \"q\" $HOME\nEOF\nls /nonexistent",
    "cat > /work/f.txt <<EOF\n  indented 'x'\n\nEOF",
    "echo \"exec '/bin/bash' -c 'x'\"\n\nexec '/bin/bash' -c 'ls /nonexistent'",
    "printf '%s\\n' \\\\ '\\t' \"tab\there\"",
    "'''",
]


@pytest.mark.parametrize("command", CASES)
def test_stripper_returns_the_command_from_the_wrapper(command: str) -> None:
    """C-AC4 for quotes, &&, newlines and heredocs: the exact command comes back out of the
    wrapper (byte for byte, before whitespace collapses)."""
    assert strip(wrap(command)) == command
    assert normalize(wrap(command), "codex") == normalize(command, "bash")
    # The pipeline scrubs before it normalizes (the wrapper has an `export ...CREDENTIALS=`).
    assert normalize(scrub(wrap(command)), "codex") == normalize(scrub(command), "bash")


def test_wrapper_size_and_tail() -> None:
    """The wrapper is far longer than a record (4096 bytes), and ends in the exec line."""
    wrapped = wrap("ls /nonexistent")
    assert len(wrapped) > 30000
    assert wrapped.endswith("\n\nexec '/bin/bash' -c 'ls /nonexistent'")


@pytest.mark.parametrize("keep", [4000, 100, 20000])
def test_cut_wrapper_is_no_command(keep: int) -> None:
    """A wrapper the hook had to cut (its head is the same for every command) is not counted as
    a command: it would merge every command into one."""
    assert normalize(wrap("ls /nonexistent")[:keep], "codex") == ""


def test_bare_commands_unchanged() -> None:
    """What really reaches the records: the bare command, unchanged, whatever it contains."""
    for command in CASES + ["set -e; make", "echo '# Snapshot file'", "bash -lc 'x'"]:
        assert strip(command) == command


def test_helpers_without_evidence_paths() -> None:
    """The snapshot check under another CODEX_HOME is still a helper."""
    assert strip('set -e; . "/home/agent/.codex/shell_snapshots/019-abc.tmp-17"') == ""
