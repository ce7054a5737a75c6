"""With the real dispatcher (fleet.control.routing.dispatch): a sync request lands in the owner
worker's queue."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from rq import Queue

from api.app import create_app
from fleet.control.keys import Queues
from fleet.control.routing import membership, payloads
from tests.api.conftest import (
    ADMIN_TOKEN,
    Api,
    RecordingDispatcher,
    add_app,
    add_cluster,
    settings_for,
)


@pytest.fixture
def real(redis_url: str, spans: InMemorySpanExporter) -> Iterator[Api]:
    app = create_app(settings_for(redis_url))
    with TestClient(app, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as client:
        yield Api(client, RecordingDispatcher(), app.state.store)


def test_a_manual_sync_lands_in_the_owner_workers_queue_carrying_the_requests_trace(
    real: Api,
) -> None:
    membership.register(real.store.redis, "w1", ttl=60, meta={})
    add_cluster(real, "east")
    add_app(real, "shop")

    first = real.client.post("/api/v1/apps/shop/sync", json={"revision": "v2"})
    again = real.client.post("/api/v1/apps/shop/sync")

    assert first.status_code == 202, first.text
    job = first.json()["jobs"][0]
    queue = Queue(job["queue"], connection=real.store.redis)
    assert job["queue"] == Queues().shard("w1")
    assert queue.job_ids == [job["job_id"]]
    carried = payloads.fetch(job["job_id"], real.store.redis).meta["otel"]
    assert carried["traceparent"].split("-")[1] == first.json()["trace_id"]
    assert again.json()["jobs"][0]["merged"] is True
    assert queue.count == 1


def test_a_sync_with_no_live_worker_is_a_503_that_says_to_start_one(real: Api) -> None:
    add_cluster(real, "east")
    add_app(real, "shop")

    response = real.client.post("/api/v1/apps/shop/sync")

    assert response.status_code == 503
    assert "no live workers" in response.json()["detail"]
