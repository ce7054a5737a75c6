"""Inventories in the clusters that no registered app owns: what a lost registry leaves behind.

Every sync keeps its app's inventory in the cluster (`fleet.engine.inventory`: a ConfigMap
labelled `gitfleet.io/inventory-of=<app>`, with the app's uid). When Redis loses the registry
the objects and their inventories stay in the clusters; after a `gitfleet registry import`
each inventory should belong to a registered app of the same uid. `orphaned` lists those that
do not: an app missing from the file restored, or restored with another uid (its next sync
would not own those objects). It reads each registered cluster once; a cluster it cannot
reach is named, never fatal: the import has already succeeded.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleet.control.registry.store import Store
from fleet.engine.inventory import INVENTORY_LABEL, UID_KEY
from fleet.errors import FleetError
from fleet.kube.client import KubeClient

NAMESPACE = "gitfleet-system"
TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Orphan:
    """An inventory of `app` on `cluster` that no registered app owns; `reason` says why."""

    cluster: str
    app: str
    reason: str


@dataclass(frozen=True)
class OrphanReport:
    orphans: tuple[Orphan, ...] = ()
    unreachable: dict[str, str] | None = None  # cluster -> why it could not be read


def orphaned(store: Store, *, namespace: str = NAMESPACE) -> OrphanReport:
    """The inventories on the registered clusters that no registered app (by name and uid)
    owns."""
    apps = {a.name: a for a in store.list_apps()}
    found: list[Orphan] = []
    unreachable: dict[str, str] = {}
    for cluster in store.list_clusters():
        try:
            kube = KubeClient(store.cluster_config(cluster.name), timeout=TIMEOUT_S)
        except FleetError as e:
            unreachable[cluster.name] = str(e)
            continue
        try:
            items = kube.list(
                "v1", "ConfigMap", namespace=namespace, label_selector=INVENTORY_LABEL
            )
        except FleetError as e:
            unreachable[cluster.name] = str(e)
            continue
        finally:
            kube.close()
        for item in items:
            name = str((item.get("metadata") or {}).get("labels", {}).get(INVENTORY_LABEL, ""))
            uid = str((item.get("data") or {}).get(UID_KEY) or "")
            app = apps.get(name)
            if app is None:
                found.append(Orphan(cluster.name, name, "no app of that name is registered"))
            elif uid and uid != app.owner_uid:
                found.append(
                    Orphan(cluster.name, name, f"written by uid {uid}, not {app.owner_uid}")
                )
    return OrphanReport(tuple(found), unreachable or None)
