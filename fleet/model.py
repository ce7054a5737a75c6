"""Shared vocabulary of the pipeline: object references, statuses, the object type, and what
asks for a sync (`Trigger`) and how a sync job ended (`Outcome`).

Objects travel through the pipeline as plain dicts (`Manifest`), exactly as the API server
speaks them; references and results are frozen dataclasses so they hash and compare.

Triggers and outcomes live here, below the engine, because every layer speaks them: the API and
the scheduler ask with a trigger, the pending sync merges by it, the engine respects a paused
self-heal unless a person asked, and workers record both in the sync history.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

Manifest = dict[str, Any]


class Health(StrEnum):
    HEALTHY = "Healthy"
    PROGRESSING = "Progressing"
    DEGRADED = "Degraded"
    SUSPENDED = "Suspended"
    MISSING = "Missing"
    UNKNOWN = "Unknown"


class SyncStatus(StrEnum):
    SYNCED = "Synced"
    OUT_OF_SYNC = "OutOfSync"
    UNKNOWN = "Unknown"


class Trigger(StrEnum):
    """What asked for a sync. The two questions every layer asks of one are properties, so the
    answer is written once: `by_person` and `automated` (no trigger is both)."""

    MANUAL = "manual"  # POST /apps/{name}/sync
    ROLLBACK = "rollback"  # POST /apps/{name}/rollback: a manual sync at an older revision
    CLI = "cli"  # `gitfleet sync`, run by a person without a coordinator
    WEBHOOK = "webhook"  # a push to the app's repository (/webhooks/git)
    INTERVAL = "interval"  # the scheduler: the app's sync interval passed
    SELF_HEAL = "self-heal"  # a worker's watch saw a declared object drift
    DELETE = "delete"  # a cascading DELETE /apps/{name}: prune the instance
    DIFF = "diff"  # GET /apps/{name}/diff: a dry run
    RETRY = "retry"  # a deferred sync whose request was lost
    ROLLOUT = "rollout"  # a progressive rollout's step (`fleet.control.rollouts`)

    @property
    def by_person(self) -> bool:
        """A person asked and waits: the request wins when it merges with an automated one
        (`fleet.control.routing.pending.merged`), and it applies objects whose self-heal is
        paused (`fleet.engine.apply.diff_live`)."""
        return self in _BY_PERSON

    @property
    def automated(self) -> bool:
        """Sync windows judge it as an automated sync (`WindowVerdict.automated_allowed`);
        every other trigger as a manual one."""
        return self in _AUTOMATED

    @property
    def may_be_quiet(self) -> bool:
        """A worker may answer it with a quiet check (`worker.quiet`) instead of a full sync,
        so it never replaces a rollout step's sync when the two merge (`pending.merged`)."""
        return self in _MAY_BE_QUIET


_BY_PERSON = frozenset({Trigger.MANUAL, Trigger.ROLLBACK, Trigger.CLI})
_AUTOMATED = frozenset({Trigger.WEBHOOK, Trigger.INTERVAL, Trigger.SELF_HEAL, Trigger.ROLLOUT})
_MAY_BE_QUIET = frozenset({Trigger.INTERVAL, Trigger.WEBHOOK})


class Outcome(StrEnum):
    """How one sync job ended, as the sync history, the journal and the job's answer say it."""

    SUCCEEDED = "succeeded"  # the sync ran to the end without an error
    FAILED = "failed"  # the sync, or a delete's prune, stopped on an error (retried by policy)
    SKIPPED = "skipped"  # a sync window blocks the trigger, or the instance is gone
    UNCHANGED = "unchanged"  # a quiet periodic check: git and the cluster unchanged
    WAITING = "waiting"  # a dependency is not Healthy yet (deferred with backoff)
    DELETED = "deleted"  # a cascading delete pruned the instance
    DEFERRED = "deferred"  # another worker holds the instance's lease (deferred a second)
    SUPERSEDED = "superseded"  # a stale job: a newer one, or another worker, owns the sync


class Action(StrEnum):
    CREATED = "created"
    CONFIGURED = "configured"
    UNCHANGED = "unchanged"
    PRUNED = "pruned"
    SKIPPED = "skipped"
    FAILED = "failed"


@dataclass(frozen=True)
class HealthStatus:
    """The health of one object and the reason a person can read."""

    health: Health
    message: str = ""


def split_api_version(api_version: str) -> tuple[str, str]:
    """Split `apps/v1` into (`apps`, `v1`) and `v1` into (``, `v1`)."""
    group, _, version = api_version.rpartition("/")
    return group, version


@dataclass(frozen=True, order=True, slots=True)
class ObjectRef:
    """Identity of one Kubernetes object. Prints as `Kind/namespace/name`."""

    group: str
    version: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, obj: Manifest) -> ObjectRef:
        group, version = split_api_version(str(obj.get("apiVersion", "")))
        meta = obj.get("metadata") or {}
        return cls(
            group=group,
            version=version,
            kind=str(obj.get("kind", "")),
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
        )

    def to_json(self) -> dict[str, str]:
        """The five fields by name, as every JSON record that names an object spells them."""
        return {
            "group": self.group,
            "version": self.version,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
        }

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_kind(self) -> str:
        return f"{self.group}/{self.kind}" if self.group else self.kind

    def __str__(self) -> str:
        if self.namespace:
            return f"{self.kind}/{self.namespace}/{self.name}"
        return f"{self.kind}/{self.name}"
