"""Real-CLI harness (spec C4): run each agent CLI against a stub model provider on 127.0.0.1 that
makes it run shell commands, with the neutral route installed, and keep what the route recorded as
evidence (``harness/evidence/<backend>.json``). ``python -m harness run [--backend NAME]``."""
