"""Scope and ownership: a project member can neither fake a kind's scope nor reach another
project's objects through an app name, and every write and delete is bounded by the project.

Attacks run as a member of a restricted project through the real API, with a real worker, real
git over HTTP and the testbed's real API server; the cluster is read with admin credentials to
show what was (not) written. The engine-level tests below them hit the checks at the moment of a
write directly (without the render-time check in front), and show that an install from before
app uids keeps working.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from fleet.control.policy import request_for
from fleet.control.registry.records import (
    AppDestination,
    AppRecord,
    AppSource,
    Destination,
    ProjectRecord,
)
from fleet.control.registry.syncrecords import SyncRecord
from fleet.engine import prune, sync
from fleet.engine.apply import Applier, Decision
from fleet.engine.caches import SyncCaches
from fleet.engine.contract import SyncRequest
from fleet.engine.diff import compare as diff
from fleet.engine.inventory import InventoryEntry, InventoryStore
from fleet.engine.plan.boundaries import Boundaries
from fleet.engine.plan.tracking import TRACKING_ANNOTATION, Owner, mark
from fleet.errors import OutsideProject
from fleet.kube.client import KubeClient
from fleet.model import ObjectRef, Trigger
from tests.conftest import Cluster
from tests.support import manifests as m
from tests.support.fleet import FleetEnv, wait_until
from tests.support.gitrepo import GitRepo

ADMIN = "gf_admin-token-for-scope-and-ownership-tests"
GIT_HOST = "127.0.0.1"  # the test git server speaks plain http
SYNC_TIMEOUT = 120
RBAC = "rbac.authorization.k8s.io"


# -- manifests -------------------------------------------------------------------------------


def fake_crd(group: str, kind: str, plural: str) -> str:
    """A "CRD" claiming an existing kind is namespaced, never applied (a Skip hook)."""
    return f"""apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {plural}.{group}
  annotations:
    argocd.argoproj.io/hook: Skip
spec:
  group: {group}
  scope: Namespaced
  names: {{plural: {plural}, singular: {kind.lower()}, kind: {kind}}}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {{type: object}}
"""


def admin_binding(name: str, namespace: str, *, hook: str = "") -> str:
    notes = f"  annotations:\n    argocd.argoproj.io/hook: {hook}\n" if hook else ""
    return f"""apiVersion: {RBAC}/v1
kind: ClusterRoleBinding
metadata:
  name: {name}
{notes}roleRef:
  apiGroup: {RBAC}
  kind: ClusterRole
  name: cluster-admin
subjects:
  - kind: ServiceAccount
    name: attacker
    namespace: {namespace}
"""


SERVICE_ACCOUNT = "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: attacker\n"


def in_namespace(namespace: str, *, hook: str = "") -> str:
    text = f"  namespace: {namespace}\n"
    return text + (f"  annotations:\n    argocd.argoproj.io/hook: {hook}\n" if hook else "")


def cm_ref(namespace: str, name: str) -> ObjectRef:
    return ObjectRef("", "v1", "ConfigMap", namespace, name)


def binding_ref(name: str) -> ObjectRef:
    return ObjectRef(RBAC, "v1", "ClusterRoleBinding", "", name)


# -- the tenants: two namespaces of one cluster, projects and members through the API -------


class Tenants:
    """Namespaces `a` and `b` on the fleet's first cluster; what the test made, removed after."""

    def __init__(self, fleet: FleetEnv) -> None:
        self.fleet = fleet
        self.cluster = sorted(fleet.clusters)[0]
        self.kube: KubeClient = fleet.clusters[self.cluster].client()
        suffix = uuid.uuid4().hex[:8]
        self.a, self.b = f"tenant-a-{suffix}", f"tenant-b-{suffix}"
        self.bindings: list[str] = []
        self.apps: list[str] = []
        for name in (self.a, self.b):
            self.kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    def live(self, ref: ObjectRef) -> dict[str, Any] | None:
        return self.kube.get(ref)

    def close(self) -> None:
        for name in self.bindings:  # never leave a cluster-admin binding behind
            self.kube.delete(binding_ref(name))
        for app in self.apps:
            InventoryStore(self.kube).delete(app)
        for name in (self.a, self.b):
            self.kube.delete(ObjectRef("", "v1", "Namespace", "", name))
        self.kube.close()


class Api:
    """The real API on the fleet's Redis prefix: admin calls by default, member calls by token."""

    def __init__(self, client: TestClient, fleet: FleetEnv, tenants: Tenants) -> None:
        self.client, self.fleet, self.tenants = client, fleet, tenants

    def project(self, name: str, namespaces: list[str], *, create: bool = True) -> None:
        body = {
            "name": name,
            "sourceRepos": [self.fleet.repo_url],
            "destinations": [{"cluster": self.tenants.cluster, "namespace": n} for n in namespaces],
        }
        if create:
            response = self.client.post("/api/v1/projects", json=body)
        else:
            response = self.client.put(f"/api/v1/projects/{name}", json=body)
        assert response.status_code in (200, 201), response.text

    def member(self, project: str) -> dict[str, str]:
        body = {"name": f"{project}-member-{uuid.uuid4().hex[:6]}", "role": "member"}
        response = self.client.post("/api/v1/tokens", json={**body, "project": project})
        assert response.status_code == 201, response.text
        return {"Authorization": f"Bearer {response.json()['token']}"}

    def add_app(
        self, member: dict[str, str], name: str, project: str, namespace: str, path: str
    ) -> dict[str, Any]:
        body = {
            "name": name,
            "project": project,
            "source": {"repo": self.fleet.repo_url, "path": path},
            "destination": {"cluster": self.tenants.cluster, "namespace": namespace},
            "syncPolicy": {"prune": True, "retry": {"limit": 0}},
        }
        response = self.client.post("/api/v1/apps", json=body, headers=member)
        assert response.status_code == 201, response.text
        self.tenants.apps.append(name)
        found: dict[str, Any] = response.json()
        return found

    def sync(self, member: dict[str, str], app: str) -> SyncRecord:
        """Ask for a sync as `member` and wait for its record (the latest in the history)."""
        before = len(self.fleet.store.log.history(app, self.tenants.cluster))
        response = self.client.post(f"/api/v1/apps/{app}/sync", headers=member)
        assert response.status_code == 202, response.text
        wait_until(
            lambda: len(self.fleet.store.log.history(app, self.tenants.cluster)) > before,
            timeout=SYNC_TIMEOUT,
            what=f"the sync record of {app}",
        )
        record = self.fleet.store.log.history(app, self.tenants.cluster)[0]
        assert isinstance(record, SyncRecord), record
        return record


@pytest.fixture
def tenants(fleet: FleetEnv) -> Iterator[Tenants]:
    found = Tenants(fleet)
    yield found
    found.close()


@pytest.fixture
def api(fleet: FleetEnv, tenants: Tenants, fleet_api: Callable[..., TestClient]) -> Api:
    client = fleet_api(ADMIN)
    fleet.worker_thread("alpha")
    return Api(client, fleet, tenants)


# -- item 3: scope from discovery, boundaries at every write and delete -----------------------


@pytest.mark.parametrize("hook", ["", "PreSync"], ids=["resource", "presync-hook"])
def test_fake_crds_cannot_make_a_cluster_role_binding_look_namespaced(
    fleet: FleetEnv, tenants: Tenants, api: Api, hook: str
) -> None:
    api.project("team-a", [tenants.a])
    member = api.member("team-a")
    app, binding = fleet.app_name(0), f"{fleet.prefix}-pwn"
    tenants.bindings.append(binding)
    fleet.repo.commit(
        {
            f"apps/{app}/crd-crds.yaml": fake_crd(
                "apiextensions.k8s.io", "CustomResourceDefinition", "customresourcedefinitions"
            ),
            f"apps/{app}/crd-crbs.yaml": fake_crd(
                RBAC, "ClusterRoleBinding", "clusterrolebindings"
            ),
            f"apps/{app}/sa.yaml": SERVICE_ACCOUNT,
            f"apps/{app}/crb.yaml": admin_binding(binding, tenants.a, hook=hook),
        }
    )
    api.add_app(member, app, "team-a", tenants.a, f"apps/{app}")

    record = api.sync(member, app)

    assert tenants.live(binding_ref(binding)) is None
    assert tenants.live(ObjectRef("", "v1", "ServiceAccount", tenants.a, "attacker")) is None
    assert record.writes == 0
    assert (
        f"ClusterRoleBinding/{binding}: cluster-scoped kind {RBAC}/ClusterRoleBinding is not "
        "allowed: project team-a allows no cluster-scoped kinds"
    ) in record.error
    assert "CustomResourceDefinition/customresourcedefinitions.apiextensions.k8s.io" in (
        record.error
    )


def test_a_hook_outside_the_projects_namespaces_is_refused(
    fleet: FleetEnv, tenants: Tenants, api: Api
) -> None:
    api.project("team-a", [tenants.a])
    member = api.member("team-a")
    app = fleet.app_name(0)
    fleet.repo.commit(
        {
            f"apps/{app}/cm.yaml": m.configmap("settings"),
            f"apps/{app}/hook.yaml": m.configmap(
                "hook", extra_meta=in_namespace(tenants.b, hook="PreSync")
            ),
        }
    )
    api.add_app(member, app, "team-a", tenants.a, f"apps/{app}")

    record = api.sync(member, app)

    assert (
        f"ConfigMap/{tenants.b}/hook: namespace {tenants.b} is not an allowed destination of "
        f"project team-a on cluster {tenants.cluster} (allowed there: {tenants.a})"
    ) in record.error
    assert tenants.live(cm_ref(tenants.b, "hook")) is None
    assert tenants.live(cm_ref(tenants.a, "settings")) is None
    assert record.writes == 0


def test_prune_and_cascade_delete_refuse_candidates_outside_the_project(
    fleet: FleetEnv, tenants: Tenants, api: Api
) -> None:
    api.project("team-a", [tenants.a, tenants.b])
    member = api.member("team-a")
    app = fleet.app_name(0)
    stray = m.configmap("stray", extra_meta=in_namespace(tenants.b))
    fleet.repo.commit({f"apps/{app}/cm.yaml": m.configmap("keep"), f"apps/{app}/b.yaml": stray})
    api.add_app(member, app, "team-a", tenants.a, f"apps/{app}")
    first = api.sync(member, app)
    assert first.error == "" and tenants.live(cm_ref(tenants.b, "stray")) is not None
    before = tenants.live(cm_ref(tenants.b, "stray"))
    api.project("team-a", [tenants.a], create=False)  # the admin narrows the project
    fleet.repo.commit({f"apps/{app}/b.yaml": None})

    record = api.sync(member, app)
    response = api.client.delete(f"/api/v1/apps/{app}", headers=member)
    wait_until(
        lambda: "delete failed" in fleet.status(app, tenants.cluster).message,
        timeout=SYNC_TIMEOUT,
        what="the cascading delete's answer",
    )

    rule = (
        f"ConfigMap/{tenants.b}/stray refused: namespace {tenants.b} is not an allowed "
        f"destination of project team-a on cluster {tenants.cluster} (allowed there: {tenants.a})"
    )
    assert rule in record.error and record.error_stage == "prune"
    assert response.status_code == 202, response.text
    assert rule in fleet.status(app, tenants.cluster).message
    after = tenants.live(cm_ref(tenants.b, "stray"))
    assert before is not None and after is not None
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


# -- item 5: ownership by app uid --------------------------------------------------------------


def _name_reused(fleet: FleetEnv, tenants: Tenants, api: Api, *, second: list[str]) -> Any:
    """App `app` of project p1 deploys two ConfigMaps in namespace a and is deleted without
    cascade; a member of p2 (allowed `second`) then creates an app of the same name."""
    api.project("p1", [tenants.a])
    api.project("p2", second)
    one, two = api.member("p1"), api.member("p2")
    app = fleet.app_name(0)
    fleet.repo.commit(
        {
            "v1/cm.yaml": m.configmap("old-1"),
            "v1/cm2.yaml": m.configmap("old-2"),
            "v2/new.yaml": m.configmap("new"),
        }
    )
    first = api.add_app(one, app, "p1", tenants.a, "v1")
    assert api.sync(one, app).error == ""
    before = {n: tenants.live(cm_ref(tenants.a, n)) for n in ("old-1", "old-2")}
    response = api.client.delete(f"/api/v1/apps/{app}?cascade=false", headers=one)
    assert response.status_code == 200, response.text
    return app, two, first["uid"], before


def _unchanged(tenants: Tenants, before: dict[str, Any], old_uid: str) -> None:
    for name, old in before.items():
        now = tenants.live(cm_ref(tenants.a, name))
        assert now is not None, f"{name} was pruned"
        assert now["metadata"]["resourceVersion"] == old["metadata"]["resourceVersion"]
        tracking = now["metadata"]["annotations"][TRACKING_ANNOTATION]
        assert tracking.startswith("p1/") and f"@{old_uid}:" in tracking


def test_an_app_given_a_deleted_apps_name_by_another_project_prunes_none_of_its_objects(
    fleet: FleetEnv, tenants: Tenants, api: Api
) -> None:
    app, two, old_uid, before = _name_reused(fleet, tenants, api, second=[tenants.b])

    second = api.add_app(two, app, "p2", tenants.b, "v2")
    record = api.sync(two, app)

    assert record.error == ""
    assert second["uid"] != old_uid
    _unchanged(tenants, before, old_uid)
    new = tenants.live(cm_ref(tenants.b, "new"))
    assert new is not None
    assert new["metadata"]["annotations"][TRACKING_ANNOTATION] == (
        f"p2/{app}@{second['uid']}:/ConfigMap:{tenants.b}/new"
    )
    stored = InventoryStore(tenants.kube).read(app)
    assert stored is not None and (stored.uid, stored.project) == (second["uid"], "p2")
    assert [e.ref.name for e in stored.entries] == ["new"]


def test_an_app_given_a_deleted_apps_name_never_applies_over_its_objects(
    fleet: FleetEnv, tenants: Tenants, api: Api
) -> None:
    app, two, old_uid, before = _name_reused(fleet, tenants, api, second=[tenants.a, tenants.b])
    fleet.repo.commit({"v3/cm.yaml": m.configmap("old-1", "k: taken")})

    api.add_app(two, app, "p2", tenants.a, "v3")
    record = api.sync(two, app)

    assert (
        f"ConfigMap/{tenants.a}/old-1 is tracked by another app {app} of project p1 (uid {old_uid})"
    ) in record.error
    _unchanged(tenants, before, old_uid)


# -- the engine alone: checks at the moment of a write, and installs from before uids ---------


def test_the_applier_refuses_a_write_outside_the_project_whatever_was_checked_before(
    kube: KubeClient, namespace: str
) -> None:
    bounds = Boundaries(namespaces=("elsewhere-*",), cluster_kinds=frozenset(), project="team-a")
    obj = mark(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "x", "namespace": namespace},
        },
        Owner("shop", "u1", "team-a"),
    )
    role = {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole", "metadata": {"name": namespace}}
    applier = Applier(kube, boundaries=bounds)
    try:
        refused = []
        for manifest in (obj, role):
            drift = diff.Drift(changed=("",))
            decision = Decision(ObjectRef.of(manifest), manifest, None, drift, True)
            with pytest.raises(OutsideProject) as err:
                applier.apply_one(decision, deadline=0)
            refused.append(str(err.value))
    finally:
        applier.close()

    assert refused == [
        f"ConfigMap/{namespace}/x refused: namespace {namespace} is not an allowed destination "
        "of project team-a (allowed there: elsewhere-*)",
        f"ClusterRole/{namespace} refused: cluster-scoped kind {RBAC}/ClusterRole is not "
        "allowed: project team-a allows no cluster-scoped kinds",
    ]
    assert kube.get(cm_ref(namespace, "x")) is None
    assert kube.get(ObjectRef(RBAC, "v1", "ClusterRole", "", namespace)) is None


def test_prune_refuses_every_candidate_outside_the_project_and_deletes_nothing(
    kube: KubeClient, namespace: str
) -> None:
    owner = Owner("shop", "u1", "team-a")
    for name in ("inside", "outside"):
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}
        body["metadata"]["namespace"] = namespace
        kube.apply(mark(body, owner))
    pruning = prune.PrunePlan(
        delete=((cm_ref(namespace, "inside"), 0), (cm_ref(namespace, "outside"), 0)), kept=()
    )
    bounds = Boundaries(namespaces=("nowhere",), project="team-a", cluster="east")

    with pytest.raises(OutsideProject) as err:
        prune.execute(kube, pruning, timeout=10, boundaries=bounds)

    assert err.value.stage == "prune"
    assert str(err.value).startswith("2 prune candidate(s) refused, nothing was deleted: ")
    assert f"ConfigMap/{namespace}/outside refused: namespace {namespace} is not" in str(err.value)
    assert kube.get(cm_ref(namespace, "inside")) is not None
    assert kube.get(cm_ref(namespace, "outside")) is not None


def _legacy_install(tmp_path: Path, kube: KubeClient, namespace: str) -> tuple[GitRepo, str]:
    """What a sync before app uids left: objects tracked `<app>:...`, an inventory without uid."""
    app = f"legacy-{namespace}"
    repo = GitRepo.create(tmp_path / "repo")
    repo.commit({"app/cm.yaml": m.configmap("kept")})
    for name in ("kept", "removed"):
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}
        body["metadata"]["namespace"] = namespace
        kube.apply(mark(body, Owner(app)))
    refs = [InventoryEntry(cm_ref(namespace, n), 0) for n in ("kept", "removed")]
    InventoryStore(kube).save(Owner(app), refs)
    return repo, app


def test_an_app_from_before_uids_adopts_its_legacy_inventory_and_objects(
    tmp_path: Path, kube: KubeClient, namespace: str
) -> None:
    repo, name = _legacy_install(tmp_path, kube, namespace)
    record = AppRecord(  # as stored before apps had uids: no uid
        name=name,
        source=AppSource(repo=repo.url, path="app"),
        destination=AppDestination(namespace=namespace, cluster="east"),
        created="2025-01-01T00:00:00+00:00",
    )
    project = ProjectRecord("default", destinations=(Destination("*", "*"),), cluster_kinds=("*",))
    request = replace(request_for(record, project, "east", trigger=Trigger.MANUAL), prune=True)
    try:
        result = sync.run(request, kube=kube, caches=SyncCaches.at(tmp_path / "cache"))
        stored = InventoryStore(kube).read(name)
    finally:
        InventoryStore(kube).delete(name)

    assert result.error == ""
    assert request.adopt_legacy and request.app_uid == record.owner_uid
    kept = kube.get(cm_ref(namespace, "kept"))
    assert kept is not None
    assert kept["metadata"]["annotations"][TRACKING_ANNOTATION] == (
        f"default/{name}@{record.owner_uid}:/ConfigMap:{namespace}/kept"
    )
    assert kube.get(cm_ref(namespace, "removed")) is None
    assert stored is not None and stored.uid == record.owner_uid


def test_a_new_app_never_adopts_a_legacy_inventory_of_its_name(
    tmp_path: Path, kube: KubeClient, namespace: str
) -> None:
    repo, name = _legacy_install(tmp_path, kube, namespace)
    request = SyncRequest(
        app=name, repo=repo.url, path="app", namespace=namespace, prune=True, app_uid="fresh"
    )
    try:
        result = sync.run(request, kube=kube, caches=SyncCaches.at(tmp_path / "cache"))
    finally:
        InventoryStore(kube).delete(name)

    assert (
        f"ConfigMap/{namespace}/kept is tracked by app {name} (a tracking id from before apps "
        "had uids), and this app's inventory does not list it"
    ) in result.error
    assert kube.get(cm_ref(namespace, "removed")) is not None
    kept = kube.get(cm_ref(namespace, "kept"))
    assert kept is not None
    assert kept["metadata"]["annotations"][TRACKING_ANNOTATION].startswith(f"{name}:")


def test_the_fake_crd_attack_fails_in_the_engine_too(
    tmp_path: Path, cluster: Cluster, kube: KubeClient, namespace: str
) -> None:
    """The same attack without API or worker: what the engine decides for a restricted project."""
    binding = f"pwn-{namespace}"
    repo = GitRepo.create(tmp_path / "repo")
    repo.commit(
        {
            "app/a.yaml": fake_crd(
                "apiextensions.k8s.io", "CustomResourceDefinition", "customresourcedefinitions"
            ),
            "app/b.yaml": fake_crd(RBAC, "ClusterRoleBinding", "clusterrolebindings"),
            "app/crb.yaml": admin_binding(binding, namespace),
        }
    )
    app = AppRecord(
        name=f"attack-{namespace}",
        project="team-a",
        source=AppSource(repo=repo.url, path="app"),
        destination=AppDestination(namespace=namespace, cluster=cluster.name),
    )
    project = ProjectRecord("team-a", destinations=(Destination(cluster.name, namespace),))
    request = request_for(app, project, cluster.name, trigger=Trigger.MANUAL)
    try:
        result = sync.run(request, kube=kube, caches=SyncCaches.at(tmp_path / "cache"))
        written = kube.get(binding_ref(binding))
    finally:
        kube.delete(binding_ref(binding))
        InventoryStore(kube).delete(app.name)

    assert written is None
    assert "project team-a allows no cluster-scoped kinds" in result.error
    assert f"ClusterRoleBinding/{binding}:" in result.error
    assert result.writes == 0
