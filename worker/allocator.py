"""A worker's C allocator: at most `ARENAS` glibc malloc arenas.

glibc gives each thread an arena of its own (up to eight per core), and memory freed in one
arena serves only that arena's later requests. Python objects come from Python's own
allocator; what reaches malloc is larger buffers: Redis replies and pipelines, HTTP bodies, TLS
records, rendered JSON. A worker runs its sync threads, watches and housekeeping in one
process, so each arena kept its own high-water mark, and the worker's RSS grew with the apps by
more than what it keeps of them. In the large benchmark (10,000 apps), with the self-heal
reload's peak also cut (`worker.selfheal.STATUS_CHUNK`), the workers' RSS grew by 1.2 KB per
app with glibc's own arenas and 0.9 to 1.1 KB with two, at no worker CPU the runs could tell.

An arena limit the operator set (`MALLOC_ARENA_MAX`, or `glibc.malloc.arena_max` in
`GLIBC_TUNABLES`), which glibc reads at start, is left to win. A C library without `mallopt`
(musl), or a platform without a C library to load this way, has nothing set.
"""

from __future__ import annotations

import ctypes
import os

ARENAS = 2
M_ARENA_MAX = -8  # mallopt's parameter number for the arena limit (glibc's malloc.h)


def limit_arenas(arenas: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas at `arenas` for the allocations that follow (call it before
    starting threads). True when the limit was set."""
    if "MALLOC_ARENA_MAX" in os.environ or "arena_max" in os.environ.get("GLIBC_TUNABLES", ""):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):  # TypeError: no CDLL(None) (Windows)
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_ARENA_MAX, arenas))
