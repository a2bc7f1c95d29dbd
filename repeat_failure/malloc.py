"""Process-wide C allocator settings for the long-running sidecar (issue 6: resident memory).

glibc's malloc serves a block of at least ``M_MMAP_THRESHOLD`` bytes (128 KiB at start) with its
own ``mmap``, returned to the system when freed. But the threshold is *dynamic*: each time such a
block is freed, it rises to that block's size (up to 32 MiB), so the next buffers of that size
come from the heap, and a freed heap block stays resident unless it happens to sit at the top.
The sidecar makes exactly such buffers over and over: the state file (about 1.3 MiB for 10,000
commands) every second during a backlog, 256 KiB collector slices. :func:`tune_malloc` fixes the
threshold at its start value, which also turns the dynamic adjustment off, so those buffers are
always given back. Python objects up to 512 bytes are not concerned (pymalloc's own arenas).
"""

from __future__ import annotations

import os

#: Blocks of at least this many bytes are mmapped and unmapped when freed (glibc's default start
#: value, made fixed).
MMAP_THRESHOLD_BYTES = 128 << 10
_M_MMAP_THRESHOLD = -3  # glibc <malloc.h>


def tune_malloc(threshold_bytes: int = MMAP_THRESHOLD_BYTES) -> bool:
    """Fix glibc's ``M_MMAP_THRESHOLD`` at ``threshold_bytes`` (bytes, > 0) for this process.

    Returns True when set; False, changing nothing, on a C library other than glibc (musl, say)
    or when ``mallopt`` refuses. Never raises. Call it once at start-up, before threads start;
    it is for the ``run`` command, not for a library import.
    """
    try:
        if not (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"):
            return False
        import ctypes

        return bool(ctypes.CDLL(None).mallopt(_M_MMAP_THRESHOLD, int(threshold_bytes)))
    except (ValueError, OSError, AttributeError, TypeError):
        return False
