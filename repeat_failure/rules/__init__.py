"""The text rules every program shares (issue 30 item 1): what turns a raw command and its
output into what is shown, stored and compared. ``scrub`` (the engine; its rule table
``scrub_rules`` with ``scrub_names``, ``scrub_replacements`` and ``scrub_context``, and
``scrub_engine``, the leaf through which a rule calls the engine back), ``normalize`` (commands
and failure output), ``exclude`` and ``terminal`` (output safety); and what the sidecar and ``replay`` both run
on a record: ``parse``, ``pipeline`` (the per-record rules) and ``detector`` (with
``detector_store``, ``detector_notes``, ``detector_results``). It sits below every program:
it imports none of them (``backends``' wrapper strippers aside, which import no program)."""
