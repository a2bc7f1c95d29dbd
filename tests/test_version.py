"""One version, written once (issue 29, item 6): ``repeat_failure.__version__``. The
distribution reads it (pyproject.toml's dynamic version), and every other place that has to say
it literally (the Dockerfile's build argument, the chart's version and appVersion, the tag of the
chart's default image) is held to it here, so a release changes one line and this test names
the copies left behind."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import yaml

from repeat_failure import __version__

REPO = Path(__file__).resolve().parent.parent
CHART = REPO / "charts" / "repeat-failure"


def test_the_version_is_written_once_in_the_package() -> None:
    """``__version__`` is a literal in repeat_failure/__init__.py, and pyproject.toml has no
    version of its own: it reads that attribute."""
    text = (REPO / "repeat_failure" / "__init__.py").read_text()
    assert re.findall(r'^__version__ = "([^"]+)"$', text, re.M) == [__version__]
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"]
    assert pyproject["project"]["dynamic"] == ["version"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "repeat_failure.__version__"}


def test_the_installed_distribution_is_repeat_failure_at_that_version() -> None:
    """The distribution is named like the package and the command (``repeat-failure``, no
    longer ``repeat-failure-sidecar``) and installs at ``__version__``."""
    assert tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["name"] == \
        "repeat-failure"
    assert importlib.metadata.version("repeat-failure") == __version__


def copies() -> dict[str, str | None]:
    """Every literal copy of the version outside the package, by where it is."""
    dockerfile = re.search(r"^ARG VERSION=(\S+)$", (REPO / "Dockerfile").read_text(), re.M)
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    image_tag = re.fullmatch(r"ghcr\.io/hive/repeat-failure:([^@]+)", values["image"]["reference"])
    return {
        "Dockerfile ARG VERSION": dockerfile.group(1) if dockerfile else None,
        "Chart.yaml version": str(chart["version"]),
        "Chart.yaml appVersion": str(chart["appVersion"]),
        "values.yaml image.reference tag": image_tag.group(1) if image_tag else None,
    }


def test_every_copy_says_the_package_version() -> None:
    """The Dockerfile, the chart (version, appVersion) and the chart's default image tag all
    say ``__version__``; a copy left behind is named in the failure."""
    assert copies() == dict.fromkeys(copies(), __version__)
