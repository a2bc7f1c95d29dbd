"""Turn health (seed ard-0038): the verdict on an agent turn
(:mod:`repeat_failure.turns.verdict`, also ``repeat-failure verdict``) and the preview health
probe after a turn that edited files (:mod:`repeat_failure.turns.probe`)."""
