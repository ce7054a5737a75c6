"""One trace per sync intent: the API request's span, through the queue, to the worker's stages."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from fleet.control.registry.syncrecords import InstanceStatus
from tests.support.fleet import FleetEnv, wait_until
from tests.support.traces import trace_id_of

TOKEN = "test-admin-token"
STAGES = ("source", "render", "order", "diff", "apply", "prune", "record")


def _last_trace_id(status: InstanceStatus) -> str:
    return status.last_sync.trace_id if status.last_sync else ""


@pytest.fixture
def api(fleet_api: Callable[..., TestClient]) -> TestClient:
    return fleet_api(TOKEN)


def _parent(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def test_an_api_sync_is_one_trace_from_the_request_to_the_worker_stages(
    fleet: FleetEnv, api: TestClient, spans: InMemorySpanExporter
) -> None:
    app, cluster = fleet.app_name(0), sorted(fleet.clusters)[0]
    fleet.commit_apps([app])
    fleet.add_app(app, cluster)
    fleet.worker_thread("alpha")
    response = api.post(f"/api/v1/apps/{app}/sync")
    assert response.status_code == 202, response.text
    trace_id = response.json()["trace_id"]
    wait_until(
        lambda: _last_trace_id(fleet.status(app, cluster)) == trace_id,
        timeout=120,
        what="the sync record with the API's trace id",
    )
    found = [s for s in spans.get_finished_spans() if trace_id_of(s) == trace_id]
    by_name = {s.name: s for s in found}
    request, enqueue = by_name["gitfleet.api.manual"], by_name["gitfleet.api.enqueue"]
    sync = by_name["gitfleet.sync"]
    assert _parent(enqueue) == request.context.span_id
    assert _parent(sync) == enqueue.context.span_id
    assert sync.attributes is not None and sync.attributes["gitfleet.outcome"] == "succeeded"
    for stage in STAGES:
        assert _parent(by_name[f"gitfleet.{stage}"]) == sync.context.span_id, stage
    assert [s.name for s in found].count("gitfleet.sync") == 1
