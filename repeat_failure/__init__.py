"""repeat-failure: notice an AI coding agent repeating the same failing shell command.

One subpackage per program of the ``repeat-failure`` command (docs/layout.md):
:mod:`repeat_failure.sidecar` (``run``, the per-pod pipeline: ``hooks/bash_env.sh`` → collector
→ parse → scrub → normalize → exclude → dedup → detector → checkstate → exporter, wired in
:mod:`repeat_failure.sidecar.app`), :mod:`repeat_failure.replay` (the same rules offline over
saved logs), :mod:`repeat_failure.kube` (``inject-webhook``) and :mod:`repeat_failure.fixloop`.
No program imports another's modules; they share what sits below all of them:
:mod:`repeat_failure.rules` (scrub, normalize, exclude, terminal escaping, parse, the per-record
rules and the detector), :mod:`repeat_failure.turns` (turn verdicts, which ``verdict`` runs too,
and the preview probe), :mod:`repeat_failure.sessions` (session-log tail and the C12 safeguard),
:mod:`repeat_failure.backends` (the agent CLIs' strippers and readers, the coverage table) and
the top-level :mod:`repeat_failure.config`, :mod:`repeat_failure.events`,
:mod:`repeat_failure.jsonlog`, :mod:`repeat_failure.serving` and :mod:`repeat_failure.malloc`.
:mod:`repeat_failure.cli` is the command line over all of them.
"""

#: The version of everything this repository releases (the distribution, the image and the chart;
#: CHANGELOG.md "Versioning and compatibility"), written here only: pyproject.toml reads it, and
#: tests/test_version.py fails when the Dockerfile or the chart says otherwise.
__version__ = "0.1.0"
