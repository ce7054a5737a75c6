"""Which objects a prune deletes, keeps (and why) or waits on: `prune.plan` is pure.

Each case lays out the cluster (live objects), the previous inventory and what the app declares
now; the test gives `plan` exactly what the sync gives it: the objects carrying the app label,
and the live state of the inventory objects fetched by ref.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from fleet.engine.inventory import InventoryEntry
from fleet.engine.plan.references import key_of
from fleet.engine.plan.tracking import APP_LABEL, TRACKING_ANNOTATION, Owner, Ownership, mark
from fleet.engine.prune import PrunePlan, keep_reason, plan
from fleet.errors import OrderError
from fleet.model import Manifest, ObjectRef

APP = "shop"
PROJECT = "team"


def owner(app: str = APP) -> Owner:
    """The app of that name, with a uid of its own (as the registry gives one)."""
    return Owner(app, f"uid-{app}", PROJECT)


OURS = Ownership.of(owner())
API = {
    "Deployment": "apps/v1",
    "CustomResourceDefinition": "apiextensions.k8s.io/v1",
    "HorizontalPodAutoscaler": "autoscaling/v2",
    "Widget": "example.com/v1",
}


def ref(kind: str, name: str, namespace: str = "shop", api: str = "") -> ObjectRef:
    return ObjectRef.of(plain(kind, name, namespace, api=api))


def plain(
    kind: str, name: str, namespace: str = "shop", *, api: str = "", **notes: str
) -> Manifest:
    """An object as someone made it by hand: no marks."""
    meta: dict[str, Any] = {"name": name, "annotations": dict(notes)}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": api or API.get(kind, "v1"), "kind": kind, "metadata": meta}


def ours(
    kind: str, name: str, namespace: str = "shop", *, app: str = APP, api: str = "", **notes: str
) -> Manifest:
    """An object `app` applied: labelled and tracked."""
    return mark(plain(kind, name, namespace, api=api, **notes), owner(app))


def tracked(kind: str, name: str, by: Owner) -> Manifest:
    """An object applied by the app `by` names (an older one, or one from before uids)."""
    return mark(plain(kind, name), by)


def with_labels(obj: Manifest, **labels: str) -> Manifest:
    obj["metadata"].setdefault("labels", {}).update(labels)
    return obj


def copied(obj: Manifest, name: str) -> Manifest:
    """`obj` saved and re-applied under another name: marks and all."""
    return {**obj, "metadata": {**obj["metadata"], "name": name}}


def terminating(obj: Manifest) -> Manifest:
    obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    obj["metadata"]["finalizers"] = ["example.com/hold"]
    return obj


def entry(
    kind: str, name: str, wave: int = 0, namespace: str = "shop", api: str = ""
) -> InventoryEntry:
    return InventoryEntry(ref(kind, name, namespace, api), wave)


@dataclass
class Case:
    id: str
    live: list[Manifest]
    inventory: list[InventoryEntry] = field(default_factory=list)
    desired: list[ObjectRef] = field(default_factory=list)
    allowed: frozenset[str] = frozenset()
    delete: list[tuple[str, int]] = field(default_factory=list)
    kept: list[tuple[str, str]] = field(default_factory=list)
    waiting: list[tuple[str, int]] = field(default_factory=list)


def run(case: Case) -> PrunePlan:
    """Call plan as a sync would: labelled objects by selector, inventory objects by GET."""
    by_key = {key_of(ObjectRef.of(obj)): obj for obj in case.live}
    labelled = [o for o in case.live if o["metadata"].get("labels", {}).get(APP_LABEL) == APP]
    live = {e.ref: by_key.get(key_of(e.ref)) for e in case.inventory}
    return plan(
        ownership=Ownership.of(owner(), [e.ref for e in case.inventory]),
        inventory=case.inventory,
        labelled=labelled,
        desired=case.desired,
        live=live,
        allowed_kinds=case.allowed,
    )


NOT_OURS = "not tracked by this app (created by hand?)"
BILLING = "tracked by app billing of project team (uid uid-billing)"
FLUX = "kustomize.toolkit.fluxcd.io/prune"
CRD_RULE = "CustomResourceDefinition is never pruned unless the app allows it"
NS_RULE = "Namespace is never pruned unless the app allows it"

CASES = [
    Case(
        "object-removed-from-git-is-deleted",
        live=[ours("ConfigMap", "old")],
        inventory=[entry("ConfigMap", "old", wave=2)],
        delete=[("ConfigMap/shop/old", 2)],
    ),
    Case(
        "desired-object-is-never-pruned",
        live=[ours("ConfigMap", "kept"), ours("ConfigMap", "labelled")],
        inventory=[entry("ConfigMap", "kept")],
        desired=[ref("ConfigMap", "kept"), ref("ConfigMap", "labelled")],
    ),
    Case(
        "desired-at-another-version-is-the-same-object",
        live=[ours("HorizontalPodAutoscaler", "web")],
        inventory=[entry("HorizontalPodAutoscaler", "web", api="autoscaling/v1")],
        desired=[ref("HorizontalPodAutoscaler", "web", api="autoscaling/v2")],
    ),
    Case(
        "labelled-object-missing-from-inventory-is-deleted-in-its-annotated-wave",
        live=[ours("ConfigMap", "lost", **{"argocd.argoproj.io/sync-wave": "3"})],
        delete=[("ConfigMap/shop/lost", 3)],
    ),
    Case(
        "inventory-wave-wins-over-the-annotation",
        live=[ours("ConfigMap", "both", **{"gitfleet.io/sync-wave": "3"})],
        inventory=[entry("ConfigMap", "both", wave=1)],
        delete=[("ConfigMap/shop/both", 1)],
    ),
    Case(
        "object-in-inventory-and-labelled-is-planned-once",
        live=[ours("HorizontalPodAutoscaler", "web")],
        inventory=[entry("HorizontalPodAutoscaler", "web", api="autoscaling/v1")],
        delete=[("HorizontalPodAutoscaler/shop/web", 0)],
    ),
    Case(
        "another-apps-object-is-kept",
        live=[ours("ConfigMap", "shared", app="billing")],
        inventory=[entry("ConfigMap", "shared")],
        kept=[("ConfigMap/shop/shared", BILLING)],
    ),
    Case(
        "our-label-on-another-apps-object-is-not-ownership",
        live=[with_labels(ours("ConfigMap", "relabelled", app="billing"), **{APP_LABEL: APP})],
        kept=[("ConfigMap/shop/relabelled", BILLING)],
    ),
    Case(
        "hand-made-object-is-kept",
        live=[plain("ConfigMap", "by-hand")],
        inventory=[entry("ConfigMap", "by-hand")],
        kept=[("ConfigMap/shop/by-hand", NOT_OURS)],
    ),
    Case(
        "label-without-tracking-annotation-is-kept",
        live=[with_labels(plain("ConfigMap", "templated"), **{APP_LABEL: APP})],
        kept=[("ConfigMap/shop/templated", NOT_OURS)],
    ),
    Case(
        "copy-carrying-our-annotation-for-another-object-is-kept",
        live=[ours("ConfigMap", "original"), copied(ours("ConfigMap", "original"), "copy")],
        desired=[ref("ConfigMap", "original")],
        kept=[
            (
                "ConfigMap/shop/copy",
                f"its {TRACKING_ANNOTATION} annotation names ConfigMap/shop/original, "
                "not this object (copied?)",
            )
        ],
    ),
    Case(
        "crd-is-kept-unless-allowed",
        live=[ours("CustomResourceDefinition", "widgets.example.com", "")],
        kept=[("CustomResourceDefinition/widgets.example.com", CRD_RULE)],
    ),
    Case(
        "crd-is-deleted-when-allowed",
        live=[ours("CustomResourceDefinition", "widgets.example.com", "")],
        allowed=frozenset({"CustomResourceDefinition"}),
        delete=[("CustomResourceDefinition/widgets.example.com", 0)],
    ),
    Case(
        "namespace-is-kept-unless-allowed",
        live=[ours("Namespace", "team", "")],
        inventory=[entry("Namespace", "team", namespace="")],
        allowed=frozenset({"CustomResourceDefinition"}),
        kept=[("Namespace/team", NS_RULE)],
    ),
    Case(
        "namespace-is-deleted-when-allowed",
        live=[ours("Namespace", "team", "")],
        allowed=frozenset({"Namespace"}),
        delete=[("Namespace/team", 0)],
    ),
    Case(
        "custom-kind-named-namespace-is-not-protected",
        live=[ours("Namespace", "n1", api="example.com/v1")],
        delete=[("Namespace/shop/n1", 0)],
    ),
    Case(
        "gitfleet-prune-annotation-keeps",
        live=[ours("ConfigMap", "a", **{"gitfleet.io/prune": "false"})],
        kept=[("ConfigMap/shop/a", "prune disabled by annotation gitfleet.io/prune")],
    ),
    Case(
        "argo-sync-option-keeps",
        live=[ours("ConfigMap", "b", **{"argocd.argoproj.io/sync-options": "Prune=false"})],
        kept=[
            (
                "ConfigMap/shop/b",
                "prune disabled by annotation argocd.argoproj.io/sync-options (Prune=false)",
            )
        ],
    ),
    Case(
        "flux-label-keeps",
        live=[with_labels(ours("ConfigMap", "c"), **{FLUX: "disabled"})],
        kept=[("ConfigMap/shop/c", f"prune disabled by label {FLUX}")],
    ),
    Case(
        "flux-annotation-keeps",
        live=[ours("ConfigMap", "d", **{FLUX: "disabled"})],
        kept=[("ConfigMap/shop/d", f"prune disabled by annotation {FLUX}")],
    ),
    Case(
        "object-already-gone-is-left-out",
        live=[],
        inventory=[entry("ConfigMap", "gone"), entry("Widget", "w1")],
    ),
    Case(
        "object-being-deleted-is-waited-on-not-deleted-again",
        live=[terminating(ours("ConfigMap", "leaving"))],
        inventory=[entry("ConfigMap", "leaving", wave=1)],
        waiting=[("ConfigMap/shop/leaving", 1)],
    ),
    Case(
        "someone-elses-object-being-deleted-is-not-waited-on",
        live=[terminating(plain("ConfigMap", "theirs"))],
        inventory=[entry("ConfigMap", "theirs")],
        kept=[("ConfigMap/shop/theirs", NOT_OURS)],
    ),
    Case(
        "an-older-app-of-the-same-name-is-another-app",
        live=[tracked("ConfigMap", "old", Owner(APP, "uid-before", "p1"))],
        inventory=[entry("ConfigMap", "old")],
        kept=[
            (
                "ConfigMap/shop/old",
                "tracked by another app shop of project p1 (uid uid-before), "
                "not this one (uid uid-shop)",
            )
        ],
    ),
    Case(
        "legacy-id-counts-when-our-inventory-lists-the-object",
        live=[tracked("ConfigMap", "before-uids", Owner(APP))],
        inventory=[entry("ConfigMap", "before-uids", wave=1)],
        delete=[("ConfigMap/shop/before-uids", 1)],
    ),
    Case(
        "legacy-id-found-by-label-alone-is-kept",
        live=[tracked("ConfigMap", "unlisted", Owner(APP))],
        kept=[
            (
                "ConfigMap/shop/unlisted",
                "tracked by app shop (a tracking id from before apps had uids), "
                "and this app's inventory does not list it",
            )
        ],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_plan(case: Case):
    result = run(case)
    assert [(str(r), wave) for r, wave in result.delete] == case.delete
    assert [(str(r), reason) for r, reason in result.kept] == case.kept
    assert [(str(r), wave) for r, wave in result.terminating] == case.waiting


def test_deletes_are_addressed_at_the_version_the_server_returned():
    live = ours("HorizontalPodAutoscaler", "web")
    inventory = [entry("HorizontalPodAutoscaler", "web", api="autoscaling/v1")]
    stale = inventory[0].ref
    result = plan(ownership=OURS, inventory=inventory, labelled=[], desired=[], live={stale: live})
    assert result.delete == ((replace(stale, version="v2"), 0),)


def test_an_object_seen_under_any_version_counts_as_live():
    inventory = [entry("HorizontalPodAutoscaler", "web", api="autoscaling/v1")]
    labelled = [ours("HorizontalPodAutoscaler", "web")]
    live = {inventory[0].ref: None}  # the old version is no longer served
    result = plan(ownership=OURS, inventory=inventory, labelled=labelled, desired=[], live=live)
    assert [str(r) for r, _ in result.delete] == ["HorizontalPodAutoscaler/shop/web"]


def test_plan_is_sorted_by_identity_whatever_the_input_order():
    names = ["b", "c", "a"]
    labelled = [ours("ConfigMap", name) for name in names]
    result = plan(ownership=OURS, inventory=[], labelled=labelled, desired=[], live={})
    assert [r.name for r, _ in result.delete] == ["a", "b", "c"]


def test_a_wave_annotation_that_is_not_a_number_names_the_object():
    labelled = [ours("ConfigMap", "bad", **{"gitfleet.io/sync-wave": "late"})]
    with pytest.raises(OrderError) as err:
        plan(ownership=OURS, inventory=[], labelled=labelled, desired=[], live={})
    assert (
        str(err.value) == "ConfigMap/shop/bad: gitfleet.io/sync-wave must be an integer, not 'late'"
    )


def test_keep_reason_checks_ownership_before_opt_outs_and_kind():
    crd = ours("CustomResourceDefinition", "w.example.com", "", app="billing")
    crd["metadata"]["annotations"]["gitfleet.io/prune"] = "false"
    crd_ref = ObjectRef.of(crd)
    assert keep_reason(crd, ownership=OURS, ref=crd_ref) == BILLING
    assert keep_reason(crd, ownership=Ownership.of(owner("billing")), ref=crd_ref) == (
        "prune disabled by annotation gitfleet.io/prune"
    )
