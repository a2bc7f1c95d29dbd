"""The tree shows its programs (issue 21): docs/layout.md names every folder of the package and
every module of the sidecar's pipeline, in a record's order, and they exist."""

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
    """The stages docs/layout.md lists for repeat_failure/sidecar/ are its modules, written in
    a record's order."""
    row = next(line for line in LAYOUT.splitlines() if line.startswith("| `repeat_failure/sidecar/`"))
    named = re.findall(r"`([a-z_]+)`", row.split("|")[3])
    stages = [name for name in named if name in PIPELINE]
    assert stages == PIPELINE
    for name in named:
        assert (PACKAGE / "sidecar" / f"{name}.py").is_file(), name


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
