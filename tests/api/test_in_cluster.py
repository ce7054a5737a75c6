"""The coordinator registers the cluster it runs in as `in-cluster` (as Argo CD does), and a
sync to it acts as the pod's ServiceAccount, whose token never leaves the pod.

The testbed plays the pod: a real ServiceAccount and its token Secret in a testbed cluster,
the token and CA written where the kubelet would mount them (GITFLEET_SERVICEACCOUNT_DIR), and
KUBERNETES_SERVICE_HOST/PORT pointing at that cluster's API server.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from fastapi.testclient import TestClient

from deploy.testbed.process import wait_for
from fleet.control.registry.records import AppDestination, AppRecord, AppSource, SyncPolicy
from fleet.engine.inventory import InventoryStore
from fleet.errors import KubeApiError
from fleet.kube import incluster, kubeconfig
from fleet.kube.client import KubeClient
from fleet.model import ObjectRef
from tests.conftest import Cluster
from tests.support.fleet import FleetEnv, settings_ref

ADMIN = "in-cluster-admin-token"


@pytest.fixture
def pod_account(
    cluster: Cluster, kube: KubeClient, namespace: str, tmp_path: Path, monkeypatch: Any
) -> Iterator[str]:
    """A ServiceAccount bound to cluster-admin (the chart's default ClusterRole is as broad),
    mounted as a pod's would be; yields its token."""
    account = {"apiVersion": "v1", "kind": "ServiceAccount"}
    kube.create({**account, "metadata": {"name": "gitfleet", "namespace": namespace}})
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/service-account-token",
        "metadata": {
            "name": "gitfleet-token",
            "namespace": namespace,
            "annotations": {"kubernetes.io/service-account.name": "gitfleet"},
        },
    }
    kube.create(secret)
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"{namespace}-in-cluster"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "cluster-admin",
        },
        "subjects": [{"kind": "ServiceAccount", "name": "gitfleet", "namespace": namespace}],
    }
    kube.create(binding)

    def token() -> str | None:
        found = kube.get(ObjectRef("", "v1", "Secret", namespace, "gitfleet-token")) or {}
        data = found.get("data") or {}
        return base64.b64decode(data["token"]).decode() if "token" in data else None

    value = wait_for(token, what="the ServiceAccount token", timeout=30, period=0.5)
    mount = tmp_path / "serviceaccount"
    mount.mkdir()
    (mount / "token").write_text(value)
    (mount / "ca.crt").write_bytes(kubeconfig.load(cluster.kubeconfig).ca_pem)
    (mount / "namespace").write_text(namespace)
    server = urlsplit(cluster.server)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", str(server.hostname))
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(server.port))
    monkeypatch.setenv(incluster.DIR_ENV, str(mount))
    yield value
    kube.delete(ObjectRef.of(binding))


def test_the_api_registers_in_cluster_once_and_never_shows_its_token(
    fleet_api: Callable[..., TestClient], fleet: FleetEnv, pod_account: str
) -> None:
    first = fleet_api(ADMIN, in_cluster=True)
    listed = first.get("/api/v1/clusters")
    again = fleet_api(ADMIN, in_cluster=True).get("/api/v1/clusters")  # a second replica starts

    names = [c["name"] for c in listed.json()]
    assert names.count("in-cluster") == 1
    assert again.json() == listed.json()
    record = first.get("/api/v1/clusters/in-cluster")
    assert record.status_code == 200
    assert record.json()["server"] == "https://kubernetes.default.svc"
    for response in (listed, again, record):
        assert pod_account not in response.text
    stored = b"".join(
        v for k in fleet.redis.scan_iter(f"{fleet.prefix}:*") if (v := _string(fleet, k))
    )
    assert pod_account.encode() not in stored


def forbidden(kube: KubeClient, namespace: str) -> bool:
    try:
        kube.get(ObjectRef("", "v1", "ConfigMap", namespace, "settings"))
    except KubeApiError as e:
        return e.status == 403
    return False


def _string(fleet: FleetEnv, key: bytes) -> bytes | None:
    value = fleet.redis.get(key) if fleet.redis.type(key) == b"string" else None
    return value if isinstance(value, bytes) else None


def test_without_a_pod_account_or_when_turned_off_nothing_is_registered(
    fleet_api: Callable[..., TestClient], pod_account: str, monkeypatch: Any
) -> None:
    off = fleet_api(ADMIN, in_cluster=False).get("/api/v1/clusters").json()
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    outside = fleet_api(ADMIN, in_cluster=True).get("/api/v1/clusters").json()

    assert "in-cluster" not in [c["name"] for c in off + outside]


def test_a_sync_to_in_cluster_applies_as_the_pods_service_account(
    fleet_api: Callable[..., TestClient],
    fleet: FleetEnv,
    kube: KubeClient,
    namespace: str,
    pod_account: str,
) -> None:
    fleet_api(ADMIN, in_cluster=True)
    app = f"{fleet.prefix}-incluster"
    fleet.commit_apps([app])
    record = AppRecord(
        name=app,
        source=AppSource(repo=fleet.repo_url, path=f"apps/{app}"),
        destination=AppDestination(namespace=app, cluster="in-cluster"),
        sync_policy=SyncPolicy(create_namespace=True, interval_s=3600),
    )
    fleet.store.put_app(record, create=True)
    fleet.worker_thread(f"w-{uuid.uuid4().hex[:6]}")
    try:
        answer = fleet.sync_and_wait(app, "in-cluster")

        assert answer["result"] == "succeeded", answer
        live = kube.get(settings_ref(app))
        assert live is not None
        managers = {m["manager"] for m in live["metadata"]["managedFields"]}
        assert "gitfleet" in managers
        assert pod_account not in str(answer)

        # Without its binding the account may change nothing, and neither may the sync.
        kube.delete(
            ObjectRef(
                "rbac.authorization.k8s.io",
                "v1",
                "ClusterRoleBinding",
                "",
                f"{namespace}-in-cluster",
            )
        )
        as_pod = KubeClient(incluster.config())
        wait_for(lambda: forbidden(as_pod, app), what="the binding gone", timeout=30, period=0.5)
        as_pod.close()
        fleet.commit_apps([app], data="k: v2")
        refused = fleet.sync_and_wait(app, "in-cluster")

        assert refused["result"] != "succeeded", refused
        assert f"system:serviceaccount:{namespace}:gitfleet" in str(refused)
        assert pod_account not in str(refused)
    finally:
        for worker in fleet.threads:
            worker.stop()
        kube.delete(ObjectRef("", "v1", "Namespace", "", app))
        InventoryStore(kube).delete(app)
