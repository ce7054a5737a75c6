"""Sync, diff, rollback, history and delete: what the API asks of the workers, and its answers."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from fleet.control.registry.syncrecords import InstanceStatus, SyncRecord
from fleet.model import SyncStatus, Trigger
from tests.api.conftest import Api, add_app, add_cluster, preview_resource
from tests.support.traces import trace_id_of

DENY_ALWAYS = {"kind": "deny", "schedule": "* * * * *", "duration": "1h"}


@pytest.fixture
def two_clusters(api: Api) -> Api:
    add_cluster(api, "east", {"env": "prod"})
    add_cluster(api, "west", {"env": "prod"})
    return api


def selector_app(api: Api, name: str = "shop", **policy: object) -> None:
    destination = {"clusterSelector": {"env": "prod"}, "namespace": "shop"}
    add_app(api, name, destination=destination, syncPolicy=policy)


def test_a_manual_sync_enqueues_one_job_per_instance_carrying_the_requests_trace(
    two_clusters: Api, spans: InMemorySpanExporter
) -> None:
    api = two_clusters
    selector_app(api)
    spans.clear()

    response = api.client.post("/api/v1/apps/shop/sync", json={"revision": "v1.2.0"})

    assert response.status_code == 202, response.text
    answer = response.json()
    assert [j["cluster"] for j in answer["jobs"]] == ["east", "west"]
    calls = api.dispatcher.calls
    assert [(c["app"], c["cluster"], c["trigger"], c["revision"]) for c in calls] == [
        ("shop", "east", "manual", "v1.2.0"),
        ("shop", "west", "manual", "v1.2.0"),
    ]
    trace_id = answer["trace_id"]
    assert len(trace_id) == 32
    for call in calls:
        assert call["carrier"]["traceparent"].split("-")[1] == trace_id
    names = {s.name for s in spans.get_finished_spans() if trace_id_of(s) == trace_id}
    assert {"gitfleet.api.manual", "gitfleet.api.enqueue"} <= names
    operation = api.client.get("/api/v1/apps/shop").json()["last_operation"]
    assert operation["kind"] == "sync" and operation["trace_id"] == trace_id


def test_a_sync_of_one_cluster_the_app_does_not_target_is_a_404(two_clusters: Api) -> None:
    selector_app(two_clusters)

    response = two_clusters.client.post("/api/v1/apps/shop/sync", json={"cluster": "north"})

    assert response.status_code == 404
    assert "no instance on north" in response.json()["detail"]
    assert two_clusters.dispatcher.calls == []


def test_a_deny_window_refuses_a_manual_sync_unless_it_allows_manual_syncs(
    two_clusters: Api,
) -> None:
    api = two_clusters
    selector_app(api, "strict", syncWindows=[DENY_ALWAYS])
    selector_app(api, "lenient", syncWindows=[{**DENY_ALWAYS, "manualSync": True}])

    strict = api.client.post("/api/v1/apps/strict/sync")
    lenient = api.client.post("/api/v1/apps/lenient/sync")

    assert strict.status_code == 409
    assert "sync blocked" in strict.json()["detail"]
    assert lenient.status_code == 202
    assert {c["app"] for c in api.dispatcher.calls} == {"lenient"}


def test_a_sync_carries_the_callers_prune_choice_for_that_sync_only(two_clusters: Api) -> None:
    api = two_clusters
    selector_app(api, prune=False)

    pruning = api.client.post("/api/v1/apps/shop/sync", json={"prune": True, "cluster": "east"})
    keeping = api.client.post("/api/v1/apps/shop/sync", json={"prune": False, "dryRun": True})
    policy = api.client.post("/api/v1/apps/shop/sync", json={"cluster": "west"})
    wrong = api.client.post("/api/v1/apps/shop/sync", json={"prune": "sometimes"})
    planned = api.client.post("/api/v1/apps/shop/sync", json={"prune": True, "plan": "p-1"})

    assert [r.status_code for r in (pruning, keeping, policy)] == [202, 202, 202]
    calls = [(c["cluster"], c["dry_run"], c["prune"]) for c in api.dispatcher.calls]
    assert calls == [
        ("east", False, True),
        ("east", True, False),
        ("west", True, False),
        ("west", False, None),
    ]
    assert wrong.status_code == 422 and "prune" in wrong.text
    assert planned.status_code == 422 and "a plan or prune" in planned.text
    assert api.client.get("/api/v1/apps/shop").json()["spec"]["syncPolicy"]["prune"] is False


def test_diff_enqueues_dry_runs_and_returns_what_would_change(two_clusters: Api) -> None:
    api = two_clusters
    selector_app(api)
    changed = preview_resource("ConfigMap", "cfg", "configured")
    same = preview_resource("Service", "svc", "unchanged")
    api.dispatcher.results[("shop", "east")] = {"revision": "abc", "resources": [changed, same]}
    api.dispatcher.results[("shop", "west")] = {"revision": "abc", "resources": [same]}

    response = api.client.get("/api/v1/apps/shop/diff")

    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["in_sync"] is False
    assert {c["cluster"]: c["changes"] for c in answer["clusters"]} == {
        "east": [changed],
        "west": [],
    }
    assert all(c["dry_run"] and c["trigger"] == "diff" for c in api.dispatcher.calls)
    assert all(0 < timeout <= 5.0 for _, timeout in api.dispatcher.waited)


def test_diff_answers_504_naming_the_clusters_whose_dry_run_did_not_finish(
    two_clusters: Api,
) -> None:
    api = two_clusters
    selector_app(api)
    api.dispatcher.results[("shop", "east")] = {"revision": "abc", "resources": []}

    response = api.client.get("/api/v1/apps/shop/diff")

    assert response.status_code == 504
    assert "no diff from cluster(s) west" in response.json()["detail"]


def test_a_rollback_syncs_the_revision_and_pauses_automated_sync(two_clusters: Api) -> None:
    api = two_clusters
    selector_app(api, automated=True)

    response = api.client.post("/api/v1/apps/shop/rollback", json={"revision": "1a2b3c"})

    assert response.status_code == 202, response.text
    assert response.json()["automated_paused"] is True
    assert {(c["trigger"], c["revision"]) for c in api.dispatcher.calls} == {("rollback", "1a2b3c")}
    view = api.client.get("/api/v1/apps/shop").json()
    assert view["spec"]["syncPolicy"]["automated"] is False
    assert view["last_operation"]["kind"] == "rollback"
    assert view["last_operation"]["revision"] == "1a2b3c"


def test_history_lists_each_instances_sync_records_newest_first(two_clusters: Api) -> None:
    api = two_clusters
    selector_app(api)
    for revision in ("r1", "r2", "r3"):
        synced = SyncRecord(
            app="shop",
            cluster="east",
            trigger=Trigger.MANUAL,
            revision=revision,
            sync_status=SyncStatus.SYNCED,
        )
        api.store.add_history("shop", "east", synced)

    answer = api.client.get("/api/v1/apps/shop/history", params={"limit": 2}).json()

    assert [r["revision"] for r in answer["clusters"]["east"]] == ["r3", "r2"]
    assert answer["clusters"]["west"] == []


def test_a_cascading_delete_marks_the_app_deleting_and_asks_for_a_prune(two_clusters: Api) -> None:
    api = two_clusters
    selector_app(api)

    response = api.client.delete("/api/v1/apps/shop")

    assert response.status_code == 202
    assert {(c["cluster"], c["trigger"]) for c in api.dispatcher.calls} == {
        ("east", "delete"),
        ("west", "delete"),
    }
    view = api.client.get("/api/v1/apps/shop").json()
    assert view["deleting"] is True
    assert api.client.post("/api/v1/apps/shop/sync").status_code == 409


def test_a_delete_without_cascade_removes_the_record_at_once(two_clusters: Api) -> None:
    api = two_clusters
    selector_app(api)
    api.store.set_status("shop", "east", InstanceStatus(sync_status=SyncStatus.SYNCED))
    api.store.add_history(
        "shop",
        "east",
        SyncRecord(app="shop", cluster="east", trigger=Trigger.MANUAL, revision="r1"),
    )

    response = api.client.delete("/api/v1/apps/shop", params={"cascade": "false"})

    assert response.status_code == 200 and response.json()["deleted"] is True
    assert api.dispatcher.calls == []
    assert api.client.get("/api/v1/apps/shop").status_code == 404
    assert api.store.get_status("shop", "east") is None
    assert api.store.history("shop", "east") == []


def test_an_app_other_apps_depend_on_is_not_deleted_unless_forced(two_clusters: Api) -> None:
    api = two_clusters
    selector_app(api, "db")
    add_app(api, "shop", destination={"cluster": "east", "namespace": "shop"}, dependsOn=["db"])

    refused = api.client.delete("/api/v1/apps/db", params={"cascade": "false"})
    forced = api.client.delete("/api/v1/apps/db", params={"cascade": "false", "force": "true"})

    assert refused.status_code == 409 and "shop" in refused.json()["detail"]
    assert forced.status_code == 200
