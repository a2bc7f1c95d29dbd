"""The import graph of a package, read from its source with :mod:`ast` (issue 30): the helpers
``tests/test_layout.py`` checks ``repeat_failure/`` with, and ``tests/test_importgraph.py``
checks on small packages written to a temporary directory.

What counts as module ``M`` importing module ``T`` of the package (``T`` being the longest name
that is a module of the package, so ``from P import name`` is ``P.name`` when that is a module,
else ``P``), wherever it is written (at the top, in a function, under ``if TYPE_CHECKING:``):

* ``import T``, ``from T import x``, ``from P import T``, and their relative forms
  (``from ..P import T``, ``from .. import P``);
* a call that imports by a literal name: ``importlib.import_module("T")`` (a relative name with
  its literal ``package``, or ``__package__``), ``__import__("T")``, ``importlib.util.find_spec``,
  ``pkgutil.resolve_name("T:attr")``, ``runpy.run_module``, ``importlib.resources.files`` ...
  however they were imported or named (``from importlib import import_module as load``,
  ``load = importlib.import_module``, ``getattr(importlib, "import_module")``);
* ``exec``/``eval``/``compile`` of a literal string: its text is read as code of ``M``;
* ``sys.modules["T"]`` and ``sys.modules.get("T")``;
* an attribute chain from a name an import bound, ``repeat_failure.sidecar.app.Sidecar`` after
  ``import repeat_failure``, also inside a string annotation (``x: "repeat_failure.P.T.C"``).

Limits: a call that imports by a computed name (``import_module("repeat_failure." + name)``, a
module-level ``__getattr__`` built on one) cannot be resolved; it is listed in
:attr:`Graph.computed` instead, for the caller to refuse or to name. An import function reached only
through an object passed in at run time or kept in a container, or a loader built by hand from a
file path (``SourceFileLoader``), is not seen at all (a top-level import made possible by editing
``sys.path`` is ``tests/test_dependencies.py``'s: no distribution provides it); importing the modules for real
(``tests/test_layout.py``) is the check of that.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

#: Calls whose first argument (``name``) is a module name to import, load or resolve.
IMPORT_CALLS = {"importlib.import_module", "importlib.__import__", "__import__",
                "builtins.__import__", "importlib.util.find_spec", "importlib.find_loader",
                "importlib.reload", "pkgutil.resolve_name", "pkgutil.get_loader",
                "pkgutil.find_loader", "runpy.run_module", "importlib.resources.files",
                "importlib.resources.read_text", "importlib.resources.read_binary",
                "importlib.resources.open_text", "importlib.resources.open_binary",
                "importlib.resources.path", "importlib.resources.contents",
                "importlib.resources.is_resource", "importlib_resources.files"}
#: Calls whose first argument is code to run.
EXEC_CALLS = {"exec", "eval", "compile", "builtins.exec", "builtins.eval", "builtins.compile"}
#: Calls on ``sys.modules`` whose first argument is a module name.
SYS_MODULES_CALLS = {"sys.modules.get", "sys.modules.pop", "sys.modules.setdefault"}


@dataclass
class Graph:
    """What :func:`read_graph` found in one package.

    ``imports``: each module (dotted name) → the modules of the package it imports (itself left
    out). ``outside``: each module → the top-level names of ``outside`` it imports (first-party
    code beside the package). ``computed``: ``(module, line, source)`` of every call that imports
    by a name the source does not spell out. ``late_init``: the packages whose ``__init__``
    imports its own submodules only after everything else it defines (or not at all), so a
    submodule may import it back without an import circle (the backends' registration)."""

    imports: dict[str, set[str]]
    outside: dict[str, set[str]] = field(default_factory=dict)
    computed: list[tuple[str, int, str]] = field(default_factory=list)
    late_init: set[str] = field(default_factory=set)


def module_name(path: Path, root: Path) -> str:
    """``root/a/b.py`` → ``<root name>.a.b``; ``root/a/__init__.py`` → ``<root name>.a``."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_of(module: str) -> str:
    """``pkg.X.y`` → ``X`` (a top-level module ``pkg.X`` → ``X``, the package itself → ``""``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _dotted(node: ast.expr) -> list[str] | None:
    """``a.b.c`` → ``["a", "b", "c"]``; anything but names and attributes → None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


def _text(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


class _Reader:
    """Everything one module names of other modules; see the module docstring."""

    def __init__(self, name: str, is_package: bool) -> None:
        self.name = name
        self.package = name if is_package else name.rpartition(".")[0]
        self.aliases: dict[str, str] = {}
        self.found: set[str] = set()
        self.computed: list[tuple[int, str]] = []

    def absolute(self, level: int, module: str | None) -> str | None:
        """The absolute name of ``from <level dots><module> import ...`` written in this module."""
        if not level:
            return module or ""
        here = self.package.split(".")
        if level - 1 >= len(here):
            return None  # beyond the top-level package: Python refuses it
        here = here[:len(here) - level + 1]
        return ".".join(here + ([module] if module else []))

    def resolve(self, node: ast.expr) -> str | None:
        """An attribute chain with its first name replaced by what an import (or an assignment
        of such a chain) bound it to; ``getattr(chain, "literal")`` is ``chain.literal``."""
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
                and len(node.args) >= 2 and (attr := _text(node.args[1])) is not None):
            base = self.resolve(node.args[0])
            return f"{base}.{attr}" if base is not None else None
        parts = _dotted(node)
        if parts is None:
            return None
        head = self.aliases.get(parts[0])
        if head is None:
            return ".".join(parts) if parts[0] in {"__import__", "exec", "eval", "compile"} else None
        return ".".join([head, *parts[1:]])

    def read(self, tree: ast.AST) -> None:
        """Bind the import aliases first (an import may follow its use in a function), then read."""
        nodes = list(ast.walk(tree))
        for node in nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self.found.add(alias.name)
                    if alias.asname:
                        self.aliases[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".")[0]
                        self.aliases[top] = top
            elif isinstance(node, ast.ImportFrom):
                base = self.absolute(node.level, node.module)
                if base is None:
                    continue
                for alias in node.names:
                    full = f"{base}.{alias.name}" if base else alias.name
                    self.found.add(base if alias.name == "*" else full)
                    if alias.name != "*":
                        self.aliases[alias.asname or alias.name] = full
        for node in nodes:  # ``load = importlib.import_module``
            if (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)
                    and (bound := self.resolve(node.value)) is not None):
                self.aliases[node.targets[0].id] = bound
        inner = {id(node.value) for node in nodes  # ``a.b`` of ``a.b.c``: the chain is read whole
                 if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)}
        for node in nodes:
            if isinstance(node, ast.Call):
                self.call(node)
            elif isinstance(node, ast.Subscript):
                if self.resolve(node.value) == "sys.modules" and (key := _text(node.slice)):
                    self.found.add(key)
            elif isinstance(node, ast.Attribute) and id(node) not in inner:
                if (chain := self.resolve(node)) is not None:
                    self.found.add(chain)
            elif isinstance(node, (ast.arg, ast.AnnAssign)) and node.annotation is not None:
                self.annotation(node.annotation)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns:
                self.annotation(node.returns)

    def annotation(self, node: ast.expr) -> None:
        """A string in an annotation is code too: ``x: "pkg.mod.Class"``."""
        for part in ast.walk(node):
            if isinstance(part, ast.expr) and (text := _text(part)) is not None:
                try:
                    self.read(ast.parse(text.strip(), mode="eval"))
                except SyntaxError:
                    pass

    def call(self, node: ast.Call) -> None:
        """A call that imports, runs code or reads ``sys.modules``: its literal name is an import
        (a relative one resolved against its literal ``package``); a computed one is listed."""
        function = self.resolve(node.func)
        keywords = {k.arg: k.value for k in node.keywords}
        first = node.args[0] if node.args else next(
            (keywords[k] for k in ("name", "source", "mod_name", "anchor", "package") if k in keywords), None)
        if function in IMPORT_CALLS:
            name = _text(first)
            if name is None:
                self.computed.append((node.lineno, ast.unparse(node)))
                return
            name = name.split(":")[0]
            if name.startswith("."):
                anchor = node.args[1] if len(node.args) > 1 else keywords.get("package")
                package = _text(anchor)
                if isinstance(anchor, ast.Name) and anchor.id in {"__package__", "__name__"}:
                    package = self.package
                if package is None:
                    self.computed.append((node.lineno, ast.unparse(node)))
                    return
                dots = len(name) - len(name.lstrip("."))
                base = ".".join(package.split(".")[:len(package.split(".")) - dots + 1])
                name = f"{base}.{name.lstrip('.')}".rstrip(".")
            self.found.add(name)
            fromlist = keywords.get("fromlist") or (
                node.args[3] if function.endswith("__import__") and len(node.args) > 3 else None)
            if isinstance(fromlist, (ast.List, ast.Tuple)):
                self.found.update(f"{name}.{t}" for e in fromlist.elts if (t := _text(e)))
        elif function in EXEC_CALLS:
            code = _text(first)
            if code is None:
                self.computed.append((node.lineno, ast.unparse(node)))
                return
            try:
                self.read(ast.parse(code))
            except SyntaxError:
                pass
        elif function in SYS_MODULES_CALLS and (key := _text(first)):
            self.found.add(key)


def _late_init(tree: ast.Module, package: str, reader: _Reader) -> bool:
    """Does this ``__init__`` import its own submodules only after its last other statement?"""
    def own(statement: ast.stmt) -> bool:
        if isinstance(statement, ast.Import):
            return any(a.name.startswith(package + ".") for a in statement.names)
        if isinstance(statement, ast.ImportFrom):
            base = reader.absolute(statement.level, statement.module) or ""
            return base == package or base.startswith(package + ".")
        return False

    body = tree.body
    last_other = max((i for i, s in enumerate(body) if not isinstance(s, (ast.Import, ast.ImportFrom))
                      and not (isinstance(s, ast.Expr) and _text(s.value) is not None)), default=-1)
    return all(i > last_other for i, s in enumerate(body) if own(s))


def read_graph(root: Path, outside: frozenset[str] = frozenset()) -> Graph:
    """Read every ``*.py`` module under ``root`` (a package's folder; a folder without
    ``__init__.py`` inside it counts too, as Python imports it as a namespace package).
    ``outside``: the top-level names of first-party code beside the package."""
    paths = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    graph = Graph(imports={})
    for name, path in paths.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        reader = _Reader(name, path.name == "__init__.py")
        reader.read(tree)
        found: set[str] = set()
        for dotted in reader.found:
            parts = dotted.split(".")
            known = next((".".join(parts[:n]) for n in range(len(parts), 0, -1)
                          if ".".join(parts[:n]) in paths), None)
            if known is not None:
                found.add(known)
            elif parts[0] in outside:
                graph.outside.setdefault(name, set()).add(parts[0])
        graph.imports[name] = found - {name}
        graph.computed.extend((name, line, source) for line, source in reader.computed)
        if path.name == "__init__.py" and _late_init(tree, name, reader):
            graph.late_init.add(name)
    return graph


def crossings(graph: Graph, programs: set[str], shared: set[str]) -> list[tuple[str, str]]:
    """``(module, target)`` for each import by a program's module of a module that is neither its
    own program's nor shared."""
    return sorted((m, t) for m, targets in graph.imports.items() if package_of(m) in programs
                  for t in targets if package_of(t) not in shared | {package_of(m)})


def shared_violations(graph: Graph, depends: dict[str, set[str]]) -> list[tuple[str, str]]:
    """``(module, target)`` for each import by a shared module of what ``depends`` does not allow
    it (``depends``: shared package → the packages, or single modules, it may import)."""
    return sorted((m, t) for m, targets in graph.imports.items() if package_of(m) in depends
                  for t in targets
                  if not {package_of(t), t} & (depends[package_of(m)] | {package_of(m)}))


def circles(graph: Graph) -> list[list[str]]:
    """Every import circle found by a depth-first walk, as ``[a, b, ..., a]``. A submodule's
    import of its own package is no edge when that package's ``__init__`` imports its submodules
    only at its end (:attr:`Graph.late_init`): Python runs the ``__init__`` first, and what the
    submodule takes from it is defined by then."""
    edges = {m: {t for t in targets if not (m.startswith(t + ".") and t in graph.late_init)}
             for m, targets in graph.imports.items()}
    state: dict[str, int] = {}
    found: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(edges[module]):
            if state.get(target) == 1:
                found.append(path[path.index(target):] + [target])
            elif target not in state:
                visit(target, path)
        path.pop()
        state[module] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module, [])
    return found
