"""omp: session-log reader (being written)."""
