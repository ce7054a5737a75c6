"""What GET returns for an application: its spec, and the status of each instance.

The spec is camelCase, as it was sent; status fields are snake_case, as the engine's
`SyncResult.to_json()` writes them (sync_status, health, revision, last_sync with its trace_id,
resources), so `gitfleet app get -o json` and `gitfleet sync -o json` read alike.

An application's status is the fold of its instances': Synced only when every instance is,
OutOfSync when any is, Unknown otherwise (including when it targets no cluster); health is
the worst instance health (`fleet.engine.health.assess.worst`), Unknown for an instance not yet
synced.
"""

from __future__ import annotations

from typing import Any

from api.appschemas import AppIn
from fleet.control.registry.records import AppRecord, ClusterRecord
from fleet.control.registry.store import Store
from fleet.engine.health.assess import worst
from fleet.model import Health, SyncStatus

UNKNOWN = str(SyncStatus.UNKNOWN)
HEALTHS = {str(h) for h in Health}


def instance_view(cluster: str, status: dict[str, Any] | None) -> dict[str, Any]:
    status = status or {}
    last = status.get("last_sync") or {}
    return {
        "cluster": cluster,
        "sync_status": status.get("sync_status") or UNKNOWN,
        "health": status.get("health") or str(Health.UNKNOWN),
        "revision": status.get("revision") or last.get("revision") or "",
        "message": status.get("message") or last.get("error") or "",
        "last_sync": last or None,
        "resources": status.get("resources") or last.get("resources") or [],
        "updated": status.get("updated") or "",
    }


def fold_sync(instances: list[dict[str, Any]]) -> str:
    states = {i["sync_status"] for i in instances}
    if states == {str(SyncStatus.SYNCED)}:
        return str(SyncStatus.SYNCED)
    return str(SyncStatus.OUT_OF_SYNC) if str(SyncStatus.OUT_OF_SYNC) in states else UNKNOWN


def fold_health(instances: list[dict[str, Any]]) -> str:
    if not instances:
        return str(Health.UNKNOWN)
    healths = [Health(i["health"] if i["health"] in HEALTHS else Health.UNKNOWN) for i in instances]
    return str(worst(healths))


def instances_of(
    store: Store, record: AppRecord, clusters: list[ClusterRecord] | None = None
) -> list[dict[str, Any]]:
    """Each target cluster's status; pass `clusters` when folding many apps at once."""
    statuses = store.log.statuses(record.name)
    return [instance_view(c, statuses.get(c)) for c in store.instances(record, clusters)]


def summary(
    store: Store, record: AppRecord, clusters: list[ClusterRecord] | None = None
) -> dict[str, Any]:
    instances = instances_of(store, record, clusters)
    return {
        "name": record.name,
        "project": record.project,
        "repo": record.source.repo,
        "path": record.source.path,
        "revision": record.source.revision,
        "clusters": [i["cluster"] for i in instances],
        "sync_status": fold_sync(instances),
        "health": fold_health(instances),
        "automated": record.sync_policy.automated,
        "deleting": record.deleting,
    }


def app_view(store: Store, record: AppRecord) -> dict[str, Any]:
    instances = instances_of(store, record)
    revisions = {i["revision"] for i in instances if i["revision"]}
    synced = [i["last_sync"] for i in instances if i["last_sync"]]
    last = max(synced, key=lambda s: str(s.get("finished", "")), default=None)
    return {
        "name": record.name,
        "project": record.project,
        "spec": AppIn.of(record).model_dump(by_alias=True, exclude={"credentials", "name"}),
        "hasCredentials": record.has_credentials,
        "deleting": record.deleting,
        "created": record.created,
        "updated": record.updated,
        "sync_status": fold_sync(instances),
        "health": fold_health(instances),
        "revision": revisions.pop() if len(revisions) == 1 else "",
        "last_sync": last,
        "last_operation": store.log.get_operation(record.name),
        "instances": instances,
    }
