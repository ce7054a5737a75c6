"""What a worker writes after each job: the instance's status and a record in its history.

Every outcome leaves a trace a person can read with `gitfleet app get` and `app history`
(the records are `fleet.control.registry.syncrecords`):

- a sync: the engine's `SyncResult.to_json()` plus who and why (cluster, trigger, attempt,
  merged requests, worker, result succeeded/failed) goes into the history, and the status
  takes its sync status, health, revision, resources and error, with the record as last_sync;
- a skip (a sync window blocks the trigger): a history record with result `skipped` and the
  window's reason, and the reason as the status message, the rest of the status kept;
- a wait (dependsOn not Healthy yet) or a note (self-heal gave up): the status message only,
  so a dependency that takes minutes does not fill the history with "still waiting".

Every write made under a sync's lease (sync, skip, dependency wait, teardown) is fenced: it
happens in one atomic step (`HeldLease.fenced`) only while the lease's fencing token is the
newest. After a sync's write, `worker.transitions.after_sync` compares the status before and
after: it queues the notifications of each transition and advances the commit-to-healthy clock
(never failing).

And what each job answers (`Answer`): its outcome, for the worker's journal, and the JSON rq
keeps as the job's return value.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from redis import WatchError
from redis.client import Pipeline

from fleet.control.registry.records import AppRecord
from fleet.control.registry.status import parse_status
from fleet.control.registry.store import Store
from fleet.control.registry.syncrecords import (
    HISTORY,
    DriftRecord,
    InstanceStatus,
    SkipRecord,
    SyncRecord,
)
from fleet.control.routing.leases import HeldLease
from fleet.model import Outcome, SyncStatus, Trigger
from worker.transitions import Before, after_sync, read_before


@dataclass(frozen=True)
class Answer:
    """What one job did, and what it returns to rq (`body`, JSON-ready, with the outcome as
    `result`; the API's diff and the tests read it through `Dispatcher.wait`): a sync or a skip
    answers with its history record, anything else with the instance and a message or error."""

    outcome: Outcome
    body: dict[str, Any]

    @classmethod
    def of(cls, outcome: Outcome, **fields: Any) -> Answer:
        return cls(outcome, {**fields, "result": outcome.value})

    @classmethod
    def of_record(cls, record: SyncRecord | SkipRecord, **fields: Any) -> Answer:
        return cls(record.outcome, {**HISTORY.dump_python(record, mode="json"), **fields})


def write_sync(
    store: Store,
    record: SyncRecord,
    lease: HeldLease | None = None,
    *,
    app: AppRecord | None = None,
    also: Callable[[Pipeline], None] | None = None,
) -> None:
    """History and status of a sync; with `lease`, both in one atomic step that runs only while
    the lease's fencing token is current (`HeldLease.fenced`: LeaseLost otherwise). `app`: the
    record the sync ran with (read again when not given); `also`: more commands to stage in
    the same write."""
    reads = store.redis.pipeline(transaction=False)  # one round trip for every read
    store.log.stage_get_status(reads, record.app, record.cluster)
    read_before(store, reads, record.app, record.cluster)
    replies = reads.execute(raise_on_error=False)  # after_sync's reads must never fail a sync
    if isinstance(replies[0], Exception):
        raise replies[0]
    previous = parse_status(replies[0])
    status = _status_of(store, record, previous)

    def write(pipe: Pipeline) -> None:
        store.log.stage_history(pipe, record.app, record.cluster, record)
        store.log.stage_status(pipe, record.app, record.cluster, status)
        if also is not None:
            also(pipe)

    if lease is None:
        with store.redis.pipeline(transaction=True) as pipe:
            write(pipe)
            pipe.execute()
    else:
        lease.fenced(write)
    before = Before.of(replies[1:])
    after_sync(store, previous, status, record, app, before)  # never raises


UNREACHABLE = "ClusterUnreachable"
DRIFT_NOTE_ATTEMPTS = 20  # WATCH retries of one drift note while other statuses of the app move
log = logging.getLogger("worker.status")
"""The word a status message starts with while the instance's API server cannot be reached."""


def _status_of(store: Store, record: SyncRecord, previous: InstanceStatus | None) -> InstanceStatus:
    """The status after `record`. A sync that failed before acting on the cluster (the git
    remote or the API server could not be reached) keeps the last applied revision and
    resources: the cluster still holds them."""
    message = record.error
    if record.error_stage == "cluster":  # fleet.errors.ClusterUnreachable
        message = f"{UNREACHABLE}: {message}"
    if record.message:  # what else the sync says: objects not applied, a cancelled wait
        message = f"{message}\n{record.message}" if message else record.message
    status = InstanceStatus(
        sync_status=record.sync_status,
        health=record.health,
        revision=record.revision,
        resources=record.resources,
        last_sync=record,
        error=record.error,
        message=message,
    )
    if previous is not None and previous.drift:  # the last drift stays readable (note_drift)
        status = replace(status, drift=previous.drift)
    if record.error and not record.writes and not record.resources and previous is not None:
        status = replace(status, revision=previous.revision, resources=previous.resources)
    return status


def write_skipped(
    store: Store,
    app: str,
    cluster: str,
    *,
    trigger: Trigger,
    reason: str,
    trace_id: str,
    worker: str,
    lease: HeldLease | None = None,
) -> SkipRecord:
    stamp = datetime.now(UTC)
    record = SkipRecord(
        app=app,
        cluster=cluster,
        trigger=trigger,
        message=reason,
        started=stamp,
        finished=stamp,
        trace_id=trace_id,
        worker=worker,
    )
    if lease is None:
        store.add_history(app, cluster, record)
        note(store, app, cluster, reason)
        return record
    noted = replace(store.get_status(app, cluster) or InstanceStatus(), message=reason)

    def write(pipe: Pipeline) -> None:
        store.log.stage_history(pipe, app, cluster, record)
        store.log.stage_status(pipe, app, cluster, noted)

    lease.fenced(write)
    return record


def note(
    store: Store, app: str, cluster: str, message: str, lease: HeldLease | None = None
) -> None:
    """Set the status message of an instance, keeping the rest of its status; with `lease`,
    only while its fencing token is current (`put`)."""
    status = store.get_status(app, cluster) or InstanceStatus()
    put(store, app, cluster, replace(status, message=message), lease)


def note_drift(
    store: Store, app: str, cluster: str, drift: tuple[DriftRecord, ...], message: str
) -> None:
    """Record the drift a watch saw (which fields, changed by which manager): the instance is
    OutOfSync until a sync applies it again; the rest of the status is kept. Written only if
    the status did not change since it was read (WATCH), so a sync's write is never undone."""
    key = store.log.keys.status(app)
    with store.log.redis.pipeline() as pipe:
        for _ in range(DRIFT_NOTE_ATTEMPTS):
            try:
                pipe.watch(key)  # type: ignore[no-untyped-call]
                status = store.get_status(app, cluster) or InstanceStatus()
                noted = replace(
                    status, drift=drift, message=message, sync_status=SyncStatus.OUT_OF_SYNC
                )
                pipe.multi()
                store.log.stage_status(pipe, app, cluster, noted)
                pipe.execute()
                return
            except WatchError:
                continue
    log.warning(
        "app=%s cluster=%s drift not recorded: its status kept changing (%d attempts); the "
        "next watch event or sync reports it",
        app,
        cluster,
        DRIFT_NOTE_ATTEMPTS,
    )


def put(
    store: Store, app: str, cluster: str, status: InstanceStatus, lease: HeldLease | None = None
) -> None:
    """Write the instance's status; with `lease`, in one atomic step that runs only while the
    lease's fencing token is current (`HeldLease.fenced`: LeaseLost otherwise)."""
    if lease is None:
        store.set_status(app, cluster, status)
        return
    lease.fenced(lambda pipe: store.log.stage_status(pipe, app, cluster, status))
