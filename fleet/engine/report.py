"""What one stage of a sync did, and the fold of a sync's stage reports into its `SyncResult`.

Stages return a `StageReport`: the commit they pinned, what they rendered, the objects they
applied, failed, skipped or pruned, the writes they made, the differences they left in place on
purpose. `fleet.engine.sync` keeps the reports in stage order and `fold`s them at the end; no
stage reads or changes another stage's report. `fold` is pure: a later report's entry for an
object replaces an earlier one, and the sync status and application health are judged from
the folded entries and the error that stopped the sync, if any.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from fleet.engine.contract import (
    MAX_WAVE_TIMINGS,
    ResourceResult,
    SyncRequest,
    SyncResult,
    WaveTiming,
)
from fleet.engine.health import assess as health
from fleet.engine.syncplan import PlannedChange
from fleet.errors import FleetError, HealthTimeout
from fleet.model import Action, Health, ObjectRef, SyncStatus


@dataclass(frozen=True)
class StageReport:
    """What one stage did. Every field is optional: a stage fills in what it knows."""

    revision: str = ""  # source: the commit the revision resolved to
    rendered: bool = False  # render: the renderer ran (the cache did not have the render)
    fingerprint: str = ""  # render: what the desired state depends on (`sync.fingerprint_of`)
    inputs: tuple[str, ...] = ()  # render: repository paths the render read
    compared: bool = False  # diff: the desired objects were compared with the live ones
    resources: tuple[ResourceResult, ...] = ()  # objects acted on, in the order acted on
    writes: int = 0  # writes to the cluster: applies, deletes, the inventory
    undone: bool = False  # differences from git left in place on purpose (dry run, self-heal
    # paused by annotation, objects that need --prune), or not applied (a wave failed)
    note: str = ""  # what the status must say besides the error (`SyncResult.message`)
    plan: tuple[PlannedChange, ...] = ()  # a dry run's plan, and its digest (`syncplan`)
    plan_digest: str = ""
    waves: tuple[WaveTiming, ...] = ()  # apply: when each wave started and how long it took
    error: FleetError | None = None  # what stopped the stage, after the work reported above


def merge_resources(reports: Iterable[StageReport]) -> dict[ObjectRef, ResourceResult]:
    """Every object's entry, the latest report's winning, in the order first reported."""
    merged: dict[ObjectRef, ResourceResult] = {}
    for report in reports:
        merged.update((r.ref, r) for r in report.resources)
    return merged


def fold(
    request: SyncRequest,
    reports: Sequence[StageReport],
    *,
    error: FleetError | None,
    seconds: Mapping[str, float],
    trace_id: str,
    started: datetime,
    finished: datetime,
) -> SyncResult:
    """The `SyncResult` of a sync whose stages reported `reports` and that stopped on `error`
    (None when it ran to the end); `seconds` is how long each stage took. The waves are the
    latest report's that timed any (the apply stage's), the first `MAX_WAVE_TIMINGS` of them."""
    resources = merge_resources(reports)
    return SyncResult(
        app=request.app,
        revision=_latest(r.revision for r in reports),
        sync_status=sync_status(reports, resources.values(), error),
        health=app_health(resources.values(), error),
        started=started,
        finished=finished,
        trace_id=trace_id,
        resources=tuple(sorted(resources.values(), key=lambda r: (r.wave, r.ref))),
        error=str(error) if error else "",
        error_stage=error.stage if error else "",
        rendered=any(r.rendered for r in reports),
        writes=sum(r.writes for r in reports),
        stages=dict(seconds),
        fingerprint=_latest(r.fingerprint for r in reports),
        inputs=next((r.inputs for r in reversed(reports) if r.inputs), ()),
        message="; ".join(r.note for r in reports if r.note),
        plan=next((r.plan for r in reversed(reports) if r.plan_digest), ()),
        plan_digest=_latest(r.plan_digest for r in reports),
        waves=next((r.waves for r in reversed(reports) if r.waves), ())[:MAX_WAVE_TIMINGS],
    )


def sync_status(
    reports: Sequence[StageReport],
    resources: Iterable[ResourceResult],
    error: FleetError | None,
) -> SyncStatus:
    """Unknown when the sync stopped before it compared anything; OutOfSync when it failed (a
    health timeout aside: it applied what it reached), an object failed, or a difference was
    left in place (objects a failed wave never applied, a prune that did not run, included);
    else Synced."""
    if error is not None and not any(r.compared for r in reports):
        return SyncStatus.UNKNOWN
    failed = any(r.action == Action.FAILED for r in resources)
    if (error is not None and not isinstance(error, HealthTimeout)) or failed:
        return SyncStatus.OUT_OF_SYNC
    left = any(r.undone for r in reports)
    return SyncStatus.OUT_OF_SYNC if left else SyncStatus.SYNCED


def app_health(resources: Iterable[ResourceResult], error: FleetError | None) -> Health:
    """The worst health of the objects not pruned (an object never applied counts as Missing);
    with none, Unknown after an error."""
    statuses = [r.health for r in resources if r.action != Action.PRUNED]
    if not statuses:
        return Health.UNKNOWN if error else Health.HEALTHY
    return health.worst(statuses)


def _latest(values: Iterable[str]) -> str:
    return ([v for v in values if v] or [""])[-1]
