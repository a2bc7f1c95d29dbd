"""``repeat-failure run``: the per-pod sidecar. One module per pipeline stage, in the order a
record goes through them (docs/layout.md): hook → collector → parse → scrub → normalize →
exclude → dedup → detector → checkstate → exporter (parse, scrub, normalize, exclude and the
detector from the shared :mod:`repeat_failure.rules`); :mod:`repeat_failure.sidecar.app` wires
them, ``demo`` runs them on one machine."""
