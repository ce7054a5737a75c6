"""Impersonation: a project acts on a cluster as a named ServiceAccount, so Kubernetes RBAC bounds
every write of its syncs, diffs and prunes even when a check above it has a hole.

The attacker is a member of project `team-a`. Its namespace globs are left wide open (`*`: the
hole the checks above RBAC could have), but it acts on the cluster as `<A>:deployer`, a
ServiceAccount with a Role in namespace A only. Real API, real worker, real testbed: the API
server's own RBAC answers Forbidden, and the tests read the cluster with the admin credentials
to show nothing was written in namespace B.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from api.schemas import ProjectIn
from fleet.control.policy import acting_as, check_app_allowed
from fleet.control.registry.records import (
    DEFAULT_PROJECT,
    AppDestination,
    AppRecord,
    AppSource,
    Destination,
    DestinationServiceAccount,
    ProjectRecord,
)
from fleet.errors import ImpersonationRequired, UsageError
from fleet.kube import kubeconfig
from fleet.kube.client import KubeClient
from fleet.kube.kubeconfig import ServiceAccount, parse
from fleet.model import ObjectRef
from tests.conftest import Cluster
from tests.support import manifests as m
from tests.support.fleet import FleetEnv, wait_until

ADMIN = "gf_admin-token-for-impersonation-tests"
GIT_HOST = "127.0.0.1"  # the test git server speaks plain http
SYNC_TIMEOUT = 90


# -- the cluster side: a ServiceAccount with RBAC in namespace A only ------------------------


class Tenancy:
    """Namespaces A and B on one cluster, and `deployer` in A, allowed ConfigMaps in A only."""

    def __init__(self, kube: KubeClient, cluster: str) -> None:
        self.kube, self.cluster = kube, cluster
        suffix = uuid.uuid4().hex[:8]
        self.a, self.b = f"team-a-{suffix}", f"team-b-{suffix}"
        self.account = f"{self.a}:deployer"
        self.user = f"system:serviceaccount:{self.a}:deployer"

    def create(self) -> Tenancy:
        for name in (self.a, self.b):
            self.kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        meta = {"name": "deployer", "namespace": self.a}
        self.kube.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta})
        rbac = "rbac.authorization.k8s.io/v1"
        rule = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}
        self.kube.create({"apiVersion": rbac, "kind": "Role", "metadata": meta, "rules": [rule]})
        binding = {
            "apiVersion": rbac,
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "deployer",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "deployer", "namespace": self.a}],
        }
        self.kube.create(binding)
        return self

    def configmap(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.kube.get(ObjectRef("", "v1", "ConfigMap", namespace, name))

    def ours_in(self, namespace: str) -> list[str]:
        """Names of the ConfigMaps in `namespace` that gitfleet labelled (read as admin)."""
        found = self.kube.list("v1", "ConfigMap", namespace=namespace)
        labelled = [c for c in found if "gitfleet.io/app" in (c["metadata"].get("labels") or {})]
        return sorted(c["metadata"]["name"] for c in labelled)

    def delete(self) -> None:
        for name in (self.a, self.b):
            self.kube.delete(ObjectRef("", "v1", "Namespace", "", name))


@pytest.fixture
def tenancy(fleet: FleetEnv) -> Iterator[Tenancy]:
    name = sorted(fleet.clusters)[0]
    kube = fleet.clusters[name].client()
    found = Tenancy(kube, name).create()
    yield found
    found.delete()
    kube.close()


# -- the API side: the real app on the fleet's Redis prefix, an admin and a member ------------


class Api:
    def __init__(self, client: TestClient) -> None:
        self.client = client
        self.member = ""

    def as_member(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.member}"}

    def put_project(self, body: dict[str, Any], *, create: bool = True) -> None:
        if create:
            response = self.client.post("/api/v1/projects", json=body)
        else:
            response = self.client.put(f"/api/v1/projects/{body['name']}", json=body)
        assert response.status_code in (200, 201), response.text

    def add_member(self, project: str) -> None:
        body = {"name": f"{project}-member", "role": "member", "project": project}
        response = self.client.post("/api/v1/tokens", json=body)
        assert response.status_code == 201, response.text
        self.member = response.json()["token"]

    def add_app(self, body: dict[str, Any]) -> Any:
        return self.client.post("/api/v1/apps", json=body, headers=self.as_member())

    def sync(self, app: str) -> None:
        response = self.client.post(f"/api/v1/apps/{app}/sync", headers=self.as_member())
        assert response.status_code == 202, response.text


@pytest.fixture
def make_api(fleet_api: Callable[..., TestClient]) -> Callable[..., Api]:
    def build(*, require_impersonation: bool = False) -> Api:
        client = fleet_api(ADMIN, scheduler=False, require_impersonation=require_impersonation)
        return Api(client)

    return build


def project_body(t: Tenancy, *, accounts: bool = True) -> dict[str, Any]:
    """team-a with the hole: every namespace allowed; acting as `deployer` when `accounts`."""
    body: dict[str, Any] = {
        "name": "team-a",
        "sourceRepos": ["*"],
        "destinations": [{"cluster": "*", "namespace": "*"}],
    }
    if accounts:
        body["destinationServiceAccounts"] = [{"cluster": t.cluster, "serviceAccount": t.account}]
    return body


def app_body(fleet: FleetEnv, t: Tenancy, name: str, **policy: Any) -> dict[str, Any]:
    return {
        "name": name,
        "project": "team-a",
        "source": {"repo": fleet.repo_url, "path": f"apps/{name}"},
        "destination": {"cluster": t.cluster, "namespace": t.a},
        "syncPolicy": policy,
    }


def last_error(fleet: FleetEnv, app: str, cluster: str) -> str:
    last = fleet.status(app, cluster).last_sync
    return last.error if last is not None else ""


def synced(fleet: FleetEnv, app: str, cluster: str, *, after: int = 0) -> bool:
    found = fleet.store.log.history(app, cluster)
    return len(found) > after


def wait_synced(fleet: FleetEnv, app: str, cluster: str, *, after: int = 0) -> None:
    wait_until(
        lambda: synced(fleet, app, cluster, after=after),
        timeout=SYNC_TIMEOUT,
        what=f"sync {after + 1} of {app}",
    )


# -- attacks against the real fleet ----------------------------------------------------------


def test_a_project_acting_as_a_service_account_syncs_into_the_namespace_its_rbac_allows(
    fleet: FleetEnv, tenancy: Tenancy, make_api: Callable[..., Api]
) -> None:
    api = make_api()
    api.put_project(project_body(tenancy))
    api.add_member("team-a")
    app = fleet.app_name(0)
    fleet.repo.commit({f"apps/{app}/cm.yaml": m.configmap("settings")})
    assert api.add_app(app_body(fleet, tenancy, app)).status_code == 201
    fleet.worker_thread("alpha")

    api.sync(app)
    wait_synced(fleet, app, tenancy.cluster)

    assert last_error(fleet, app, tenancy.cluster) == ""
    live = tenancy.configmap(tenancy.a, "settings")
    assert live is not None and live["data"] == {"k": "v"}


def test_an_object_outside_the_service_accounts_rbac_is_forbidden_even_when_the_project_allows_it(
    fleet: FleetEnv, tenancy: Tenancy, make_api: Callable[..., Api]
) -> None:
    api = make_api()
    api.put_project(project_body(tenancy))
    api.add_member("team-a")
    app = fleet.app_name(0)
    planted = m.configmap("planted", extra_meta=f"  namespace: {tenancy.b}\n")
    fleet.repo.commit(
        {f"apps/{app}/cm.yaml": m.configmap("settings"), f"apps/{app}/b.yaml": planted}
    )
    response = api.add_app(app_body(fleet, tenancy, app))
    assert response.status_code == 201, "the project's wide-open globs let the app in"
    fleet.worker_thread("alpha")

    diff = api.client.get(f"/api/v1/apps/{app}/diff", headers=api.as_member())
    api.sync(app)
    wait_synced(fleet, app, tenancy.cluster)

    error = last_error(fleet, app, tenancy.cluster)
    assert "Forbidden" in error and tenancy.user in error, error
    assert f"ConfigMap/{tenancy.b}/planted" in error, error
    assert tenancy.configmap(tenancy.b, "planted") is None
    assert tenancy.ours_in(tenancy.b) == []
    assert diff.status_code == 200, diff.text
    (found,) = diff.json()["clusters"]
    assert "Forbidden" in found["error"] and tenancy.user in found["error"], found


def test_prune_and_cascade_delete_act_as_the_service_account_and_leave_other_namespaces_alone(
    fleet: FleetEnv, tenancy: Tenancy, make_api: Callable[..., Api]
) -> None:
    api = make_api()
    api.put_project(project_body(tenancy, accounts=False))
    api.add_member("team-a")
    app = fleet.app_name(0)
    planted = m.configmap("planted", extra_meta=f"  namespace: {tenancy.b}\n")
    fleet.repo.commit(
        {f"apps/{app}/cm.yaml": m.configmap("settings"), f"apps/{app}/b.yaml": planted}
    )
    assert api.add_app(app_body(fleet, tenancy, app, prune=True)).status_code == 201
    fleet.worker_thread("alpha")
    api.sync(app)  # before the project acts as a ServiceAccount: the object lands in B
    wait_synced(fleet, app, tenancy.cluster)
    assert tenancy.ours_in(tenancy.b) == ["planted"]

    api.put_project(project_body(tenancy), create=False)
    fleet.repo.commit({f"apps/{app}/b.yaml": None})
    api.sync(app)
    wait_synced(fleet, app, tenancy.cluster, after=1)

    error = last_error(fleet, app, tenancy.cluster)
    assert "Forbidden" in error and tenancy.user in error, error
    assert tenancy.ours_in(tenancy.b) == ["planted"]
    response = api.client.delete(f"/api/v1/apps/{app}", headers=api.as_member())
    assert response.status_code == 202, response.text
    wait_until(
        lambda: "delete failed" in fleet.status(app, tenancy.cluster).message,
        timeout=SYNC_TIMEOUT,
        what="the cascading delete to fail",
    )
    message = fleet.status(app, tenancy.cluster).message
    assert "Forbidden" in message and tenancy.user in message, message
    assert tenancy.ours_in(tenancy.b) == ["planted"]


def test_when_impersonation_is_mandatory_a_project_without_a_service_account_cannot_sync(
    fleet: FleetEnv, tenancy: Tenancy, make_api: Callable[..., Api]
) -> None:
    api = make_api(require_impersonation=True)
    api.put_project(project_body(tenancy, accounts=False))
    api.add_member("team-a")
    app = fleet.app_name(0)
    fleet.repo.commit({f"apps/{app}/cm.yaml": m.configmap("settings")})

    refused = api.add_app(app_body(fleet, tenancy, app))
    assert refused.status_code == 403, refused.text
    assert "GITFLEET_REQUIRE_IMPERSONATION" in refused.text
    assert f"no ServiceAccount for cluster {tenancy.cluster}" in refused.text
    # An app registered before the setting was turned on: the worker refuses to sync it.
    record = AppRecord(
        name=app,
        project="team-a",
        source=AppSource(repo=fleet.repo_url, path=f"apps/{app}"),
        destination=AppDestination(namespace=tenancy.a, cluster=tenancy.cluster),
    )
    fleet.store.put_app(record, create=True)
    fleet.worker_thread("alpha", require_impersonation=True)
    api.sync(app)
    wait_synced(fleet, app, tenancy.cluster)

    error = last_error(fleet, app, tenancy.cluster)
    assert "GITFLEET_REQUIRE_IMPERSONATION" in error and "team-a" in error, error
    assert tenancy.configmap(tenancy.a, "settings") is None


def test_when_impersonation_is_mandatory_members_cannot_deploy_through_the_default_project(
    fleet: FleetEnv, tenancy: Tenancy, make_api: Callable[..., Api]
) -> None:
    api = make_api(require_impersonation=True)
    api.add_member("default")
    body = {**app_body(fleet, tenancy, fleet.app_name(0)), "project": "default"}
    refused = api.add_app(body)
    assert refused.status_code == 403, refused.text
    assert "GITFLEET_REQUIRE_IMPERSONATION" in refused.text


# -- the pieces, without a cluster -----------------------------------------------------------


def test_a_client_acting_as_a_service_account_is_that_account_to_the_api_server(
    cluster: Cluster,
) -> None:
    account = ServiceAccount("team-a", "deployer")
    client = KubeClient(kubeconfig.load(cluster.kubeconfig).acting_as(account))
    try:
        review = client.request(
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        )
    finally:
        client.close()
    user = review["status"]["userInfo"]
    assert user["username"] == "system:serviceaccount:team-a:deployer"
    groups = {"system:serviceaccounts", "system:serviceaccounts:team-a", "system:authenticated"}
    assert set(user["groups"]) == groups


def test_a_kubeconfig_that_already_impersonates_is_refused() -> None:
    text = """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t, as: someone}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
"""
    with pytest.raises(UsageError, match="impersonat"):
        parse(text)


def _project(*entries: DestinationServiceAccount) -> ProjectRecord:
    return ProjectRecord(
        "team-a",
        source_repos=("*",),
        destinations=(Destination("*", "*"),),
        destination_service_accounts=entries,
    )


def _app(namespace: str = "shop") -> AppRecord:
    return AppRecord(
        name="shop",
        project="team-a",
        source=AppSource(repo="https://git.example.com/shop.git"),
        destination=AppDestination(namespace=namespace, cluster="prod-eu"),
    )


def test_the_first_entry_matching_cluster_and_namespace_names_the_account() -> None:
    project = _project(
        DestinationServiceAccount("lab", "*", "lab:deployer"),
        DestinationServiceAccount("prod-*", "shop", "shop:deployer"),
        DestinationServiceAccount("prod-*", "*", "prod:fallback"),
    )
    assert acting_as(_app(), project, "prod-eu") == ServiceAccount("shop", "deployer")
    assert acting_as(_app("cart"), project, "prod-eu") == ServiceAccount("prod", "fallback")
    assert acting_as(_app(), project, "staging") is None


def test_mandatory_impersonation_names_the_project_the_cluster_and_the_setting() -> None:
    project = _project(DestinationServiceAccount("lab", "*", "lab:deployer"))
    with pytest.raises(ImpersonationRequired) as caught:
        acting_as(_app(), project, "prod-eu", required=True)
    message = str(caught.value)
    assert "team-a" in message and "prod-eu" in message
    assert "GITFLEET_REQUIRE_IMPERSONATION" in message
    assert acting_as(_app(), DEFAULT_PROJECT, "prod-eu", required=True) is None
    violations = check_app_allowed(_app(), project, ["prod-eu", "lab"], require_impersonation=True)
    assert len(violations) == 1 and "prod-eu" in violations[0]


@pytest.mark.parametrize("account", ["deployer", "a:b:c", "Team:deployer", ":x", "ns:"])
def test_a_service_account_must_be_named_with_its_namespace(account: str) -> None:
    body = {
        "name": "team-a",
        "destinationServiceAccounts": [{"cluster": "*", "serviceAccount": account}],
    }
    with pytest.raises(ValidationError, match="namespace:name"):
        ProjectIn.model_validate(body)
