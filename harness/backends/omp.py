"""Oh My Pi (npm ``@oh-my-pi/pi-coding-agent``) against the OpenAI Chat Completions stub.

**What it shows: omp's agent commands never reach a bash, so the neutral route records nothing.**
omp's ``bash`` tool runs every command inside an embedded shell (brush-core, a bash
re-implementation in Rust loaded in-process through ``@oh-my-pi/pi-natives``), with common
commands (``ls``, ``cat``, ...) as in-process uutils built-ins; no ``/bin/bash`` is started for an
agent command, so ``BASH_ENV`` is never read. The one real bash it starts (``/bin/bash -c
SNAPSHOT_FILE=...``, the shell-snapshot writer) gets an environment with ``BASH_ENV`` deleted
(``src/utils/shell-snapshot.ts``). omp's own session log has what a backend route would need:
``~/.omp/agent/sessions/<cwd-slug>/*.jsonl``, a ``toolResult`` for ``bash`` with ``isError`` and
``details.exitCode``.

Version: the newest on the registry is 18.3.4, but its ``@oh-my-pi/*`` dependencies at 18.3.4 are
not on the registry mirror here (``npm install`` fails with ETARGET for
``@oh-my-pi/omp-stats@18.3.4``); 18.2.3 is the newest whose dependencies all install.

omp is a Bun program (``dist/cli.js`` starts ``#!/usr/bin/env bun``; ``engines.bun >= 1.3.14``),
and the package does not depend on Bun. ``extra_packages`` installs the pinned ``bun`` npm
package (its binary ships inside the registry package ``@oven/bun-linux-x64``) into the same
cache prefix, where ``node_modules/.bin`` is first on the run's PATH.

Pointing it at the stub: a custom provider in ``~/.omp/agent/models.yml`` (JSON is YAML), model
``stub/stub-model``; ``-p`` runs one turn non-interactively and ``--auto-approve`` approves the
tool calls. Keeping it on loopback (checked with ``strace -f -e trace=connect,sendto``): at start-up
omp probes local model servers (ollama, llama.cpp, LM Studio: disabled in
``~/.omp/agent/config.yml``) and fetches public model lists (catalog.stencil.so, api.kilo.ai,
api.venice.ai, zenmux.ai, ...) with no key; those go through ``HTTPS_PROXY`` = the stub, which
refuses ``CONNECT``, so no name is even looked up. Update checks, the setup wizard, titles and
OpenTelemetry are off.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.backends.pi import stub_models
from harness.install import Backend

VERSION = "18.2.3"
BUN = "bun@1.4.5"


def _prepare(home: Path, work: Path, url: str) -> dict[str, str]:
    agent_dir = home / ".omp" / "agent"
    agent_dir.mkdir(parents=True, exist_ok=True)
    (agent_dir / "models.yml").write_text(json.dumps(stub_models(url), indent=2))
    config = {
        "disabledProviders": ["ollama", "llama.cpp", "lm-studio"],
        "startup": {"checkUpdate": False, "setupWizard": False},
        "marketplace": {"autoUpdate": "off"},
    }
    (agent_dir / "config.yml").write_text(json.dumps(config, indent=2))
    loopback = "127.0.0.1,localhost"
    return {
        "HTTPS_PROXY": url, "HTTP_PROXY": url, "https_proxy": url, "http_proxy": url,
        "NO_PROXY": loopback, "no_proxy": loopback,
        "OMP_SKIP_SETUP": "1", "PI_NO_TITLE": "1", "OTEL_SDK_DISABLED": "true",
    }


def _argv(binary: str, prompt: str) -> list[str]:
    return [binary, "--model", "stub/stub-model", "--auto-approve", "--no-title", "-p", prompt]


BACKEND = Backend(
    name="omp", package="@oh-my-pi/pi-coding-agent", version=VERSION, binary="omp",
    prepare=_prepare, argv=_argv, session_globs=(".omp/agent/sessions/*/*.jsonl",),
    extra_packages=(BUN,),
)
