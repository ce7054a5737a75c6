"""Helpers for the web UI's page tests: a browser-like client per user, signed in by token."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from tests.api.conftest import Api

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
