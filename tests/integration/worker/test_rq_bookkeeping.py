"""rq's records of a sync job, which `FleetWorker` writes in fewer round trips than rq does.

The worker ends a successful job in one transaction (rq's own adds a WATCH and a read of the
job's dependents, which gitfleet jobs never have, its heartbeat and its return to idle are one
round trip each), and leaves the heartbeat of a failed job to rq's failure path. What rq
keeps must not change: the result, the finished registry, the job's end and last heartbeat,
its expiry, the worker's state, and for a failure the failed registry and the reason.
"""

from __future__ import annotations

from redis import Redis
from rq.job import Job, JobStatus
from rq.registry import FailedJobRegistry, FinishedJobRegistry, StartedJobRegistry
from rq.worker import WorkerStatus

from fleet.control.routing import payloads
from fleet.control.routing.dispatch import RESULT_TTL
from fleet.model import Trigger
from tests.support import manifests as m
from tests.support.fleet import FleetEnv
from worker.process import FleetWorker, register
from worker.runtime import Runtime


def _job(fleet: FleetEnv, job_id: str) -> Job:
    return payloads.fetch(job_id, fleet.redis)


def test_a_successful_sync_job_keeps_every_record_rq_keeps(fleet: FleetEnv) -> None:
    cluster = sorted(fleet.clusters)[0]
    app = fleet.app_name(0)
    fleet.repo.commit({f"apps/{app}/cm.yaml": m.configmap("settings", "k: v1")})
    fleet.add_app(app, cluster)
    runtime = Runtime(fleet.settings("rq-records"), fleet.redis)
    worker = FleetWorker(runtime)
    register(runtime)
    ref = fleet.dispatcher.request_sync(app, cluster, trigger=Trigger.MANUAL)
    worker.work(burst=True, logging_level="WARNING")
    runtime.close()

    job = _job(fleet, ref.job_id)
    assert job.get_status() == JobStatus.FINISHED
    answer = fleet.dispatcher.wait(ref, timeout=5)
    assert answer is not None and answer["result"] == "succeeded", answer
    assert job.started_at is not None and job.ended_at is not None
    assert job.last_heartbeat is not None and job.last_heartbeat >= job.started_at
    assert job.ended_at >= job.started_at
    queue = payloads.queue(ref.queue, fleet.redis)
    assert ref.job_id in FinishedJobRegistry(queue=queue).get_job_ids()
    assert ref.job_id not in StartedJobRegistry(queue=queue).get_job_ids()
    redis: Redis = fleet.redis
    assert 0 < redis.ttl(job.key) <= RESULT_TTL  # type: ignore[operator]
    assert worker.get_state() == WorkerStatus.IDLE
    stored = redis.hget(worker.key, "state")
    assert stored is not None and stored.decode() == WorkerStatus.IDLE


def test_a_failed_job_is_recorded_as_rq_records_it(fleet: FleetEnv) -> None:
    """A preview job whose intent is not JSON raises: rq's failure path runs, with the
    heartbeat the worker left to it."""
    runtime = Runtime(fleet.settings("rq-failure"), fleet.redis)
    worker = FleetWorker(runtime)
    register(runtime)
    queue = payloads.queue(fleet.dispatcher.queue_name(runtime.name), fleet.redis)
    job = queue.enqueue_call(payloads.PREVIEW_JOB, args=("a@b", "{not json"), job_id="diff-bad-1")
    worker.work(burst=True, logging_level="CRITICAL")
    runtime.close()

    failed = _job(fleet, job.id)
    assert failed.get_status() == JobStatus.FAILED
    assert failed.ended_at is not None and failed.last_heartbeat is not None
    assert failed.last_heartbeat >= (failed.started_at or failed.last_heartbeat)
    assert job.id in FailedJobRegistry(queue=queue).get_job_ids()
    assert job.id not in StartedJobRegistry(queue=queue).get_job_ids()
    result = failed.latest_result()
    assert result is not None and "JSON" in (result.exc_string or ""), "the reason was not kept"
