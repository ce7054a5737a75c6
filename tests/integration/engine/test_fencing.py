"""Fenced syncs against a real API server: the inventory carries the fencing token and is written
with a `resourceVersion` precondition, and the engine stops at its guard (issue 12, item 1).

The guard here is a stand-in for the worker's `HeldLease` (the engine never sees Redis): it has
a token and raises `LeaseLost` at the step it is told to.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from fleet.engine.inventory import InventoryEntry, InventoryStore
from fleet.engine.plan.tracking import Owner
from fleet.errors import LeaseLost
from fleet.kube.client import KubeClient
from fleet.model import ObjectRef
from tests.integration.engine.sync_helpers import scenario_for
from tests.support import manifests as m

SHOP = Owner("shop", "uid-shop", "team")


@dataclass
class Guard:
    token: int
    lost_at: str = ""
    current: bool = True  # False: a stale holder, whose lease another worker took since
    seen: tuple[str, ...] = ()

    def __call__(self, step: str) -> None:
        self.seen += (step,)
        if not self.current or (self.lost_at and step.startswith(self.lost_at)):
            raise LeaseLost(f"lease token {self.token} lost before {step}")

    def advance(self, past: int) -> None:
        if not self.current:
            raise LeaseLost(f"lease token {self.token} is no longer current")
        self.token = max(self.token, past + 1)


def _cm(namespace: str, name: str) -> ObjectRef:
    return ObjectRef("", "v1", "ConfigMap", namespace, name)


def test_the_inventory_refuses_a_stale_holders_write(kube: KubeClient, namespace: str) -> None:
    store = InventoryStore(kube, namespace=namespace)
    entries = [InventoryEntry(_cm(namespace, "a"), 0)]
    store.save(SHOP, entries, fence=1, stored=None)  # a create
    first = store.read("shop")
    assert first is not None and first.fence == 1 and first.resource_version
    store.save(SHOP, entries, fence=2, stored=first)
    second = store.read("shop")
    assert second is not None and second.fence == 2
    with pytest.raises(LeaseLost, match="409"):
        store.save(SHOP, [], fence=1, stored=None)  # read nothing; token 2 created it since
    with pytest.raises(LeaseLost, match="409"):
        store.save(SHOP, [], fence=1, stored=first)  # read before the token-2 write
    with pytest.raises(LeaseLost, match="newer than this sync's 1"):
        store.save(SHOP, [], fence=1, stored=second)
    third = store.read("shop")
    assert third == second and third is not None and third.fence == 2
    # the newest holder (token 3) read `first`; an older token wrote since (a stale holder's
    # claim): it writes over that once, keeping what that version listed for the next prune
    store.save(SHOP, [InventoryEntry(_cm(namespace, "b"), 0)], fence=3, stored=first)
    fourth = store.read("shop")
    assert fourth is not None and fourth.fence == 3
    assert sorted(e.ref.name for e in fourth.entries) == ["a", "b"]
    store.save(SHOP, [], stored=fourth)  # unfenced (standalone): no precondition, no token
    unfenced = store.read("shop")
    assert unfenced is not None and unfenced.fence == 0 and unfenced.entries == []


def test_the_engine_stops_at_its_guard_and_a_stale_token_writes_nothing(
    tmp_path: Path, kube: KubeClient, namespace: str
) -> None:
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit({"app/a.yaml": m.configmap("a")})
    first = Guard(token=1)
    assert s.sync(prune=True, guard=first).error == ""
    # checked before each write: the tier of wave 0 and the record (nothing to prune)
    assert "record" in first.seen and any("wave" in x for x in first.seen), first.seen
    assert not any(x.startswith("prune") for x in first.seen), first.seen
    inventory = InventoryStore(kube)
    stored = inventory.read(s.app)
    assert stored is not None and stored.fence == 1

    s.repo.commit({"app/a.yaml": None, "app/b.yaml": m.configmap("b")})
    lost = s.sync(prune=True, guard=Guard(token=2, lost_at="prune batch"))
    assert lost.error_stage == "lease", lost.error  # before its first delete
    assert kube.get(_cm(namespace, "a")) is not None, "pruned after the lease was lost"
    kept = inventory.read(s.app)
    assert kept is not None and kept.fence == 1 and kept.entries == stored.entries

    assert s.sync(prune=True, guard=Guard(token=3)).error == ""
    assert kube.get(_cm(namespace, "a")) is None
    newest = inventory.read(s.app)
    assert newest is not None and newest.fence == 3

    s.repo.commit({"app/a.yaml": m.configmap("a"), "app/b.yaml": None})
    stale = s.sync(prune=True, guard=Guard(token=2, current=False))  # from before token 3
    assert stale.error_stage == "lease", stale.error
    assert kube.get(_cm(namespace, "a")) is None, "a stale holder applied its revision"
    assert kube.get(_cm(namespace, "b")) is not None, "a stale holder pruned"
    after = inventory.read(s.app)
    assert after is not None and after.fence == 3


def test_a_current_holder_after_a_registry_restore_takes_a_token_past_the_clusters(
    tmp_path: Path, kube: KubeClient, namespace: str
) -> None:
    """A registry restored into an empty Redis hands out tokens from 1 again: the holder, still
    current there, moves its token past the one the inventory carries instead of failing."""
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit({"app/a.yaml": m.configmap("a")})
    assert s.sync(prune=True, guard=Guard(token=7)).error == ""
    restored = Guard(token=1)
    result = s.sync(prune=True, guard=restored)
    assert result.error == "", result.error
    assert restored.token == 8
    stored = InventoryStore(kube).read(s.app)
    assert stored is not None and stored.fence == 8
