"""Every requirement id the docs and the code cite resolves in ``docs/requirements.md`` (issue 17,
item 12): spec requirements ``C1``-``C15``, acceptance criteria ``C-AC1``-``C-AC16``, the seeds
``ARD-0038`` (with its sections, ``§1``-``§4``) and ``ADR-0010``, the spec's Constraints, and
``issue N``.

Scanned: README.md, every page under ``docs/``, the chart READMEs, and the text of the ``sidecar``
package (docstrings, help texts and comments alike), the hook templates, the harness, the
benchmarks and ``scripts/``. A ``§N`` belongs to the seed named last before it in the same file.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
REQUIREMENTS = REPO / "docs" / "requirements.md"

#: A spec id: C-AC<n>[letter] or C<n> (n from 1) standing alone, not inside a word such as
#: SC2154 (C0, as in "C0 controls", is no id).
SPEC_ID = re.compile(r"(?<![\w-])(C-AC[1-9]\d*[a-z]?|C[1-9]\d?)(?![\w-])")
SEED_ID = re.compile(r"(?<![\w-])(ard|adr)-(\d{4})(?!\d)", re.IGNORECASE)
SECTION = re.compile(r"§\s?(\d+)")
ISSUE = re.compile(r"\bissues? #?(\d+)((?:(?:,|,? and| and) #?\d+)*)", re.IGNORECASE)
SPEC_CONSTRAINTS = re.compile(r"\bspec Constraints\b")


def defined(text: str) -> set[str]:
    """The ids ``text`` (docs/requirements.md) defines: ``- **C1 — ...``,
    ``- **§1 — ...`` under a ``## ARD-0038`` heading (as ``ard-0038 §1``), the seed headings
    ``## ARD-0038``/``## ADR-0010`` (as ``ard-0038``/``adr-0010``), ``- **Issue 6 — ...``
    (as ``issue 6``) and ``### Constraints`` (as ``spec Constraints``)."""
    ids: set[str] = set()
    seed = None
    for line in text.splitlines():
        if m := re.match(r"^## (ARD|ADR)-(\d{4})\b", line):
            seed = f"{m.group(1).lower()}-{m.group(2)}"
            ids.add(seed)
        elif line.startswith("## "):
            seed = None
        if m := re.match(r"^- \*\*(C-AC\d+[a-z]?|C\d+) — ", line):
            ids.add(m.group(1))
        elif (m := re.match(r"^- \*\*§(\d+) — ", line)) and seed:
            ids.add(f"{seed} §{m.group(1)}")
        elif m := re.match(r"^- \*\*Issue (\d+) — ", line):
            ids.add(f"issue {m.group(1)}")
        elif line == "### Constraints":
            ids.add("spec Constraints")
    return ids


def cited(text: str) -> list[tuple[int, str]]:
    """(line number, id) for every citation in ``text``, normalized as :func:`defined` names
    them; a ``§N`` with no seed named before it in the text is cited as ``(no seed) §N``."""
    found: list[tuple[int, int, str]] = []  # (offset, line, id)

    def line_of(pos: int) -> int:
        return text.count("\n", 0, pos) + 1

    seeds = [(m.start(), f"{m.group(1).lower()}-{m.group(2)}") for m in SEED_ID.finditer(text)]
    for m in SPEC_ID.finditer(text):
        found.append((m.start(), line_of(m.start()), m.group(1)))
    for pos, seed in seeds:
        found.append((pos, line_of(pos), seed))
    for m in SECTION.finditer(text):
        before = [seed for pos, seed in seeds if pos < m.start()]
        seed = before[-1] if before else "(no seed)"
        found.append((m.start(), line_of(m.start()), f"{seed} §{m.group(1)}"))
    for m in ISSUE.finditer(text):
        for number in [m.group(1), *re.findall(r"\d+", m.group(2))]:
            found.append((m.start(), line_of(m.start()), f"issue {int(number)}"))
    for m in SPEC_CONSTRAINTS.finditer(text):
        found.append((m.start(), line_of(m.start()), "spec Constraints"))
    return [(line, ident) for _, line, ident in sorted(found)]


def scanned() -> list[Path]:
    """The files whose citations must resolve."""
    files = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")),
             *sorted(REPO.glob("charts/*/README.md"))]
    for folder, pattern in (("repeat_failure", "**/*.py"), ("hooks", "*"), ("harness", "*.py"),
                            ("benchmarks", "*.py"), ("scripts", "*")):
        files += sorted(p for p in (REPO / folder).glob(pattern)
                        if p.is_file() and "__pycache__" not in p.parts)
    return files


def test_requirements_page_defines_every_spec_id():
    """docs/requirements.md defines C1-C15, C-AC1-C-AC16 (with C-AC14a), ARD-0038 §1-§4,
    ADR-0010 and the spec's Constraints."""
    ids = defined(REQUIREMENTS.read_text(encoding="utf-8"))
    spec = {f"C{n}" for n in range(1, 16)} | {f"C-AC{n}" for n in range(1, 17)} | {"C-AC14a"}
    seeds = {"ard-0038", "adr-0010", "spec Constraints"} | {f"ard-0038 §{n}" for n in range(1, 5)}
    assert spec | seeds <= ids
    assert {i for i in ids if SPEC_ID.fullmatch(i)} == spec  # no id the spec does not have


def test_every_cited_id_resolves():
    """No file cites an id docs/requirements.md does not define (file:line: id)."""
    ids = defined(REQUIREMENTS.read_text(encoding="utf-8"))
    missing = [f"{path.relative_to(REPO)}:{line}: {ident}"
               for path in scanned()
               for line, ident in cited(path.read_text(encoding="utf-8", errors="replace"))
               if ident not in ids]
    assert missing == []


def test_the_scan_covers_docs_help_texts_and_docstrings():
    """The scan reads what a new user reads: README, docs, the chart README, the CLI's help
    texts (repeat_failure/cli.py) and module docstrings; and it finds their citations."""
    names = {str(p.relative_to(REPO)) for p in scanned()}
    assert {"README.md", "docs/requirements.md", "docs/metrics.md", "docs/backend-support.md",
            "charts/repeat-failure/README.md", "repeat_failure/cli.py", "repeat_failure/rules/detector.py",
            "hooks/bash_env.sh"} <= names
    cli = {ident for _, ident in cited((REPO / "repeat_failure" / "cli.py").read_text())}
    assert {"ard-0038", "ard-0038 §1", "adr-0010"} <= cli


@pytest.mark.parametrize("text,expected", [
    ("spec C16 and C-AC17", ["C16", "C-AC17"]),
    ("see C-AC14b", ["C-AC14b"]),
    ("seed ard-0038 §5", ["ard-0038 §5"]),
    ("design adr-0011", ["adr-0011"]),
    ("adr-0010 §2", ["adr-0010 §2"]),
    ("as §3 says", ["(no seed) §3"]),
    ("issue 99, and issues 7 and 42", ["issue 99", "issue 42"]),
    ("ARD-0099", ["ard-0099"]),
])
def test_an_unknown_citation_is_reported(text, expected):
    """The check can fail: each of these cites something the page does not define."""
    ids = defined(REQUIREMENTS.read_text(encoding="utf-8"))
    assert [ident for _, ident in cited(text) if ident not in ids] == expected


@pytest.mark.parametrize("text", [
    "shellcheck disable=SC2154,SC1091", "LC_ALL=C", "a C-string", "x86-64", "UTF-8 C0 controls",
])
def test_words_that_are_not_citations(text):
    """Lint codes, locale names and the like are not read as requirement ids."""
    assert cited(text) == []
