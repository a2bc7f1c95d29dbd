"""License and policy files (issue 29, item 1): Apache-2.0 in every place a reviewer or a
scanner looks for it, and the security, changelog and contributing pages say what they must."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
SPDX = "Apache-2.0"


def test_license_is_the_apache_2_0_text() -> None:
    """LICENSE is the Apache License 2.0 whole: its title, the nine sections of the terms in
    order, the end marker and the appendix, and nothing else (its 1,581 words)."""
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    sections = re.findall(r"^ {3}(\d)\. (\w[\w ]*)\.", text, re.M)
    assert [n for n, _ in sections] == [str(n) for n in range(1, 10)]
    assert [title for _, title in sections] == [
        "Definitions", "Grant of Copyright License", "Grant of Patent License", "Redistribution",
        "Submission of Contributions", "Trademarks", "Disclaimer of Warranty",
        "Limitation of Liability", "Accepting Warranty or Additional Liability"]
    assert "END OF TERMS AND CONDITIONS" in text
    assert "APPENDIX: How to apply the Apache License to your work." in text
    assert len(text.split()) == 1581  # words: the whole text, nothing added or cut


def test_license_is_declared_everywhere() -> None:
    """The distribution (`license`, PEP 639), the chart (`artifacthub.io/license`) and the image
    (`org.opencontainers.image.licenses`) all name the same SPDX id."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["license"] == SPDX
    assert project["license-files"] == ["LICENSE"]
    chart = yaml.safe_load((REPO / "charts/repeat-failure/Chart.yaml").read_text())
    assert chart["annotations"]["artifacthub.io/license"] == SPDX
    dockerfile = (REPO / "Dockerfile").read_text()
    assert f'org.opencontainers.image.licenses="{SPDX}"' in dockerfile
    assert re.search(r"^COPY pyproject.toml README.md LICENSE \./$", dockerfile, re.M)


def _headings(name: str) -> list[str]:
    return re.findall(r"^#+ (.+)$", (REPO / name).read_text(encoding="utf-8"), re.M)


def test_security_policy_says_how_to_report_and_what_is_in_scope() -> None:
    """SECURITY.md: a private channel, what a report holds, the supported versions, and what
    is and is not in scope (the injector first: it changes every agent pod)."""
    text = (REPO / "SECURITY.md").read_text(encoding="utf-8")
    assert _headings("SECURITY.md") == ["Security policy", "How to report", "Supported versions",
                                        "In scope", "Out of scope"]
    assert "Report a vulnerability" in text and "Do not open a public issue" in text
    scope = text.split("## In scope", 1)[1].split("## Out of scope", 1)[0]
    for part in ("The injector", "The sidecar", "The bash hook", "The fix loop", "The Helm chart",
                 "The image"):
        assert f"**{part}**" in scope, part


def test_changelog_has_the_policy_and_the_current_version() -> None:
    """CHANGELOG.md states the versioning and compatibility policy for the chart, the image,
    the metrics and the config keys, and has a section for the current version."""
    text = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    policy = text.split("## Versioning and compatibility", 1)[1].split("\n## [", 1)[0]
    rows = re.findall(r"^\| (chart|image|metrics|config keys|alerts and dashboard) \|", policy, re.M)
    assert rows == ["chart", "image", "metrics", "config keys", "alerts and dashboard"]
    assert "**Deprecated**" in policy and "**Breaking**" in policy
    from repeat_failure import __version__
    assert f"## [{__version__}]" in text
    assert "## [Unreleased]" in text


def test_contributing_names_the_checks_that_exist() -> None:
    """CONTRIBUTING.md's commands name files that exist (the test entry point, the docs
    checks), so following it works."""
    text = (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert "./scripts/test" in text
    for path in re.findall(r"`(tests/test_\w+\.py)", text):
        assert (REPO / path).is_file(), path
    assert (REPO / "scripts/test").is_file()


def test_chart_readme_has_the_operator_sections() -> None:
    """The chart README (issue 29, item 5) says how to upgrade, how to uninstall and what is
    left behind (each with how to remove it), how to troubleshoot (pointing at the runbook),
    and how to test a release."""
    text = (REPO / "charts/repeat-failure/README.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", text, re.M)
    for heading in ("Testing a release", "Upgrading", "Uninstalling", "Troubleshooting"):
        assert heading in headings, heading
    uninstall = text.split("## Uninstalling\n", 1)[1].split("\n## ", 1)[0]
    assert "| what | why | how to remove |" in uninstall
    rows = [line for line in uninstall.splitlines()
            if line.startswith("| ") and not line.startswith(("| what", "| ---"))]
    assert len(rows) == 8 and all(line.count(" | ") == 2 for line in rows)
    troubleshooting = text.split("## Troubleshooting\n", 1)[1].split("\n## ", 1)[0]
    assert "(../../docs/runbook.md)" in troubleshooting
    assert "helm test" in text.split("## Testing a release\n", 1)[1]
