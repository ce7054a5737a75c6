"""The coordinator's app set loop: every set reconciled in a thread of its own, apart from the
scheduler's tick, so a git host that is slow or hangs never delays a sync, a retry or a
recovery, nor lets the scheduler's lease lapse.

One replica reconciles at a time: the lease `<p>:scheduler:lease:appsets`
(`fleet.control.routing.leases`, renewed before each set). A round takes the sets one by one;
each is reconciled in a daemon thread the round waits for at most `set_deadline` seconds. A set
still running then (its git fetch hangs, bounded by the project's `fetchTimeoutS`) is left to
finish on its own and skipped by the next rounds until it has, so it delays the others by its
deadline at most. `round()` is one pass, so tests drive it; `start()` / `stop()` run it in a
thread (the scheduler's do, `fleet.control.scheduler`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable

from fleet.control.appsets.reconcile import AppSets
from fleet.control.appsets.records import AppSetRecord, AppSetStatus
from fleet.control.connection import TRANSIENT, Outage
from fleet.control.keys import Keys
from fleet.control.routing.leases import Lease

log = logging.getLogger("gitfleet.appsets")

LOCK_NAME = "appsets"
SET_DEADLINE = 20.0  # seconds a round waits for one set before it moves on to the next


class AppSetRunner:
    def __init__(
        self,
        appsets: AppSets,
        *,
        period: float = 5.0,
        set_deadline: float = SET_DEADLINE,
        holder: str | None = None,
    ) -> None:
        self.appsets = appsets
        self.period = period
        self.set_deadline = set_deadline
        self.lock_ttl = max(30.0, 3 * set_deadline)
        self.holder = holder or f"{socket.gethostname()}-{os.getpid()}-{id(self):x}"
        self.lock = Lease(appsets.store.redis, Keys(appsets.dispatcher.prefix).scheduler_lease)
        self._running: dict[str, threading.Thread] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- one pass -----------------------------------------------------------------------------

    def round(self, *, max_age: float | None = None) -> dict[str, AppSetStatus]:
        """Reconcile every set this replica may (the lease holder), each for at most
        `set_deadline` seconds before the next; `max_age` overrides each set's `refresh`."""
        done: dict[str, AppSetStatus] = {}
        if not self._lead():
            return done
        for appset in self.appsets.list_sets():
            if self._stop.is_set() or not self._lead():
                break
            status = self._one(appset, appset.refresh_s if max_age is None else max_age)
            if status is not None:
                done[appset.name] = status
        return done

    def _one(self, appset: AppSetRecord, max_age: float) -> AppSetStatus | None:
        running = self._running.get(appset.name)
        if running is not None and running.is_alive():
            log.warning("appset %s: the last reconcile still runs; skipped", appset.name)
            return None
        result: list[AppSetStatus] = []
        thread = threading.Thread(
            target=_guarded(appset.name, lambda: result.append(self._reconcile(appset, max_age))),
            name=f"gitfleet-appset-{appset.name}",
            daemon=True,
        )
        thread.start()
        deadline = time.monotonic() + self.set_deadline
        while thread.is_alive() and not self._stop.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            thread.join(min(remaining, 0.2))  # in slices: `stop()` need not wait a deadline
        if thread.is_alive():
            self._running[appset.name] = thread
            log.warning(
                "appset %s: not reconciled within %.0fs (a slow git host?); the others go on",
                appset.name,
                self.set_deadline,
            )
            return None
        self._running.pop(appset.name, None)
        return result[0] if result else None

    def _reconcile(self, appset: AppSetRecord, max_age: float) -> AppSetStatus:
        return self.appsets.reconcile(appset, max_age=max_age)

    def _lead(self) -> bool:
        if self.lock.renew(LOCK_NAME, self.holder, self.lock_ttl):
            return True
        return self.lock.acquire(LOCK_NAME, self.holder, self.lock_ttl)

    # -- the thread ---------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="gitfleet-appsets", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        with contextlib.suppress(*TRANSIENT):  # Redis away: the lease expires by itself
            self.lock.release(LOCK_NAME, self.holder)

    def _loop(self) -> None:
        outage = Outage(log, "app sets")
        pause = 0.0  # the first round at once: sets changed while the coordinator was down
        while not self._stop.wait(pause):
            pause = self.period
            try:
                self.round()
                outage.ok()
            except TRANSIENT as e:
                outage.failed(e)
            except Exception:
                log.exception("app sets not reconciled")


def _guarded(name: str, run: Callable[[], object]) -> Callable[[], None]:
    def guarded() -> None:
        try:
            run()
        except Exception:  # one set's bad record must never stop the others
            log.exception("appset %s cannot be reconciled", name)

    return guarded
