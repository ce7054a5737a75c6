"""Sync policies run by real workers: sync windows, self-heal and its pause, retries."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

from fleet.control.registry.instances import instance_key
from fleet.control.scheduler import Scheduler
from fleet.control.windows import SyncWindow
from fleet.model import ObjectRef, Trigger
from tests.support.fleet import FleetEnv, WorkerThread, settings_ref, wait_until

ALWAYS = {"schedule": "* * * * *", "duration": "1h"}


def _one_app(fleet: FleetEnv, **policy: Any) -> tuple[str, str]:
    app, cluster = fleet.app_name(0), sorted(fleet.clusters)[0]
    fleet.commit_apps([app])
    fleet.add_app(app, cluster, **policy)
    return app, cluster


def test_a_deny_window_blocks_automated_syncs_and_a_manual_sync_may_override_it(
    fleet: FleetEnv,
) -> None:
    deny = SyncWindow("deny", **ALWAYS, manual_sync=True)
    app, cluster = _one_app(fleet, automated=True, sync_windows=(deny,))
    fleet.worker_thread("alpha")
    report = Scheduler(fleet.store, fleet.dispatcher).tick()
    instance = instance_key(app, cluster)
    assert report.dispatched == []
    assert "sync blocked" in report.blocked[instance]
    skipped = fleet.sync_and_wait(app, cluster, trigger=Trigger.WEBHOOK)
    assert skipped["result"] == "skipped"
    assert skipped["message"].startswith(f"sync blocked: {app} is inside deny window")
    assert fleet.store.history(app, cluster)[0].result == "skipped"
    assert fleet.status(app, cluster).message == skipped["message"]
    assert fleet.live(cluster, settings_ref(app)) is None
    manual = fleet.sync_and_wait(app, cluster)
    assert (manual["result"], manual["sync_status"]) == ("succeeded", "Synced"), manual
    assert fleet.live(cluster, settings_ref(app))["data"] == {"k": "v1"}


def test_a_deny_window_without_manual_override_blocks_manual_syncs_too(fleet: FleetEnv) -> None:
    deny = SyncWindow("deny", **ALWAYS, manual_sync=False)
    app, cluster = _one_app(fleet, sync_windows=(deny,))
    fleet.worker_thread("alpha")
    result = fleet.sync_and_wait(app, cluster)
    assert result["result"] == "skipped"
    assert result["message"].endswith("manual sync also blocked")
    assert fleet.live(cluster, settings_ref(app)) is None


def _edit(fleet: FleetEnv, cluster: str, ref: ObjectRef, patch: dict[str, Any]) -> None:
    kube = fleet.clusters[cluster].client()
    try:
        kube.request(
            "PATCH",
            kube.object_path(ref),
            body=patch,
            params={"fieldManager": "kubectl-edit"},
            content_type="application/merge-patch+json",
        )
    finally:
        kube.close()


def _watching(worker: WorkerThread, fleet: FleetEnv, cluster: str, app: str) -> bool:
    selfheal = worker.process.selfheal
    assert selfheal is not None
    watch = selfheal.watch_cache(cluster, "v1", "ConfigMap")
    return watch is not None and watch.get(app, "settings") is not None


def test_self_heal_reverts_a_manual_edit_of_a_managed_configmap(fleet: FleetEnv) -> None:
    app, cluster = _one_app(fleet, automated=True, self_heal=True)
    worker = fleet.worker_thread("alpha")
    assert fleet.sync_and_wait(app, cluster)["result"] == "succeeded"
    wait_until(lambda: _watching(worker, fleet, cluster, app), timeout=30, what="the watch")
    _edit(fleet, cluster, settings_ref(app), {"data": {"k": "edited", "extra": "x"}})
    took = wait_until(
        lambda: (fleet.live(cluster, settings_ref(app)) or {}).get("data", {}).get("k") == "v1",
        timeout=60,
        what="self-heal to revert the edit",
    )
    print(f"\nself-heal reverted a manual edit in {took:.1f}s")
    wait_until(
        lambda: len(fleet.store.history(app, cluster)) == 2,
        timeout=30,
        what="record",
    )
    history = fleet.store.history(app, cluster)
    assert history[0].trigger == "self-heal"
    assert history[0].result == "succeeded"
    assert any(r.action == "configured" for r in history[0].resources)


def test_the_pause_annotation_leaves_a_manual_edit_in_place(fleet: FleetEnv) -> None:
    app, cluster = _one_app(fleet, automated=True, self_heal=True)
    worker = fleet.worker_thread("alpha")
    assert fleet.sync_and_wait(app, cluster)["result"] == "succeeded"
    wait_until(lambda: _watching(worker, fleet, cluster, app), timeout=30, what="the watch")
    selfheal = worker.process.selfheal
    assert selfheal is not None
    paused = {"gitfleet.io/self-heal": "false"}
    _edit(
        fleet,
        cluster,
        settings_ref(app),
        {"metadata": {"annotations": paused}, "data": {"k": "mine"}},
    )
    wait_until(lambda: selfheal.seen["paused"] >= 1, timeout=30, what="the paused event")
    assert selfheal.seen["drift"] == 0
    assert selfheal.flush(now=float("inf")) == []  # nothing is waiting to heal
    assert fleet.idle()
    assert fleet.live(cluster, settings_ref(app))["data"] == {"k": "mine"}
    assert [h.trigger for h in fleet.store.history(app, cluster)] == ["manual"]


def test_a_failed_sync_is_retried_with_backoff_up_to_the_retry_limit(fleet: FleetEnv) -> None:
    from fleet.control.registry.records import RetryPolicy

    app, cluster = fleet.app_name(0), sorted(fleet.clusters)[0]
    fleet.repo.commit({f"apps/{app}/bad.yaml": "kind: [unclosed\n"})
    retry = RetryPolicy(limit=2, backoff_s=0.2, factor=2.0, max_backoff_s=1.0)
    fleet.add_app(app, cluster, retry=retry)
    fleet.worker_thread("alpha")
    first = fleet.sync_and_wait(app, cluster)
    assert first["result"] == "failed" and first["error_stage"] == "render"
    assert first["retry_in_s"] is not None
    wait_until(
        lambda: len(fleet.store.history(app, cluster)) == 3,
        timeout=60,
        what="retries",
    )
    wait_until(fleet.idle, timeout=30, what="no retry left")
    attempts = [h.attempt for h in reversed(fleet.store.history(app, cluster))]
    assert attempts == [0, 1, 2]
    assert all(h.trigger == "manual" for h in fleet.store.history(app, cluster))


def test_self_heal_gives_up_on_an_object_another_controller_keeps_changing(
    fleet: FleetEnv,
) -> None:
    app, cluster = _one_app(fleet, automated=True, self_heal=True)
    worker = fleet.worker_thread("alpha", fight_limit=3)
    assert fleet.sync_and_wait(app, cluster)["result"] == "succeeded"
    wait_until(lambda: _watching(worker, fleet, cluster, app), timeout=30, what="the watch")
    stop = threading.Event()

    def fight() -> None:
        kube = fleet.clusters[cluster].client()
        try:
            while not stop.wait(0.2):
                if (kube.get(settings_ref(app)) or {}).get("data", {}).get("k") != "theirs":
                    kube.request(
                        "PATCH",
                        kube.object_path(settings_ref(app)),
                        body={"data": {"k": "theirs"}},
                        params={"fieldManager": "other-controller"},
                        content_type="application/merge-patch+json",
                    )
        finally:
            kube.close()

    fighter = threading.Thread(target=fight, daemon=True)
    fighter.start()
    try:
        wait_until(
            lambda: "self-heal stopped" in fleet.status(app, cluster).message,
            timeout=90,
            what="self-heal to give up",
        )
    finally:
        stop.set()
        fighter.join(timeout=10)
    message = fleet.status(app, cluster).message
    assert message.startswith(f"self-heal stopped for ConfigMap/{app}/settings: it drifted 4 times")
    assert "another controller is likely fighting gitfleet" in message
    heals = [h for h in fleet.store.history(app, cluster) if h.trigger == "self-heal"]
    assert 1 <= len(heals) <= 3


def test_a_cascading_delete_prunes_the_apps_objects_and_then_its_record(fleet: FleetEnv) -> None:
    app, cluster = _one_app(fleet)
    fleet.worker_thread("alpha")
    assert fleet.sync_and_wait(app, cluster)["result"] == "succeeded"
    fleet.store.mark_deleting(app)
    result = fleet.sync_and_wait(app, cluster, trigger=Trigger.DELETE)
    assert result["result"] == "deleted", result
    assert fleet.live(cluster, settings_ref(app)) is None
    assert fleet.live(cluster, ObjectRef("apps", "v1", "Deployment", app, "web")) is None
    assert app not in [a.name for a in fleet.store.list_apps()]


def test_an_app_waits_for_its_dependency_to_be_healthy_then_syncs(fleet: FleetEnv) -> None:
    base, app = fleet.app_name(0), fleet.app_name(1)
    cluster = sorted(fleet.clusters)[0]
    fleet.commit_apps([base, app])
    fleet.add_app(base, cluster)
    fleet.add_app(app, cluster)
    record = fleet.store.get_app(app)
    fleet.store.put_app(replace(record, depends_on=(base,)), create=False)
    fleet.worker_thread("alpha")
    waiting = fleet.sync_and_wait(app, cluster)
    assert waiting["result"] == "waiting"
    assert waiting["message"] == f"waiting for app {base}: {base}@{cluster} is Unknown"
    assert fleet.status(app, cluster).message == waiting["message"]
    assert fleet.live(cluster, settings_ref(app)) is None
    assert fleet.sync_and_wait(base, cluster)["result"] == "succeeded"
    wait_until(
        lambda: fleet.status(app, cluster).sync_status == "Synced",
        timeout=60,
        what="the dependent app to sync once its dependency is Healthy",
    )
    assert fleet.store.history(app, cluster)[0].trigger == "manual"
