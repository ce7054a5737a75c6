"""Reviewable sync plans, and one-time allowances to prune over an app's budget.

A plan (`StoredPlan`) is what a sync of an app would do on each of its clusters, computed by a
dry run on the workers (`fleet.engine.syncplan`: per object create, update with the changed
fields, delete, hook, with its wave) and kept in Redis under an id for `PLAN_TTL_S`, with the
token that made it (`created_by`) and the uid and project of the app it was made for. A writer
of the app's project other than the token that made it may approve it (`approve`): four eyes,
admins included; a plan approved by its own maker does not count as approved. A sync told to
run a plan of another app, or of an earlier app of the same name, is refused by the API
(`api.routes.plans.sync_gate`). A sync told to run a plan
(`queue_run`, read back by the worker with `take_run`) runs at the plan's revision and, before
its first write, compares the resolved commit and the digest of what it would do now with the
plan's (`check_for`): any difference refuses the sync (`PlanMoved`) and nothing is written.

A project may require an approved plan for syncs to chosen clusters (`ProjectRecord
.require_plan_for`, cluster globs): every sync there, automated ones included, waits until
a person runs an approved plan (`required_reason`).

Queued runs and prune allowances are kept per instance and app uid, so a later app of the same
name (a new uid) inherits neither.

Keys: `Keys.plan` (`id:<id>`, `run:<app@cluster>/<uid>`, `prune-allow:<app@cluster>/<uid>`).
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from typing import Any

from redis import Redis

from fleet.control.keys import Keys
from fleet.control.registry.records import ProjectRecord, from_json, to_json
from fleet.engine.syncplan import PlanCheck, PlanMoved
from fleet.errors import FleetError

PLAN_TTL_S = 7 * 24 * 3600  # a plan older than a week is gone
RUN_TTL_S = 3600  # a queued plan run or prune allowance unused for an hour lapses


class PlanNotFound(FleetError):
    stage = "plan"


class SelfApproval(FleetError):
    """The token that made a plan tried to approve it."""

    stage = "plan"


@dataclass(frozen=True)
class ClusterPlan:
    """What a sync would do on one cluster: at `revision` (the resolved commit), the changes
    (`PlannedChange.to_json` each) and their digest; `error` when the dry run failed."""

    cluster: str
    revision: str = ""
    digest: str = ""
    changes: tuple[dict[str, Any], ...] = ()
    error: str = ""
    message: str = ""


@dataclass(frozen=True)
class StoredPlan:
    """A plan of app `app`. `requested_revision`: what the plan was asked for ("" the app's
    own revision), which the sync that runs it resolves again. `created_by`: the name of the
    token that made it ("" a plan stored before it was recorded: `by` then), which may not
    approve it. `app_uid`: the `AppRecord.owner_uid` of the app it was made for ("" a plan
    stored before it was recorded, which no sync runs)."""

    id: str
    app: str
    project: str
    requested_revision: str
    clusters: tuple[ClusterPlan, ...]
    created: str
    by: str
    approved_by: str = ""
    approved_at: str = ""
    created_by: str = ""
    app_uid: str = ""

    @property
    def maker(self) -> str:
        return self.created_by or self.by

    @property
    def approved(self) -> bool:
        """Approved by a token other than the one that made it (four eyes)."""
        return bool(self.approved_by) and bool(self.maker) and self.approved_by != self.maker

    def on(self, cluster: str) -> ClusterPlan | None:
        return next((c for c in self.clusters if c.cluster == cluster), None)


def new_id() -> str:
    return uuid.uuid4().hex[:16]


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def requires_plan(project: ProjectRecord, cluster: str) -> bool:
    """Whether `project` requires an approved plan for syncs to `cluster`."""
    return any(fnmatchcase(cluster, glob) for glob in project.require_plan_for)


def required_reason(app: str, project: ProjectRecord, cluster: str) -> str:
    return (
        f"waiting for an approved plan: project {project.name} requires one for syncs to "
        f"cluster {cluster}; make one with `gitfleet app plan {app} --cluster {cluster}`, have "
        f"it approved (`gitfleet app plan approve ID`), then `gitfleet app sync {app} --plan ID`"
    )


def check_for(plan: StoredPlan, cluster: str) -> PlanCheck:
    """The engine's `plan_check` for running `plan` on `cluster`."""
    found = plan.on(cluster)
    if found is None or found.error:
        raise PlanMoved(f"plan {plan.id} has no usable plan for cluster {cluster}", cluster=cluster)

    def check(commit: str, digest: str) -> None:
        if commit != found.revision:
            raise PlanMoved(
                f"plan {plan.id} refused: the revision moved since the plan was made "
                f"({found.revision[:12]} then, {commit[:12]} now); nothing was written. Make a "
                f"new plan with `gitfleet app plan {plan.app}`",
                cluster=cluster,
            )
        if digest != found.digest:
            raise PlanMoved(
                f"plan {plan.id} refused: the cluster moved since the plan was made (what the "
                f"sync would do differs from the plan); nothing was written. Make a new plan "
                f"with `gitfleet app plan {plan.app}`",
                cluster=cluster,
            )

    return check


class PlanStore:
    def __init__(self, redis: Redis, *, prefix: str = "gitfleet") -> None:
        self.redis, self.keys = redis, Keys(prefix)

    def save(self, plan: StoredPlan) -> StoredPlan:
        self.redis.set(self.keys.plan(f"id:{plan.id}"), to_json(plan), ex=PLAN_TTL_S)
        return plan

    def get(self, plan_id: str) -> StoredPlan:
        raw = self.redis.get(self.keys.plan(f"id:{plan_id}"))
        if raw is None:
            raise PlanNotFound(
                f"plan {plan_id} not found (plans are kept {PLAN_TTL_S // 86400} days)"
            )
        return from_json(StoredPlan, raw)

    def approve(self, plan_id: str, by: str) -> StoredPlan:
        """Approve plan `plan_id` as token `by`, which must not be the token that made it
        (`SelfApproval`)."""
        found = self.get(plan_id)
        if not found.maker or by == found.maker:
            raise SelfApproval(
                f"plan {plan_id} was made by token {found.maker or '(unknown)'}: a second "
                f"person must approve it (four eyes; admins too), with a token of their own"
            )
        plan = dataclasses.replace(found, approved_by=by, approved_at=now())
        key = self.keys.plan(f"id:{plan_id}")
        self.redis.set(key, to_json(plan), keepttl=True)
        return plan

    def _slot(self, kind: str, instance: str, app_uid: str) -> str:
        if not app_uid:
            raise ValueError(f"no app uid for {kind} of {instance}")
        return self.keys.plan(f"{kind}:{instance}/{app_uid}")

    def queue_run(self, instance: str, plan_id: str, *, app_uid: str) -> None:
        """The next sync of `instance`, of the app with uid `app_uid`, runs plan `plan_id`."""
        self.redis.set(self._slot("run", instance, app_uid), plan_id, ex=RUN_TTL_S)

    def queued_run(self, instance: str, *, app_uid: str) -> str:
        raw = self.redis.get(self._slot("run", instance, app_uid))
        return raw.decode() if isinstance(raw, bytes) else str(raw or "")

    def take_run(self, instance: str, *, app_uid: str) -> str:
        """The plan id the next sync of `instance` (app uid `app_uid`) runs, once ("" none)."""
        raw = self.redis.getdel(self._slot("run", instance, app_uid))
        return raw.decode() if isinstance(raw, bytes) else str(raw or "")

    def allow_prune(self, instance: str, *, app_uid: str) -> None:
        """The next sync of `instance` (app uid `app_uid`) may prune over the app's budget."""
        self.redis.set(self._slot("prune-allow", instance, app_uid), "1", ex=RUN_TTL_S)

    def take_prune_allowance(self, instance: str, *, app_uid: str) -> bool:
        return self.redis.getdel(self._slot("prune-allow", instance, app_uid)) is not None

    def take_both(self, instance: str, *, app_uid: str) -> tuple[str, bool]:
        """`take_run` and `take_prune_allowance` in one round trip (what every sync asks)."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.getdel(self._slot("run", instance, app_uid))
        pipe.getdel(self._slot("prune-allow", instance, app_uid))
        run, allowed = pipe.execute()
        return (run.decode() if isinstance(run, bytes) else str(run or "")), allowed is not None


__all__ = [
    "ClusterPlan",
    "PlanNotFound",
    "PlanStore",
    "SelfApproval",
    "StoredPlan",
    "check_for",
    "required_reason",
    "requires_plan",
]
