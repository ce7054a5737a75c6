"""What an rq job carries through Redis, and the only way gitfleet reads one back.

Redis is a trust boundary (SECURITY.md, "Redis"): whoever can write to it can put anything in a
worker's queue, and a worker holds the key that decrypts every credential. So a job is data,
never code:

- jobs are stored as JSON (`SERIALIZER`), never with rq's default pickle, which runs whatever
  a planted payload names while it is being read;
- a worker runs only gitfleet's own job functions (`JOBS`), each with the positional string
  arguments it takes: `sync_job(instance)` and `preview_job(instance, intent_json)`, whose
  intent must parse (`fleet.control.routing.pending.Intent`). Anything else (another function,
  other arguments, keyword arguments, webhooks) is a `PayloadError`;
- `FleetJob` is the job class every gitfleet queue and worker uses: its function comes from
  `JOBS` after that check, it never imports a callback named in Redis, never sends rq webhooks,
  never retries (retries are gitfleet's own, `fleet.control.backoff`), and a record that is
  not a job at all reads as a missing job (`NoSuchJobError`, which rq skips) with a logged
  error, so one bad record can neither crash a worker nor make it loop.

The job functions live in the worker (`worker.jobs`); they are named by import path, so this
library never imports the process that runs them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from redis import Redis
from rq import Queue
from rq.exceptions import DeserializationError, NoSuchJobError
from rq.job import Job, JobStatus
from rq.serializers import JSONSerializer
from rq.utils import import_attribute

from fleet.control.routing.pending import Intent
from fleet.errors import FleetError

log = logging.getLogger("gitfleet.queue")

SERIALIZER = JSONSerializer
SYNC_JOB = "worker.jobs.sync_job"
PREVIEW_JOB = "worker.jobs.preview_job"
JOBS = {SYNC_JOB: ("instance",), PREVIEW_JOB: ("instance", "intent_json")}
"""Each job function gitfleet queues, with the names of the string arguments it takes."""


class PayloadError(FleetError):
    """A job or record read from Redis is not what gitfleet writes: it is refused, not run."""

    stage = "queue"


@dataclass(frozen=True)
class JobCall:
    """A checked job: one of `JOBS` and its arguments."""

    function: str
    args: tuple[str, ...]


def check(job: Job) -> JobCall:
    """The call `job` asks for, if it is one of gitfleet's own; `PayloadError` otherwise."""
    try:
        function, instance, args, kwargs = job.func_name, job.instance, job.args, job.kwargs
    except DeserializationError as e:
        raise PayloadError(f"job {job.id}: its data is not JSON (a pickle?)") from e
    if not isinstance(function, str) or function not in JOBS or instance is not None:
        raise PayloadError(f"job {job.id}: {function!r} is not a gitfleet job")
    names = JOBS[function]
    if kwargs:
        raise PayloadError(f"job {job.id}: {function} takes no keyword arguments")
    if not isinstance(args, list | tuple) or len(args) != len(names):
        raise PayloadError(f"job {job.id}: {function} takes {len(names)} argument(s) {names}")
    if not all(isinstance(arg, str) for arg in args):
        raise PayloadError(f"job {job.id}: the arguments of {function} must be strings")
    if job.webhooks:
        raise PayloadError(f"job {job.id}: gitfleet jobs carry no webhooks")
    if function == PREVIEW_JOB:
        _intent(job.id, args[1])
    return JobCall(function, tuple(args))


def _intent(job_id: str, text: str) -> Intent:
    try:
        return Intent.from_json(text)
    except ValueError as e:
        problems = e.error_count() if isinstance(e, ValidationError) else 1
        raise PayloadError(
            f"job {job_id}: its intent is not one gitfleet writes ({problems} problem(s))"
        ) from e


class FleetJob(Job):
    """An rq job that can only ever run one of `JOBS` (see the module docstring)."""

    def restore(self, raw_data: Any) -> Any:
        try:
            return super().restore(raw_data)
        except NoSuchJobError:
            raise
        except Exception as e:
            log.error("job %s refused: its record is not a job gitfleet wrote (%s)", self.id, e)
            raise NoSuchJobError(f"job {self.id}: not a job gitfleet wrote") from e

    @property
    def func(self) -> Callable[..., Any]:
        return import_attribute(check(self).function)

    @property
    def success_callback(self) -> None:
        return None

    @property
    def failure_callback(self) -> None:
        return None

    @property
    def stopped_callback(self) -> None:
        return None

    @property
    def should_retry(self) -> bool:
        return False

    def send_webhooks(self, status: str | JobStatus, *, exc_string: str | None = None) -> None:
        return None


def queue(name: str, redis: Redis) -> Queue:
    """The rq queue `name` as gitfleet uses it: JSON jobs of the `FleetJob` class."""
    return Queue(name, connection=redis, job_class=FleetJob, serializer=SERIALIZER)


def fetch(job_id: str, redis: Redis) -> Job:
    """A queued or finished job, read as JSON (`NoSuchJobError` when missing or not a job)."""
    return FleetJob.fetch(job_id, connection=redis, serializer=SERIALIZER)
