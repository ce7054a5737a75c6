"""What the UI reads from the clusters on demand: live objects, children, diffs, reachability.

Every read is for an object the app's last sync recorded (`allowed_ref`), or a child that
object owns (ownerReferences), so the UI never becomes a way to read any object of a cluster;
and it reads as the app's project acts on that cluster (`fleet.control.policy.acting_as`), so
the cluster's RBAC for that ServiceAccount bounds it too.

- `live_object`: the object as the cluster has it, normalized for reading (managed fields
  dropped) and with a Secret's values masked (`mask_secret`).
- `children`: ReplicaSets owned by a Deployment and Pods owned by those ReplicaSets (or by a
  StatefulSet, DaemonSet, Job), each with its health (`fleet.engine.health.assess`).
- `preview`: stages 1-4 of a sync without writing (`fleet.engine.sync.preview`, as `gitfleet
  diff` runs it), for the per-object unified diff (`fleet.engine.diff.compare.unified`, which
  masks Secret values itself). The REST diff (`GET /apps/{name}/diff`) answers which objects
  would change; the text of each change needs the desired manifest, which only a preview has.
  Like the REST diff it is refused to viewers (`api.auth.require_writer`).
- `probe`: whether a cluster answers /version within PROBE_TIMEOUT_S, remembered for
  PROBE_TTL_S so the clusters page stays cheap.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import yaml
from starlette.requests import Request

from fleet.control.policy import acting_as, check_source, request_for
from fleet.control.registry.records import AppRecord
from fleet.control.registry.store import Store
from fleet.engine import sync
from fleet.engine.caches import SyncCaches
from fleet.engine.diff.compare import unified
from fleet.engine.health.assess import assess
from fleet.engine.source.remotes import RemotePolicy
from fleet.errors import FleetError
from fleet.kube.client import KubeClient
from fleet.kube.kubeconfig import ServiceAccount
from fleet.model import Manifest, ObjectRef, Trigger

PROBE_TIMEOUT_S = 3.0
PROBE_TTL_S = 15.0
READ_TIMEOUT_S = 10.0
MASK = "(masked)"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
OWNED_KINDS = {
    ("apps", "Deployment"): ("apps/v1", "ReplicaSet"),
    ("apps", "ReplicaSet"): ("v1", "Pod"),
    ("apps", "StatefulSet"): ("v1", "Pod"),
    ("apps", "DaemonSet"): ("v1", "Pod"),
    ("batch", "Job"): ("v1", "Pod"),
}


@dataclass(frozen=True)
class Child:
    """An object owned (transitively) by one the app declares: depth 1 or 2 below it."""

    kind: str
    namespace: str
    name: str
    health: str
    message: str
    depth: int


@dataclass(frozen=True)
class ObjectDiff:
    """One object of a preview: would a sync apply it, and the unified diff (may be empty)."""

    ref: ObjectRef
    apply: bool
    text: str


def mask_secret(obj: Manifest) -> Manifest:
    """`obj` with a Secret's `data` and `stringData` values replaced by a mask, and its
    `last-applied-configuration` annotation too (a `kubectl apply` copies the data there)."""
    if obj.get("kind") != "Secret":
        return obj
    masked = dict(obj)
    for key in ("data", "stringData"):
        if isinstance(obj.get(key), dict):
            masked[key] = dict.fromkeys(obj[key], MASK)
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    if LAST_APPLIED in annotations:
        masked["metadata"] = {**meta, "annotations": {**annotations, LAST_APPLIED: MASK}}
    return masked


def readable(obj: Manifest) -> Manifest:
    """A live object as a person reads it: server bookkeeping dropped, Secret values masked."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    return mask_secret({**obj, "metadata": meta})


def allowed_ref(resources: Any, ref: ObjectRef) -> bool:
    """The instance's last sync recorded `ref` (the only objects the UI reads)."""
    return any(r.ref == ref for r in resources)


def to_yaml(obj: Manifest) -> str:
    text: str = yaml.safe_dump(obj, sort_keys=False, default_flow_style=False)
    return text


def account_for(store: Store, app: AppRecord, cluster: str) -> ServiceAccount | None:
    """Who the app's project acts as on `cluster` (None: the cluster's own credentials)."""
    return acting_as(app, store.get_project(app.project), cluster)


@contextmanager
def client_for(
    store: Store, cluster: str, account: ServiceAccount | None, *, timeout: float = READ_TIMEOUT_S
) -> Iterator[KubeClient]:
    kube = KubeClient(store.cluster_config(cluster).acting_as(account), timeout=timeout)
    try:
        yield kube
    finally:
        kube.close()


def live_object(kube: KubeClient, ref: ObjectRef) -> Manifest | None:
    obj = kube.get(ref)
    return readable(obj) if obj is not None else None


def children(kube: KubeClient, ref: ObjectRef) -> list[Child]:
    """ReplicaSets and Pods under `ref`, by ownerReferences, newest first."""
    return list(_owned(kube, ref, ref.namespace, 1))


def _owned(kube: KubeClient, ref: ObjectRef, namespace: str, depth: int) -> Iterator[Child]:
    kind = OWNED_KINDS.get((ref.group, ref.kind))
    if kind is None or depth > 2:
        return
    parent = kube.get(ref)
    uid = ((parent or {}).get("metadata") or {}).get("uid")
    if not uid:
        return
    items = kube.list(kind[0], kind[1], namespace=namespace)
    owned = [o for o in items if _owner_uids(o) & {uid}]
    owned.sort(key=lambda o: str(o["metadata"].get("creationTimestamp", "")), reverse=True)
    for obj in owned:
        status = assess(obj)
        meta = obj["metadata"]
        yield Child(obj["kind"], namespace, meta["name"], status.health, status.message, depth)
        yield from _owned(kube, ObjectRef.of(obj), namespace, depth + 1)


def _owner_uids(obj: Manifest) -> set[str]:
    owners = (obj.get("metadata") or {}).get("ownerReferences") or []
    return {str(o.get("uid")) for o in owners}


def preview(
    store: Store,
    app: AppRecord,
    cluster: str,
    *,
    caches: SyncCaches,
    remotes: RemotePolicy,
    require_impersonation: bool,
) -> list[ObjectDiff]:
    """What a sync of `app` on `cluster` would change, object by object. Raises FleetError
    (and RepoUrlError) with a message a person can act on."""
    project = store.get_project(app.project)
    check_source(app, project, remotes)
    request = request_for(
        app,
        project,
        cluster,
        trigger=Trigger.DIFF,
        dry_run=True,
        credentials=store.git_credentials_for(app),
        require_impersonation=require_impersonation,
        cluster_labels=store.get_cluster(cluster).labels if app.post_build else None,
        age_key=store.age_keys.key_for(project.name),
    )
    with (
        client_for(store, cluster, request.service_account, timeout=30) as kube,
        client_for(store, cluster, None, timeout=30) as own,
    ):
        state = sync.preview(request, kube=kube, caches=caches, own=own)
    found = [
        ObjectDiff(d.ref, d.apply, unified(d.desired, d.live, ref=d.ref) if d.apply else "")
        for d in state.decisions.values()
    ]
    return sorted(found, key=lambda d: (not d.apply, str(d.ref)))


@dataclass(frozen=True)
class Reachability:
    reachable: bool
    detail: str
    checked: datetime


class Prober:
    """Ask each cluster's /version, at most once per PROBE_TTL_S; remember the last success."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[str, tuple[float, Reachability]] = {}
        self.last_contact: dict[str, datetime] = {}

    def probe(self, store: Store, cluster: str) -> Reachability:
        with self._lock:
            known = self._known.get(cluster)
        if known is not None and time.monotonic() - known[0] < PROBE_TTL_S:
            return known[1]
        found = self._ask(store, cluster)
        with self._lock:
            self._known[cluster] = (time.monotonic(), found)
            if found.reachable:
                self.last_contact[cluster] = found.checked
        return found

    def _ask(self, store: Store, cluster: str) -> Reachability:
        now = datetime.now(UTC)
        try:
            with client_for(store, cluster, None, timeout=PROBE_TIMEOUT_S) as kube:
                version = kube.request("GET", "/version") or {}
        except FleetError as e:
            return Reachability(False, str(e), now)
        return Reachability(True, f"Kubernetes {version.get('gitVersion', '?')}", now)


def prober_of(request: Request) -> Prober:
    """The coordinator's one `Prober` (kept in the app's state)."""
    prober = getattr(request.app.state, "ui_prober", None)
    if not isinstance(prober, Prober):
        prober = request.app.state.ui_prober = Prober()
    return prober
