"""/metrics reads Redis at scrape time: sync counts and durations, app statuses, queues, workers."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families
from rq import Queue

from fleet.control.routing import membership
from tests.api.conftest import Api, add_app, add_cluster


def samples(api: Api) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = api.client.get("/metrics")
    assert response.status_code == 200
    found = {}
    for family in text_string_to_metric_families(response.text):
        for s in family.samples:
            found[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return found


def record(status: str, seconds: float, error: str = "") -> dict[str, object]:
    return {
        "revision": "abc",
        "sync_status": status,
        "error": error,
        "started": "2025-01-01T00:00:00+00:00",
        "finished": f"2025-01-01T00:00:{seconds:02.0f}+00:00",
        "stages": {"render": 0.4, "apply": seconds - 1},
    }


def test_metrics_count_syncs_by_result_and_histogram_their_durations(api: Api) -> None:
    api.store.add_history("shop", "east", record("Synced", 3))
    api.store.add_history("shop", "east", record("Synced", 20))
    api.store.add_history("shop", "west", record("OutOfSync", 4, error="apply failed"))

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
    api.store.set_status("shop", "east", {"sync_status": "Synced", "health": "Healthy"})
    Queue("gitfleet:shard:w1", connection=api.store.redis).enqueue("os.getcwd")
    membership.register(api.store.redis, "w1", ttl=60, meta={})

    found = samples(api)

    assert found[("gitfleet_apps", (("health", "Healthy"), ("sync_status", "Synced")))] == 1
    assert found[("gitfleet_apps", (("health", "Unknown"), ("sync_status", "Unknown")))] == 1
    assert found[("gitfleet_queue_depth", (("queue", "gitfleet:shard:w1"),))] == 1
    assert found[("gitfleet_worker_apps", (("worker", "w1"),))] == 2
    assert found[("gitfleet_workers", ())] == 1
    assert found[("gitfleet_clusters", ())] == 1
