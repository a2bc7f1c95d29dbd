"""Turn health (seed ard-0038), shared by the programs: the verdict on an agent turn
(:mod:`repeat_failure.turns.verdict`: the sidecar's turn rows, ``repeat-failure verdict``, the
harness's checks) and the preview health probe the sidecar runs after a turn that edited files
(:mod:`repeat_failure.turns.probe`). Imports only :mod:`repeat_failure.rules` and
:mod:`repeat_failure.backends` (docs/layout.md "Imports")."""
