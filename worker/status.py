"""What a worker writes after each job: the instance's status and a record in its history.

Every outcome leaves a trace a person can read with `gitfleet app get` and `app history`:

- a sync: the engine's `SyncResult.to_json()` plus who and why (cluster, trigger, attempt,
  merged requests, worker, `result` succeeded/failed) goes into the history, and the status
  takes its sync status, health, revision, resources and error, with the record as last_sync;
- a skip (a sync window blocks the trigger): a history record with result `skipped` and the
  window's reason, and the reason as the status message, the rest of the status kept;
- a wait (dependsOn not Healthy yet) or a note (self-heal gave up): the status message only,
  so a dependency that takes minutes does not fill the history with "still waiting".
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fleet.control.registry.store import Store
from fleet.engine.contract import SyncResult


def sync_record(
    result: SyncResult, *, cluster: str, trigger: str, attempt: int, requests: int, worker: str
) -> dict[str, Any]:
    record = result.to_json()
    record.update(
        cluster=cluster,
        trigger=trigger,
        attempt=attempt,
        requests=requests,
        worker=worker,
        result="failed" if result.error else "succeeded",
        duration_s=(result.finished - result.started).total_seconds(),
    )
    return record


def write_sync(store: Store, record: dict[str, Any]) -> None:
    app, cluster = record["app"], record["cluster"]
    store.add_history(app, cluster, record)
    status = {
        "sync_status": record["sync_status"],
        "health": record["health"],
        "revision": record["revision"],
        "resources": record["resources"],
        "last_sync": record,
        "error": record["error"],
        "message": record["error"],
    }
    store.set_status(app, cluster, status)


def write_skipped(
    store: Store, app: str, cluster: str, *, trigger: str, reason: str, trace_id: str, worker: str
) -> dict[str, Any]:
    stamp = datetime.now(UTC).isoformat()
    record = {
        "app": app,
        "cluster": cluster,
        "trigger": trigger,
        "result": "skipped",
        "message": reason,
        "error": "",
        "revision": "",
        "started": stamp,
        "finished": stamp,
        "trace_id": trace_id,
        "worker": worker,
        "resources": [],
    }
    store.add_history(app, cluster, record)
    note(store, app, cluster, reason)
    return record


def note(store: Store, app: str, cluster: str, message: str) -> None:
    """Set the status message of an instance, keeping the rest of its status."""
    status = store.get_status(app, cluster) or {"sync_status": "Unknown", "health": "Unknown"}
    status.pop("updated", None)
    store.set_status(app, cluster, {**status, "message": message})
