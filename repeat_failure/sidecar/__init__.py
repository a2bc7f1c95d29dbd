"""``repeat-failure run``: the per-pod sidecar. One module per pipeline stage, in the order a
record goes through them (docs/layout.md): hook → collector → parse → scrub → normalize →
exclude → dedup → detector → checkstate → exporter; :mod:`repeat_failure.sidecar.app` wires
them, ``demo`` and ``replay`` run them on one machine and offline."""
