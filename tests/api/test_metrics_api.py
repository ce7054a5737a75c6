"""/metrics reads Redis at scrape time: sync counts and durations, app statuses, queues, workers."""

from __future__ import annotations

from datetime import UTC, datetime

from prometheus_client.parser import text_string_to_metric_families
from rq import Queue

from fleet.control.keys import Queues
from fleet.control.registry.syncrecords import InstanceStatus, SyncRecord
from fleet.control.routing import membership
from fleet.model import Health, SyncStatus, Trigger
from tests.api.conftest import Api, add_app, add_cluster


def samples(api: Api) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = api.client.get("/metrics")
    assert response.status_code == 200
    found = {}
    for family in text_string_to_metric_families(response.text):
        for s in family.samples:
            found[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return found


def record(status: SyncStatus, seconds: int, error: str = "", cluster: str = "east") -> SyncRecord:
    """A record as written before records carried `result` and `duration_s`: both are judged
    from its status, error and timestamps."""
    return SyncRecord(
        app="shop",
        cluster=cluster,
        trigger=Trigger.MANUAL,
        revision="abc",
        sync_status=status,
        error=error,
        started=datetime(2025, 1, 1, tzinfo=UTC),
        finished=datetime(2025, 1, 1, 0, 0, seconds, tzinfo=UTC),
        stages={"render": 0.4, "apply": seconds - 1},
    )


def test_metrics_count_syncs_by_result_and_histogram_their_durations(api: Api) -> None:
    api.store.add_history("shop", "east", record(SyncStatus.SYNCED, 3))
    api.store.add_history("shop", "east", record(SyncStatus.SYNCED, 20))
    failed = record(SyncStatus.OUT_OF_SYNC, 4, error="apply failed", cluster="west")
    api.store.add_history("shop", "west", failed)

    found = samples(api)

    assert found[("gitfleet_syncs_total", (("result", "succeeded"),))] == 2
    assert found[("gitfleet_syncs_total", (("result", "failed"),))] == 1
    assert found[("gitfleet_sync_duration_seconds_count", ())] == 3
    assert found[("gitfleet_sync_duration_seconds_sum", ())] == 27
    assert found[("gitfleet_sync_duration_seconds_bucket", (("le", "5.0"),))] == 2
    assert found[("gitfleet_sync_duration_seconds_bucket", (("le", "+Inf"),))] == 3
    render = (("le", "0.5"), ("stage", "render"))
    assert found[("gitfleet_stage_duration_seconds_bucket", render)] == 3


def test_metrics_report_apps_by_status_queue_depths_and_apps_per_worker(api: Api) -> None:
    add_cluster(api, "east")
    add_app(api, "shop")
    add_app(api, "cart")
    synced = InstanceStatus(sync_status=SyncStatus.SYNCED, health=Health.HEALTHY)
    api.store.set_status("shop", "east", synced)
    queue = Queues().shard("w1")
    Queue(queue, connection=api.store.redis).enqueue("os.getcwd")
    membership.register(api.store.redis, "w1", ttl=60, meta={})

    found = samples(api)

    assert found[("gitfleet_apps", (("health", "Healthy"), ("sync_status", "Synced")))] == 1
    assert found[("gitfleet_apps", (("health", "Unknown"), ("sync_status", "Unknown")))] == 1
    assert found[("gitfleet_queue_depth", (("queue", queue),))] == 1
    assert found[("gitfleet_worker_apps", (("worker", "w1"),))] == 2
    assert found[("gitfleet_workers", ())] == 1
    assert found[("gitfleet_clusters", ())] == 1
