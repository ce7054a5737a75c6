"""A sync's plan: what it would do to each object, and a digest that pins it.

Pure. `changes` turns stage 4's decisions, the ordered plan (waves and hooks) and the prune plan
into one `PlannedChange` per object: create, update (with the changed fields, as JSON pointers
into the desired object, and the fields it would remove), delete, hook, unchanged or skip, each
with its wave. `digest` hashes the revision and the changes: a stored plan
(`fleet.control.plans`) keeps it, and a sync told to run exactly that plan computes it again
from the cluster as it is, before its first write, and hands both to `SyncRequest.plan_check`,
which refuses (`PlanMoved`) when the revision or the cluster moved since. The digest covers
what the sync would do, not every live `resourceVersion`: a status update by a controller
bumps a Deployment's resourceVersion every few seconds without changing what a sync does.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from fleet.errors import FleetError
from fleet.model import Action, ObjectRef

CREATE, UPDATE, DELETE, HOOK, UNCHANGED, SKIP, ORPHAN = (
    "create",
    "update",
    "delete",
    "hook",
    "unchanged",
    "skip",
    "needs-prune",
)
_ACTIONS = {Action.CREATED: CREATE, Action.CONFIGURED: UPDATE, Action.UNCHANGED: UNCHANGED}


class PlanMoved(FleetError):
    """A sync asked to run a stored plan found the revision or the cluster moved since."""

    stage = "plan"


PlanCheck = Callable[[str, str], None]
"""Called with the resolved commit and the digest of what the sync would do now, before its
first write; raises `PlanMoved` when either differs from the stored plan's."""


class Decided(Protocol):
    """What `changes` reads of a stage-4 decision (`fleet.engine.apply.Decision`)."""

    @property
    def action(self) -> Action: ...

    @property
    def skip_reason(self) -> str: ...


@dataclass(frozen=True)
class PlannedChange:
    ref: ObjectRef
    wave: int
    action: str
    fields: tuple[str, ...] = ()
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            **self.ref.to_json(),
            "wave": self.wave,
            "action": self.action,
            "fields": list(self.fields),
            "message": self.message,
        }


def changes(
    decisions: Mapping[ObjectRef, Decided],
    fields: Mapping[ObjectRef, tuple[str, ...]],
    waves: Mapping[ObjectRef, int],
    hooks: Iterable[tuple[ObjectRef, int]],
    deletes: Iterable[tuple[ObjectRef, int]],
    *,
    prune: bool,
) -> tuple[PlannedChange, ...]:
    """One entry per object, ordered by wave then identity (see the module docstring)."""
    found = []
    for ref, decision in decisions.items():
        action = SKIP if decision.skip_reason else _ACTIONS.get(decision.action, SKIP)
        changed = fields.get(ref, ()) if action == UPDATE else ()
        found.append(PlannedChange(ref, waves.get(ref, 0), action, changed, decision.skip_reason))
    found += [PlannedChange(ref, wave, HOOK) for ref, wave in hooks]
    message = "" if prune else "would be deleted with --prune"
    found += [
        PlannedChange(ref, wave, DELETE if prune else ORPHAN, (), message) for ref, wave in deletes
    ]
    return tuple(sorted(found, key=lambda c: (c.wave, _identity(c.ref), c.action)))


def _identity(ref: ObjectRef) -> tuple[str, str, str, str]:
    return (ref.group, ref.kind, ref.namespace, ref.name)


def digest(revision: str, planned: Iterable[PlannedChange]) -> str:
    """A stable hash of the revision and what the sync would do to the cluster's objects.
    Hooks are left out: the revision fixes them, and whether an in-sync app runs them depends
    on who asks (`fleet.engine.plan.hooks.runs_hooks`), not on the cluster."""
    rows = [
        [*_identity(c.ref), c.wave, c.action, list(c.fields)] for c in planned if c.action != HOOK
    ]
    text = json.dumps([revision, rows], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


__all__ = ["PlanCheck", "PlanMoved", "PlannedChange", "changes", "digest"]
