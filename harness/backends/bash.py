"""The pseudo-backend ``bash``: a program that runs each command with a plain ``bash -c``.

Its "CLI" is bash itself (the machine's ``/bin/bash``), so the evidence records exactly what the
neutral route writes for an unwrapped command; ``--version`` is bash's own.
"""

from __future__ import annotations

from pathlib import Path

from harness.install import Backend


def _prepare(home: Path, work: Path, url: str) -> dict[str, str]:
    return {}


def _argv(binary: str, command: str) -> list[str]:
    return [binary, "-c", command]


BACKEND = Backend(name="bash", package="bash (Debian)", version="system", binary="bash",
                  prepare=_prepare, argv=_argv, registry="system", direct=True)
