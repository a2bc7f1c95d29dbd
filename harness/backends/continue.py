"""Continue CLI (npm ``@continuedev/cli``, command ``cn``; not a Hive backend) against the OpenAI
Chat Completions stub.

A plain JavaScript bundle: nothing is downloaded at install or first run, and it runs on the
machine's Node 20. No Continue account is needed when ``~/.continue/config.yaml`` exists (its
default config path): one model of provider ``openai`` whose ``apiBase`` is the stub's ``/v1``,
with a dummy key (Continue's config.yaml reference: ``name``, ``version``, ``schema: v1``,
``models``). ``cn -p`` is its headless mode (prints the final answer and exits); ``--auto``
allows every tool. ``CONTINUE_CLI_ENABLE_TELEMETRY=0`` and ``CONTINUE_METRICS_ENABLED=0`` turn
its telemetry and metrics off (the switches its bundle reads). Its update check
(``https://api.continue.dev/cn/info``) has no switch: 1.5.47 looks up ``api.continue.dev`` once
per run; the lookup fails on the harness machine and the run goes on.

Its ``Bash`` tool (``command``) runs ``$SHELL -l -c <cmd>`` (``/bin/bash`` when ``SHELL`` is
unset), no wrapper: with ``SHELL=/bin/sh`` nothing is recorded, so the launch environment's
``SHELL=/bin/bash`` is what makes the route work (seen with 1.5.47). Session files:
``~/.continue/sessions/<uuid>.json`` and ``sessions.json``.
"""

from __future__ import annotations

from pathlib import Path

from harness.install import Backend

MODEL = "stub-model"


def _prepare(home: Path, work: Path, url: str) -> dict[str, str]:
    config_dir = home / ".continue"
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "config.yaml").write_text(
        "name: harness\nversion: 0.0.1\nschema: v1\nmodels:\n"
        f"  - name: stub\n    provider: openai\n    model: {MODEL}\n"
        f"    apiBase: {url}/v1\n    apiKey: stub-key-not-a-secret\n"
        "    roles: [chat, edit, apply]\n")
    return {"CONTINUE_CLI_ENABLE_TELEMETRY": "0", "CONTINUE_METRICS_ENABLED": "0"}


def _argv(binary: str, prompt: str) -> list[str]:
    return [binary, "-p", "--auto", prompt]


BACKEND = Backend(
    name="continue", package="@continuedev/cli", version="1.5.47", binary="cn",
    prepare=_prepare, argv=_argv,
    session_globs=(".continue/sessions/*.json",),
    looks_up="api.continue.dev (its update check; no setting turns it off)",
)
