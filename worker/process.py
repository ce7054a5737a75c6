"""The worker process: an rq SimpleWorker on its own shard queue, with membership and self-heal.

Why a `SimpleWorker` and not rq's forking `Worker`: a forked child starts cold every job (new
TLS connections to each cluster, empty discovery cache, git packs reopened, spans buffered in
the child lost at `os._exit`), and warm caches are the point of a long-lived worker. rq's job
timeout still applies: in the main thread by SIGALRM (`UnixSignalDeathPenalty`), and in a
thread (tests run workers in-process) by a timer that raises in the job's thread.

`concurrency` rq workers (default 4) consume the shard queue, one in the calling thread and
the others in threads, sharing the runtime: a sync spends much of its time waiting for the API
server, and a second one fills that wait (the instance lease still keeps one instance to one
sync at a time).

Beside the rq loops, one housekeeping thread keeps the worker a member of the fleet:
- heartbeats `fleet.control.routing.membership` every ttl/3, and registers again if it was declared
  dead (its instances may have moved meanwhile; their leases keep that safe);
- pumps deferred syncs (retries, dependency waits) that are due, from any worker;
- refreshes the self-heal watches and requests the debounced self-heal syncs.

And one more thread judges the worker's quiet periodic checks in batches
(`worker.quietbatch`), which are no rq jobs.

A clean stop (SIGTERM, or `stop()` in-process) drains: no rq loop takes a new job, and the
running syncs get `DRAIN_TIMEOUT_S` (30 s) to finish. A sync still running then is handed
back: the worker leaves the fleet (so its instances have other owners), raises `HandBack` in the
sync's thread, and the job queues its sync again for the new owner (`Dispatcher.hand_back`)
and releases the lease, so another worker runs it at once. The process then exits, within
the bound plus a few seconds. A second SIGTERM is rq's cold shutdown: it stops at once, and
the sync in the main thread is handed back the same way.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import math
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from redis import Redis
from rq.exceptions import DeserializationError, StopRequested
from rq.executions import Execution
from rq.job import Job, JobStatus
from rq.queue import Queue
from rq.timeouts import TimerDeathPenalty, UnixSignalDeathPenalty
from rq.utils import now
from rq.worker import SimpleWorker, WorkerStatus

from fleet.control.connection import TRANSIENT, Outage, connect
from fleet.control.registry.secrets import require_key
from fleet.control.routing import membership, payloads
from fleet.control.routing.payloads import PayloadError
from worker.health import HealthServer
from worker.quietbatch import QuietChecker
from worker.runtime import HandBack, Runtime, active
from worker.selfheal import SelfHeal
from worker.settings import WorkerSettings

log = logging.getLogger("gitfleet.worker")

TICK = 0.25
PUMP_EVERY = 0.5
REFRESH_EVERY = 2.0
DRAIN_TIMEOUT_S = 30.0
"""How long a stopping worker lets its running syncs finish before it hands them back."""
HEARTBEAT_EVERY_S = 5.0
"""rq's own worker heartbeat (its worker hash's TTL, for `rq info`) at most this often, as
long as the hash has more than `worker_ttl` seconds left: rq beats 3 to 4 times per job."""
SUSPENSION_EVERY_S = 1.0
"""`rq suspend` stops each rq loop of a worker within this long (rq asks before every job)."""


RQ_LEVELS = ((logging.WARNING, "WARNING"), (logging.ERROR, "ERROR"), (logging.CRITICAL, "CRITICAL"))


def rq_logging_level(level: str) -> str:
    """The level name of rq's own loggers for a worker logging at `level` (a name or a number):
    its errors and warnings always, its per-job lines only at DEBUG. rq writes four INFO lines
    per job (dequeued, OK, completed, result kept), which repeat the worker's own line per sync
    and cost a sync about 1% of a worker's CPU; the worker logs suspension itself
    (`FleetWorker.set_state`)."""
    named = logging.getLevelName(level.upper())
    number = named if isinstance(named, int) else int(level)
    if number <= logging.DEBUG:
        return "DEBUG"
    # the nearest standard level at or above: rq sets levels by name, and 35 has none
    wanted = max(number, logging.WARNING)
    return next((name for limit, name in RQ_LEVELS if wanted <= limit), "CRITICAL")


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


class FleetWorker(SimpleWorker):
    """Runs each job in this process with the worker's runtime active for it.

    Jobs are read as JSON into `FleetJob`s (`fleet.control.routing.payloads`), which run only
    gitfleet's own job functions: a job that is anything else fails without running, with one
    logged error saying why, and the worker goes on with the next."""

    def __init__(self, runtime: Runtime, on_stop: Callable[[], None] | None = None) -> None:
        self.runtime = runtime
        self.on_stop = on_stop
        self.job_thread: int | None = None  # the thread running a job, while one runs
        self._halt = threading.Event()
        self._beat_at = -math.inf  # monotonic time of the last heartbeat rq asked for
        self._suspension_checked = -math.inf  # monotonic time of the last suspension check
        self._alive_until = -math.inf  # when rq's worker hash expires, by that heartbeat
        self._state_written: str | None = None  # the state Redis holds, when known
        super().__init__(
            [runtime.dispatcher.queue_name(runtime.name)],
            name=f"{runtime.name}.{uuid.uuid4().hex[:8]}",
            connection=runtime.redis,
            worker_ttl=60,
            job_class=payloads.FleetJob,
            serializer=payloads.SERIALIZER,
        )

    @property
    def dequeue_timeout(self) -> int:
        """Block on the queue for 2 s at a time, so an in-process stop is noticed quickly."""
        return 2

    def execute_job(self, job: Job, queue: Queue) -> None:
        self.job_thread = threading.get_ident()
        try:
            with active(self.runtime):
                super().execute_job(job, queue)
        except TRANSIENT as e:
            # Redis went away while rq recorded the job's end (heartbeat, result, registries).
            # Raised further, it would end this rq loop and the process with it. The sync is
            # done or was fenced out; a pending sync left claimed is recovered after its
            # lease's deadline (`Dispatcher.recover`). The loop goes on and waits for Redis.
            log.warning(
                "worker=%s: Redis unreachable while finishing job %s (%s); going on",
                *(self.runtime.name, job.id, e),
            )
        finally:
            self.job_thread = None

    def request_stop(self, signum: Any, frame: Any) -> None:
        """SIGTERM/SIGINT: drain the whole process (every rq loop), not this loop alone."""
        if self.on_stop is not None:
            self.on_stop()
        with contextlib.suppress(Exception):  # a handler interrupting a log write: drain anyway
            log.info("worker=%s stopping on signal %s: no new syncs, draining", self.name, signum)
        super().request_stop(signum, frame)  # type: ignore[no-untyped-call]

    def hand_back(self) -> bool:
        """Interrupt the running job, if any, with `HandBack`; True when one was running."""
        thread = self.job_thread
        if thread is None:
            return False
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(thread), ctypes.py_object(HandBack)
        )
        return True

    def handle_exception(self, job: Job, *exc_info: Any) -> None:
        error = exc_info[1] if len(exc_info) > 1 else None
        if isinstance(error, DeserializationError):
            error = PayloadError(f"job {job.id}: its data is not JSON (a pickle?)")
        if not isinstance(error, PayloadError):
            super().handle_exception(job, *exc_info)
            return
        log.error(
            "worker=%s refused job %s from %s: %s", self.runtime.name, job.id, job.origin, error
        )

    def heartbeat(self, timeout: int | None = None, pipeline: Any = None) -> None:
        """rq's worker heartbeat (HSET and two EXPIREs), in one round trip, and skipped when
        the last one is under `HEARTBEAT_EVERY_S` old and left the hash `worker_ttl` s to live
        (rq calls it before and after every dequeue and after every job)."""
        if self._halt.is_set() and self.get_state() == WorkerStatus.IDLE:
            raise StopRequested()
        now = time.monotonic()
        if pipeline is not None:  # part of one of rq's own transactions
            super().heartbeat(timeout, pipeline=pipeline)
            self._beat(now, timeout)
            return
        recent = now - self._beat_at < HEARTBEAT_EVERY_S
        if timeout is None and recent and self._alive_until - now > self.worker_ttl:
            return
        with contextlib.suppress(*TRANSIENT):  # Redis away: rq's next dequeue waits for it
            with self.connection.pipeline(transaction=False) as pipe:
                super().heartbeat(timeout, pipeline=pipe)
                pipe.execute()
            self._beat(now, timeout)

    def _beat(self, at: float, timeout: int | None) -> None:
        self._beat_at = at
        self._alive_until = at + (timeout or self.worker_ttl + 60)  # rq's own default

    # rq's per-worker totals (`successful_job_count`, `total_working_time`...): nobody reads
    # them (the journal and /metrics count syncs), so no job pays the commands.

    def increment_successful_job_count(self, pipeline: Any = None) -> None:
        pass

    def increment_failed_job_count(self, pipeline: Any = None) -> None:
        pass

    def increment_total_working_time(self, job_execution_time: Any, pipeline: Any) -> None:
        pass

    # rq's end of a job: the same records, in fewer round trips.

    def handle_execution_ended(self, job: Job, queue: Queue, heartbeat_ttl: int) -> None:
        """rq notes the end time and writes the job's `last_heartbeat` in a round trip of its
        own; here the heartbeat goes into the success transaction (the job's hash is saved
        there), and `handle_job_failure` writes it first, in a round trip of its own. rq 3.0's
        `Job.heartbeat` sets only that field and ignores `heartbeat_ttl`."""
        job.ended_at = job.last_heartbeat = now()

    def handle_job_success(
        self, job: Job, queue: Queue, started_job_registry: Any, execution: Execution
    ) -> None:
        """rq's success bookkeeping (status, result, finished registry, the job's expiry, the
        end of its execution, the worker's return to idle) in one transaction. rq's own first
        WATCHes the job's dependents and reads them, two more round trips, to release jobs
        waiting on this one: gitfleet never enqueues a job that depends on another
        (`fleet.control.routing.dispatch`), nor one that repeats or is rate limited, so this
        skips them. A result TTL of 0 (rq: delete the job at once) is not one gitfleet sets."""
        result_ttl = job.get_result_ttl(self.default_result_ttl)
        with self.connection.pipeline() as pipe:
            if result_ttl != 0:
                job._handle_success(  # also saves the job's hash, `last_heartbeat` with it
                    result_ttl,
                    pipeline=pipe,
                    worker_name=self.name,
                    execution_id=execution.id,
                    execution_started_at=execution.created_at,
                    execution_ended_at=job.ended_at,
                )
            job.cleanup(result_ttl, pipeline=pipe, remove_from_queue=False)
            self.cleanup_execution(job, pipeline=pipe, execution=execution)
            self.set_state(WorkerStatus.IDLE, pipeline=pipe)  # rq's next step, a round trip
            pipe.execute()
        self._state_written = WorkerStatus.IDLE  # so rq's own IDLE write right after is skipped
        job._status = JobStatus.FINISHED

    def handle_job_failure(
        self,
        job: Job,
        queue: Queue,
        started_job_registry: Any = None,
        exc_string: str = "",
        execution: Execution | None = None,
    ) -> None:
        """rq's own failure handling, after writing the heartbeat `handle_execution_ended` no
        longer writes (failures are rare: that round trip stays)."""
        with contextlib.suppress(*TRANSIENT):
            job.heartbeat(job.last_heartbeat or now(), 0)
        super().handle_job_failure(job, queue, started_job_registry, exc_string, execution)

    # rq's loop quits on any Redis error outside its dequeue (which waits for Redis to come
    # back): these steps of each round let a restart pass instead, so the process lives on.

    def check_for_suspension(self, burst: bool) -> None:
        """rq's `rq suspend` check (a round trip), at most every `SUSPENSION_EVERY_S` while not
        suspended: rq asks before every job."""
        now = time.monotonic()
        if now - self._suspension_checked < SUSPENSION_EVERY_S:
            return
        with contextlib.suppress(*TRANSIENT):
            super().check_for_suspension(burst)  # waits while suspended
            self._suspension_checked = time.monotonic()

    def run_maintenance_tasks(self) -> None:
        with contextlib.suppress(*TRANSIENT):  # done again on a later round
            super().run_maintenance_tasks()  # type: ignore[no-untyped-call]

    def set_state(self, state: str, pipeline: Any = None) -> None:
        """rq's state write, skipped when Redis already holds `state` from our last direct
        write (rq sets IDLE after each job and again before each dequeue). Entering and
        leaving `rq suspend` is logged here, as rq logs it only at INFO (`rq_logging_level`)."""
        if state == WorkerStatus.SUSPENDED and self._state != state:
            log.warning("%s: suspended by `rq suspend`: no new syncs until `rq resume`", self.name)
        elif self._state == WorkerStatus.SUSPENDED != state and not self._stop_requested:
            log.warning("%s: resumed after `rq suspend`", self.name)  # not on the way out
        if pipeline is not None:  # written when rq's pipeline runs, if it does: unknown
            self._state_written = None
            super().set_state(state, pipeline)
            return
        if state == self._state_written:
            self._state = state
            return
        self._state_written = None
        with contextlib.suppress(*TRANSIENT):  # rq keeps the state in memory too
            super().set_state(state, pipeline)
            self._state_written = state

    def _install_signal_handlers(self) -> None:
        if _in_main_thread():
            super()._install_signal_handlers()  # type: ignore[no-untyped-call]

    def halt(self) -> None:
        """Stop after the current job (for workers run in a thread), or at once while `rq
        suspend` holds the loop: rq's suspension wait and its loop both end on
        `_stop_requested`, which rq itself sets only for a loop that is busy."""
        self._halt.set()
        self._stop_requested = True

    def unsubscribe(self) -> None:
        """rq's, with a bounded wait for its pubsub thread: redis-py's `stop()` joins it
        without a timeout, and a thread that saw the unsubscribe before the stop sleeps up to
        rq's 60 s in `get_message`, which held a draining worker past its bound. The thread
        is a daemon, so it ends with the process."""
        thread = self.pubsub_thread
        if thread is None or self.pubsub is None:
            return
        with contextlib.suppress(*TRANSIENT):
            self.pubsub.unsubscribe()
        thread.stop(timeout=1.0)


class Housekeeper:
    """The thread that heartbeats, pumps deferred syncs and drives self-heal."""

    def __init__(self, runtime: Runtime, selfheal: SelfHeal | None) -> None:
        self.runtime = runtime
        self.selfheal = selfheal
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="housekeeper", daemon=True)
        self._due = {"beat": 0.0, "pump": 0.0, "refresh": 0.0}
        self.last_tick = time.monotonic()  # read by the /healthz listener (`worker.health`)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        outage = Outage(log, f"worker={self.runtime.name} housekeeping")
        while not self._stop.wait(TICK):
            self.last_tick = time.monotonic()
            try:
                self.tick(time.time())
                outage.ok()
            except TRANSIENT as e:  # a Redis restart: heartbeats resume once it is back
                outage.failed(e)
            except Exception:
                log.exception("worker=%s housekeeping failed", self.runtime.name)

    def is_alive(self, stale_after: float) -> bool:
        """Whether the loop ticked within `stale_after` seconds (a stuck tick stops it)."""
        return time.monotonic() - self.last_tick < stale_after

    def tick(self, now: float) -> None:
        s = self.runtime.settings
        if self._is_due("beat", now, s.ttl / 3):
            beat(self.runtime)
        if self._is_due("pump", now, PUMP_EVERY):
            self.runtime.dispatcher.pump(now)
        if self.selfheal is not None:
            if self._is_due("refresh", now, REFRESH_EVERY):
                started = time.monotonic()
                self.selfheal.refresh()
                self._stretch("refresh", now, time.monotonic() - started)
            self.selfheal.flush(now)

    def _stretch(self, what: str, now: float, took: float) -> None:
        """A refresh reads every app and status; with thousands of apps it is slow, so space
        the next one out until refreshing takes at most a fifth of the time (syncs need it)."""
        self._due[what] = max(self._due[what], now + 4.0 * took)

    def _is_due(self, what: str, now: float, every: float) -> bool:
        if now < self._due[what]:
            return False
        self._due[what] = now + every
        return True


def register(runtime: Runtime) -> None:
    meta = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "queue": runtime.dispatcher.queue_name(runtime.name),
    }
    membership.register(
        runtime.redis,
        runtime.name,
        ttl=runtime.settings.ttl,
        meta=meta,
        prefix=runtime.settings.prefix,
    )


def beat(runtime: Runtime) -> None:
    s = runtime.settings
    if not membership.heartbeat(runtime.redis, runtime.name, ttl=s.ttl, prefix=s.prefix):
        log.warning("worker=%s was declared dead; registering again", runtime.name)
        register(runtime)


class WorkerProcess:
    """One shard member: `run()` blocks until stopped (SIGTERM/SIGINT, or `stop()`)."""

    def __init__(
        self,
        settings: WorkerSettings,
        *,
        redis: Redis | None = None,
        drain_timeout: float = DRAIN_TIMEOUT_S,
    ) -> None:
        self.settings = settings
        self.drain_timeout = drain_timeout
        self._drain: threading.Timer | None = None
        self._drain_lock = threading.Lock()
        require_key(settings.secret_key, insecure_dev=settings.insecure_dev)
        self.redis = redis or connect(settings.redis_url)
        self.selfheal: SelfHeal | None = None
        watcher = self._self_heal if settings.self_heal else None
        self.runtime = Runtime(settings, self.redis, watcher=watcher)
        self.rqs = [FleetWorker(self.runtime, self.stop) for _ in range(settings.concurrency)]
        self.rq = self.rqs[0]
        self.keeper = Housekeeper(self.runtime, self.selfheal)
        self.checker = QuietChecker(self.runtime)
        self.started = threading.Event()
        self.health: HealthServer | None = None

    def _self_heal(self, runtime: Runtime) -> SelfHeal:
        """The runtime's watcher, kept here too: this process drives its refreshes and heals."""
        self.selfheal = SelfHeal(runtime)
        return self.selfheal

    def run(self, *, logging_level: str = "INFO") -> None:
        rq_level = rq_logging_level(logging_level)  # a level rq cannot set fails here, first
        main = _in_main_thread()
        self.rq.death_penalty_class = UnixSignalDeathPenalty if main else TimerDeathPenalty
        if main:  # a SIGTERM before rq installs its own handlers drains too, never kills
            for number in (signal.SIGTERM, signal.SIGINT):
                signal.signal(number, lambda *_: self.stop())
        health = self.health = self._serve_health()  # first: a port in use stops it here
        register(self.runtime)
        self.keeper.start()
        self.checker.start()
        helpers = [
            threading.Thread(target=self._work, args=(rq, rq_level), daemon=True)
            for rq in self.rqs[1:]
        ]
        for thread in helpers:
            thread.start()
        self.started.set()
        log.info(
            "worker=%s listening on %s with %d sync(s) at once",
            *(self.settings.name, self.rq.queue_names(), len(self.rqs)),
        )
        try:
            self.rq.work(logging_level=rq_level)
        except HandBack:
            log.warning("worker=%s handed back a job outside a sync", self.settings.name)
        finally:
            self.stop()
            for thread in helpers:
                thread.join(timeout=self.drain_timeout + 5.0)
            if self._drain is not None:
                self._drain.cancel()
            self.keeper.stop()
            self.checker.stop()
            if health is not None:
                health.stop()
            if self.selfheal is not None:
                self.selfheal.stop()
            membership.deregister(self.redis, self.settings.name, prefix=self.settings.prefix)
            self.runtime.close()

    def _serve_health(self) -> HealthServer | None:
        """The kubelet's /healthz (`worker.health`), when a port is set: alive while the
        housekeeper ticks within 4 membership TTLs (60 s at least)."""
        s = self.settings
        if not s.health_port:
            return None
        stale_after = max(60.0, 4 * s.ttl)
        return HealthServer(
            s.health_host, s.health_port, lambda: self.keeper.is_alive(stale_after)
        ).start()

    def _work(self, rq: FleetWorker, rq_level: str) -> None:
        rq.death_penalty_class = TimerDeathPenalty
        try:
            rq.work(logging_level=rq_level)
        except HandBack:  # landed outside a sync job (between jobs): nothing to give back
            pass
        except Exception:
            log.exception("worker=%s: an rq loop stopped", self.settings.name)
            self.stop()  # one loop down: stop cleanly rather than run short-handed unseen

    def stop(self) -> None:
        """Drain: take no new job; hand back what still runs after `drain_timeout`."""
        for rq in self.rqs:
            rq.halt()
        with self._drain_lock:
            if self._drain is None:
                self._drain = threading.Timer(self.drain_timeout, self._hand_back)
                self._drain.daemon = True
                self._drain.start()

    def _hand_back(self) -> None:
        """The drain's time is up: leave the fleet, then give the running syncs back."""
        busy = [rq for rq in self.rqs if rq.job_thread is not None]
        if not busy:
            return
        log.warning(
            "worker=%s: %d sync(s) still running after %.0fs of draining: handing them back",
            *(self.settings.name, len(busy), self.drain_timeout),
        )
        self.keeper.stop()  # no heartbeat may register this worker again
        membership.deregister(self.redis, self.settings.name, prefix=self.settings.prefix)
        for rq in busy:
            rq.hand_back()
