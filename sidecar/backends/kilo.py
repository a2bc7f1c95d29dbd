"""kilo: session-log reader (being written)."""
