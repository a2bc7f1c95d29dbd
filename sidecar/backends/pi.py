"""pi: session-log reader (being written)."""
