"""The coordinator's HTTP client, used by the `gitfleet` client commands and by the benchmark.

One request at a time (`call`), many at once with a bounded number in flight (`bulk`,
which retries what the coordinator says a retry can cure: a 409 asking to "retry it" when the
registry changed under the request, or a 503 when no worker was live), a GitHub-style push
webhook signed with the webhook secret (`push`), and the Prometheus text of /metrics.

Every failure a person can act on, an unreachable server, a refused token, a 4xx with the
server's message naming the field, is a `ClientError` of one line; it is a `UsageError`, so the
command line prints it without a traceback. This module imports neither FastAPI nor the rest of
`api`, so a client starts fast.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from fleet.errors import UsageError

DEFAULT_TIMEOUT = 60.0
BULK_TIMEOUT = 300.0
PUSH_TIMEOUT = 600.0
RETRIES = 30
WEBHOOK_PATH = "/api/v1/webhooks/git"
REGISTRY_PATH = "/api/v1/registry"

Request = tuple[str, str, Any]  # method, path, JSON body (or None)


class ClientError(UsageError):
    """A request to the coordinator failed in a way the caller can act on."""


class Unreachable(ClientError):
    """No answer came: the request may or may not have been carried out."""


class CoordinatorClient:
    """The coordinator's REST API at `server`, as the holder of `token`."""

    def __init__(self, server: str, token: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.server = server.rstrip("/")
        self.token = token
        self.timeout = timeout

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: dict[str, Any] | None = None,
        ok: tuple[int, ...] = (),
        timeout: float | None = None,
    ) -> Any:
        """The decoded JSON answer; ClientError for anything but 2xx (or a status in `ok`)."""
        try:
            response = httpx.request(
                method,
                self.server + path,
                json=body,
                params=params,
                headers=self.headers,
                timeout=self.timeout if timeout is None else timeout,
            )
        except httpx.TransportError as e:
            raise self._unreachable(e) from e
        return _decode(response, ok)

    def bulk(self, requests: Sequence[Request], *, concurrency: int = 16) -> list[Any]:
        """Send (method, path, body) requests with at most `concurrency` in flight; the answers
        in the order of the requests."""
        return asyncio.run(self._bulk(requests, concurrency))

    async def _bulk(self, requests: Sequence[Request], concurrency: int) -> list[Any]:
        gate = asyncio.Semaphore(concurrency)
        limits = httpx.Limits(max_connections=concurrency)
        async with httpx.AsyncClient(
            base_url=self.server, headers=self.headers, timeout=BULK_TIMEOUT, limits=limits
        ) as client:

            async def one(method: str, path: str, body: Any) -> Any:
                async with gate:
                    return await self._with_retries(client, method, path, body)

            return list(await asyncio.gather(*(one(*r) for r in requests)))

    async def _with_retries(
        self, client: httpx.AsyncClient, method: str, path: str, body: Any
    ) -> Any:
        """One request; a 409 "retry it" or a 503 is retried with a growing pause."""
        try:
            for attempt in range(RETRIES):
                response = await client.request(method, path, json=body)
                if not is_retryable(response):
                    break
                await asyncio.sleep(min(0.05 * 2**attempt, 2.0))
        except httpx.TransportError as e:
            raise self._unreachable(e) from e
        return _decode(response, ())

    def push(self, secret: str, payload: Mapping[str, Any]) -> Any:
        """POST a GitHub push event to the webhook, signed with `secret` as GitHub signs it."""
        body = json.dumps(payload).encode()
        signature = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        headers = {
            **self.headers,
            "Content-Type": "application/json",
            "X-GitHub-Event": "push",
            "X-GitHub-Delivery": str(uuid.uuid4()),  # each delivery is accepted once
            "X-Hub-Signature-256": signature,
        }
        try:
            response = httpx.post(
                self.server + WEBHOOK_PATH, content=body, headers=headers, timeout=PUSH_TIMEOUT
            )
        except httpx.TransportError as e:
            raise self._unreachable(e) from e
        return _decode(response, ())

    def export_registry(self) -> str:
        """The registry document (`GET /api/v1/registry/export`), as the server wrote it."""
        try:
            response = httpx.get(
                self.server + REGISTRY_PATH + "/export", headers=self.headers, timeout=self.timeout
            )
        except httpx.TransportError as e:
            raise self._unreachable(e) from e
        if response.status_code >= 300:
            _decode(response, ())
        return response.text

    def import_registry(self, document: bytes) -> Any:
        """Send a registry document as it is (`POST /api/v1/registry/import`): the report."""
        headers = {**self.headers, "Content-Type": "application/json"}
        try:
            response = httpx.post(
                self.server + REGISTRY_PATH + "/import",
                content=document,
                headers=headers,
                timeout=max(self.timeout, BULK_TIMEOUT),
            )
        except httpx.TransportError as e:
            raise self._unreachable(e) from e
        return _decode(response, ())

    def metrics(self) -> str:
        """The Prometheus text of /metrics (an open endpoint)."""
        try:
            response = httpx.get(self.server + "/metrics", timeout=self.timeout)
        except httpx.TransportError as e:
            raise self._unreachable(e) from e
        if response.status_code >= 300:
            _decode(response, ())
        return response.text

    def _unreachable(self, error: httpx.TransportError) -> ClientError:
        reason = type(error).__name__
        return Unreachable(f"cannot reach the gitfleet server at {self.server} ({reason})")


def is_retryable(response: httpx.Response) -> bool:
    """A 503, or a 409 whose message asks to retry (the registry changed under the request)."""
    if response.status_code == 503:
        return True
    if response.status_code != 409:
        return False
    detail = _json(response)
    detail = detail.get("detail") if isinstance(detail, dict) else None
    return isinstance(detail, str) and detail.endswith("; retry it")


def _decode(response: httpx.Response, ok: tuple[int, ...]) -> Any:
    data = _json(response)
    if response.status_code < 300 or response.status_code in ok:
        return data
    detail = data.get("detail") if isinstance(data, dict) else None
    message = detail if isinstance(detail, str) else response.reason_phrase
    if response.status_code == 401:
        raise ClientError(f"the server refused the token (401): {message}")
    raise ClientError(
        f"{response.request.method} {response.request.url.path} failed "
        f"({response.status_code}): {message}"
    )


def _json(response: httpx.Response) -> Any:
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return {"detail": response.text.strip()[:200]}
