"""Prune against a real API server: the inventory ConfigMap, finding labelled objects, and
deleting in reverse waves with stuck finalizers reported by name."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest

from fleet.engine import prune
from fleet.engine.inventory import Inventory, InventoryEntry, InventoryStore
from fleet.engine.plan.tracking import APP_LABEL, Owner, Ownership, mark
from fleet.engine.prune import PruneIncomplete, PrunePlan
from fleet.errors import PruneError, UsageError
from fleet.kube.client import KubeClient
from fleet.kube.watch import Watch
from fleet.model import Manifest, ObjectRef
from tests.support.wait import eventually

HOLD = "example.com/hold"


def owner(app: str) -> Owner:
    """The app of that name, with a uid of its own (as the registry gives one)."""
    return Owner(app, f"uid-{app}", "team")


SHOP = owner("shop")


def configmap(ns: str, name: str, *, wave: int = 0, app: str = "shop") -> Manifest:
    obj: Manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": ns,
            "annotations": {"gitfleet.io/sync-wave": str(wave)},
        },
        "data": {"k": "v"},
    }
    return mark(obj, owner(app))


def cm_ref(ns: str, name: str) -> ObjectRef:
    return ObjectRef("", "v1", "ConfigMap", ns, name)


def release(kube: KubeClient, ref: ObjectRef) -> None:
    """Remove every finalizer, as the controller owning them would."""
    if kube.get(ref) is not None:
        body = {"metadata": {"finalizers": None}}
        path = kube.object_path(ref)
        kube.request("PATCH", path, body=body, content_type="application/merge-patch+json")


@pytest.fixture
def held(kube: KubeClient, namespace: str) -> Iterator[list[ObjectRef]]:
    """Refs the test put a finalizer on; released afterwards so the namespace can go."""
    refs: list[ObjectRef] = []
    yield refs
    for ref in refs:
        release(kube, ref)


def apply_held(kube: KubeClient, held: list[ObjectRef], obj: Manifest) -> ObjectRef:
    obj["metadata"]["finalizers"] = [HOLD]
    ref = ObjectRef.of(kube.apply(obj))
    held.append(ref)
    return ref


# -- inventory -------------------------------------------------------------------------------


def entries(ns: str, count: int) -> list[InventoryEntry]:
    return [
        InventoryEntry(ObjectRef("apps", "v1", "Deployment", ns, f"deployment-{i:05d}"), i % 7)
        for i in range(count)
    ]


def test_inventory_round_trip_and_none_when_absent(kube: KubeClient, namespace: str):
    store = InventoryStore(kube, namespace=namespace)
    assert store.read("shop") is None
    first = [
        InventoryEntry(cm_ref(namespace, "a"), 0),
        InventoryEntry(ObjectRef("rbac.authorization.k8s.io", "v1", "ClusterRole", "", "r"), -2),
    ]
    store.save(SHOP, first)
    assert store.read("shop") == Inventory(first, "uid-shop", "team")
    live = kube.get(store.ref("shop"))
    assert live is not None
    assert live["metadata"]["name"] == "gitfleet-inventory-shop"
    assert "gitfleet.io/app" not in live["metadata"].get("labels", {})
    managers = {m["manager"] for m in live["metadata"]["managedFields"]}
    assert managers == {"gitfleet-inventory"}
    second = first[:1]
    store.save(SHOP, second)
    assert store.read("shop") == Inventory(second, "uid-shop", "team")
    assert store.read("other") is None
    assert store.delete("shop") is True
    eventually(lambda: store.read("shop") is None, what="inventory deleted")
    assert store.delete("shop") is False


def test_inventory_save_creates_its_namespace(kube: KubeClient, namespace: str):
    home = f"{namespace}-inv"
    store = InventoryStore(kube, namespace=home)
    try:
        store.save(SHOP, entries(namespace, 3))
        assert kube.get(ObjectRef("", "v1", "Namespace", "", home)) is not None
        found = store.read("shop")
        assert found is not None and found.entries == entries(namespace, 3)
    finally:
        kube.delete(ObjectRef("", "v1", "Namespace", "", home))


def test_inventory_of_ten_thousand_objects_fits(kube: KubeClient, namespace: str):
    store = InventoryStore(kube, namespace=namespace)
    big = entries(namespace, 10_000)
    store.save(owner("big"), big)
    found = store.read("big")
    assert found is not None and found.entries == big


def test_inventory_too_large_for_a_configmap_is_refused_before_writing(
    kube: KubeClient, namespace: str
):
    store = InventoryStore(kube, namespace=namespace)
    long_name = "x" * 200
    huge = [InventoryEntry(cm_ref(namespace, f"{long_name}{i}"), 0) for i in range(6_000)]
    with pytest.raises(PruneError) as err:
        store.save(owner("huge"), huge)
    assert "the inventory of 6000 objects takes" in str(err.value)
    assert "more than the 1048576 bytes a ConfigMap can hold" in str(err.value)
    assert store.read("huge") is None


def test_inventory_refuses_an_app_name_that_is_not_a_dns_label(kube: KubeClient, namespace: str):
    store = InventoryStore(kube, namespace=namespace)
    with pytest.raises(UsageError, match="'Shop_App' is not a DNS-1123 label"):
        store.save(owner("Shop_App"), [])


def test_a_corrupt_inventory_is_an_error_not_an_empty_one(kube: KubeClient, namespace: str):
    store = InventoryStore(kube, namespace=namespace)
    store.save(SHOP, [])
    broken = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"entries": '{"a": 1}'}}
    broken["metadata"] = {"name": "gitfleet-inventory-shop", "namespace": namespace}
    kube.apply(broken, manager="gitfleet-inventory")
    with pytest.raises(PruneError, match="is not a valid inventory"):
        store.read("shop")


# -- find_labelled ---------------------------------------------------------------------------


def test_find_labelled_finds_the_apps_objects_and_skips_unserved_kinds(
    kube: KubeClient, namespace: str
):
    app = f"app-{uuid.uuid4().hex[:8]}"
    kube.apply(configmap(namespace, "mine", app=app))
    kube.apply(configmap(namespace, "theirs", app=f"{app}-other"))
    kinds = [("v1", "ConfigMap"), ("v1", "Secret"), ("example.com/v1", "Nothing")]
    found = prune.find_labelled(kube, app, kinds)
    assert [str(ObjectRef.of(obj)) for obj in found] == [f"ConfigMap/{namespace}/mine"]
    tracking = found[0]["metadata"]["annotations"]["gitfleet.io/tracking"]
    assert tracking.startswith(f"team/{app}@uid-{app}:")


# -- plan + execute --------------------------------------------------------------------------


def test_sync_style_prune_deletes_only_what_the_app_owns(kube: KubeClient, namespace: str):
    app = f"app-{uuid.uuid4().hex[:8]}"
    for name in ("stays", "removed"):
        kube.apply(configmap(namespace, name, app=app))
    kube.apply(configmap(namespace, "other-apps", app=f"{app}-other"))
    by_hand = configmap(namespace, "by-hand")
    del by_hand["metadata"]["labels"], by_hand["metadata"]["annotations"]
    kube.apply(by_hand, manager="kubectl")
    inventory = [InventoryEntry(cm_ref(namespace, n), 0) for n in ("stays", "removed", "by-hand")]
    desired = [cm_ref(namespace, "stays")]
    labelled = prune.find_labelled(kube, app, [("v1", "ConfigMap")])
    live = prune.read_live(kube, inventory=inventory, labelled=labelled, desired=desired)
    ownership = Ownership.of(owner(app), [e.ref for e in inventory])
    pruning = prune.plan(
        ownership=ownership, inventory=inventory, labelled=labelled, desired=desired, live=live
    )
    assert pruning.kept == (
        (cm_ref(namespace, "by-hand"), "not tracked by this app (created by hand?)"),
    )
    outcomes = prune.execute(kube, pruning, timeout=30)
    assert [(str(o.ref), o.pruned, o.message) for o in outcomes] == [
        (f"ConfigMap/{namespace}/removed", True, "pruned")
    ]
    remaining = {o["metadata"]["name"] for o in kube.list("v1", "ConfigMap", namespace=namespace)}
    assert {"stays", "other-apps", "by-hand"} <= remaining
    assert "removed" not in remaining


def test_later_waves_are_gone_before_earlier_waves_are_deleted(kube: KubeClient, namespace: str):
    objects = [configmap(namespace, "first", wave=0), configmap(namespace, "second", wave=1)]
    for obj in objects:
        kube.apply(obj)
    pruning = PrunePlan(
        delete=((cm_ref(namespace, "first"), 0), (cm_ref(namespace, "second"), 1)), kept=()
    )
    events: list[str] = []
    outcomes = prune.execute(kube, pruning, timeout=30, on_progress=events.append)
    assert events == [
        f"ConfigMap/{namespace}/second deleting",
        f"ConfigMap/{namespace}/second pruned",
        f"ConfigMap/{namespace}/first deleting",
        f"ConfigMap/{namespace}/first pruned",
    ]
    assert [(o.ref.name, o.wave, o.pruned) for o in outcomes] == [
        ("second", 1, True),
        ("first", 0, True),
    ]
    assert kube.get(cm_ref(namespace, "first")) is None


def test_earlier_wave_waits_until_a_finalizer_on_a_later_wave_is_released(
    kube: KubeClient, namespace: str, held: list[ObjectRef]
):
    late = apply_held(kube, held, configmap(namespace, "late", wave=2))
    early = ObjectRef.of(kube.apply(configmap(namespace, "early", wave=0)))
    events: list[str] = []
    releaser = threading.Timer(0.5, release, args=(kube, late))

    def progress(message: str) -> None:
        events.append(message)
        if message == f"{late} deleting":
            assert kube.get(early) is not None
            releaser.start()

    pruning = PrunePlan(delete=((early, 0), (late, 2)), kept=())
    try:
        outcomes = prune.execute(kube, pruning, timeout=30, on_progress=progress)
    finally:
        releaser.cancel()
        if releaser.ident is not None:
            releaser.join()
    assert events == [f"{late} deleting", f"{late} pruned", f"{early} deleting", f"{early} pruned"]
    assert [(o.ref, o.pruned) for o in outcomes] == [(late, True), (early, True)]


def test_stuck_finalizers_are_named_for_every_object_at_the_deadline(
    kube: KubeClient, namespace: str, held: list[ObjectRef]
):
    stuck = [apply_held(kube, held, configmap(namespace, n, wave=1)) for n in ("held-a", "held-b")]
    free = ObjectRef.of(kube.apply(configmap(namespace, "free", wave=1)))
    earlier = ObjectRef.of(kube.apply(configmap(namespace, "earlier", wave=0)))
    pruning = PrunePlan(delete=((stuck[0], 1), (stuck[1], 1), (free, 1), (earlier, 0)), kept=())
    with pytest.raises(PruneIncomplete) as err:
        prune.execute(kube, pruning, timeout=1)
    assert isinstance(err.value, PruneError)
    assert str(err.value) == (
        "2 object(s) not pruned within 1s: "
        f"ConfigMap/{namespace}/held-a is held by finalizers {HOLD}; "
        f"ConfigMap/{namespace}/held-b is held by finalizers {HOLD}"
    )
    assert [(o.ref.name, o.pruned) for o in err.value.outcomes] == [
        ("free", True),
        ("held-a", False),
        ("held-b", False),
        ("earlier", False),
    ]
    assert err.value.outcomes[3].message.startswith("not attempted")
    assert kube.get(free) is None
    assert kube.get(earlier) is not None


def test_object_already_being_deleted_is_waited_on_not_deleted_again(
    kube: KubeClient, namespace: str, held: list[ObjectRef]
):
    app = "shop"
    ref = apply_held(kube, held, configmap(namespace, "leaving", app=app))
    kube.delete(ref)
    inventory = [InventoryEntry(ref, 0)]
    pruning = prune.plan(
        ownership=Ownership.of(owner(app)),
        inventory=inventory,
        labelled=[],
        desired=[],
        live={ref: kube.get(ref)},
    )
    assert pruning.terminating == ((ref, 0),) and pruning.delete == ()
    deletes = kube.requests["DELETE"]
    with pytest.raises(PruneIncomplete, match=f"ConfigMap/{namespace}/leaving is held by"):
        prune.execute(kube, pruning, timeout=0.5)
    assert kube.requests["DELETE"] == deletes
    release(kube, ref)
    outcomes = prune.execute(kube, pruning, timeout=30)
    assert [(o.ref, o.pruned) for o in outcomes] == [(ref, True)]
    assert kube.requests["DELETE"] == deletes


# -- finding labelled objects from a watch-backed index ---------------------------------------


class FixedIndex:
    """An index that answers ConfigMaps from a list, as a lagging watch cache might."""

    def __init__(self, objects: list[Manifest]) -> None:
        self.objects = objects

    def labelled(
        self, cluster: str, api_version: str, kind: str, app: str
    ) -> list[Manifest] | None:
        return list(self.objects) if kind == "ConfigMap" else None


def test_find_labelled_trusts_an_index_only_for_desired_objects(kube: KubeClient, namespace: str):
    app = f"app-{uuid.uuid4().hex[:8]}"
    for name in ("mine", "orphan", "gone", "moved"):
        kube.apply(configmap(namespace, name, app=app))
    stale = [kube.get(cm_ref(namespace, n)) for n in ("mine", "orphan", "gone", "moved")]
    kube.delete(cm_ref(namespace, "gone"))
    kube.apply(configmap(namespace, "moved", app=f"{app}-other"))
    index = FixedIndex([o for o in stale if o is not None])
    kube.requests.clear()
    found = prune.find_labelled(
        kube, app, [("v1", "ConfigMap")], index=index, desired=[cm_ref(namespace, "mine")]
    )
    assert sorted(o["metadata"]["name"] for o in found) == ["mine", "orphan"]
    assert kube.requests == {"GET": 3}  # orphan, gone, moved read again; no LIST; mine trusted
    kube.requests.clear()
    found = prune.find_labelled(kube, app, [("v1", "ConfigMap"), ("v1", "Secret")], index=index)
    assert sorted(o["metadata"]["name"] for o in found) == ["mine", "orphan"]
    assert kube.requests == {"GET": 5}  # four candidates, one LIST of the kind the index lacks


def test_a_watch_indexes_its_cache_by_app_label(kube: KubeClient, namespace: str):
    app = f"app-{uuid.uuid4().hex[:8]}"
    kube.apply(configmap(namespace, "first", app=app))
    resource = kube.resource_for("v1", "ConfigMap")
    watch = Watch(kube.config, resource, label_selector=APP_LABEL, index_label=APP_LABEL)
    assert watch.labelled(app) is None  # not listed yet: it cannot tell
    thread = threading.Thread(target=watch.run, args=(lambda event: None,), daemon=True)
    thread.start()
    try:

        def names(value: str) -> list[str]:
            return sorted(o["metadata"]["name"] for o in watch.labelled(value) or [])

        eventually(lambda: names(app) == ["first"], timeout=10)
        kube.apply(configmap(namespace, "second", app=app))
        eventually(lambda: names(app) == ["first", "second"], timeout=10)
        kube.apply(configmap(namespace, "first", app=f"{app}-other"))
        eventually(lambda: names(app) == ["second"], timeout=10)
        assert names(f"{app}-other") == ["first"]
        kube.delete(cm_ref(namespace, "second"))
        eventually(lambda: names(app) == [], timeout=10)
    finally:
        watch.stop()
        thread.join(timeout=5)
