"""The sidecar's second input: each agent's own session log, tailed as it grows
(:mod:`repeat_failure.sessions.tail`; its files found by :mod:`repeat_failure.sessions.scan`,
the stores that are not JSON Lines opened by :mod:`repeat_failure.sessions.stores`), a file whose
shell calls the reader cannot read (:mod:`repeat_failure.sessions.unrecognized`), and the "not
receiving data" safeguard built on it (:mod:`repeat_failure.sessions.activity`, spec C12).
Shared: ``repeat-failure replay`` reads saved session logs with the same modules. Imports only
:mod:`repeat_failure.rules` and :mod:`repeat_failure.backends` (docs/layout.md "Imports")."""
