"""What GET returns for an application: its spec, and the status of each instance.

The spec is camelCase, as it was sent; status fields are snake_case, as the workers' records
(`fleet.control.registry.syncrecords`) write them (sync_status, health, revision, last_sync
with its trace_id, resources), so `gitfleet app get -o json` and `gitfleet sync -o json` read
alike.

An application's status is the fold of its instances': Synced only when every instance is,
OutOfSync when any is, Unknown otherwise (including when it targets no cluster); health is
the worst instance health (`fleet.engine.health.assess.worst`), Unknown for an instance not yet
synced.

The same models also say what a sync, rollback, delete or diff request answers. The command
line (`cli.apps`) reads every answer through them, never by key name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from api.appschemas import AppIn
from fleet.control.registry.records import AppRecord, ClusterRecord
from fleet.control.registry.store import Store
from fleet.control.registry.syncrecords import (
    DriftRecord,
    HistoryRecord,
    InstanceStatus,
    Operation,
    OperationJob,
    PreviewRecord,
    ResourceRecord,
    SyncRecord,
)
from fleet.engine.health.assess import worst
from fleet.engine.source.remotes import shown
from fleet.model import Action, Health, SyncStatus


class View(BaseModel):
    model_config = ConfigDict(frozen=True)


class InstanceView(View):
    """One instance: its status, falling back on its last sync's revision, error and objects."""

    cluster: str
    sync_status: SyncStatus
    health: Health
    revision: str
    message: str
    last_sync: SyncRecord | None
    resources: tuple[ResourceRecord, ...]
    updated: str
    drift: tuple[DriftRecord, ...] = ()

    @classmethod
    def of(cls, cluster: str, status: InstanceStatus | None) -> InstanceView:
        status = status or InstanceStatus()
        last = status.last_sync
        return cls(
            cluster=cluster,
            sync_status=status.sync_status,
            health=status.health,
            revision=status.revision or (last.revision if last else ""),
            message=status.message or (last.error if last else ""),
            last_sync=last,
            resources=status.resources or (last.resources if last else ()),
            updated=status.updated.isoformat() if status.updated else "",
            drift=status.drift,
        )


class AppSummary(View):
    """An application in the list: where it comes from, where it goes, its folded status."""

    name: str
    project: str
    repo: str
    path: str
    revision: str
    clusters: list[str]
    sync_status: SyncStatus
    health: Health
    automated: bool
    deleting: bool
    suspended: bool = False  # no automated sync until resumed


class AppView(View):
    """An application: its spec, folded status, latest sync and operation, and each instance."""

    name: str
    project: str
    uid: str = Field(
        default="",
        description="the app's identity for life, in its objects' gitfleet.io/tracking ids",
    )
    spec: dict[str, Any]
    has_credentials: bool = Field(
        serialization_alias="hasCredentials",
        validation_alias=AliasChoices("hasCredentials", "has_credentials"),
    )
    deleting: bool
    suspended: bool = False  # no automated sync until resumed (`gitfleet app resume`)
    owner_set: str = ""  # the app set that generated it (it follows the set; "" none)
    created: str
    updated: str
    sync_status: SyncStatus
    health: Health
    revision: str
    last_sync: SyncRecord | None
    last_operation: Operation | None
    instances: list[InstanceView]
    warnings: list[str] = Field(
        default_factory=list,
        description="what a PUT did that its caller may not expect (git credentials dropped)",
    )


class HistoryView(View):
    """The sync history of each of an app's instances, newest first; a sync's record carries
    its stages' seconds and when each wave of its apply stage ran (`SyncRecord.waves`)."""

    app: str
    clusters: dict[str, list[HistoryRecord]]


class Accepted(View):
    """What a sync request answers (202): the trace to follow and each instance's job."""

    app: str
    trace_id: str
    jobs: tuple[OperationJob, ...]


class RollbackAccepted(Accepted):
    """A rollback's 202; `automated_paused`: it turned automated sync off."""

    revision: str
    automated_paused: bool


class BatchCreated(View):
    """What POST /apps/batch answers (201): the apps it created, in the order given."""

    created: tuple[str, ...]


class Deleted(View):
    """What DELETE answers: `deleted` at once (no cascade, or no instance), or `deleting` while
    each instance's worker prunes (202, with the trace and the jobs)."""

    app: str
    deleted: bool
    deleting: bool = False
    trace_id: str = ""
    jobs: tuple[OperationJob, ...] = ()


class ClusterDiff(View):
    """What a sync would change on one cluster; `pending`: its preview has not answered yet."""

    cluster: str
    pending: bool
    revision: str = ""
    error: str = ""
    changes: tuple[ResourceRecord, ...] = ()

    @classmethod
    def of(cls, cluster: str, preview: PreviewRecord | None) -> ClusterDiff:
        if preview is None:
            return cls(cluster=cluster, pending=True)
        changes = tuple(r for r in preview.resources if r.action != Action.UNCHANGED)
        return cls(
            cluster=cluster,
            pending=False,
            revision=preview.revision,
            error=preview.error,
            changes=changes,
        )


class DiffView(View):
    """What a sync would change on each cluster; `in_sync`: nothing, and no error."""

    app: str
    trace_id: str
    in_sync: bool
    clusters: list[ClusterDiff]


class Folded(Protocol):
    """What the folds read of an instance: an `InstanceView`, or the `InstanceStatus` itself
    (the UI's table folds 10,000 apps without building a view for each)."""

    @property
    def sync_status(self) -> SyncStatus: ...

    @property
    def health(self) -> Health: ...


def fold_sync(instances: Sequence[Folded]) -> SyncStatus:
    states = {i.sync_status for i in instances}
    if states == {SyncStatus.SYNCED}:
        return SyncStatus.SYNCED
    return SyncStatus.OUT_OF_SYNC if SyncStatus.OUT_OF_SYNC in states else SyncStatus.UNKNOWN


def fold_health(instances: Sequence[Folded]) -> Health:
    if not instances:
        return Health.UNKNOWN
    return worst([i.health for i in instances])


def instances_of(
    store: Store, record: AppRecord, clusters: list[ClusterRecord] | None = None
) -> list[InstanceView]:
    """Each target cluster's status; pass `clusters` when folding many apps at once."""
    statuses = store.log.statuses(record.name)
    return [InstanceView.of(c, statuses.get(c)) for c in store.instances(record, clusters)]


def summary(
    store: Store, record: AppRecord, clusters: list[ClusterRecord] | None = None
) -> AppSummary:
    return _summary(record, instances_of(store, record, clusters))


def summaries(store: Store, records: list[AppRecord]) -> list[AppSummary]:
    """`summary` of many apps (a page of the list), their statuses read in one round trip."""
    clusters = store.list_clusters()
    statuses = store.log.statuses_of([r.name for r in records])
    return [
        _summary(r, [InstanceView.of(c, found.get(c)) for c in store.instances(r, clusters)])
        for r, found in zip(records, statuses, strict=True)
    ]


def _summary(record: AppRecord, instances: list[InstanceView]) -> AppSummary:
    return AppSummary(
        name=record.name,
        project=record.project,
        repo=shown(record.source.repo),
        path=record.source.path,
        revision=record.source.revision,
        clusters=[i.cluster for i in instances],
        sync_status=fold_sync(instances),
        health=fold_health(instances),
        automated=record.sync_policy.automated,
        deleting=record.deleting,
        suspended=record.sync_policy.suspended,
    )


def app_view(store: Store, record: AppRecord) -> AppView:
    instances = instances_of(store, record)
    revisions = {i.revision for i in instances if i.revision}
    synced = [i.last_sync for i in instances if i.last_sync]
    last = max(synced, key=_finished, default=None)
    return AppView(
        name=record.name,
        project=record.project,
        uid=record.owner_uid,
        spec=AppIn.of(record).model_dump(by_alias=True, exclude={"credentials", "name"}),
        has_credentials=record.has_credentials,
        deleting=record.deleting,
        suspended=record.sync_policy.suspended,
        owner_set=record.owner_set,
        created=record.created,
        updated=record.updated,
        sync_status=fold_sync(instances),
        health=fold_health(instances),
        revision=revisions.pop() if len(revisions) == 1 else "",
        last_sync=last,
        last_operation=store.log.get_operation(record.name),
        instances=instances,
    )


def history_view(store: Store, app: str, clusters: list[str], limit: int) -> HistoryView:
    return HistoryView(app=app, clusters={c: store.log.history(app, c, limit) for c in clusters})


def _finished(record: SyncRecord) -> str:
    return record.finished.isoformat() if record.finished else ""
