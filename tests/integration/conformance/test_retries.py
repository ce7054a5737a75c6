"""A retry after a failure followed by a success, through the API and real workers.

A failed sync schedules a retry with backoff; a later sync that starts (or succeeds) cancels it,
so the older pinned revision is never synced again, not even by a retry a worker already popped.
A retry merged into a newer trigger keeps the newer trigger's revision and trace. Every trace id
the API hands out ends with its own `gitfleet.sync` span, or with a `gitfleet.sync.merged` span
naming the sync it was merged into.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from opentelemetry import propagate
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from fleet.control.registry.instances import instance_key
from fleet.control.registry.records import RetryPolicy
from fleet.control.routing import membership
from fleet.control.routing.pending import Intent
from fleet.model import Outcome, Trigger
from fleet.telemetry import spans as telemetry
from tests.support.fleet import FleetEnv, settings_ref, wait_until
from tests.support.traces import trace_id_of
from worker import jobs
from worker.runtime import Runtime

TOKEN = "test-admin-token"
SLOW_RETRY = RetryPolicy(limit=3, backoff_s=60.0, factor=2.0, max_backoff_s=120.0)


@pytest.fixture
def api(fleet_api: Callable[..., TestClient]) -> TestClient:
    return fleet_api(TOKEN)


def _sync(api: TestClient, app: str, **body: Any) -> str:
    response = api.post(f"/api/v1/apps/{app}/sync", json=body)
    assert response.status_code == 202, response.text
    trace_id: str = response.json()["trace_id"]
    return trace_id


def _spans(spans: InMemorySpanExporter, trace_id: str) -> dict[str, Any]:
    return {s.name: s for s in spans.get_finished_spans() if trace_id_of(s) == trace_id}


def _outcomes(spans: InMemorySpanExporter, trace_id: str) -> list[str]:
    found = [
        s
        for s in spans.get_finished_spans()
        if s.name == "gitfleet.sync" and trace_id_of(s) == trace_id
    ]
    ordered = sorted(found, key=lambda s: s.start_time or 0)
    return [str((s.attributes or {}).get("gitfleet.outcome")) for s in ordered]


def _history_traces(fleet: FleetEnv, app: str, cluster: str) -> list[str]:
    return [h.trace_id for h in fleet.store.history(app, cluster)]


def test_a_later_successful_sync_cancels_the_retry_and_the_old_revision_never_returns(
    fleet: FleetEnv, api: TestClient, spans: InMemorySpanExporter
) -> None:
    app, cluster = fleet.app_name(0), sorted(fleet.clusters)[0]
    instance = instance_key(app, cluster)
    fleet.commit_apps([app])
    broken = fleet.repo.commit({f"apps/{app}/bad.yaml": "kind: [unclosed\n"})
    fleet.add_app(app, cluster, retry=SLOW_RETRY)
    fleet.worker_thread("alpha")

    failed_trace = _sync(api, app, revision=broken)
    wait_until(lambda: len(fleet.store.history(app, cluster)) == 1, timeout=60, what="failure")
    failed = fleet.store.history(app, cluster)[0]
    assert (failed.result, failed.error_stage, failed.revision) == ("failed", "render", broken)
    wait_until(
        lambda: fleet.dispatcher.pending.deferred_at(instance) is not None,
        timeout=30,
        what="the retry to be scheduled",
    )

    fixed = fleet.repo.commit({f"apps/{app}/bad.yaml": None, f"apps/{app}/cm.yaml": _cm("v2")})
    good_trace = _sync(api, app)
    wait_until(lambda: len(fleet.store.history(app, cluster)) == 2, timeout=60, what="success")
    good = fleet.store.history(app, cluster)[0]
    assert (good.result, good.revision, good.sync_status) == ("succeeded", fixed, "Synced")
    assert fleet.dispatcher.pending.deferred_at(instance) is None  # the retry is cancelled
    assert fleet.dispatcher.pump(time.time() + 3600) == []  # nothing left to fire, ever

    # a retry a worker had already popped before the success still arrives: it is stale
    carrier = {"traceparent": f"00-{failed_trace}-{'1' * 16}-01"}
    late = Intent(Trigger.MANUAL, broken, carrier, attempt=1, since=failed.started.timestamp())
    answer = fleet.dispatcher.wait(fleet.dispatcher.request_intent(instance, late), 60)
    assert answer is not None and answer["result"] == "superseded", answer
    assert answer["message"] == "a newer sync already ran"
    wait_until(fleet.idle, timeout=30, what="no pending sync")
    status = fleet.status(app, cluster)
    assert (status.revision, status.sync_status) == (fixed, "Synced")
    assert fleet.live(cluster, settings_ref(app))["data"] == {"k": "v2"}
    assert [h.revision for h in fleet.store.history(app, cluster)] == [fixed, broken]

    # each trace id the API returned ends with its own sync span; the cancelled retry's trace
    # (the failed sync's) also says which sync served it, and the stale one why it did not run
    assert _history_traces(fleet, app, cluster) == [good_trace, failed_trace]
    assert _outcomes(spans, good_trace) == ["succeeded"]
    assert _outcomes(spans, failed_trace) == ["failed (render)", "superseded"]
    served = _spans(spans, failed_trace)["gitfleet.sync.merged"]
    assert served.attributes["gitfleet.merged_into_trace"] == good_trace
    assert served.attributes["gitfleet.revision"] == broken


def test_a_retry_merged_into_a_newer_trigger_keeps_its_revision_and_trace(
    fleet: FleetEnv, spans: InMemorySpanExporter
) -> None:
    app, cluster = fleet.app_name(0), sorted(fleet.clusters)[0]
    instance = instance_key(app, cluster)
    old = fleet.commit_apps([app])
    new = fleet.commit_apps([app], data="k: v2")
    fleet.add_app(app, cluster, automated=True)
    # the worker is registered but not consuming yet, so both requests meet in its queue
    membership.register(fleet.redis, "alpha", ttl=30, meta={}, prefix=fleet.prefix)

    with telemetry.stage("test.webhook") as span:
        webhook_trace = telemetry.trace_id_of(span)
        fresh = fleet.dispatcher.request_sync(
            app, cluster, trigger=Trigger.WEBHOOK, revision=new, carrier=_carrier()
        )
    with telemetry.stage("test.retry") as span:
        retry_trace = telemetry.trace_id_of(span)
        retry = Intent(Trigger.WEBHOOK, old, _carrier(), attempt=1, since=time.time() - 5)
        merged = fleet.dispatcher.request_intent(instance, retry)
    assert merged.merged and merged.job_id == fresh.job_id
    pending = fleet.dispatcher.pending.get(instance)
    assert pending is not None and pending.intent.revision == new

    fleet.worker_thread("alpha")
    answer = fleet.dispatcher.wait(fresh, 120)
    assert answer is not None and answer["result"] == "succeeded", answer
    assert (answer["revision"], answer["trace_id"]) == (new, webhook_trace)
    assert fleet.live(cluster, settings_ref(app))["data"] == {"k": "v2"}
    assert fleet.status(app, cluster).revision == new
    assert _spans(spans, webhook_trace)["gitfleet.sync"].attributes["gitfleet.revision"] == new
    note = _spans(spans, retry_trace)["gitfleet.sync.merged"]
    assert note.attributes["gitfleet.merged_into_job"] == fresh.job_id
    assert note.attributes["gitfleet.merged_into_trace"] == webhook_trace
    assert note.attributes["gitfleet.revision"] == old
    assert "gitfleet.sync" not in _spans(spans, retry_trace)


def _carrier() -> dict[str, str]:
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


def _cm(value: str) -> str:
    from tests.support import manifests as m

    return m.configmap("settings", f"k: {value}")


def test_a_sync_that_fails_with_no_retry_left_still_cancels_the_deferred_sync_it_served(
    fleet: FleetEnv, api: TestClient, spans: InMemorySpanExporter
) -> None:
    """A deferred sync waiting when a newer sync is claimed is cancelled by it, also when that
    sync fails and schedules nothing: the older intent (here at the older commit) never runs."""
    app, cluster = fleet.app_name(0), sorted(fleet.clusters)[0]
    instance = instance_key(app, cluster)
    old = fleet.commit_apps([app])
    fleet.repo.commit({f"apps/{app}/bad.yaml": "kind: [unclosed\n"})
    fleet.add_app(app, cluster, retry=RetryPolicy(limit=0))
    waiting = Intent(Trigger.MANUAL, old, {"traceparent": f"00-{'a' * 32}-{'1' * 16}-01"})
    fleet.dispatcher.defer(instance, waiting, delay=3600)
    fleet.worker_thread("alpha")

    failed_trace = _sync(api, app)
    wait_until(lambda: len(fleet.store.history(app, cluster)) == 1, timeout=60, what="failure")
    failed = fleet.store.history(app, cluster)[0]
    assert (failed.result, failed.error_stage) == ("failed", "render")
    assert fleet.dispatcher.pending.deferred_at(instance) is None  # served, so cancelled
    assert fleet.dispatcher.pump(time.time() + 7200) == []  # and nothing fires later
    served = _spans(spans, "a" * 32)["gitfleet.sync.merged"]
    assert served.attributes["gitfleet.merged_into_trace"] == failed_trace


def test_a_deferred_sync_written_after_the_claim_is_cancelled_when_the_sync_fails(
    fleet: FleetEnv,
) -> None:
    """A claim that saw no deferred sync skips the cancel at the sync's start; one written
    after the claim (a pump putting back what it popped) is then cancelled at the sync's end,
    also when the sync fails with no retry left, so the older intent never runs."""
    app, cluster = fleet.app_name(0), sorted(fleet.clusters)[0]
    instance = instance_key(app, cluster)
    old = fleet.commit_apps([app])
    fleet.repo.commit({f"apps/{app}/bad.yaml": "kind: [unclosed\n"})
    fleet.add_app(app, cluster, retry=RetryPolicy(limit=0))
    runtime = Runtime(fleet.settings("w-direct"), fleet.redis)
    try:
        fleet.dispatcher.defer(instance, Intent(Trigger.MANUAL, old), delay=3600)
        with fleet.dispatcher.leases.held(instance, "w-direct/1/x", 30.0) as held:
            answer = jobs.attempt(
                runtime, instance, Intent(Trigger.MANUAL), lease=held, deferred=False
            )
        assert answer.outcome == Outcome.FAILED, answer.body
        assert fleet.dispatcher.pending.deferred_at(instance) is None
        assert fleet.dispatcher.pump(time.time() + 7200) == []
    finally:
        runtime.close()
