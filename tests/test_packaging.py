"""Packaging: the wheel carries the hook templates, and an installed package renders them."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_wheel_contains_hooks_and_console_script(tmp_path: Path) -> None:
    """`pip wheel .` includes hooks/*.sh as repeat_failure/hooks/ and the repeat-failure entry point."""
    src = tmp_path / "src"  # build from a copy: an in-tree build leaves build/ in the checkout
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, src / name)
    for name in ("repeat_failure", "hooks"):
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "-w", str(tmp_path), str(src)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("repeat_failure-0.1.0-*.whl")  # the distribution's name and version
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"repeat_failure/hooks/bash_env.sh", "repeat_failure/hooks/bash_env.slow.bash",
            "repeat_failure/hooks/bash_env.chain.bash", "repeat_failure/hooks/bash_env.trap.bash",
            "repeat_failure/cli.py", "repeat_failure/backends/__init__.py"} <= names
    # The license travels with the distribution (issue 29): SPDX expression and the text.
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    assert "License-Expression: Apache-2.0" in zipfile.ZipFile(wheel).read(metadata).decode()
    license_file = next(n for n in names if n.endswith(".dist-info/licenses/LICENSE"))
    assert zipfile.ZipFile(wheel).read(license_file) == (REPO / "LICENSE").read_bytes()
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry).decode()
    assert "repeat-failure = repeat_failure.cli:main" in text
    # The installed copy of the hook is byte-identical to the source.
    assert zipfile.ZipFile(wheel).read("repeat_failure/hooks/bash_env.sh") == \
        (REPO / "hooks" / "bash_env.sh").read_bytes()
