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

And what each job answers (`Answer`): its outcome, for the worker's journal, and the JSON rq
keeps as the job's return value.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from redis.client import Pipeline

from fleet.control.registry.store import Store
from fleet.control.registry.syncrecords import HISTORY, InstanceStatus, SkipRecord, SyncRecord
from fleet.control.routing.leases import HeldLease
from fleet.model import Outcome, Trigger


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


def write_sync(store: Store, record: SyncRecord, lease: HeldLease | None = None) -> None:
    """History and status of a sync; with `lease`, both in one MULTI/EXEC that runs only while
    the lease's fencing token is current (`HeldLease.fenced`: LeaseLost otherwise)."""
    status = _status_of(store, record)
    if lease is None:
        store.add_history(record.app, record.cluster, record)
        store.set_status(record.app, record.cluster, status)
        return

    def write(pipe: Pipeline) -> None:
        store.log.stage_history(pipe, record.app, record.cluster, record)
        store.log.stage_status(pipe, record.app, record.cluster, status)

    lease.fenced(write)


UNREACHABLE = "ClusterUnreachable"
"""The word a status message starts with while the instance's API server cannot be reached."""


def _status_of(store: Store, record: SyncRecord) -> InstanceStatus:
    """The status after `record`. A sync that failed before acting on the cluster (the git
    remote or the API server could not be reached) keeps the last applied revision and
    resources: the cluster still holds them."""
    message = record.error
    if record.error_stage == "cluster":  # fleet.errors.ClusterUnreachable
        message = f"{UNREACHABLE}: {message}"
    status = InstanceStatus(
        sync_status=record.sync_status,
        health=record.health,
        revision=record.revision,
        resources=record.resources,
        last_sync=record,
        error=record.error,
        message=message,
    )
    previous = store.get_status(record.app, record.cluster)
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


def note(store: Store, app: str, cluster: str, message: str) -> None:
    """Set the status message of an instance, keeping the rest of its status."""
    status = store.get_status(app, cluster) or InstanceStatus()
    store.set_status(app, cluster, replace(status, message=message))
