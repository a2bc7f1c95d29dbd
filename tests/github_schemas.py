"""GitHub's published REST schemas, as githubkit generates them, for checking the fake GitHub.

githubkit (a test extra, ``githubkit-schemas[2022-11-28]``) generates one pydantic model per
schema of GitHub's OpenAPI description (github/rest-api-description, API version 2022-11-28)
and one client method per operation. Each generated method names, in its docstring, the
operation id and ``METHOD /path/{template}``, and passes ``response_model=`` (the 2xx body) and,
for writes, validates its body with ``type_validate_python(<Body model>, json)``. This module
reads those methods once (with :mod:`ast`, nothing is executed but the model imports), so the
table of operations is GitHub's own, not a hand-kept copy:

* :func:`operation` ``(method, path)`` → the :class:`Operation` whose template matches a
  concrete path (``/repositories/{id}/...`` is read as ``/repos/{owner}/{repo}/...``, the form
  GitHub's ``Link`` URLs use), or ``None``.
* :func:`response_errors` / :func:`request_errors` ``(method, path, document)`` → a list of
  one-line problems (empty when the document validates), so a test can say exactly which
  field the fake got wrong.

Validation is pydantic's default (lax) mode, as githubkit itself parses responses: an ISO 8601
string is a datetime, but a missing required field, a ``null`` where the schema has no
``null``, or a value outside an enum (``Literal``) is an error.
"""

from __future__ import annotations

import ast
import functools
import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

VERSION = "v2022_11_28"
_PACKAGE = f"githubkit_schemas.{VERSION}"
_DOC_LINE = re.compile(r"^(?P<op>[\w-]+/[\w-]+)\s*\n\s*\n\s*(?P<method>GET|POST|PUT|PATCH|DELETE)"
                       r"\s+(?P<path>/\S*)", re.M)


@dataclass(frozen=True)
class Operation:
    """One REST operation: ``op_id`` (``checks/list-for-ref``), ``method``, ``template``
    (``/repos/{owner}/{repo}/commits/{ref}/check-runs``), ``response`` (the source text of its
    ``response_model``, e.g. ``list[PullRequestSimple]``; ``None`` when it returns no body)
    ``body`` (the source text of its request-body type, or ``None``) and ``errors`` (HTTP
    status → the source text of the error model GitHub documents for it, e.g. ``"422":
    "ValidationError"``)."""

    op_id: str
    method: str
    template: str
    response: str | None
    body: str | None
    errors: tuple[tuple[str, str], ...] = ()

    @functools.cached_property
    def pattern(self) -> re.Pattern[str]:
        parts = re.split(r"(\{[^}]+\})", self.template)
        return re.compile("".join("[^/]+" if p.startswith("{") else re.escape(p)
                                  for p in parts) + r"\Z")


def _scan(source: str) -> list[Operation]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef):  # the sync methods (the async ones match)
            continue
        doc = ast.get_docstring(node) or ""
        m = _DOC_LINE.match(doc)
        if not m:
            continue
        response = body = None
        errors: list[tuple[str, str]] = []
        for call in ast.walk(node):
            if not isinstance(call, ast.Call):
                continue
            for kw in call.keywords:
                if kw.arg == "response_model":
                    response = ast.unparse(kw.value)
                if kw.arg == "error_models" and isinstance(kw.value, ast.Dict):
                    errors = [(ast.literal_eval(k), ast.unparse(v))
                              for k, v in zip(kw.value.keys, kw.value.values)
                              if isinstance(k, ast.Constant)]
            if isinstance(call.func, ast.Name) and call.func.id == "type_validate_python" \
                    and call.args:
                body = ast.unparse(call.args[0])
        found.append(Operation(m["op"], m["method"], m["path"], response, body,
                               tuple(errors)))
    return found


@functools.lru_cache(maxsize=1)
def operations() -> tuple[Operation, ...]:
    """Every operation githubkit generated for the API version (read once per process)."""
    rest = importlib.import_module(f"{_PACKAGE}.rest")
    ops: dict[tuple[str, str], Operation] = {}
    for path in sorted(Path(rest.__file__).parent.glob("*.py")):
        for op in _scan(path.read_text(encoding="utf-8")):
            ops.setdefault((op.method, op.template), op)
    return tuple(ops.values())


def operation(method: str, path: str) -> Operation | None:
    """The operation serving ``method path`` (a concrete path without query), or ``None``.
    A template with fewer placeholders wins over one with more (``/app/installations/{id}``
    before ``/app/{x}/{y}`` style overlaps)."""
    path = re.sub(r"^/repositories/\d+", "/repos/o/r", path)
    best: Operation | None = None
    for op in operations():
        if op.method == method and op.pattern.match(path):
            if best is None or op.template.count("{") < best.template.count("{"):
                best = op
    return best


@functools.lru_cache(maxsize=None)
def _adapter(expression: str) -> Any:
    from pydantic import TypeAdapter

    models = importlib.import_module(f"{_PACKAGE}.models")

    import builtins
    import typing

    class Names(dict):  # the models package loads each model lazily: only those named
        def __missing__(self, name: str) -> Any:
            for space in (typing, builtins, models):
                if hasattr(space, name):
                    return getattr(space, name)
            raise NameError(name)

    return TypeAdapter(eval(expression, {"__builtins__": {}}, Names()))  # noqa: S307


def _problems(expression: str, document: Any, what: str) -> list[str]:
    from pydantic import ValidationError

    try:
        _adapter(expression).validate_python(document)
    except ValidationError as exc:
        return [f"{what} vs {expression}: {'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                for e in exc.errors()[:20]]
    return []


def response_errors(method: str, path: str, status: int, document: Any) -> list[str]:
    """Problems of ``document`` answered to ``method path`` with ``status``: a 2xx against the
    operation's response model, an error status against the error model GitHub documents for
    it on that operation (``ValidationError`` for a 422, ``BasicError`` for most others; a
    status it documents none for is not checked). A 2xx for a path githubkit knows no
    operation for is itself a problem (the fake must not serve endpoints GitHub does not
    have)."""
    if not 200 <= status < 300:
        op = operation(method, path)
        model = dict(op.errors).get(str(status)) if op is not None else None
        if model is None:
            return []
        return _problems(model, document, f"{method} {path} ({op.op_id}) HTTP {status}")
    op = operation(method, path)
    if op is None:
        return [f"{method} {path}: no such operation in GitHub's REST description"]
    if op.response is None:
        return [] if document in (None, b"", "") else \
            [f"{method} {path} ({op.op_id}): answers no body, got one"]
    return _problems(op.response, document, f"{method} {path} ({op.op_id}) HTTP {status}")


def request_errors(method: str, path: str, body: Any) -> list[str]:
    """Problems of a request ``body`` sent to ``method path`` against the operation's body
    model (``[]`` when the operation takes no body or the path is unknown)."""
    op = operation(method, path)
    if op is None or op.body is None:
        return []
    return _problems(op.body, body, f"{method} {path} ({op.op_id}) request body")
