"""Interval requests are quiet checks judged in batches by the owner, not one rq job each."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from rq import Queue

from fleet.control.registry.instances import instance_key
from fleet.control.registry.records import ClusterCredentials, ClusterRecord
from fleet.control.routing import membership
from fleet.control.routing.checks import Check
from fleet.control.routing.dispatch import JobRef
from fleet.control.routing.pending import Intent
from fleet.model import ObjectRef, Trigger
from tests.support.fleet import FleetEnv, WorkerThread, settings_ref, wait_until
from worker import quiet, quietbatch
from worker.runtime import Runtime


def _quiet_ready(fleet: FleetEnv, app: str, cluster: str) -> bool:
    """The watches started after the last sync, so ask periodic syncs until one is quiet."""
    return bool(fleet.sync_and_wait(app, cluster, Trigger.INTERVAL)["result"] == "unchanged")


def _synced_quietly(fleet: FleetEnv, apps: list[str], cluster: str) -> WorkerThread:
    fleet.commit_apps(apps)
    for app in apps:
        fleet.add_app(app, cluster, automated=True)
    worker = fleet.worker_thread("alpha")
    for app in apps:
        assert fleet.sync_and_wait(app, cluster, Trigger.MANUAL)["result"] == "succeeded"
    for app in apps:
        wait_until(lambda a=app: _quiet_ready(fleet, a, cluster), timeout=60, what=f"{app} quiet")
    return worker


def _interval_checks(apps: list[str], cluster: str, label: str) -> list[Check]:
    """One interval check of each app's instance on `cluster`, as the scheduler would park."""
    return [
        Check(instance_key(app, cluster), f"check-{label}-{i}", Intent(Trigger.INTERVAL))
        for i, app in enumerate(apps)
    ]


def _requests(worker: WorkerThread, cluster: str) -> int:
    return sum(worker.process.runtime.kube_for(cluster).requests.values())


def test_interval_requests_on_clean_instances_make_no_rq_job_and_stamp_every_status(
    fleet: FleetEnv,
) -> None:
    cluster = sorted(fleet.clusters)[0]
    apps = [fleet.app_name(i) for i in range(3)]
    worker = _synced_quietly(fleet, apps, cluster)
    jobs, calls = len(fleet.entries()), _requests(worker, cluster)
    before = {app: fleet.status(app, cluster) for app in apps}
    quiet = worker.process.checker.checked["quiet"]

    refs = [fleet.dispatcher.request_sync(a, cluster, trigger=Trigger.INTERVAL) for a in apps]
    answers = [fleet.dispatcher.wait(ref, timeout=60) for ref in refs]

    assert all(ref.job_id.startswith("check-") for ref in refs)
    assert [a["result"] if a else None for a in answers] == ["unchanged"] * 3
    assert len(fleet.entries()) == jobs  # no sync job ran
    assert _requests(worker, cluster) == calls  # and nothing was asked of the cluster
    assert worker.process.checker.checked["quiet"] - quiet == 3
    for app, answer in zip(apps, answers, strict=True):
        after = fleet.status(app, cluster)
        stamp = before[app].checked
        assert after.checked is not None and (stamp is None or after.checked > stamp)
        assert answer is not None and after.checked.isoformat() == answer["checked"]
        assert after.last_sync == before[app].last_sync and after.sync_status == "Synced"
    assert fleet.idle()


def test_a_status_written_between_read_and_stamp_is_kept_and_a_full_sync_follows(
    fleet: FleetEnv,
) -> None:
    cluster, app = sorted(fleet.clusters)[0], fleet.app_name(0)
    worker = _synced_quietly(fleet, [app], cluster)
    runtime = worker.process.runtime
    instance = instance_key(app, cluster)
    check = Check(instance, "check-race", Intent(Trigger.INTERVAL))
    verdicts = quietbatch.judge(runtime, [check], quietbatch.Desires())
    assert len(verdicts.stamps) == 1 and not verdicts.full  # quiet, as read

    newer = dataclasses.replace(fleet.status(app, cluster), message="written by another sync")
    fleet.store.set_status(app, cluster, newer)  # lands between the read and the stamp
    jobs = len(fleet.entries())
    quietbatch.settle(runtime, verdicts)

    assert verdicts.counts["refused"] == 1 and verdicts.counts["full"] == 1
    assert fleet.status(app, cluster).message == "written by another sync"
    answer = fleet.dispatcher.checks.answer_of("check-race")
    assert answer is not None and answer["followed_by"].startswith("sync-")
    followed = fleet.dispatcher.wait(JobRef("check-race", "", False), timeout=120)
    assert followed is not None and followed["result"] in ("succeeded", "unchanged")
    assert len(fleet.entries()) == jobs + 1  # the full sync, as an rq job


def test_an_instance_looks_its_render_up_once_per_commit_and_keeps_one_memo_entry(
    fleet: FleetEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = sorted(fleet.clusters)[0]
    apps = [fleet.app_name(i) for i in range(2)]
    worker = _synced_quietly(fleet, apps, cluster)
    runtime = worker.process.runtime
    looked_up: list[str] = []
    render = runtime.caches.renderer.render

    def counted(*args: Any, **kwargs: Any) -> Any:
        looked_up.append(args[2])  # the app path
        return render(*args, **kwargs)

    monkeypatch.setattr(runtime.caches.renderer, "render", counted)
    checks = _interval_checks(apps, cluster, "memo")
    desires = quietbatch.Desires()
    for _ in range(3):
        assert len(quietbatch.judge(runtime, checks, desires).stamps) == 2  # quiet each time
    assert sorted(looked_up) == [f"apps/{app}" for app in apps]  # once each, not per check

    monkeypatch.setattr(quiet, "FETCH_MAX_AGE", 0.0)  # see the next commit at once
    fleet.commit_apps(apps, data="k: v2")
    verdicts = quietbatch.judge(runtime, checks, desires)

    assert len(verdicts.full) == 2 and not verdicts.stamps  # changed: the normal path syncs
    assert sorted(looked_up) == sorted([f"apps/{app}" for app in apps] * 2)
    assert len(desires) == 2  # the new commit's lookups replaced the old ones


def test_the_memo_forgets_instances_of_deleted_apps(
    fleet: FleetEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = sorted(fleet.clusters)[0]
    apps = [fleet.app_name(i) for i in range(2)]
    runtime = _synced_quietly(fleet, apps, cluster).process.runtime
    checks = _interval_checks(apps, cluster, "gone")
    monkeypatch.setattr(quietbatch, "SWEEP_AT", 2)
    desires = quietbatch.Desires()
    quietbatch.judge(runtime, checks, desires)
    assert len(desires) == 2

    fleet.store.delete_app(apps[1])
    assert len(quietbatch.judge(runtime, checks[:1], desires).stamps) == 1

    assert len(desires) == 1  # the deleted app's instance is forgotten, the other kept


def test_an_app_record_changed_after_a_quiet_check_makes_the_next_one_full(
    fleet: FleetEnv,
) -> None:
    cluster, app = sorted(fleet.clusters)[0], fleet.app_name(0)
    worker = _synced_quietly(fleet, [app], cluster)
    runtime = worker.process.runtime
    check = Check(instance_key(app, cluster), "check-changed", Intent(Trigger.INTERVAL))
    desires = quietbatch.Desires()
    assert len(quietbatch.judge(runtime, [check], desires).stamps) == 1  # remembered, quiet

    record = fleet.store.get_app(app)
    policy = dataclasses.replace(record.sync_policy, allow_empty=not record.sync_policy.allow_empty)
    fleet.store.put_app(dataclasses.replace(record, sync_policy=policy), create=False)
    verdicts = quietbatch.judge(runtime, [check], desires)

    assert verdicts.full == [check] and not verdicts.stamps  # the request changed: a sync


def test_a_dirty_instance_gets_a_full_sync_that_repairs_it(fleet: FleetEnv) -> None:
    cluster, app = sorted(fleet.clusters)[0], fleet.app_name(0)
    worker = _synced_quietly(fleet, [app], cluster)
    ref = ObjectRef("", "v1", "ConfigMap", app, "settings")
    fleet.edit_by_hand(cluster, ref, {"k": "by-hand"})
    watcher = worker.process.selfheal
    assert watcher is not None
    instance = instance_key(app, cluster)
    wait_until(lambda: watcher.touched.get(instance, 0) > 0, timeout=30, what="the edit event")
    jobs = len(fleet.entries(instance))

    check = fleet.dispatcher.request_sync(app, cluster, trigger=Trigger.INTERVAL)
    answer = fleet.dispatcher.wait(check, timeout=120)

    assert answer is not None and answer["result"] == "succeeded", answer
    assert answer["trigger"] == "interval"
    assert len(fleet.entries(instance)) == jobs + 1
    live = fleet.live(cluster, settings_ref(app))
    assert live is not None and live["data"] == {"k": "v1"}


def _registered(env: FleetEnv, worker: str) -> str:
    creds = ClusterCredentials(server="https://127.0.0.1:1", token="t")
    env.store.put_cluster(ClusterRecord("eu", "https://127.0.0.1:1"), creds)
    app = env.app_name(0)
    env.add_app(app, "eu", automated=True)
    membership.register(env.redis, worker, ttl=30, meta={}, prefix=env.prefix)
    return app


def test_a_pending_manual_sync_is_neither_delayed_nor_swallowed_by_a_waiting_check(
    registry: FleetEnv,
) -> None:
    app = _registered(registry, "w-a")
    instance = instance_key(app, "eu")
    check = registry.dispatcher.request_sync(app, "eu", trigger=Trigger.INTERVAL)
    assert check.job_id.startswith("check-") and not check.merged
    again = registry.dispatcher.request_sync(app, "eu", trigger=Trigger.INTERVAL)
    assert (again.job_id, again.merged) == (check.job_id, True)  # one check per instance

    manual = registry.dispatcher.request_sync(app, "eu", trigger=Trigger.MANUAL, revision="v2")
    assert Queue(manual.queue, connection=registry.redis).job_ids == [manual.job_id]
    merged = registry.dispatcher.request_sync(app, "eu", trigger=Trigger.INTERVAL)
    assert (merged.job_id, merged.merged) == (manual.job_id, True)  # the normal path now

    runtime = Runtime(registry.settings("w-a"), registry.redis)
    taken = registry.dispatcher.checks.take("w-a", 10)
    assert [c.instance for c in taken] == [instance]
    quietbatch.judge_batch(runtime, taken, quietbatch.Desires())

    pending = registry.dispatcher.pending.get(instance)
    assert pending is not None and pending.job_id == manual.job_id
    assert (pending.intent.trigger, pending.intent.revision) == ("manual", "v2")
    assert Queue(manual.queue, connection=registry.redis).job_ids == [manual.job_id]
    answer = registry.dispatcher.checks.answer_of(check.job_id)
    assert answer == {"followed_by": manual.job_id}
    assert registry.dispatcher.checks.take("w-a", 10) == []


def test_checks_left_by_a_dead_worker_are_asked_again_as_syncs_of_the_new_owner(
    registry: FleetEnv,
) -> None:
    app = _registered(registry, "w-a")
    check = registry.dispatcher.request_sync(app, "eu", trigger=Trigger.INTERVAL)
    membership.deregister(registry.redis, "w-a", prefix=registry.prefix)
    membership.register(registry.redis, "w-b", ttl=30, meta={}, prefix=registry.prefix)

    moved = registry.dispatcher.recover(0.0)

    assert moved == [instance_key(app, "eu")]
    pending = registry.dispatcher.pending.get(instance_key(app, "eu"))
    assert pending is not None and pending.queue == registry.dispatcher.queue_name("w-b")
    assert pending.intent.trigger == "interval"
    assert registry.dispatcher.checks.answer_of(check.job_id) == {"followed_by": pending.job_id}
    assert registry.dispatcher.checks.workers() == []


def test_a_check_of_an_app_deleted_meanwhile_is_skipped_without_a_sync_or_a_status(
    registry: FleetEnv,
) -> None:
    app = _registered(registry, "w-a")
    check = registry.dispatcher.request_sync(app, "eu", trigger=Trigger.INTERVAL)
    registry.store.delete_app(app)

    runtime = Runtime(registry.settings("w-a"), registry.redis)
    counts = quietbatch.judge_batch(
        runtime, registry.dispatcher.checks.take("w-a", 10), quietbatch.Desires()
    )

    assert counts["skipped"] == 1 and counts["full"] == 0
    answer = registry.dispatcher.wait(check, timeout=5)
    assert answer is not None and answer["result"] == "skipped"
    assert answer["message"] == f"no app named {app}"
    assert registry.dispatcher.pending.get(instance_key(app, "eu")) is None
    assert registry.store.get_status(app, "eu") is None
