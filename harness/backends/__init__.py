"""The backends the harness drives, one module each (``harness/backends/<name>.py`` defining
``BACKEND``); :data:`BACKENDS` lists those present, in the order the harness attempts them."""

from __future__ import annotations

import importlib

from harness.install import Backend

#: The order to attempt backends in (the harness issue's list); a module not written yet is
#: simply absent from BACKENDS. ``qwen`` is run for its stream-JSON transcripts of the turn-verdict
#: scenarios; it and the CLIs after it are beyond Hive's list (issue 15, item 7: their rows in
#: the coverage table say so).
ORDER = ("bash", "claude", "codex", "gemini", "opencode", "pi", "omp", "kilo", "copilot", "aider",
         "qwen", "cline", "continue", "droid")


def _load() -> dict[str, Backend]:
    found = {}
    for name in ORDER:
        try:
            module = importlib.import_module(f"harness.backends.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"harness.backends.{name}":
                raise
            continue
        found[name] = module.BACKEND
    return found


BACKENDS: dict[str, Backend] = _load()
