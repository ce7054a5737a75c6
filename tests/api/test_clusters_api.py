"""Onboarding clusters through the API: credentials go in and never come out."""

from __future__ import annotations

import base64

import yaml

from fleet.kube.client import KubeClient
from tests.api.conftest import Api, add_app, add_cluster, fake_kubeconfig
from tests.conftest import Cluster


def test_a_testbed_cluster_onboarded_by_kubeconfig_is_listed_without_credentials_and_reachable(
    api: Api, testbed: list[Cluster]
) -> None:
    cluster = testbed[0]
    text = cluster.kubeconfig.read_text()
    token = yaml.safe_load(text)["users"][0]["user"]["token"]
    body = {"name": "east", "kubeconfig": text, "labels": {"region": "eu"}}

    created = api.client.post("/api/v1/clusters", json=body)
    listed = api.client.get("/api/v1/clusters")
    one = api.client.get("/api/v1/clusters/east")

    assert created.status_code == 201, created.text
    assert listed.json() == [one.json()]
    assert one.json()["server"] == cluster.server
    assert one.json()["labels"] == {"region": "eu"}
    for response in (created, listed, one):
        assert token not in response.text
        assert "kubeconfig" not in response.text and "token" not in response.text
    kube = KubeClient(api.store.cluster_config("east"))
    try:
        assert kube.request("GET", "/version")["gitVersion"].startswith("v1.")
    finally:
        kube.close()


def test_a_cluster_registered_with_server_token_and_ca_data_reaches_its_api_server(
    api: Api, testbed: list[Cluster]
) -> None:
    cluster = testbed[1]
    config = KubeClient.from_kubeconfig(cluster.kubeconfig).config
    body = {
        "name": "west",
        "server": config.server,
        "token": config.token,
        "caData": base64.b64encode(config.ca_pem).decode(),
    }

    created = api.client.post("/api/v1/clusters", json=body)

    assert created.status_code == 201, created.text
    assert config.token not in created.text
    kube = KubeClient(api.store.cluster_config("west"))
    try:
        assert kube.request("GET", "/version")["gitVersion"].startswith("v1.")
    finally:
        kube.close()


def test_a_cluster_name_already_registered_is_refused_and_the_first_one_kept(api: Api) -> None:
    add_cluster(api, "east", {"tier": "prod"})

    again = api.client.post(
        "/api/v1/clusters", json={"name": "east", "kubeconfig": fake_kubeconfig("other")}
    )

    assert again.status_code == 409
    assert "cluster east already exists" in again.json()["detail"]
    assert api.client.get("/api/v1/clusters/east").json()["labels"] == {"tier": "prod"}
    assert api.store.cluster_config("east").token == "tok-east"


def test_deleting_a_cluster_an_app_targets_is_refused_until_forced(api: Api) -> None:
    add_cluster(api, "east")
    add_app(api, "shop")

    refused = api.client.delete("/api/v1/clusters/east")
    still_there = api.client.get("/api/v1/clusters/east")
    forced = api.client.delete("/api/v1/clusters/east", params={"force": "true"})

    assert refused.status_code == 409
    assert "destination of app(s) shop" in refused.json()["detail"]
    assert still_there.status_code == 200
    assert forced.status_code == 204
    assert api.client.get("/api/v1/clusters/east").status_code == 404


def test_deleting_a_cluster_selected_by_an_app_label_selector_is_refused(api: Api) -> None:
    add_cluster(api, "east", {"env": "prod"})
    add_cluster(api, "lab", {"env": "dev"})
    add_app(api, "shop", destination={"clusterSelector": {"env": "prod"}, "namespace": "shop"})

    refused = api.client.delete("/api/v1/clusters/east")
    unused = api.client.delete("/api/v1/clusters/lab")

    assert refused.status_code == 409 and "shop" in refused.json()["detail"]
    assert unused.status_code == 204


def test_a_kubeconfig_that_names_files_on_the_coordinator_is_refused_naming_the_field(
    api: Api,
) -> None:
    text = fake_kubeconfig("t").replace(
        "insecure-skip-tls-verify: true", "certificate-authority: /etc/passwd"
    )

    response = api.client.post("/api/v1/clusters", json={"name": "east", "kubeconfig": text})

    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "body.kubeconfig"
    assert "certificate-authority names a file" in response.json()["detail"]
    assert api.client.get("/api/v1/clusters").json() == []


def test_a_kubeconfig_without_the_requested_context_is_refused_naming_the_context(
    api: Api,
) -> None:
    body = {"name": "east", "kubeconfig": fake_kubeconfig("t"), "context": "nope"}

    response = api.client.post("/api/v1/clusters", json=body)

    assert response.status_code == 422
    assert "body.kubeconfig: no entry named 'nope' in contexts" in response.json()["detail"]


def test_a_cluster_with_neither_kubeconfig_nor_token_is_refused(api: Api) -> None:
    response = api.client.post("/api/v1/clusters", json={"name": "east", "server": "https://x"})

    assert response.status_code == 422
    assert "give a kubeconfig, or a server and a token" in response.json()["detail"]


def test_changing_a_cluster_replaces_its_labels_and_keeps_its_creation_time(api: Api) -> None:
    created = add_cluster(api, "east", {"env": "dev"})
    body = {"name": "east", "kubeconfig": fake_kubeconfig("new"), "labels": {"env": "prod"}}

    changed = api.client.put("/api/v1/clusters/east", json=body)

    assert changed.status_code == 200, changed.text
    assert changed.json()["labels"] == {"env": "prod"}
    assert changed.json()["created"] == created["created"]
    assert api.store.cluster_config("east").token == "new"
