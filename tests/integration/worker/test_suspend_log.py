"""`rq suspend` shows in a worker's log at its default level: rq logs it only at INFO, which a
worker gives rq at DEBUG only (`worker.process.rq_logging_level`), so the worker says it."""

from __future__ import annotations

import logging

import pytest
from rq.worker import WorkerStatus

from tests.support.fleet import FleetEnv
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
            loop._stop_requested = True  # stopping while suspended: rq restores the state
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
