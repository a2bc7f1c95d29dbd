"""The tree shows its programs (issue 21): docs/layout.md names every folder of the package and
every module of the sidecar's pipeline, in a record's order, and they exist. The programs meet
only through the shared packages, and nothing in the package imports in a circle (issue 30)."""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import importgraph

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


@pytest.mark.parametrize("folder", sorted(p.name for p in PACKAGE.iterdir()
                                           if (p / "__init__.py").is_file()) + [""])
def test_every_module_of_the_package_is_named_in_its_row(folder: str):
    """docs/layout.md's row of each folder of the package (and of its top) names every module
    in it, ``__init__`` too where it holds code, not only a docstring: a reader looking for where
    a thing lives finds its module by name (the fix loop's ``app``, ``notify``, ``config`` and
    the agent CLIs' modules were not, before issue 30's review)."""
    row = _row(f"repeat_failure/{folder}/" if folder else "repeat_failure/").split("|") \
        if folder else next(line for line in LAYOUT.splitlines()
                            if line.startswith("| `repeat_failure/` (top)")).split("|")
    named = set(re.findall(r"`([a-z_]+)`", row[3]))
    here = PACKAGE / folder
    modules = {p.stem for p in here.glob("*.py") if p.stem != "__init__"}
    body = ast.parse((here / "__init__.py").read_text(encoding="utf-8")).body
    if any(not isinstance(b, ast.Expr) and not (isinstance(b, ast.ImportFrom) and b.module == "__future__")
           for b in body):
        modules.add("__init__")  # code, not only its docstring
    assert modules - named == set()


def test_every_page_of_docs_is_named_in_its_row():
    """The ``docs/`` row names every page of docs/ (and each page it names exists)."""
    named = set(re.findall(r"`docs/([a-z-]+\.md)`", _row("docs/")))
    assert named == {p.name for p in (REPO / "docs").glob("*.md")}


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


def _outside() -> frozenset[str]:
    """The top-level names first-party code beside the package could be imported by: the
    repository's folders (``harness``, ``tests``, ``benchmarks`` ...), its top-level modules and
    the suite's helper modules (``sessionlogs``, ``fakegithub`` ...)."""
    tracked = subprocess.run(["git", "-C", str(REPO), "ls-files"], capture_output=True,
                             text=True, check=True).stdout.splitlines()
    names = {path.split("/")[0] for path in tracked if "/" in path}
    names |= {Path(path).stem for path in tracked if path.endswith(".py")
              and (path.count("/") == 0 or path.startswith("tests/") and path.count("/") == 1)}
    return frozenset(names - {"repeat_failure"})


GRAPH = importgraph.read_graph(PACKAGE, _outside())


def _imports() -> dict[str, set[str]]:
    """Each module of the package → the modules of the package it imports
    (:func:`importgraph.read_graph`: at the top, in a function, under ``if TYPE_CHECKING:``, by
    a literal name given to ``importlib.import_module`` or ``__import__``, through an attribute
    chain or a string annotation)."""
    return GRAPH.imports


_package = importgraph.package_of


def test_no_program_imports_another_programs_modules():
    """A program's modules import their own program, the shared packages and the shared
    top-level modules; never another program's (issue 30)."""
    assert importgraph.crossings(GRAPH, PROGRAMS, SHARED) == []


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
    assert importgraph.shared_violations(GRAPH, SHARED_DEPENDS) == []


def test_no_import_circle_in_the_package():
    """No module of the package imports, directly or through others, a module that imports it
    back. A submodule's import of its own package's ``__init__`` is left out only where that
    ``__init__`` imports its submodules after everything else it defines (the backends register
    themselves that way): Python runs the ``__init__`` first, and what the submodule takes from
    it exists by then. An ``__init__`` that imports a submodule importing it back any earlier is
    a circle (``tests/test_importgraph.py``)."""
    assert importgraph.circles(GRAPH) == []
    assert "repeat_failure.backends" in GRAPH.late_init


def test_the_package_imports_nothing_beside_it_nor_by_a_computed_name():
    """No module of the package imports first-party code outside it (``harness``, ``tests``,
    ``benchmarks`` ...: the wheel and the image do not ship them, and through them a program
    could reach another unseen), and none imports by a name its source does not spell out
    (``importlib.import_module(prefix + name)``), which no reading of the source can follow."""
    assert GRAPH.outside == {}
    assert GRAPH.computed == []


#: Each program's and the shared code's modules, imported for real in one interpreter.
_LOADED = """
import importlib, json, sys
for name in json.loads(sys.argv[1]):
    importlib.import_module(name)
print(json.dumps(sorted({m.split(".")[1] for m in sys.modules if m.startswith("repeat_failure.")})))
"""


@pytest.mark.parametrize("group", sorted(PROGRAMS) + ["shared"])
def test_importing_a_program_loads_no_other_program(group: str):
    """Importing every module of one program loads none of another program's modules (nor the
    command line), and importing every shared module loads no program's: the static rules above,
    confirmed by Python's own ``sys.modules`` (which also sees what a computed name loads at
    import time)."""
    modules = sorted(m for m in GRAPH.imports if (_package(m) == group if group in PROGRAMS
                                                 else _package(m) in SHARED))
    run = subprocess.run([sys.executable, "-c", _LOADED, json.dumps(modules)], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    loaded = set(json.loads(run.stdout))
    assert loaded & (PROGRAMS | {"cli", "__main__"}) == ({group} if group in PROGRAMS else set())


#: Each module imported first, into an interpreter that holds none of the package: an import
#: circle that breaks shows as an ImportError (a name taken from a module not yet run).
_EACH_FIRST = """
import importlib, json, sys
failed = {}
for name in json.loads(sys.argv[1]):
    for loaded in [m for m in sys.modules if m == "repeat_failure" or m.startswith("repeat_failure.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as error:
        failed[name] = repr(error)
print(json.dumps(failed))
"""


def test_every_module_imports_first():
    """Every module of the package but ``__main__`` (which runs the command line) imports
    cleanly as the first module of the package an interpreter loads."""
    modules = sorted(set(GRAPH.imports) - {"repeat_failure.__main__"})
    run = subprocess.run([sys.executable, "-c", _EACH_FIRST, json.dumps(modules)], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {}


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
