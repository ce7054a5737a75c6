"""A periodic sync of an instance nothing touched answers from the watches: no API request."""

from __future__ import annotations

from typing import Any

import pytest

from fleet.control.pushes import PushLog, SyncedAt, spec_of
from fleet.control.registry.instances import instance_key
from fleet.control.registry.repos import normalize_repo
from fleet.model import ObjectRef, Trigger
from tests.support.fleet import FleetEnv, WorkerThread, wait_until


def _requests(worker: WorkerThread, cluster: str) -> int:
    return sum(worker.process.runtime.kube_for(cluster).requests.values())


def _quiet_ready(fleet: FleetEnv, worker: WorkerThread, app: str, cluster: str) -> bool:
    """The watches started after the last sync, so run periodic syncs until one is quiet."""
    return fleet.sync_and_wait(app, cluster, Trigger.INTERVAL)["result"] == "unchanged"


def _synced_and_quiet(fleet: FleetEnv) -> tuple[str, str, WorkerThread]:
    """One automated app, synced by hand, whose periodic syncs have become quiet checks."""
    app, cluster = fleet.app_name(0), sorted(fleet.clusters)[0]
    fleet.commit_apps([app])
    fleet.add_app(app, cluster, automated=True)
    worker = fleet.worker_thread("alpha")
    assert fleet.sync_and_wait(app, cluster, Trigger.MANUAL)["result"] == "succeeded"
    wait_until(lambda: _quiet_ready(fleet, worker, app, cluster), timeout=60, what="quiet")
    return app, cluster, worker


def test_an_untouched_instance_costs_no_api_request_until_something_changes(
    fleet: FleetEnv,
) -> None:
    app, cluster, worker = _synced_and_quiet(fleet)

    before = _requests(worker, cluster)
    quiet = fleet.sync_and_wait(app, cluster, Trigger.INTERVAL)
    assert quiet["result"] == "unchanged"
    assert _requests(worker, cluster) == before
    assert fleet.status(app, cluster).sync_status == "Synced"

    ref = ObjectRef("", "v1", "ConfigMap", app, "settings")
    fleet.edit_by_hand(cluster, ref, {"k": "by-hand"})
    watcher = worker.process.runtime.watcher
    assert watcher is not None
    instance = instance_key(app, cluster)
    wait_until(lambda: watcher.touched.get(instance, 0) > 0, timeout=30, what="the edit event")
    healed = fleet.sync_and_wait(app, cluster, Trigger.INTERVAL)
    assert healed["result"] == "succeeded"
    assert fleet.live(cluster, ref)["data"] == {"k": "v1"}

    fleet.commit_apps([app], data="k: v2")  # a push: the webhook's sync fetches at once
    changed = fleet.sync_and_wait(app, cluster, Trigger.WEBHOOK)
    assert changed["result"] == "succeeded"
    assert fleet.live(cluster, ref)["data"] == {"k": "v2"}


def test_a_push_touching_one_app_of_a_monorepo_syncs_and_renders_only_that_app(
    fleet: FleetEnv,
) -> None:
    cluster = sorted(fleet.clusters)[0]
    apps = [fleet.app_name(i) for i in range(4)]
    fleet.commit_apps(apps)
    for app in apps:
        fleet.add_app(app, cluster, automated=True)
    worker = fleet.worker_thread("alpha")
    for app in apps:
        assert fleet.sync_and_wait(app, cluster, Trigger.MANUAL)["result"] == "succeeded"
    for app in apps:
        wait_until(lambda a=app: _quiet_ready(fleet, worker, a, cluster), timeout=60, what=app)

    sha = fleet.commit_apps(apps[:1], data="k: pushed")
    renders = worker.process.runtime.caches.renderer.renders
    results = {}
    for app in apps:
        ref = fleet.dispatcher.request_sync(app, cluster, trigger=Trigger.WEBHOOK, revision=sha)
        results[app] = fleet.dispatcher.wait(ref, 120)
    assert results[apps[0]] is not None and results[apps[0]]["result"] == "succeeded"
    assert [results[a]["result"] for a in apps[1:]] == ["unchanged"] * 3  # type: ignore[index]
    assert worker.process.runtime.caches.renderer.renders - renders == 1
    changed = fleet.live(cluster, ObjectRef("", "v1", "ConfigMap", apps[0], "settings"))
    assert changed is not None and changed["data"] == {"k": "pushed"}


def test_workers_record_the_commit_and_paths_each_instance_matches_for_webhooks(
    fleet: FleetEnv,
) -> None:
    cluster = sorted(fleet.clusters)[0]
    apps = [fleet.app_name(i) for i in range(2)]
    first = fleet.commit_apps(apps)
    for app in apps:
        fleet.add_app(app, cluster, automated=True)
    worker = fleet.worker_thread("alpha")
    for app in apps:
        assert fleet.sync_and_wait(app, cluster, Trigger.MANUAL)["result"] == "succeeded"
    pushes, repo = PushLog(fleet.redis, prefix=fleet.prefix), normalize_repo(fleet.repo_url)
    instances = [instance_key(app, cluster) for app in apps]
    assert pushes.synced(repo, instances) == {
        instance_key(app, cluster): SyncedAt(
            first, (f"apps/{app}",), spec_of(fleet.store.get_app(app))
        )
        for app in apps
    }

    wait_until(lambda: _quiet_ready(fleet, worker, apps[1], cluster), timeout=60, what="quiet")
    second = fleet.commit_apps(apps[:1], data="k: v2")
    ref = fleet.dispatcher.request_sync(apps[1], cluster, trigger=Trigger.WEBHOOK, revision=second)
    assert (fleet.dispatcher.wait(ref, 120) or {}).get("result") == "unchanged"
    assert pushes.synced(repo, instances[1:])[instances[1]].revision == second  # checked there

    fleet.repo.commit({f"apps/{apps[0]}/cm.yaml": "kind: [broken"})
    assert fleet.sync_and_wait(apps[0], cluster, Trigger.MANUAL)["result"] == "failed"
    assert instances[0] not in pushes.synced(repo, instances)  # the next push must sync it


def test_a_webhook_sync_after_its_quiet_check_fetches_the_repository_once(
    fleet: FleetEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The quiet check fetches the pushed commit; the sync it hands on to reuses that fetch,
    which began after the sync was requested, instead of asking the git server again."""
    app, cluster, worker = _synced_and_quiet(fleet)

    source = worker.process.runtime.caches.source
    real_fetch, fetches = source._fetch, []

    def counted(*args: Any) -> None:
        fetches.append(args[1])
        real_fetch(*args)

    monkeypatch.setattr(source, "_fetch", counted)
    pushed = fleet.commit_apps([app], data="k: pushed")
    answer = fleet.sync_and_wait(app, cluster, Trigger.WEBHOOK)
    assert (answer["result"], answer["revision"]) == ("succeeded", pushed)
    assert len(fetches) == 1, fetches
    ref = ObjectRef("", "v1", "ConfigMap", app, "settings")
    assert fleet.live(cluster, ref)["data"] == {"k": "pushed"}
