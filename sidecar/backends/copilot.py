"""copilot: session-log reader (being written)."""
