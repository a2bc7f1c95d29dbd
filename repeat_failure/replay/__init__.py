"""``repeat-failure replay``: the sidecar's pipeline run offline over saved session logs and
record files (issue 19; its own program since issue 30). :mod:`repeat_failure.replay.run` feeds
each source through the shared rules (:mod:`repeat_failure.rules.pipeline`,
:mod:`repeat_failure.rules.detector`) as the sidecar would; :mod:`repeat_failure.replay.sources`
finds and reads the files; :mod:`repeat_failure.replay.report` holds what a replay found and
prints it. It imports no other program (docs/layout.md "Imports")."""
