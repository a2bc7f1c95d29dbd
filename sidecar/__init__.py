"""repeat-failure sidecar: notice an AI coding agent repeating the same failing shell command.

Read the pipeline in this order: ``hooks/bash_env.sh`` → :mod:`sidecar.collector` →
:mod:`sidecar.parse` → :mod:`sidecar.scrub` → :mod:`sidecar.normalize` → :mod:`sidecar.exclude`
→ :mod:`sidecar.detector` → :mod:`sidecar.checkstate` → :mod:`sidecar.exporter`, wired together
in :mod:`sidecar.app`.
"""

__version__ = "0.1.0"
