"""Every document the repository's text cites is in the repository (issue 30 item 3): the docs
under ``docs/``, the README and the policy files are the contract, so a citation of a file that
is not here (``DESIGN.md`` of the seed's Go codebase, the team's ``HOOK-NOTES.md``) sends a reader
nowhere. Where a citation names a section (``docs/metrics.md "Series"`` or
``docs/metrics.md ("Series")``), the file has a heading holding that name.

Scanned: every tracked text file (code, tests, scripts, hooks, the chart, the docs) except the
harness's captured evidence and test data, which hold what other programs wrote. A URL
(``https://...x.md``) is not a citation of a file here. A name resolves relative to the
repository's root, to the citing file's folder, or, when it has no folder, as the name of a
tracked Markdown file anywhere (``metrics.md`` in ``docs/operations.md``).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

#: A cited Markdown file: a path ending in ``.md`` not preceded by ``/`` of a URL's host part.
CITATION = re.compile(r"(?<![\w./-])((?:\.\./|\./)*[A-Za-z0-9_][A-Za-z0-9_./-]*\.md)\b")
#: The section a citation names right after it: ``"Name"`` or ``("Name"``.
SECTION = re.compile(r'(?:\s+\(?|\s*\()"([^"\n]{2,80})"')
#: Not scanned: what other programs wrote, and this file (its examples cite what is not here).
SKIP = ("harness/evidence/", "tests/data/", "tests/fixtures/", "tests/test_doc_citations.py")
TEXT = {".py", ".md", ".sh", ".bash", ".yaml", ".yml", ".tpl", ".txt", ".toml", ".json", ""}


def tracked(everything: bool = False) -> list[Path]:
    """The tracked text files the scan reads (see the module docstring); ``everything``: the
    skipped ones too (a citation may name a file of the test data)."""
    out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout.split("\n")
    return [REPO / p for p in out if p and (everything or not p.startswith(SKIP))
            and Path(p).suffix in TEXT and (REPO / p).is_file()]


def markdown_names(files: list[Path]) -> dict[str, list[Path]]:
    names: dict[str, list[Path]] = {}
    for f in files:
        if f.suffix == ".md":
            names.setdefault(f.name, []).append(f)
    return names


def resolve(name: str, source: Path, names: dict[str, list[Path]]) -> Path | None:
    """The file ``name`` cited in ``source`` means, or None when the repository has none."""
    bare = name
    while bare.startswith(("../", "./")):  # relative to a folder the text means (a chart's)
        bare = bare.split("/", 1)[1]
    for base, rel in ((REPO, name), (source.parent, name), (REPO, bare)):
        candidate = (base / rel).resolve()
        if candidate.is_file() and REPO in candidate.parents:
            return candidate
    if "/" not in name and len(names.get(name, [])) == 1:
        return names[name][0]
    return None


def headings(path: Path) -> list[str]:
    return [line.lstrip("#").strip().lower() for line in path.read_text().splitlines()
            if line.startswith("#")]


def citations(files: list[Path]) -> list[tuple[Path, int, str, str | None]]:
    """(file, line, cited name, cited section or None) for every citation in ``files``."""
    found = []
    for f in files:
        try:
            text = f.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for m in CITATION.finditer(text):
            start = m.start()
            before = text[max(0, start - 12):start]
            if "://" in before or before.endswith("/"):  # a URL's path
                continue
            section = SECTION.match(text, m.end())
            found.append((f, text.count("\n", 0, start) + 1, m.group(1),
                          section.group(1) if section else None))
    return found


def test_every_cited_document_is_in_the_repository() -> None:
    files = tracked()
    names = markdown_names(tracked(everything=True))
    missing = [f"{f.relative_to(REPO)}:{line}: {name}"
               for f, line, name, _ in citations(files) if resolve(name, f, names) is None]
    assert missing == []


def test_every_cited_section_is_a_heading_of_its_document() -> None:
    files = tracked()
    names = markdown_names(tracked(everything=True))
    wrong = []
    for f, line, name, section in citations(files):
        target = resolve(name, f, names)
        if target is None or section is None:
            continue
        want = section.lower()
        if not any(want in h for h in headings(target)):
            wrong.append(f"{f.relative_to(REPO)}:{line}: {name} \"{section}\"")
    assert wrong == []


def test_the_scan_finds_a_citation_of_a_missing_document(tmp_path: Path) -> None:
    """The check can fail: a planted citation of a document that is not here is reported, one
    of a real document with a wrong section too, and a URL is not a citation."""
    f = tmp_path / "x.py"
    f.write_text('# see DESIGN.md "Metrics", docs/metrics.md ("No such part"), '
                 'docs/metrics.md ("Series") and https://example.test/a/DESIGN.md\n')
    found = citations([f])
    assert [(n, s) for _, _, n, s in found] == [("DESIGN.md", "Metrics"),
                                                ("docs/metrics.md", "No such part"),
                                                ("docs/metrics.md", "Series")]
    names = markdown_names(tracked(everything=True))
    assert resolve("DESIGN.md", f, names) is None
    metrics = resolve("docs/metrics.md", f, names)
    assert metrics == REPO / "docs" / "metrics.md"
    assert any("series" in h for h in headings(metrics))
    assert not any("no such part" in h for h in headings(metrics))
