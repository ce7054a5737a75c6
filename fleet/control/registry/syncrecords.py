"""The records a sync leaves behind: each instance's status and its sync history; and the
records around them: the last operation requested through the API, and a preview's answer.

Workers write them and the coordinator, the scheduler and the benchmark read them, so they are
frozen dataclasses read and written through pydantic (`TypeAdapter`), never dicts read by key
name. Their JSON is what the API returns (`api.views`), field for field:

- `SyncRecord`: one sync, `SyncResult.to_json()` plus what the worker knows (cluster, trigger,
  attempt, merged requests, worker, outcome, duration);
- `SkipRecord`: a sync a window blocked, with the window's reason as its message;
- `InstanceStatus`: the current state of one instance: the last sync's status, health,
  revision and objects, the last sync itself, and the latest message (a skip, a wait, a delete);
- `Operation`: the last sync, rollback or delete requested through the API, with its jobs;
- `PreviewRecord`: what a preview (dry-run) job answers, which `GET .../diff` shows.

Records written by an older version still read: every field that was added later has a
default, and unknown fields are ignored. A record without `result` or `duration_s` (older
than both) is judged by `outcome` and `seconds`, as the counters always judged it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from sys import intern
from typing import Annotated, Any, Literal

import orjson
from pydantic import BeforeValidator, Discriminator, Field, PlainSerializer, Tag, TypeAdapter

from fleet.engine.contract import MAX_WAVE_TIMINGS, ResourceResult, SyncResult, WaveTiming
from fleet.model import Action, Health, ObjectRef, Outcome, SyncStatus, Trigger


def _iso(stamp: datetime) -> str:
    return stamp.isoformat()


def _trigger(value: Any) -> Any:
    return value or Trigger.RETRY  # an intent without a trigger runs as a retry (`Intent`)


Stamp = Annotated[datetime, PlainSerializer(_iso, return_type=str, when_used="json")]
"""A timestamp, in JSON as `datetime.isoformat()` writes it (`+00:00`, not `Z`)."""

AnyTrigger = Annotated[Trigger, BeforeValidator(_trigger)]


@dataclass(frozen=True, kw_only=True)
class ResourceRecord:
    """One object of a sync and what the sync did to it (`ResourceResult.to_json()`)."""

    group: str = ""
    version: str
    kind: str
    namespace: str = ""
    name: str
    wave: int = 0
    action: Action
    health: Health = Health.UNKNOWN
    message: str = ""

    @classmethod
    def of(cls, result: ResourceResult) -> ResourceRecord:
        ref = result.ref
        return cls(
            group=ref.group,
            version=ref.version,
            kind=ref.kind,
            namespace=ref.namespace,
            name=ref.name,
            wave=result.wave,
            action=result.action,
            health=result.health,
            message=result.message,
        )

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef(self.group, self.version, self.kind, self.namespace, self.name)

    @property
    def declared(self) -> bool:
        """The sync left the object in the cluster (it neither pruned it nor failed on it)."""
        return self.action not in (Action.PRUNED, Action.FAILED)


@dataclass(frozen=True, kw_only=True)
class WaveRecord:
    """When one wave of the apply stage ran (`WaveTiming.to_json()`): `offset` seconds after
    the apply stage started, for `seconds`, with `objects` objects; `failed`: the wave failed."""

    phase: str = "Sync"
    number: int = 0
    offset: float = 0.0
    seconds: float = 0.0
    objects: int = 0
    failed: bool = False

    @classmethod
    def of(cls, timing: WaveTiming) -> WaveRecord:
        return cls(
            phase=timing.phase,
            number=timing.number,
            offset=timing.offset,
            seconds=timing.seconds,
            objects=timing.objects,
            failed=timing.failed,
        )


@dataclass(frozen=True, kw_only=True)
class SyncRecord:
    """One sync of one instance. `result`: succeeded (no error) or failed; `stages`: seconds
    per stage; `waves`: when each wave of the apply stage ran (at most `MAX_WAVE_TIMINGS`);
    `fingerprint`: what the desired state depended on (`worker.quiet`)."""

    app: str
    revision: str = ""
    sync_status: SyncStatus = SyncStatus.UNKNOWN
    health: Health = Health.UNKNOWN
    started: Stamp | None = None
    finished: Stamp | None = None
    trace_id: str = ""
    error: str = ""
    error_stage: str = ""
    rendered: bool = False
    writes: int = 0
    stages: dict[str, float] = field(default_factory=dict)
    fingerprint: str = ""
    inputs: tuple[str, ...] = ()
    resources: tuple[ResourceRecord, ...] = ()
    cluster: str
    trigger: AnyTrigger
    attempt: int = 0
    requests: int = 1
    worker: str = ""
    result: Outcome | None = None
    duration_s: float | None = None
    message: str = ""  # `SyncResult.message`: a cancelled wait, objects not applied
    waves: tuple[WaveRecord, ...] = ()  # none in a record older than wave timings

    @classmethod
    def of(
        cls,
        result: SyncResult,
        *,
        cluster: str,
        trigger: Trigger,
        attempt: int = 0,
        requests: int = 1,
        worker: str = "",
    ) -> SyncRecord:
        """The record of `result`, synced to `cluster` for `trigger`."""
        return cls(
            app=result.app,
            revision=result.revision,
            sync_status=result.sync_status,
            health=result.health,
            started=result.started,
            finished=result.finished,
            trace_id=result.trace_id,
            error=result.error,
            error_stage=result.error_stage,
            rendered=result.rendered,
            writes=result.writes,
            stages=dict(result.stages),
            fingerprint=result.fingerprint,
            inputs=result.inputs,
            resources=tuple(ResourceRecord.of(r) for r in result.resources),
            cluster=cluster,
            trigger=trigger,
            attempt=attempt,
            requests=requests,
            worker=worker,
            result=Outcome.FAILED if result.error else Outcome.SUCCEEDED,
            duration_s=(result.finished - result.started).total_seconds(),
            message=result.message,
            waves=tuple(WaveRecord.of(w) for w in result.waves[:MAX_WAVE_TIMINGS]),
        )

    @property
    def outcome(self) -> Outcome:
        """`result`; for a record older than it, succeeded when it ended Synced without error."""
        if self.result is not None:
            return self.result
        ok = not self.error and self.sync_status == SyncStatus.SYNCED
        return Outcome.SUCCEEDED if ok else Outcome.FAILED

    @property
    def seconds(self) -> float | None:
        """`duration_s`, or for a record older than it, finished minus started."""
        if self.duration_s is not None:
            return self.duration_s
        return _between(self.started, self.finished)


@dataclass(frozen=True, kw_only=True)
class SkipRecord:
    """A sync a sync window blocked; `message` is the window's reason."""

    app: str
    cluster: str
    trigger: AnyTrigger
    result: Outcome = Outcome.SKIPPED
    message: str = ""
    error: str = ""
    revision: str = ""
    started: Stamp | None = None
    finished: Stamp | None = None
    trace_id: str = ""
    worker: str = ""
    resources: tuple[ResourceRecord, ...] = ()

    @property
    def outcome(self) -> Outcome:
        return self.result

    @property
    def seconds(self) -> float | None:
        return _between(self.started, self.finished)


def _between(started: datetime | None, finished: datetime | None) -> float | None:
    if started is None or finished is None:
        return None
    return (finished - started).total_seconds()


def _history_kind(value: Any) -> str:
    result = value.get("result") if isinstance(value, dict) else getattr(value, "result", None)
    return "skip" if result == Outcome.SKIPPED else "sync"


HistoryRecord = Annotated[
    Annotated[SyncRecord, Tag("sync")] | Annotated[SkipRecord, Tag("skip")],
    Discriminator(_history_kind),
]
"""An entry of an instance's sync history: a sync, or a skip (told apart by `result`)."""


@dataclass(frozen=True, kw_only=True)
class DriftRecord:
    """One declared field another manager changed in the cluster (`worker.drift`): the object,
    the field (`spec.replicas`), the manager that owns it now and how it wrote it (operation,
    subresource such as `scale`); `field` "" with operation `Delete` is the object deleted.
    `self_heal`: self-heal was asked to revert it (else it is only reported: self-heal or
    automated sync is off)."""

    group: str = ""
    kind: str
    namespace: str = ""
    name: str
    field: str = ""
    manager: str = ""
    operation: str = ""
    subresource: str = ""
    at: Stamp | None = None
    self_heal: bool = False

    def describe(self) -> str:
        where = "/".join(part for part in (self.kind, self.namespace, self.name) if part)
        if self.operation == "Delete" and not self.field:
            return f"{where} deleted"
        how = f" via /{self.subresource}" if self.subresource else ""
        return f"{where} {self.field or '(object)'} changed by {self.manager or 'unknown'}{how}"


@dataclass(frozen=True, kw_only=True)
class InstanceStatus:
    """The current state of one instance. `message`: the latest thing a person should read (the
    last error, a skip's or a wait's reason, a delete); `deleted`: a cascading delete pruned the
    instance; `checked`: a quiet periodic check found nothing to do (`worker.quiet`); `updated`:
    when this status was written."""

    sync_status: SyncStatus = SyncStatus.UNKNOWN
    health: Health = Health.UNKNOWN
    revision: str = ""
    resources: tuple[ResourceRecord, ...] = ()
    last_sync: SyncRecord | None = None
    error: str = ""
    message: str = ""
    deleted: bool = False
    checked: Stamp | None = None
    updated: Stamp | None = None
    drift: tuple[DriftRecord, ...] = ()


@dataclass(frozen=True, kw_only=True)
class OperationJob:
    """The job an operation enqueued for one instance; `merged`: the request joined a sync
    already pending for it (`fleet.control.routing.pending`)."""

    cluster: str
    job_id: str
    queue: str
    merged: bool


@dataclass(frozen=True, kw_only=True)
class SyncOperation:
    """`POST .../sync`: a sync at `revision` (None: the app's own), or only a dry run."""

    kind: Literal["sync"] = "sync"
    revision: str | None = None
    dry_run: bool = False
    by: str
    trace_id: str = ""
    jobs: tuple[OperationJob, ...] = ()
    at: Stamp | None = None


@dataclass(frozen=True, kw_only=True)
class RollbackOperation:
    """`POST .../rollback`: a sync at an earlier `revision`; `automated_paused`: it turned
    automated sync off."""

    kind: Literal["rollback"] = "rollback"
    revision: str
    automated_paused: bool = False
    by: str
    trace_id: str = ""
    jobs: tuple[OperationJob, ...] = ()
    at: Stamp | None = None


@dataclass(frozen=True, kw_only=True)
class DeleteOperation:
    """`DELETE` with cascade: every instance prunes what the app owns."""

    kind: Literal["delete"] = "delete"
    cascade: bool = True
    by: str
    trace_id: str = ""
    at: Stamp | None = None


Operation = Annotated[
    SyncOperation | RollbackOperation | DeleteOperation, Field(discriminator="kind")
]
"""The last operation requested through the API for an app, told apart by `kind`; `at`: when
it was stored."""


@dataclass(frozen=True, kw_only=True)
class PreviewRecord:
    """What a preview job answers (`SyncResult.to_json()` of a dry run, or its error): the
    revision it rendered and what a sync would do to each object."""

    revision: str = ""
    error: str = ""
    resources: tuple[ResourceRecord, ...] = ()


STATUS: TypeAdapter[InstanceStatus] = TypeAdapter(InstanceStatus)
HISTORY: TypeAdapter[SyncRecord | SkipRecord] = TypeAdapter(HistoryRecord)
OPERATION: TypeAdapter[Operation] = TypeAdapter(Operation)
PREVIEW: TypeAdapter[PreviewRecord] = TypeAdapter(PreviewRecord)

_NOT_DECLARED = frozenset({str(Action.PRUNED), str(Action.FAILED)})
_ACTIONS = frozenset(str(a) for a in Action)


def declared_refs(raw: bytes) -> set[ObjectRef]:
    """The objects a stored status says its last sync left in the cluster: `ResourceRecord`s
    with a kind and `declared`. A worker's self-heal reloads every status of its shard once a
    minute for only this, so it reads the JSON with orjson and takes the fields it needs,
    about a tenth of validating the whole record. A resource whose action is not one this
    version knows, or whose name fields are not strings, sends the record through `STATUS`
    (and its error, as a full read would); the fields it does not read are not checked."""
    try:
        found = orjson.loads(raw).get("resources", ())
        refs = set()
        for r in found:
            parts = (r.get("group", ""), r["version"], r["kind"], r.get("namespace", ""), r["name"])
            if r["action"] not in _ACTIONS or not all(type(p) is str for p in parts):
                raise TypeError("not a resource record as this version writes it")
            if parts[2] and r["action"] not in _NOT_DECLARED:
                group, version, kind, namespace, name = parts  # kept for long: share repeats
                refs.add(
                    ObjectRef(intern(group), intern(version), intern(kind), intern(namespace), name)
                )
        return refs
    except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError):
        status = STATUS.validate_json(raw)
        return {r.ref for r in status.resources if r.declared and r.kind}
