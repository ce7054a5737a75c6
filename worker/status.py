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

from fleet.control.registry.store import Store
from fleet.control.registry.syncrecords import HISTORY, InstanceStatus, SkipRecord, SyncRecord
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


def write_sync(store: Store, record: SyncRecord) -> None:
    store.add_history(record.app, record.cluster, record)
    status = InstanceStatus(
        sync_status=record.sync_status,
        health=record.health,
        revision=record.revision,
        resources=record.resources,
        last_sync=record,
        error=record.error,
        message=record.error,
    )
    store.set_status(record.app, record.cluster, status)


def write_skipped(
    store: Store,
    app: str,
    cluster: str,
    *,
    trigger: Trigger,
    reason: str,
    trace_id: str,
    worker: str,
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
    store.add_history(app, cluster, record)
    note(store, app, cluster, reason)
    return record


def note(store: Store, app: str, cluster: str, message: str) -> None:
    """Set the status message of an instance, keeping the rest of its status."""
    status = store.get_status(app, cluster) or InstanceStatus()
    store.set_status(app, cluster, replace(status, message=message))
