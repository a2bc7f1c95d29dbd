"""``repeat-failure fixloop``: the CI fix-loop escalation ledger (design adr-0010).

The per-command check one level up: agents repair their own failing pull requests, and a loop of
blind fixes while CI stays red burns as many tokens as a repeating shell command. This component
runs once per cluster (a Deployment in the chart, off by default), sweeps the open pull requests
of the configured GitHub repositories on a cadence and breaks such loops.

One record from the forge to the metric, stage by stage:

``auth`` (a token file or a GitHub App's installation tokens) → ``github`` (REST client:
pulls, commits, check runs, check suites, combined status, comments, labels) →
``sweep`` (one pass: each PR's CI state, the rules below) → ``ledger`` (SQLite on a volume: what
each PR has tried) → ``notify`` (a re-engagement kick to the owning agent's webhook) →
``metrics`` (``hive_repeat_failure_fixloop_*``). ``config`` reads the ``fixloop:`` YAML section;
``app`` runs the loop and serves ``/metrics``.

The ladder from first red to hand-off is docs/fixloop.md.
"""
