"""The inventory: what an application applied in its last sync, kept in the target cluster.

Prune needs to know what an app owned before, including objects whose kind the new render no
longer mentions (a label selector only finds kinds you know to ask for). Like Flux's
`.status.inventory` and kapp's app ConfigMap, the record lives next to the objects it describes,
in a ConfigMap `gitfleet-inventory-<app>` in `gitfleet-system` of the target cluster, so that
standalone mode (one process, no Redis) prunes correctly and a cluster carries its own truth.

The inventory is the app's, not the name's: data keys `uid` and `project` say which app wrote
it (`fleet.engine.plan.tracking.Owner`), and a sync uses an inventory only when `belongs_to` its
own app, so a later app given a deleted app's name inherits none of it (it replaces the
ConfigMap on its first sync). An inventory without `uid` was written before apps had uids: only
an app whose record predates uids adopts it, once, and stamps it with its uid.

Format: data key `entries` holds compact JSON, a list of `[group, version, kind, namespace,
name, wave]`. That is about 60 bytes an object, so 10,000 objects take ~600 KB, well inside the
1 MiB a ConfigMap may hold; an inventory that would not fit raises PruneError before anything is
written. The ConfigMap is written with server-side apply (field manager `gitfleet-inventory`),
so a save is one idempotent request, and it is labelled `gitfleet.io/inventory-of`, never with
the app label, so the app can never prune its own inventory.

A fenced sync that presumes its app has no inventory yet (`SyncRequest.first_sync`) skips the
read and `claim`s it instead, right before its first write: a create (POST) of the inventory
listing what the sync is about to apply, stamped with its token. The API server's 409
AlreadyExists says the presumption was wrong (`InventoryExists`): the sync then reads the
inventory and goes on as if it had read it at the start, so no write ever happens on a presumed
inventory that the server has not confirmed absent.

Fencing: a sync that holds a lease (`SyncRequest.guard`) stamps its fencing token in data key
`fence` and saves with the `resourceVersion` it read at the start of the sync (a create when
there was none), so the API server itself refuses (409 Conflict) the write of a holder whose
lease was taken over and whose successor wrote in between; a stored token greater than ours is
refused before any request. Both raise `LeaseLost`. A fenced teardown removes the inventory the
same way (`remove`: a DELETE with a `resourceVersion` precondition).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from fleet.engine.plan.tracking import Owner, validate_app_name
from fleet.errors import KubeApiError, LeaseLost, PruneError
from fleet.kube.client import KubeClient
from fleet.model import Manifest, ObjectRef

FIELD_MANAGER = "gitfleet-inventory"
DATA_KEY = "entries"
NAME_PREFIX = "gitfleet-inventory-"
INVENTORY_LABEL = "gitfleet.io/inventory-of"
# ConfigMap validation: keys plus values of data and binaryData may total at most 1 MiB.
MAX_DATA_BYTES = 1024 * 1024
STAMP_BYTES = 256  # room left for the `uid` and `project` keys and values

UID_KEY, PROJECT_KEY, FENCE_KEY = "uid", "project", "fence"

__all__ = [
    "Inventory",
    "InventoryEntry",
    "InventoryExists",
    "InventoryStore",
    "decode",
    "encode",
]


class InventoryExists(Exception):
    """A claim found an inventory already stored: read it (not an error a user sees)."""


@dataclass(frozen=True)
class InventoryEntry:
    """One object an app applied and the wave it was applied in (prune runs waves backwards)."""

    ref: ObjectRef
    wave: int


@dataclass(frozen=True)
class Inventory:
    """A stored inventory and the app that wrote it (`uid` empty: written before apps had
    uids)."""

    entries: list[InventoryEntry]
    uid: str = ""
    project: str = ""
    fence: int = 0  # the fencing token of the sync that wrote it (0: unfenced)
    # The ConfigMap's, as read: the precondition of the next save (not part of its value).
    resource_version: str = field(default="", compare=False)

    def belongs_to(self, owner: Owner, *, adopt_legacy: bool = False) -> bool:
        """Whether `owner` may use it: it carries the owner's uid, or it is a legacy inventory
        and the owner adopts legacy ones (its record predates uids)."""
        return self.uid == owner.uid if self.uid else adopt_legacy

    def written_by(self, owner: Owner) -> bool:
        """Whether it is stamped exactly with `owner` (nothing to rewrite)."""
        return (self.uid, self.project) == (owner.uid, owner.project)


def _identity(ref: ObjectRef) -> list[str]:
    return [ref.group, ref.version, ref.kind, ref.namespace, ref.name]


def _same_object(ref: ObjectRef) -> tuple[str, ...]:
    """An object's identity whatever its version."""
    return (ref.group, ref.kind, ref.namespace, ref.name)


def encode(entries: Iterable[InventoryEntry]) -> str:
    """Compact JSON of the entries; PruneError when it would not fit in one ConfigMap."""
    rows = [[*_identity(e.ref), e.wave] for e in entries]
    text = orjson.dumps(rows).decode()
    size = len(DATA_KEY) + len(text.encode())
    if size > MAX_DATA_BYTES - STAMP_BYTES:
        raise PruneError(
            f"the inventory of {len(rows)} objects takes {size} bytes, more than the "
            f"{MAX_DATA_BYTES} bytes a ConfigMap can hold: split the application into smaller ones"
        )
    return text


def _entry(row: Any) -> InventoryEntry:
    if not (isinstance(row, list) and len(row) == 6 and type(row[5]) is int):
        raise ValueError(f"entry {row!r} is not [group, version, kind, namespace, name, wave]")
    if not all(isinstance(part, str) for part in row[:5]):
        raise ValueError(f"entry {row!r} has a non-string identity")
    return InventoryEntry(ObjectRef(*row[:5]), row[5])


def decode(text: str) -> list[InventoryEntry]:
    """Entries from `encode`'s output; ValueError when the text is not an inventory."""
    rows = orjson.loads(text)
    if not isinstance(rows, list):
        raise ValueError("entries is not a JSON list")
    return [_entry(row) for row in rows]


class InventoryStore:
    """Load, save and delete app inventories in one cluster's `namespace`."""

    def __init__(self, kube: KubeClient, *, namespace: str = "gitfleet-system") -> None:
        self.kube = kube
        self.namespace = namespace

    def ref(self, app: str) -> ObjectRef:
        """The ConfigMap that holds `app`'s inventory."""
        name = NAME_PREFIX + validate_app_name(app)
        return ObjectRef("", "v1", "ConfigMap", self.namespace, name)

    def read(self, app: str) -> Inventory | None:
        """The inventory stored under `app`'s name, whoever wrote it; None when there is none
        (check `Inventory.belongs_to` before trusting it)."""
        ref = self.ref(app)
        live = self.kube.get(ref)
        if live is None:
            return None
        data = live.get("data") or {}
        try:
            entries = decode(str(data[DATA_KEY]))
        except (KeyError, ValueError) as e:
            raise PruneError(
                f"{ref} is not a valid inventory ({e}); delete it to rebuild the inventory from "
                f"the objects labelled gitfleet.io/app={app}",
                cluster=self.kube.name,
                obj=str(ref),
            ) from e
        try:
            fence = int(data.get(FENCE_KEY) or 0)
        except ValueError:
            fence = 0
        version = str((live.get("metadata") or {}).get("resourceVersion") or "")
        uid, project = str(data.get(UID_KEY) or ""), str(data.get(PROJECT_KEY) or "")
        return Inventory(entries, uid, project, fence, version)

    def check_fence(self, app: str, stored: Inventory | None, fence: int) -> None:
        """Refuse to go on when the stored inventory was written with a newer fencing token."""
        if fence and stored is not None and stored.fence > fence:
            raise LeaseLost(
                f"the inventory of {app} was written with fencing token {stored.fence}, newer "
                f"than this sync's {fence}: another worker synced it since; nothing written",
                cluster=self.kube.name,
                obj=str(self.ref(app)),
            )

    def save(
        self,
        owner: Owner,
        entries: Iterable[InventoryEntry],
        *,
        fence: int = 0,
        stored: Inventory | None = None,
    ) -> None:
        """Replace the inventory of `owner`'s app with `entries`, stamped with its uid and
        project, creating the namespace if it does not exist yet. With `fence` (a fenced sync),
        stamp it and write only over `stored` (what the sync read): LeaseLost otherwise,
        except over a version written since by an older token (a stale holder's claim, or a
        person's edit), which this newer holder replaces once, keeping what that version
        listed besides its own entries for the next prune to judge."""
        listed = list(entries)
        configmap = self._configmap(owner, encode(listed), fence)
        if not fence:
            self._apply(configmap)
            return
        self.check_fence(owner.app, stored, fence)
        try:
            self._save_over(configmap, stored)
            return
        except KubeApiError as e:
            if e.status != 409:
                raise
            conflict = e
        found = self.read(owner.app)
        if found is not None and found.fence < fence and found.belongs_to(owner):
            known = {_same_object(e.ref) for e in listed}
            kept = listed + [e for e in found.entries if _same_object(e.ref) not in known]
            try:
                self._save_over(self._configmap(owner, encode(kept), fence), found)
                return
            except KubeApiError as e:
                if e.status != 409:
                    raise
                conflict = e
        raise LeaseLost(
            f"the inventory of {owner.app} changed since this sync read it (409 "
            f"{conflict.reason or 'Conflict'}): another worker synced it; nothing written",
            cluster=self.kube.name,
            obj=str(self.ref(owner.app)),
        ) from conflict

    def _save_over(self, configmap: Manifest, stored: Inventory | None) -> None:
        """Create, or replace only the version `stored` read (409 Conflict otherwise)."""
        if stored is None or not stored.resource_version:
            self._create(configmap)
        else:
            configmap["metadata"]["resourceVersion"] = stored.resource_version
            self.kube.apply(configmap, manager=FIELD_MANAGER)

    def claim(self, owner: Owner, entries: Iterable[InventoryEntry], *, fence: int) -> Inventory:
        """Create the inventory of `owner`'s app, listing `entries` and stamped with `fence`,
        only if none is stored: `InventoryExists` otherwise. Returns what it stored."""
        listed = list(entries)
        configmap = self._configmap(owner, encode(listed), fence)
        try:
            created = self._create(configmap)
        except KubeApiError as e:
            if e.status != 409:
                raise
            raise InventoryExists(str(self.ref(owner.app))) from e
        version = str((created.get("metadata") or {}).get("resourceVersion") or "")
        return Inventory(listed, owner.uid, owner.project, fence, version)

    def _apply(self, configmap: Manifest) -> None:
        try:
            self.kube.apply(configmap, manager=FIELD_MANAGER)
        except KubeApiError as e:
            if e.status != 404:
                raise
            self._create_namespace()
            self.kube.apply(configmap, manager=FIELD_MANAGER)

    def _create(self, configmap: Manifest) -> Manifest:
        """POST: 409 AlreadyExists when another sync created it first."""
        try:
            return self.kube.create(configmap, manager=FIELD_MANAGER)
        except KubeApiError as e:
            if e.status != 404:
                raise
            self._create_namespace()
            return self.kube.create(configmap, manager=FIELD_MANAGER)

    def delete(self, app: str) -> bool:
        """Remove `app`'s inventory; False when there was none."""
        return self.kube.delete(self.ref(app))

    def remove(self, app: str, *, stored: Inventory, fence: int) -> bool:
        """Remove `stored` (what a fenced teardown read), only that version of it: a newer
        token in it, or a write since the read (409 from the API server), raise `LeaseLost`
        and keep it. Unfenced (`fence` 0): remove whatever is there."""
        if not fence:
            return self.delete(app)
        self.check_fence(app, stored, fence)
        try:
            return self.kube.delete(self.ref(app), resource_version=stored.resource_version)
        except KubeApiError as e:
            if e.status != 409:
                raise
            raise LeaseLost(
                f"the inventory of {app} changed since this teardown read it (409 "
                f"{e.reason or 'Conflict'}): another worker synced it; nothing removed",
                cluster=self.kube.name,
                obj=str(self.ref(app)),
            ) from e

    def _configmap(self, owner: Owner, text: str, fence: int = 0) -> Manifest:
        ref = self.ref(owner.app)
        labels = {INVENTORY_LABEL: owner.app, "app.kubernetes.io/managed-by": "gitfleet"}
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": ref.name, "namespace": ref.namespace, "labels": labels},
            "data": {DATA_KEY: text, UID_KEY: owner.uid, PROJECT_KEY: owner.project}
            | ({FENCE_KEY: str(fence)} if fence else {}),
        }

    def _create_namespace(self) -> None:
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}}
        self.kube.apply(namespace, manager=FIELD_MANAGER)
