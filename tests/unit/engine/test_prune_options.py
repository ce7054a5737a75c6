"""Prune options and sync plans, the pure parts: the budget, per-object propagation and
PruneLast read from live objects, the final batch, and a plan's digest."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fleet.engine.diff.compare import Drift
from fleet.engine.plan.tracking import Owner, Ownership, mark
from fleet.engine.prune import (
    PROPAGATION_ANNOTATION,
    PruneBudget,
    _with_last,
    over_budget,
    plan,
)
from fleet.engine.syncplan import CREATE, DELETE, HOOK, ORPHAN, UPDATE, changes, digest
from fleet.model import Action, Manifest, ObjectRef

OWNER = Owner("shop", "uid-shop", "team")


def ours(name: str, **notes: str) -> Manifest:
    meta: dict[str, Any] = {"name": name, "namespace": "shop", "annotations": dict(notes)}
    return mark({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}, OWNER)


def ref(name: str) -> ObjectRef:
    return ObjectRef("", "v1", "ConfigMap", "shop", name)


def test_a_budget_by_count_or_share_names_what_it_would_delete() -> None:
    assert over_budget(PruneBudget(), deleting=100, owned=100) == ""
    assert over_budget(PruneBudget(max_count=3), deleting=3, owned=10) == ""
    assert over_budget(PruneBudget(max_count=3), deleting=4, owned=10) == (
        "4 object(s), more than the budget of 3"
    )
    assert over_budget(PruneBudget(max_percent=50), deleting=2, owned=4) == ""
    assert over_budget(PruneBudget(max_percent=50), deleting=3, owned=4) == (
        "3 of 4 object(s) (75%), more than the budget of 50%"
    )
    assert over_budget(PruneBudget(max_count=1), deleting=0, owned=4) == ""


def test_an_object_chooses_its_propagation_and_prune_last() -> None:
    live = [
        ours("a", **{PROPAGATION_ANNOTATION: "Orphan"}),
        ours("b", **{"argocd.argoproj.io/sync-options": "PruneLast=true"}),
        ours("c"),
    ]
    pruning = plan(ownership=Ownership.of(OWNER), inventory=[], labelled=live, desired=[], live={})
    assert dict(pruning.propagation) == {ref("a"): "Orphan"}
    assert pruning.last == frozenset({ref("b")})


def test_prune_last_objects_go_in_a_final_batch_of_their_own() -> None:
    batches = [[ref("a"), ref("b")], [ref("c")]]
    assert _with_last(batches, frozenset({ref("b")})) == [[ref("a")], [ref("c")], [ref("b")]]
    assert _with_last(batches, frozenset({ref("c")})) == [[ref("a"), ref("b")], [ref("c")]]
    assert _with_last(batches, frozenset()) == batches


@dataclass(frozen=True)
class Decided:
    action: Action
    skip_reason: str = ""


def test_a_plan_lists_each_change_and_its_digest_pins_revision_and_changes() -> None:
    decisions = {ref("new"): Decided(Action.CREATED), ref("old"): Decided(Action.CONFIGURED)}
    fields = {ref("old"): Drift(changed=("/data/k",)).changed}
    hook = ObjectRef("batch", "v1", "Job", "shop", "migrate-x1")
    planned = changes(
        decisions, fields, {ref("old"): 1}, [(hook, -1)], [(ref("gone"), 0)], prune=True
    )
    assert [(c.action, c.ref.name, c.fields) for c in planned] == [
        (HOOK, "migrate-x1", ()),
        (DELETE, "gone", ()),
        (CREATE, "new", ()),
        (UPDATE, "old", ("/data/k",)),
    ]
    pinned = digest("abc", planned)
    assert digest("abc", planned) == pinned
    assert digest("def", planned) != pinned  # the revision moved
    renamed_hook = changes(
        decisions,
        fields,
        {ref("old"): 1},
        [(ObjectRef("batch", "v1", "Job", "shop", "migrate-y2"), -1)],
        [(ref("gone"), 0)],
        prune=True,
    )
    assert digest("abc", renamed_hook) == pinned  # hooks: fixed by the revision
    no_prune = changes(decisions, fields, {}, [], [(ref("gone"), 0)], prune=False)
    assert ORPHAN in [c.action for c in no_prune]
    assert digest("abc", no_prune) != pinned
