"""Which coordinator answers the bulk client retries: only what a retry can cure."""

from __future__ import annotations

import httpx

from api.client import is_retryable
from fleet.control.registry.errors import Conflict


def answer(status: int, detail: str) -> httpx.Response:
    return httpx.Response(status, json={"detail": detail})


def test_only_the_registry_conflict_and_unavailability_are_retried() -> None:
    conflict = str(
        Conflict("the registry kept changing while this request ran; retry it")
    )  # transact's

    assert is_retryable(answer(409, conflict))
    assert is_retryable(answer(503, "Redis is unreachable"))
    assert not is_retryable(answer(409, "apps.0 (retry-it): app retry-it already exists"))
    assert not is_retryable(answer(409, "app retry already exists"))
    assert not is_retryable(answer(422, "retry it"))
