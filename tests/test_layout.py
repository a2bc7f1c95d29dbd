"""The tree shows its programs (issue 21): docs/layout.md names every folder of the package and
every module of the sidecar's pipeline, in a record's order, and they exist."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "repeat_failure"
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
    """The stages docs/layout.md lists for repeat_failure/sidecar/ are its modules, written in
    a record's order."""
    row = next(line for line in LAYOUT.splitlines() if line.startswith("| `repeat_failure/sidecar/`"))
    named = re.findall(r"`([a-z_]+)`", row.split("|")[3])
    stages = [name for name in named if name in PIPELINE]
    assert stages == PIPELINE
    for name in named:
        assert (PACKAGE / "sidecar" / f"{name}.py").is_file(), name


def test_no_module_over_600_lines():
    """Every module of the package reads in one sitting: at most 600 lines (issue 21)."""
    long = {str(p.relative_to(REPO)): n for p in sorted(PACKAGE.rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 600}
    assert long == {}
