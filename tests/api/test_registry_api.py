"""/api/v1/registry: export and import through the API, admin only, with their own body limit."""

from __future__ import annotations

import json

from tests.api.conftest import Api, add_app, add_cluster

MiB = 1 << 20


def _member(api: Api) -> str:
    body = {"name": "ci", "role": "member", "project": "default"}
    response = api.client.post("/api/v1/tokens", json=body)
    assert response.status_code == 201, response.text
    token: str = response.json()["token"]
    return token


def test_an_admin_exports_and_imports_and_nobody_else_may(api: Api) -> None:
    assert api.client.get("/readyz").json()["registry"] == "empty"
    add_cluster(api, "east")
    add_app(api, "shop")
    assert "warning" not in api.client.get("/readyz").json()
    member = _member(api)

    response = api.client.get("/api/v1/registry/export")
    assert response.status_code == 200
    document = response.json()
    assert [a["record"]["name"] for a in document["apps"]] == ["shop"]
    assert "tok-east" not in response.text  # the kubeconfig's token: ciphertext only

    assert api.client.get("/api/v1/registry/export", headers=api.as_(member)).status_code == 403
    refused = api.client.post(
        "/api/v1/registry/import", content=response.content, headers=api.as_(member)
    )
    assert refused.status_code == 403

    answer = api.client.post("/api/v1/registry/import", content=response.content).json()
    assert answer["counts"]["apps"] == {"created": 0, "updated": 0, "unchanged": 1, "kept": 0}
    assert list(answer["unreachable"]) == ["east"]  # a fake server: named, never fatal

    newer = json.dumps({**document, "version": 2})
    refused = api.client.post("/api/v1/registry/import", content=newer)
    assert refused.status_code == 422 and "version 2" in refused.json()["detail"]


def test_only_an_admin_import_may_pass_the_ordinary_body_limit(api: Api) -> None:
    add_cluster(api, "east")
    document = api.client.get("/api/v1/registry/export").json()
    document["clusters"][0]["record"]["labels"] = {"pad": "x" * (2 * MiB)}
    body = json.dumps(document).encode()
    member = _member(api)

    too_large = api.client.post("/api/v1/registry/import", content=body, headers=api.as_(member))
    assert too_large.status_code == 413
    answer = api.client.post("/api/v1/registry/import", content=body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["counts"]["clusters"]["updated"] == 1
