"""`rq suspend` and a worker: the worker logs it at its default level (rq logs it only at INFO,
which a worker gives rq at DEBUG only: `worker.process.rq_logging_level`), and a suspended
rq loop still stops when the worker drains."""

from __future__ import annotations

import logging
import threading

import pytest
from rq.suspension import resume, suspend
from rq.worker import WorkerStatus

from tests.support.fleet import FleetEnv, wait_until
from worker.process import FleetWorker
from worker.runtime import Runtime


def test_a_worker_logs_entering_and_leaving_a_suspension(
    registry: FleetEnv, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = Runtime(registry.settings("w-suspended"), registry.redis)
    loop = FleetWorker(runtime)
    try:
        with caplog.at_level(logging.WARNING, logger="gitfleet.worker"):
            loop.set_state(WorkerStatus.IDLE)
            loop.set_state(WorkerStatus.SUSPENDED)
            loop.set_state(WorkerStatus.SUSPENDED)  # still suspended: said once
            loop.set_state(WorkerStatus.IDLE)
            loop.set_state(WorkerStatus.SUSPENDED)
            loop.halt()  # stopping while suspended: rq restores the state on its way out
            loop.set_state(WorkerStatus.IDLE)
        said = [r.getMessage() for r in caplog.records if r.name == "gitfleet.worker"]
        assert said == [
            f"{loop.name}: suspended by `rq suspend`: no new syncs until `rq resume`",
            f"{loop.name}: resumed after `rq suspend`",
            f"{loop.name}: suspended by `rq suspend`: no new syncs until `rq resume`",
        ]
        assert registry.redis.hget(loop.key, "state") == b"idle"  # rq's own write still made
    finally:
        runtime.close()


def test_a_suspended_rq_loop_stops_when_the_worker_drains(registry: FleetEnv) -> None:
    """A loop waiting in rq's suspension ends on `halt` (a drain), not at `rq resume`: the
    worker's helper loops would otherwise hold its exit past any grace period."""
    runtime = Runtime(registry.settings("w-drained"), registry.redis)
    loop = FleetWorker(runtime)
    suspend(registry.redis)
    try:
        thread = threading.Thread(target=loop.work, kwargs={"logging_level": "WARNING"})
        thread.start()
        wait_until(
            lambda: registry.redis.hget(loop.key, "state") == b"suspended",
            timeout=15,
            what="the loop suspended",
        )
        loop.halt()
        thread.join(timeout=10)
        assert not thread.is_alive(), "the suspended loop did not stop on halt"
    finally:
        resume(registry.redis)
        runtime.close()
