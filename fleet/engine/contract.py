"""What a sync is asked to do and what it reports: the contract between fleet.engine.sync and
callers.

The CLI, the worker and the benchmark build a `SyncRequest`; `fleet.engine.sync.run` returns a
`SyncResult` whose JSON form (`to_json`) is what `gitfleet sync -o json` prints; the coordinator's
sync records carry the same fields and a few more (`fleet.control.registry.syncrecords`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from fleet.engine.diff.compare import IgnoreRules
from fleet.engine.health.assess import HealthOptions
from fleet.engine.limits import Limits
from fleet.engine.plan.boundaries import Boundaries
from fleet.engine.plan.tracking import Owner
from fleet.engine.prune import PruneBudget
from fleet.engine.render.job import RenderParams
from fleet.engine.source.cache import GitCredentials
from fleet.engine.syncplan import PlanCheck, PlannedChange
from fleet.kube.kubeconfig import ServiceAccount
from fleet.model import Action, Health, ObjectRef, SyncStatus, Trigger


class SyncGuard(Protocol):
    """The holder's lease, as the engine sees it (the worker passes its `HeldLease`; the engine
    never imports Redis). `token` is the lease's fencing token, stamped into the inventory;
    calling the guard before a step raises `fleet.errors.LeaseLost` when the lease is no longer
    this sync's."""

    @property
    def token(self) -> int: ...

    def __call__(self, step: str) -> None: ...

    def advance(self, past: int) -> None:
        """Take a token greater than `past` (found in the cluster while the guard passes: the
        token counter was reset, e.g. a restored registry); LeaseLost when not current."""
        ...


@dataclass(frozen=True)
class NewerRequest:
    """A sync of the same instance requested while this one runs (the worker reads it from its
    pending syncs; the engine never imports Redis). `revision`: what it asks for (a commit,
    tag or branch); `key` differs from one request to the next, so each is resolved once."""

    revision: str
    key: str


NewerRequests = Callable[[], "NewerRequest | None"]
"""The newest sync requested for the instance while this one runs, or None."""


@dataclass(frozen=True)
class SyncRequest:
    """One application synced to one cluster."""

    app: str
    repo: str
    path: str
    revision: str = "HEAD"
    namespace: str = "default"
    credentials: GitCredentials | None = field(default=None, repr=False)
    render: RenderParams = field(default_factory=RenderParams)
    prune: bool = False
    allow_empty: bool = False
    create_namespace: bool = False
    force_conflicts: bool = True
    dry_run: bool = False
    timeout: float = 300.0
    ignore: IgnoreRules = field(default_factory=IgnoreRules)
    prune_kinds_allowed: frozenset[str] = frozenset()
    boundaries: Boundaries = field(default_factory=Boundaries)  # the project's, on this cluster
    service_account: ServiceAccount | None = None  # act as it: the client must impersonate it
    trigger: Trigger = Trigger.MANUAL
    # a retry of a failed sync (`Intent.is_retry`): it runs its hooks even with nothing to apply
    retry: bool = field(default=False, repr=False, compare=False)
    fetch_max_age: float = 0.0  # reuse a fetch of the repo younger than this (periodic syncs)
    # reuse a fetch of the repo begun at or after this `time.monotonic()` of the worker: the
    # sync's own quiet check made it (`SourceCache.resolve`); process-local, so no knob
    fetched_since: float | None = field(default=None, repr=False, compare=False)
    limits: Limits = field(default_factory=Limits)  # the project's bounds on fetch and render
    health: HealthOptions = field(default_factory=HealthOptions)  # the app's health choices
    # Who the app is (`tracking.Owner`): the registry's uid for life; without one (the one-shot
    # CLI, tests) a uid derived from the name, so repeated runs are one app. `adopt_legacy`: the
    # app predates uids, so it adopts its legacy inventory (`fleet.engine.inventory`).
    app_uid: str = ""
    project: str = ""
    adopt_legacy: bool = False
    # The lease this sync holds (None: standalone, unfenced). Checked before the inventory
    # claim, the Namespaces and CRDs validation writes, each tier of a wave, each batch of
    # deletes and the record, and at each poll of a health wait; its token fences the
    # inventory write.
    guard: SyncGuard | None = field(default=None, repr=False, compare=False)
    # A hint that the instance was never synced (the worker's first lease of it): a fenced sync
    # then presumes it has no inventory instead of reading one, and creates it before its first
    # write (`fleet.engine.inventory.InventoryStore.claim`); a wrong hint costs requests only.
    first_sync: bool = field(default=False, repr=False, compare=False)  # not in the fingerprint
    # Asked at each safe point of a wave's health wait: a newer revision requested meanwhile
    # cancels the wait and the sync re-plans with it (`fleet.engine.supersede`).
    newer: NewerRequests | None = field(default=None, repr=False, compare=False)
    # Prune options (`fleet.engine.prune`): the most one sync may delete, unless a person
    # allowed this sync over it; the delete calls' propagationPolicy (API spelling).
    prune_budget: PruneBudget = field(default_factory=PruneBudget)
    allow_prune_over_budget: bool = False
    prune_propagation: str = "Background"
    # Run exactly a stored plan (`fleet.engine.syncplan`): called before the first write with
    # the resolved commit and the digest of what the sync would do; raises PlanMoved.
    plan_check: PlanCheck | None = field(default=None, repr=False, compare=False)

    @property
    def fence(self) -> int:
        """The fencing token this sync writes with (0: unfenced)."""
        return self.guard.token if self.guard is not None else 0

    def check_lease(self, step: str) -> None:
        """Raise `LeaseLost` before `step` when the lease is no longer this sync's."""
        if self.guard is not None:
            self.guard(step)

    @property
    def owner(self) -> Owner:
        uid = self.app_uid or str(uuid.uuid5(uuid.NAMESPACE_URL, f"gitfleet:app:{self.app}"))
        return Owner(self.app, uid, self.project)

    @property
    def allowed_namespaces(self) -> tuple[str, ...] | None:
        return self.boundaries.namespaces

    @property
    def allowed_cluster_kinds(self) -> frozenset[str] | None:
        return self.boundaries.cluster_kinds


@dataclass(frozen=True)
class ResourceResult:
    ref: ObjectRef
    wave: int
    action: Action
    health: Health
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            **self.ref.to_json(),
            "wave": self.wave,
            "action": str(self.action),
            "health": str(self.health),
            "message": self.message,
        }


MAX_WAVE_TIMINGS = 50
"""The most waves a sync result (and its record) times; the later ones are left out."""


@dataclass(frozen=True)
class WaveTiming:
    """When one wave of the apply stage ran: its phase (PreSync, Sync, PostSync, SyncFail for
    the SyncFail hooks) and number, seconds from the start of the apply stage to its start,
    how long it took (applies and health wait), its objects, and whether it failed."""

    phase: str
    number: int
    offset: float
    seconds: float
    objects: int
    failed: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "number": self.number,
            "offset": self.offset,
            "seconds": self.seconds,
            "objects": self.objects,
            "failed": self.failed,
        }


@dataclass(frozen=True)
class SyncResult:
    app: str
    revision: str
    sync_status: SyncStatus
    health: Health
    started: datetime
    finished: datetime
    trace_id: str
    resources: tuple[ResourceResult, ...] = ()
    error: str = ""
    error_stage: str = ""
    rendered: bool = False
    writes: int = 0
    stages: dict[str, float] = field(default_factory=dict)
    fingerprint: str = ""
    inputs: tuple[str, ...] = ()  # repository paths the render read (`fleet.control.pushes`)
    # What else the status must say: a wave wait cancelled for a newer revision, objects a
    # failed wave left unapplied, a prune that did not run.
    message: str = ""
    # A dry run's plan (`fleet.engine.syncplan`): every object's change, and their digest.
    plan: tuple[PlannedChange, ...] = ()
    plan_digest: str = ""
    waves: tuple[WaveTiming, ...] = ()  # the apply stage's waves, in the order they ran

    @property
    def succeeded(self) -> bool:
        return not self.error and self.sync_status == SyncStatus.SYNCED

    def to_json(self) -> dict[str, Any]:
        return {
            "app": self.app,
            "revision": self.revision,
            "sync_status": str(self.sync_status),
            "health": str(self.health),
            "started": self.started.isoformat(),
            "finished": self.finished.isoformat(),
            "trace_id": self.trace_id,
            "error": self.error,
            "error_stage": self.error_stage,
            "rendered": self.rendered,
            "writes": self.writes,
            "stages": dict(self.stages),
            "fingerprint": self.fingerprint,
            "inputs": list(self.inputs),
            "message": self.message,
            "resources": [r.to_json() for r in self.resources],
            "waves": [w.to_json() for w in self.waves],
            **(
                {"plan": [c.to_json() for c in self.plan], "plan_digest": self.plan_digest}
                if self.plan_digest
                else {}
            ),
        }
