"""The mutable record of one sync in progress, turned into a `SyncResult` at the end."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from fleet.engine.contract import ResourceResult, SyncRequest, SyncResult
from fleet.engine.health import assess as health
from fleet.errors import FleetError, HealthTimeout
from fleet.model import Action, Health, ObjectRef, SyncStatus

if TYPE_CHECKING:
    from fleet.engine.apply import Decision
    from fleet.engine.plan.order import SyncPlan


@dataclass
class SyncState:
    request: SyncRequest
    trace_id: str = ""
    revision: str = ""
    rendered: bool = False
    writes: int = 0
    create_namespace: str = ""
    pending_prune: bool = False
    drift_left: bool = False
    error: FleetError | None = None
    diffed: bool = False
    results: dict[ObjectRef, ResourceResult] = field(default_factory=dict)
    decisions: dict[ObjectRef, Decision] = field(default_factory=dict)
    stages: dict[str, float] = field(default_factory=dict)
    fingerprint: str = ""
    inputs: tuple[str, ...] = ()

    def add(
        self, ref: ObjectRef, wave: int, action: Action, health_: Health, message: str = ""
    ) -> None:
        self.results[ref] = ResourceResult(ref, wave, action, health_, message)

    def update_health(self, ref: ObjectRef, health_: Health, message: str) -> None:
        old = self.results.get(ref)
        if old is not None and old.action != Action.FAILED:
            keep = old.action == Action.SKIPPED and old.message
            text = old.message if keep else message
            self.results[ref] = ResourceResult(ref, old.wave, old.action, health_, text)

    def fail(self, error: FleetError) -> None:
        self.error = error

    def record_preview(self, decisions: dict[ObjectRef, Decision], plan: SyncPlan) -> None:
        self.decisions = decisions
        waves = {s.ref: s.wave for w in plan.waves for s in w.steps}
        for ref, d in decisions.items():
            message = "would apply" if d.apply else ""
            status = health.assess(d.live) if d.live else health.assess_missing(ref)
            self.add(ref, waves.get(ref, 0), d.action, status.health, message or status.message)
        self.pending_prune = any(d.apply for d in decisions.values())

    def sync_status(self) -> SyncStatus:
        if self.error is not None and not self.diffed:
            return SyncStatus.UNKNOWN
        failed = any(r.action == Action.FAILED for r in self.results.values())
        if (self.error is not None and not isinstance(self.error, HealthTimeout)) or failed:
            return SyncStatus.OUT_OF_SYNC
        left = self.pending_prune or self.drift_left
        return SyncStatus.OUT_OF_SYNC if left else SyncStatus.SYNCED

    def app_health(self) -> Health:
        statuses = [r.health for r in self.results.values() if r.action != Action.PRUNED]
        if not statuses:
            return Health.UNKNOWN if self.error else Health.HEALTHY
        return health.worst(statuses)

    def outcome(self) -> str:
        if self.error is not None:
            return f"failed ({self.error.stage})"
        return "succeeded"

    def result(self, *, started: datetime, finished: datetime) -> SyncResult:
        ordered = sorted(self.results.values(), key=lambda r: (r.wave, r.ref))
        return SyncResult(
            app=self.request.app,
            revision=self.revision,
            sync_status=self.sync_status(),
            health=self.app_health(),
            started=started,
            finished=finished,
            trace_id=self.trace_id,
            resources=tuple(ordered),
            error=str(self.error) if self.error else "",
            error_stage=self.error.stage if self.error else "",
            rendered=self.rendered,
            writes=self.writes,
            stages=dict(self.stages),
            fingerprint=self.fingerprint,
            inputs=self.inputs,
        )
