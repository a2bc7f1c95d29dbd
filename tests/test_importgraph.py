"""The import checker of tests/test_layout.py, checked (issue 30): each way one program's module
can reach another program's, written into a small package under ``tmp_path``, is an edge of
:func:`importgraph.read_graph`'s graph and a crossing of :func:`importgraph.crossings`; what it
cannot follow is listed, never dropped in silence."""

from pathlib import Path

import pytest

import importgraph

#: Two programs, ``a`` and ``b``, and a shared package ``shared``, in a package ``pkg``.
PROGRAMS = {"a", "b"}
SHARED = {"shared", ""}


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    """Write ``pkg/`` with programs ``a`` (modules ``run``, ``probe``) and ``b`` (``app``) and the
    shared package ``shared`` (``text``), then ``files`` (path under ``pkg/`` → source)."""
    root = tmp_path / "pkg"
    base = {"__init__.py": "", "a/__init__.py": "", "a/run.py": "", "a/probe.py": "",
            "b/__init__.py": "", "b/app.py": "class App:\n    pass\n",
            "shared/__init__.py": "", "shared/text.py": ""}
    for path, text in {**base, **files}.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    return root


#: Each way ``a.probe`` may import ``b.app``, and every module the graph must say ``a.probe``
#: imports (``pkg.b`` too where the source names it, the package and the shared code allowed).
WAYS = {
    "import": ("import pkg.b.app\n", "pkg.b.app"),
    "from import": ("from pkg.b.app import App\n", "pkg.b.app"),
    "relative module": ("from ..b import app\n", "pkg.b.app"),
    "relative package": ("from .. import b\n", "pkg.b"),
    "star": ("from ..b.app import *\n", "pkg.b.app"),
    "TYPE_CHECKING": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                      "    from pkg.b.app import App\n", "pkg.b.app"),
    "import_module": ("import importlib\ndef f():\n    return importlib.import_module('pkg.b.app')\n",
                      "pkg.b.app"),
    "import_module renamed": ("from importlib import import_module as load\n"
                              "def f():\n    return load('pkg.b.app')\n", "pkg.b.app"),
    "import_module assigned": ("import importlib\nload = importlib.import_module\n"
                               "def f():\n    return load('pkg.b.app')\n", "pkg.b.app"),
    "import_module by getattr": ("import importlib\ndef f():\n"
                                 "    return getattr(importlib, 'import_module')('pkg.b.app')\n",
                                 "pkg.b.app"),
    "import_module relative": ("import importlib\ndef f():\n"
                               "    return importlib.import_module('..b.app', __package__)\n",
                               "pkg.b.app"),
    "__import__": ("def f():\n    return __import__('pkg.b.app')\n", "pkg.b.app"),
    "__import__ fromlist": ("def f():\n    return __import__('pkg.b', fromlist=['app']).app\n",
                            "pkg.b", "pkg.b.app"),
    "find_spec": ("import importlib.util\ndef f():\n    return importlib.util.find_spec('pkg.b.app')\n",
                  "pkg.b.app"),
    "resolve_name": ("import pkgutil\ndef f():\n    return pkgutil.resolve_name('pkg.b.app:App')\n",
                     "pkg.b.app"),
    "run_module": ("import runpy\ndef f():\n    return runpy.run_module('pkg.b.app')\n", "pkg.b.app"),
    "exec": ("def f():\n    exec('from pkg.b import app')\n", "pkg.b.app"),
    "sys.modules": ("import sys\ndef f():\n    return sys.modules['pkg.b.app']\n", "pkg.b.app"),
    "attribute of the package": ("import pkg.shared.text\ndef f():\n    return pkg.b.app.App\n",
                                 "pkg.shared.text", "pkg.b.app"),
    "attribute of a subpackage": ("from pkg import b\ndef f():\n    return b.app.App\n", "pkg.b",
                                  "pkg.b.app"),
    "string annotation": ("import pkg\ndef f(x: 'pkg.b.app.App') -> None:\n    pass\n", "pkg",
                          "pkg.b.app"),
    "string in an annotation": ("import pkg\ndef f() -> list['pkg.b.app.App']:\n    return []\n",
                                "pkg", "pkg.b.app"),
    "module __getattr__": ("def __getattr__(name):\n    from pkg.b import app\n    return app\n",
                           "pkg.b.app"),
}


@pytest.mark.parametrize("way", WAYS)
def test_every_way_to_import_another_program_is_a_crossing(tmp_path: Path, way: str):
    """``a.probe`` importing ``b.app`` by any of :data:`WAYS` is an edge of the graph and a
    crossing; before issue 30's review, the imports by a literal name, the attribute
    chains and the string annotations were no edge at all."""
    source, *targets = WAYS[way]
    graph = importgraph.read_graph(_package(tmp_path, {"a/probe.py": source}))
    assert graph.imports["pkg.a.probe"] == set(targets)
    assert importgraph.crossings(graph, PROGRAMS, SHARED) == [
        ("pkg.a.probe", t) for t in sorted(targets) if t.startswith("pkg.b")]
    assert graph.computed == []


def test_a_program_importing_only_itself_and_shared_code_is_no_crossing(tmp_path: Path):
    """The rules allow what the programs do: their own modules, the shared ones, the package."""
    root = _package(tmp_path, {"a/probe.py": "import pkg\nfrom . import run\nfrom ..shared import text\n"
                                             "import importlib\nimportlib.import_module('pkg.shared')\n"})
    graph = importgraph.read_graph(root)
    assert graph.imports["pkg.a.probe"] == {"pkg", "pkg.a.run", "pkg.shared.text", "pkg.shared"}
    assert importgraph.crossings(graph, PROGRAMS, SHARED) == []


@pytest.mark.parametrize("source", [
    "import importlib\ndef __getattr__(name):\n    return importlib.import_module('pkg.b.' + name)\n",
    "import importlib\nNAME = 'pkg.b.app'\ndef f():\n    return importlib.import_module(NAME)\n",
    "def f(code):\n    exec(code)\n",
    "import importlib\ndef f():\n    return importlib.import_module('.app', package=f'pkg.{\"b\"}')\n",
], ids=["getattr", "constant", "exec", "relative"])
def test_an_import_by_a_computed_name_is_listed(tmp_path: Path, source: str):
    """A name the source does not spell out cannot be resolved; the call is listed (module, line,
    source) so that tests/test_layout.py can refuse it, and no edge is made up."""
    graph = importgraph.read_graph(_package(tmp_path, {"a/probe.py": source}))
    assert [(m, line) for m, line, _ in graph.computed] == [("pkg.a.probe", source.count("\n"))]
    assert graph.imports["pkg.a.probe"] == set()


def test_a_folder_without_init_is_read_as_a_namespace_package(tmp_path: Path):
    """A module in a folder with no ``__init__.py`` is still a module of the package, in a
    package of its own (``c``): neither a program nor shared, so a program's import of it is a
    crossing."""
    root = _package(tmp_path, {"c/bridge.py": "from pkg.b import app\n",
                               "a/probe.py": "from pkg.c import bridge\n"})
    graph = importgraph.read_graph(root)
    assert graph.imports["pkg.c.bridge"] == {"pkg.b.app"}
    assert importgraph.crossings(graph, PROGRAMS, SHARED) == [("pkg.a.probe", "pkg.c.bridge")]
    assert importgraph.package_of("pkg.c.bridge") == "c"


def test_code_beside_the_package_is_listed(tmp_path: Path):
    """First-party code outside the package (the harness, the suite) is not a module of it but is
    listed by its top-level name: through it a program could load another unseen."""
    root = _package(tmp_path, {"a/probe.py": "def f():\n    from harness.capture import App\n"
                                             "import os.path\n"})
    graph = importgraph.read_graph(root, frozenset({"harness", "tests"}))
    assert graph.outside == {"pkg.a.probe": {"harness"}}
    assert graph.imports["pkg.a.probe"] == set()


def test_a_shared_module_importing_a_program_is_a_violation(tmp_path: Path):
    """:func:`importgraph.shared_violations` names each import a shared package is not allowed."""
    root = _package(tmp_path, {"shared/text.py": "import importlib\n"
                                                 "def f():\n    return importlib.import_module('pkg.a.run')\n"})
    graph = importgraph.read_graph(root)
    assert importgraph.shared_violations(graph, {"shared": set(), "": set()}) == [
        ("pkg.shared.text", "pkg.a.run")]


def test_an_init_that_registers_its_submodules_last_is_no_circle(tmp_path: Path):
    """The backends' pattern: the ``__init__`` defines what its submodules take, then imports
    them; a submodule's import of the package is then no circle."""
    root = _package(tmp_path, {"shared/__init__.py": '"""Doc."""\nREGISTRY = {}\n'
                                                     "from pkg.shared import text  # noqa\n",
                               "shared/text.py": "from pkg.shared import REGISTRY\n"})
    graph = importgraph.read_graph(root)
    assert "pkg.shared" in graph.late_init
    assert importgraph.circles(graph) == []


def test_an_init_that_imports_a_submodule_before_its_definitions_is_a_circle(tmp_path: Path):
    """The same imports with the submodule imported first: Python fails on it (``REGISTRY`` does
    not exist yet when ``text`` runs), and the checker reports the circle; before issue 30's
    review every submodule-to-package edge was left out, and this passed."""
    root = _package(tmp_path, {"shared/__init__.py": "from pkg.shared import text  # noqa\nREGISTRY = {}\n",
                               "shared/text.py": "from pkg.shared import REGISTRY\n"})
    graph = importgraph.read_graph(root)
    assert "pkg.shared" not in graph.late_init
    assert importgraph.circles(graph) == [["pkg.shared", "pkg.shared.text", "pkg.shared"]]


def test_a_circle_through_functions_is_a_circle(tmp_path: Path):
    """Imports inside functions count: ``a.run`` → ``a.probe`` → ``a.run``."""
    root = _package(tmp_path, {"a/run.py": "def f():\n    from pkg.a import probe\n",
                               "a/probe.py": "def g():\n    from pkg.a import run\n"})
    assert importgraph.circles(importgraph.read_graph(root)) == [["pkg.a.probe", "pkg.a.run", "pkg.a.probe"]]


def test_a_relative_import_beyond_the_top_is_no_edge(tmp_path: Path):
    """``from ... import x`` from ``pkg.a.probe`` leaves the package: Python refuses it, and the
    checker makes no edge of it (nor crashes)."""
    graph = importgraph.read_graph(_package(tmp_path, {"a/probe.py": "from ... import b\n"}))
    assert graph.imports["pkg.a.probe"] == set()
