"""A worker's C allocator: at most `ARENAS` glibc malloc arenas.

glibc gives a thread that finds the arenas in use busy an arena of its own, up to eight per
core, and memory freed in one arena serves only that arena's later requests. Python objects
come from Python's own allocator; what reaches malloc is larger buffers: Redis replies and
pipelines, HTTP bodies, TLS records, rendered JSON, often allocated by C code with the GIL
released, which is when threads find an arena busy. A worker runs its sync threads, watches and
housekeeping in one process, so each arena kept its own high-water mark, and the worker's RSS
grew with the apps by more than what it keeps of them. In the large benchmark (10,000 apps),
two arenas took the workers' RSS growth from 2.0 to 2.2 KB per app down to 1.4 KB.

`MALLOC_ARENA_MAX` in the environment, which glibc reads at start, is left to win. A C library
without `mallopt` (musl) has nothing to set.
"""

from __future__ import annotations

import ctypes
import os

ARENAS = 2
M_ARENA_MAX = -8  # mallopt's parameter number for the arena limit (glibc's malloc.h)


def limit_arenas(arenas: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas at `arenas` for the allocations that follow (call it before
    starting threads). True when the limit was set."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_ARENA_MAX, arenas))
