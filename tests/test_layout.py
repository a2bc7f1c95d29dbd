"""The tree shows its programs (issue 21): docs/layout.md names every folder of the package and
every module of the sidecar's pipeline, in a record's order, and they exist. The programs meet
only through the shared packages, and nothing in the package imports in a circle (issue 30)."""

import ast
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "repeat_failure"
HARNESS = REPO / "harness"
LAYOUT = (REPO / "docs" / "layout.md").read_text(encoding="utf-8")

#: A record's path through the sidecar, stage by stage (README.md "How it works"; issue 21 item 1).
PIPELINE = ["hook", "collector", "parse", "scrub", "normalize", "exclude", "dedup", "detector",
            "checkstate", "exporter"]


def test_every_subpackage_is_a_row_of_the_layout_table():
    """Each folder under repeat_failure/ is one row of docs/layout.md's table, and each row
    names a folder that exists."""
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    rows = set(re.findall(r"^\| `repeat_failure/([a-z_]+)/` \|", LAYOUT, re.M))
    assert rows == folders


def test_pipeline_stages_are_modules_in_the_sidecar_program_in_order():
    """The stages docs/layout.md lists for repeat_failure/sidecar/ are written in a record's
    order, and each is a module of the sidecar or of the shared rules (parse, scrub, normalize,
    exclude, detector: issue 30)."""
    row = next(line for line in LAYOUT.splitlines() if line.startswith("| `repeat_failure/sidecar/`"))
    named = re.findall(r"`([a-z_]+)`", row.split("|")[3])
    stages = [name for name in named if name in PIPELINE]
    assert stages == PIPELINE
    for name in named:
        assert any((PACKAGE / folder / f"{name}.py").is_file() for folder in ("sidecar", "rules")), name


@pytest.mark.parametrize("root", [PACKAGE, HARNESS], ids=["repeat_failure", "harness"])
def test_no_module_over_600_lines(root: Path):
    """Every module of the package (issue 21) and of the harness (issue 30 item 4) reads in one
    sitting: at most 600 lines."""
    long = {str(p.relative_to(REPO)): n for p in sorted(root.rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 600}
    assert long == {}


def _row(folder: str) -> str:
    return next(line for line in LAYOUT.splitlines() if line.startswith(f"| `{folder}` |"))


def test_every_harness_module_is_named_in_its_row():
    """docs/layout.md's ``harness/`` row names every module of the harness (issue 30 item 4:
    install, run, capture beside the runner), and each module it names exists."""
    named = set(re.findall(r"`([a-z_]+)`", _row("harness/").split("|")[2]))
    modules = {p.stem for p in HARNESS.glob("*.py") if p.stem != "__init__"}
    assert modules <= named, modules - named
    assert {n for n in named if (HARNESS / f"{n}.py").is_file()} == modules


def test_every_top_level_folder_is_a_row_of_the_layout():
    """Every folder of the repository's top (tracked in git) is a row of one of docs/layout.md's
    tables, and so are the harness's backends and committed evidence (issue 30 item 4)."""
    tracked = subprocess.run(["git", "-C", str(REPO), "ls-files"], capture_output=True,
                             text=True, check=True).stdout.splitlines()
    folders = {f"{path.split('/')[0]}/" for path in tracked if "/" in path}
    folders = {"charts/repeat-failure/" if f == "charts/" else f for f in folders}
    folders -= {"repeat_failure/"}  # one row per subpackage (the test above) and its top
    rows = set(re.findall(r"^\| `([a-z_.-]+(?:/[a-z_-]+)*/)` \|", LAYOUT, re.M))
    assert folders | {"harness/backends/", "harness/evidence/"} <= rows, folders - rows


def test_the_modules_that_are_not_what_their_folder_suggests_are_named():
    """``backends/trajectory`` is replay's reader of benchmark trajectories, not an agent CLI, and
    ``malloc`` is the sidecar's only: the layout says so where a reader looks (issue 30 item 4)."""
    backends = _row("repeat_failure/backends/")
    assert "`trajectory`" in backends and "`repeat-failure replay` only" in backends
    top = next(line for line in LAYOUT.splitlines() if line.startswith("| `repeat_failure/` (top)"))
    assert "`malloc` (" in top and "only `repeat-failure run` calls it" in top
    assert (PACKAGE / "backends" / "trajectory.py").is_file()
    assert (PACKAGE / "malloc.py").is_file()
# --- imports (issue 30) ------------------------------------------------------------------------

#: The programs: one subpackage each; none imports another's modules (docs/layout.md "Imports").
PROGRAMS = {"sidecar", "replay", "kube", "fixloop"}
#: What a program may import besides itself: the shared rules, the shared turn rules, the shared
#: inputs (the session reader and the agent CLIs' tables) and the shared top-level modules (the
#: bare package too).
SHARED = {"rules", "turns", "sessions", "backends", "config", "events", "jsonlog", "serving",
          "malloc", ""}
#: What each shared package or top-level module may import besides itself (a package, or one
#: module of it); none of them imports a program.
SHARED_DEPENDS = {"rules": {"backends"}, "turns": {"rules", "backends"},
                  "sessions": {"rules", "backends"},
                  # the readers of stores that are not JSON Lines (issue 26); stores imports
                  # nothing of the package
                  "backends": {"repeat_failure.sessions.stores"},
                  # the coverage table and the preview URL's rules, to check a config
                  "config": {"backends", "turns"},
                  "events": {"rules", ""},  # the terminal escaping; the package's version
                  "jsonlog": {"rules"}, "serving": set(), "malloc": set(), "": set()}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    """Each module of the package → the modules of the package it imports (at the top or inside a
    function; ``from P import m`` counts as importing ``P.m`` when that is a module)."""
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                    here = here[:len(here) - node.level + 1]
                    base = ".".join(here + ([base] if base else []))
                for alias in node.names:
                    found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in paths else base)
        graph[name] = {m for m in found if m in paths and m != name}
    return graph


def _package(module: str) -> str:
    """``repeat_failure.X.y`` → ``X`` (a top-level module ``repeat_failure.X`` → ``X``, the
    package itself → ``""``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_no_program_imports_another_programs_modules():
    """A program's modules import their own program, the shared packages and the shared
    top-level modules; never another program's (issue 30)."""
    bad = sorted((m, t) for m, targets in _imports().items() if _package(m) in PROGRAMS
                 for t in targets if _package(t) not in SHARED | {_package(m)})
    assert bad == []


def test_every_package_and_top_level_module_is_a_program_or_shared():
    """What :data:`PROGRAMS` and :data:`SHARED` name is every subpackage and top-level module of
    the package but the command line (``cli``, ``__main__``), which imports every program; so a
    new package cannot escape the two rules above by being neither."""
    found = {_package(m) for m in _imports()}
    assert found - {"cli", "__main__"} == PROGRAMS | SHARED
    assert set(SHARED_DEPENDS) == SHARED


def test_shared_packages_import_no_program():
    """The shared rules import only themselves and ``backends``; the turn rules only the rules
    and ``backends``; ``backends`` nothing else of the package but ``sessions.stores``;
    ``sessions`` only the rules and ``backends``; the shared top-level modules what
    :data:`SHARED_DEPENDS` names (issue 30). No shared module imports a program."""
    bad = sorted((m, t) for m, targets in _imports().items() if _package(m) in SHARED_DEPENDS
                 for t in targets if not {_package(t), t} & (SHARED_DEPENDS[_package(m)] | {_package(m)}))
    assert bad == []


def test_no_import_circle_in_the_package():
    """No module of the package imports, directly or through others, a module that imports it
    back. A submodule's import of its own package's ``__init__`` is left out: Python runs that
    ``__init__`` before any submodule anyway (the backends register themselves that way)."""
    graph = _imports()
    graph = {m: {t for t in targets if not m.startswith(t + ".")} for m, targets in graph.items()}
    state: dict[str, int] = {}
    circles: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                circles.append(path[path.index(target):] + [target])
            elif target not in state:
                visit(target, path)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
    assert circles == []


def test_the_scrub_circle_stays_broken():
    """scrub → scrub_rules → scrub_replacements no longer leads back to scrub: the replacement
    that scrubs a decoded word reaches the engine through the leaf ``scrub_engine``."""
    graph = _imports()
    assert "repeat_failure.rules.scrub" not in graph["repeat_failure.rules.scrub_replacements"]
    assert graph["repeat_failure.rules.scrub_engine"] == set()


def test_both_opencode_readers_share_its_row_rules_without_a_circle():
    """opencode's SQLite reader and its storage reader (opencode 1.0/1.1) run the same row rules,
    ``backends.opencode_rows``, which imports neither reader (the circle issue 26 left)."""
    graph = _imports()
    rows = "repeat_failure.backends.opencode_rows"
    assert rows in graph["repeat_failure.backends.opencode"]
    assert rows in graph["repeat_failure.backends.opencode_storage"]
    assert "repeat_failure.backends.opencode" not in graph["repeat_failure.backends.opencode_storage"]
    assert not {"repeat_failure.backends.opencode", "repeat_failure.backends.opencode_storage"} & graph[rows]


def test_replay_is_a_program_that_imports_no_other():
    """``repeat-failure replay`` is its own subpackage beside the sidecar; neither imports the
    other, and both reach the per-record rules through ``rules.pipeline`` (issue 30 item 2)."""
    graph = _imports()
    replay = {m for m in graph if _package(m) == "replay"}
    assert replay == {"repeat_failure.replay", "repeat_failure.replay.run",
                      "repeat_failure.replay.sources", "repeat_failure.replay.report"}
    assert not {t for m in replay for t in graph[m] if _package(t) == "sidecar"}
    assert not {t for m, ts in graph.items() if _package(m) == "sidecar" for t in ts
                if _package(t) == "replay"}
    assert "repeat_failure.rules.pipeline" in graph["repeat_failure.replay.run"]
    assert "repeat_failure.rules.pipeline" in graph["repeat_failure.sidecar.records"]
