"""Helpers for the web UI's page tests: a browser-like client per user, signed in by token."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from tests.api.conftest import Api, add_app, add_cluster

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def browser(api: Api) -> TestClient:
    """A client with no bearer header and its own cookie jar, that does not follow redirects."""
    return TestClient(api.client.app, follow_redirects=False)


def signed_in(api: Api, token: str) -> TestClient:
    client = browser(api)
    answer = client.post("/ui/login", data={"token": token})
    assert answer.status_code == 303, answer.text
    return client


def csrf_of(client: TestClient, page: str = "/ui/") -> str:
    match = CSRF.search(client.get(page).text)
    assert match, f"no CSRF field on {page}"
    return match.group(1)


def token_for(api: Api, name: str, role: str, project: str | None = None) -> str:
    body = {"name": name, "role": role, "project": project}
    answer = api.client.post("/api/v1/tokens", json=body)
    assert answer.status_code == 201, answer.text
    token: str = answer.json()["token"]
    return token


def two_projects(api: Api) -> None:
    """Cluster `east`; projects team-a and team-b with one app each (`team-a-shop`, ...)."""
    add_cluster(api, "east")
    for team in ("team-a", "team-b"):
        body = {
            "name": team,
            "sourceRepos": ["*"],
            "destinations": [{"cluster": "*", "namespace": f"{team}-*"}],
        }
        assert api.client.post("/api/v1/projects", json=body).status_code == 201
        destination = {"cluster": "east", "namespace": f"{team}-shop"}
        add_app(api, f"{team}-shop", project=team, destination=destination)
