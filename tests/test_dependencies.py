"""Every package the product imports is declared (issue 29, item 6): each third-party module
imported anywhere in ``repeat_failure/`` (top level or inside a function) belongs to a
distribution named in pyproject.toml's ``dependencies``, not one that only arrives through
another (the fix loop imported ``requests`` and ``urllib3``, which came with ``kubernetes``)."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def canonical(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def declared() -> set[str]:
    """The distributions pyproject.toml's ``dependencies`` name (extras and versions dropped)."""
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    return {canonical(re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", d).group(0)) for d in deps}


def imported_modules(root: Path) -> dict[str, list[str]]:
    """Top-level module name -> the files importing it, for every absolute import under
    ``root`` that is neither the standard library nor the package itself."""
    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top == "repeat_failure":
                    continue
                found.setdefault(top, []).append(str(path.relative_to(REPO)))
    return found


def undeclared(modules: dict[str, list[str]], names: set[str]) -> dict[str, str]:
    """Module -> why it is not covered by ``names`` (its distributions, or that none is
    installed)."""
    owners = importlib.metadata.packages_distributions()
    missing = {}
    for module, files in sorted(modules.items()):
        dists = {canonical(d) for d in owners.get(module, [])}
        if not dists:
            missing[module] = f"no installed distribution provides it ({files[0]})"
        elif not dists & names:
            missing[module] = f"from {sorted(dists)}, not declared ({files[0]})"
    return missing


def test_every_imported_package_is_declared() -> None:
    """Each third-party module ``repeat_failure/`` imports comes from a declared dependency."""
    modules = imported_modules(REPO / "repeat_failure")
    assert {"requests", "urllib3", "yaml", "prometheus_client"} <= set(modules)
    assert undeclared(modules, declared()) == {}


def test_the_check_names_a_transitive_import() -> None:
    """The check can fail: without ``requests``, ``urllib3`` and ``cryptography`` in the
    declared set (as before issue 29), each is reported, with a file that imports it."""
    modules = imported_modules(REPO / "repeat_failure")
    missing = undeclared(modules, declared() - {"requests", "urllib3", "cryptography"})
    assert sorted(missing) == ["cryptography", "requests", "urllib3"]
    assert "repeat_failure/fixloop/" in missing["requests"]
