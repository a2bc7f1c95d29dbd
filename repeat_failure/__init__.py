"""repeat-failure: notice an AI coding agent repeating the same failing shell command.

One subpackage per program of the ``repeat-failure`` command (docs/layout.md):
:mod:`repeat_failure.sidecar` (the per-pod pipeline: ``hooks/bash_env.sh`` → collector → parse
→ scrub → normalize → exclude → dedup → detector → checkstate → exporter, wired in
:mod:`repeat_failure.sidecar.app`), :mod:`repeat_failure.sessions` (session-log tail and
safeguard), :mod:`repeat_failure.turns` (verdicts, preview probe), :mod:`repeat_failure.kube`
(injector webhook, Events) and :mod:`repeat_failure.fixloop`; shared by them:
:mod:`repeat_failure.backends`, :mod:`repeat_failure.config`, :mod:`repeat_failure.rules.terminal`.
"""

#: The version of everything this repository releases (the distribution, the image and the chart;
#: CHANGELOG.md "Versioning and compatibility"), written here only: pyproject.toml reads it, and
#: tests/test_version.py fails when the Dockerfile or the chart says otherwise.
__version__ = "0.1.0"
