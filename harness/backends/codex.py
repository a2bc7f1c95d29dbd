"""Codex CLI (npm ``@openai/codex``, a native binary inside) against the OpenAI Responses stub.

A custom provider in ``~/.codex/config.toml`` (``wire_api = "responses"``, ``base_url`` the stub,
``env_key`` naming a dummy key variable); the update check, analytics, feedback upload and the
OpenTelemetry exporter are off there, web search is disabled, and the plugin/app features whose
start-up sync reaches github.com and chatgpt.com are off (checked with strace: the only
connections left are to the stub on 127.0.0.1). ``codex exec`` runs one turn
non-interactively; ``--dangerously-bypass-approvals-and-sandbox`` lets its ``exec_command`` tool
run shell commands as root with no approval prompt and no sandbox (the harness machine is the
outer sandbox). ``--strict-config`` makes a config key this version does not know an error rather
than silently ignored, so a renamed "off" switch cannot slip by. Codex ignores ``$SHELL``: its
tool shell is ``/bin/bash`` (a snapshot wrapper ending ``exec '/bin/bash' -c '<cmd>'``, or plain
``/bin/bash -lc <cmd>``). Session logs: ``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``. The
verdict scenarios run ``codex exec --json`` (the transcript, one JSON event a line, on stdout).

Earlier releases (``python -m harness run --backend codex --release V``, issue 26): the invocation
is chosen by the installed release (:func:`release_of`), each rule found by trying releases:

* ``--strict-config`` only from 0.131.0 (:data:`STRICT_CONFIG_SINCE`): 0.130.0 and older stop
  with "unexpected argument '--strict-config'" (and ignore config keys they do not know, so the
  same ``config.toml`` serves every release);
* before 0.96.0 the model :data:`SHELL_COMMAND_MODEL` (``-c model=...``), so the capture has the
  ``shell_command`` tool OpenAI's models got there, not the generic ``shell`` of the stub's
  unknown model (:data:`UNIFIED_EXEC_SINCE`);
* ``OPENAI_BASE_URL`` is the stub for every release: 0.98.0 (at least) fetches
  ``https://api.openai.com/v1/models`` from its built-in OpenAI provider whatever
  ``model_provider`` says. With it, strace of whole harness runs of 0.64.0 and 0.96.0 showed
  connections to 127.0.0.1 only.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.install import Backend

KEY_VAR = "REPEAT_FAILURE_STUB_API_KEY"
#: Codex has no read tool: it reads files through its shell. For the stub's model it offers no
#: file tool at all (``exec_command``, ``write_stdin``, ``view_image`` for images, agent and goal
#: tools); for a model its built-in catalog lists with ``"apply_patch_tool_type": "freeform"`` it
#: adds ``apply_patch``, a freeform (Responses ``custom``) edit tool. The session scenario with a
#: file-tool step runs with this model name, so the stub can drive ``apply_patch``: the non-shell
#: tool call of a Codex session log. The requests still go to the stub (checked with strace: the
#: only connections are to 127.0.0.1).
FILE_TOOL_MODEL = "gpt-5.5"

# Codex 0.171.0 starts a helper ``bash -lc`` per session that writes a *shell snapshot* of every
# exported variable (``declare -xp``), the hook's ``REPEAT_FAILURE_MARK=<helper PID>`` included;
# each tool shell sources it before it ``exec``s ``/bin/bash -c '<cmd>'``. The hook treats a
# marker whose shell no longer exists as stale, so Codex needs no setting of ours here: the
# evidence is what Codex's defaults give.


def _config(url: str) -> str:
    return f"""\
model = "stub-model"
model_provider = "stub"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false
web_search = "disabled"
# Anything addressed to ChatGPT's backend goes to the stub (loopback) instead.
chatgpt_base_url = "{url}/backend-api/"

[model_providers.stub]
name = "stub"
base_url = "{url}/v1"
env_key = "{KEY_VAR}"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

# The curated-plugin sync (git ls-remote github.com/openai/plugins, api.github.com, then an
# archive from chatgpt.com) runs at start-up unless plugins are off.
[features]
plugins = false
remote_plugin = false
apps = false

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"
trace_exporter = "none"
metrics_exporter = "none"
log_user_prompt = false
"""


def _prepare(home: Path, work: Path, url: str) -> dict[str, str]:
    """Write ``~/.codex/config.toml`` under ``home`` for the stub at ``url``; returns the
    environment every Codex release needs (the dummy key, ``CODEX_HOME``, ``OPENAI_BASE_URL``)."""
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(_config(url))
    # Codex 0.98.0 refreshes its model list from the built-in OpenAI provider
    # (``https://api.openai.com/v1/models?client_version=...``) whatever ``model_provider``
    # says; ``OPENAI_BASE_URL`` points that provider at the stub too (checked with strace).
    return {KEY_VAR: "stub-key-not-a-secret", "CODEX_HOME": str(codex_home),
            "OPENAI_BASE_URL": f"{url}/v1"}


#: The first release whose ``codex exec`` knows ``--strict-config`` (0.131.0; 0.130.0 and older
#: reject the flag as an unexpected argument, and ignore config keys they do not know).
STRICT_CONFIG_SINCE = (0, 131, 0)


def release_of(binary: str) -> tuple[int, ...]:
    """The installed release of the ``codex`` at ``binary`` (``node_modules/.bin/codex``, a link
    to ``@openai/codex/bin/codex.js``) as a tuple of ints, read from the package's
    ``package.json``. Raises ``OSError`` when that file is missing, ``ValueError`` when it
    holds no ``major.minor.patch`` version."""
    package = Path(binary).resolve().parent.parent / "package.json"
    version = json.loads(package.read_text())["version"]
    return tuple(int(part) for part in version.split("-", 1)[0].split("."))


#: Before 0.96.0 the tool Codex offers for a shell depends on the model: its built-in entries for
#: OpenAI's models (``"shell_type": "shell_command"``) get ``shell_command`` (``command`` a
#: string), an unknown model such as the stub's gets the generic ``shell`` (``command`` an argv
#: list). Releases before 0.96.0 run with this built-in model, so their captures hold what
#: users of OpenAI's models have; from 0.96.0 every model gets ``exec_command``.
SHELL_COMMAND_MODEL = "gpt-5.1-codex-max"
UNIFIED_EXEC_SINCE = (0, 96, 0)


def _argv(binary: str, prompt: str) -> list[str]:
    """``codex exec`` of ``prompt`` with the flags the release at ``binary`` takes (the module
    docstring); raises what :func:`release_of` raises."""
    release = release_of(binary)
    strict = ["--strict-config"] if release >= STRICT_CONFIG_SINCE else []
    # ``-c``, not ``--model``: the file-tool scenario's ``--model`` (FILE_TOOL_MODEL) comes on
    # top, and clap refuses a second ``--model``.
    model = ["-c", f'model="{SHELL_COMMAND_MODEL}"'] if release < UNIFIED_EXEC_SINCE else []
    return [binary, "exec", *strict, *model, "--dangerously-bypass-approvals-and-sandbox",
            "--skip-git-repo-check", "--color", "never", prompt]


def _transcript_argv(binary: str, prompt: str) -> list[str]:
    # ``--json``: "Print events to stdout as JSONL".
    return [*_argv(binary, prompt)[:-1], "--json", prompt]


BACKEND = Backend(
    name="codex", package="@openai/codex", version="0.171.0", binary="codex",
    prepare=_prepare, argv=_argv, session_globs=(".codex/sessions/*/*/*/rollout-*.jsonl",),
    file_tool_args=("--model", FILE_TOOL_MODEL), transcript_argv=_transcript_argv,
)
