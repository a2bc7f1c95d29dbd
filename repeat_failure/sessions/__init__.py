"""The sidecar's second input: each agent's own session log, tailed as it grows
(:mod:`repeat_failure.sessions.tail`), and the "not receiving data" safeguard built on it
(:mod:`repeat_failure.sessions.activity`, spec C12)."""
