"""The UI's object pages against a real cluster: live manifests, masked Secrets, diffs, children.

The coordinator reads an object only when the app's last sync recorded it (or it is owned by
one that was), as the app's project acts on that cluster; and it never shows a Secret's values,
neither in the live manifest nor in the diff.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from fleet.control.registry.records import Role
from tests.support import manifests as m
from tests.support.fleet import FleetEnv

ADMIN_TOKEN = "gf_ui-objects-admin-token-0123456789"


def secret(value: str) -> str:
    encoded = base64.b64encode(value.encode()).decode()
    return f"""apiVersion: v1
kind: Secret
metadata:
  name: db
type: Opaque
data:
  password: {encoded}
"""


def signed_in(app: object, token: str) -> TestClient:
    client = TestClient(app, follow_redirects=False)  # type: ignore[arg-type]
    assert client.post("/ui/login", data={"token": token}).status_code == 303
    return client


@pytest.fixture
def deployed(fleet: FleetEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """An app with a ConfigMap, a Deployment and a Secret, synced once: (app, cluster)."""
    monkeypatch.setenv("GITFLEET_CACHE_DIR", str(tmp_path / "coordinator-cache"))
    cluster = sorted(fleet.clusters)[0]
    app = fleet.app_name(0)
    fleet.repo.commit(
        {
            f"apps/{app}/cm.yaml": m.configmap("settings", "k: v1"),
            f"apps/{app}/deploy.yaml": m.deployment("web", configmap="settings"),
            f"apps/{app}/secret.yaml": secret("first-password"),
        }
    )
    fleet.add_app(app, cluster)
    fleet.worker_thread("ui-objects")
    answer = fleet.sync_and_wait(app, cluster)
    assert not answer.get("error"), answer
    return app, cluster


def query(cluster: str, kind: str, name: str, namespace: str, group: str = "") -> dict[str, str]:
    version = "v1"
    return dict(
        cluster=cluster, group=group, version=version, kind=kind, namespace=namespace, name=name
    )


def test_a_secrets_values_never_show_in_its_live_manifest_or_its_diff(
    fleet: FleetEnv, fleet_api: Callable[..., TestClient], deployed: tuple[str, str]
) -> None:
    app, cluster = deployed
    client = signed_in(fleet_api(ADMIN_TOKEN).app, ADMIN_TOKEN)
    fleet.repo.commit({f"apps/{app}/secret.yaml": secret("second-password")})

    page = client.get(f"/ui/apps/{app}", params=None)
    assert f'data-ref="Secret/{app}/db"' in page.text
    shown = client.get(f"/ui/apps/{app}/object", params=query(cluster, "Secret", "db", app))

    assert shown.status_code == 200
    for value in ("first-password", "second-password"):
        assert value not in shown.text
        assert base64.b64encode(value.encode()).decode() not in shown.text
    assert "password: (masked)" in shown.text  # the live manifest
    assert "-  password: &#39;--------&#39;" in shown.text  # the diff: masks that differ
    assert "+  password: ++++++++" in shown.text


def test_a_configmaps_page_shows_its_live_manifest_and_its_diff_after_a_commit(
    fleet: FleetEnv, fleet_api: Callable[..., TestClient], deployed: tuple[str, str]
) -> None:
    app, cluster = deployed
    client = signed_in(fleet_api(ADMIN_TOKEN).app, ADMIN_TOKEN)
    params = query(cluster, "ConfigMap", "settings", app)

    in_sync = client.get(f"/ui/apps/{app}/object", params=params).text
    fleet.commit_apps([app], data="k: v2")
    changed = client.get(f"/ui/apps/{app}/object", params=params).text

    assert "In sync: the live object matches git." in in_sync and "k: v1" in in_sync
    assert "-  k: v1" in changed and "+  k: v2" in changed
    assert "managedFields" not in changed


def test_a_deployments_children_are_its_replicasets_and_their_pods_from_the_cluster(
    fleet: FleetEnv, fleet_api: Callable[..., TestClient], deployed: tuple[str, str]
) -> None:
    app, cluster = deployed
    client = signed_in(fleet_api(ADMIN_TOKEN).app, ADMIN_TOKEN)

    answer = client.get(
        f"/ui/api/apps/{app}/children", params=query(cluster, "Deployment", "web", app, "apps")
    ).json()

    kinds = [(c["kind"], c["depth"]) for c in answer["children"]]
    assert kinds[0] == ("ReplicaSet", 1) and ("Pod", 2) in kinds, answer
    assert all(c["namespace"] == app for c in answer["children"])


def test_objects_the_app_does_not_declare_are_not_readable_through_the_ui(
    fleet: FleetEnv, fleet_api: Callable[..., TestClient], deployed: tuple[str, str]
) -> None:
    app, cluster = deployed
    client = signed_in(fleet_api(ADMIN_TOKEN).app, ADMIN_TOKEN)

    for params in (
        query(cluster, "Secret", "anything", "kube-system"),
        query(cluster, "ConfigMap", "kube-root-ca.crt", app),
        {**query(cluster, "ConfigMap", "settings", app), "cluster": "elsewhere"},
    ):
        answer = client.get(f"/ui/apps/{app}/object", params=params)
        assert answer.status_code == 404, params
        assert "is not an object of app" in answer.text
    children = client.get(
        f"/ui/api/apps/{app}/children",
        params=query(cluster, "Deployment", "coredns", "kube-system"),
    )
    assert children.status_code == 404


def test_a_viewer_reads_live_manifests_but_may_not_ask_for_a_diff(
    fleet: FleetEnv, fleet_api: Callable[..., TestClient], deployed: tuple[str, str]
) -> None:
    app, cluster = deployed
    built = fleet_api(ADMIN_TOKEN)
    viewer = signed_in(built.app, fleet.store.create_token("ui-viewer", Role.VIEWER))

    page = viewer.get(f"/ui/apps/{app}/object", params=query(cluster, "ConfigMap", "settings", app))
    whole = viewer.get(f"/ui/apps/{app}/diff", params={"cluster": cluster})

    assert page.status_code == 200 and "k: v1" in page.text
    assert "is a viewer: read only, cannot ask for a diff" in page.text
    assert whole.status_code == 403
