"""Keep the garbage collector's full collections short in the coordinator (`gitfleet api`),
a long-lived process whose registry caches grow with the fleet.

A full (generation 2) collection walks every container object alive and stops every thread of
the process while it does. The registry's in-memory caches hold about fifty objects per app, so
at 10,000 apps a full collection took 80 to 360 ms and, several times a minute under load, set
the API's p99 (`loadtest.apiload` showed every request of one process finishing in the same
200 ms window). `api.app.freeze_loaded` freezes what is loaded at start (`gc.freeze`: frozen
objects are never walked again), but apps registered while the process runs were still walked.

`CollectionWatch` is a `gc.callbacks` hook that times each full collection. When one takes
longer than `slow_s`, it freezes the survivors, so the next full collections walk only what was
allocated since. Frozen objects are still freed when nothing refers to them; only garbage
*cycles* among them wait. A freeze can also catch the cycles of requests in flight (frames,
tasks), which die later: every `refresh_s` the watch unfreezes everything once, so the next
full collection walks it all (one slow pause), collects such cycles and freezes the rest again.
Memory held by frozen cycles is thus bounded by what one period's freezes caught, and freezes
come at most one per `min_gap_s` (a client that makes full collections slow on purpose, with
large request bodies, gets at most 60 freezes an hour of its requests' cycles pinned).

Not for the worker: a gc callback runs Python code at arbitrary points, and an exception that a
signal handler or another thread raises there (rq's job timeouts: SIGALRM, or an exception set
into the job thread) is printed and dropped, so a timed-out job would run on.
"""

from __future__ import annotations

import gc
import logging
import math
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("gitfleet.gc")

SLOW_S = 0.02  # a full collection slower than this freezes its survivors
REFRESH_S = 3600.0  # how often the frozen set is walked once, to collect cycles that died in it
MIN_GAP_S = 60.0  # at most one freeze per this many seconds


class CollectionWatch:
    """Times full collections and freezes their survivors when one is slow (see module)."""

    def __init__(
        self,
        *,
        slow_s: float = SLOW_S,
        refresh_s: float = REFRESH_S,
        min_gap_s: float = MIN_GAP_S,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.slow_s = slow_s
        self.refresh_s = refresh_s
        self.min_gap_s = min_gap_s
        self.clock = clock
        self.freezes = 0
        self.refreshes = 0
        self._began = 0.0
        self._frozen_at = -math.inf
        self._refreshed = clock()

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if info.get("generation") != 2:
            return
        now = self.clock()
        if phase == "start":
            self._began = now
            return
        took = now - self._began
        if now - self._refreshed >= self.refresh_s:
            # walked by the next full collection, which then freezes what is still alive
            self._refreshed = now
            self.refreshes += 1
            gc.unfreeze()
            return
        if took >= self.slow_s and now - self._frozen_at >= self.min_gap_s:
            gc.freeze()
            self._frozen_at = now
            self.freezes += 1
            log.info(
                "a full garbage collection took %.0f ms; froze its %d survivors so the next "
                "ones skip them",
                took * 1000,
                gc.get_freeze_count(),
            )

    def install(self) -> CollectionWatch:
        """Watch this process's collections (a process-wide hook: long-lived processes only,
        never a library caller or a test process)."""
        if self not in gc.callbacks:
            gc.callbacks.append(self)
        return self

    def uninstall(self) -> None:
        if self in gc.callbacks:
            gc.callbacks.remove(self)
