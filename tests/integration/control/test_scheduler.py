"""The reconcile scheduler driven tick by tick against a real redis-server."""

from __future__ import annotations

from dataclasses import replace

from fleet.control.registry.instances import instance_key
from fleet.control.registry.records import (
    ClusterCredentials,
    ClusterRecord,
    RolloutSpec,
    RolloutStep,
)
from fleet.control.routing import membership
from fleet.control.scheduler import Scheduler
from fleet.control.windows import SyncWindow
from tests.support.fleet import FleetEnv


def _setup(env: FleetEnv) -> None:
    creds = ClusterCredentials(server="https://127.0.0.1:1", token="t")
    for cluster in ("eu", "us"):
        env.store.put_cluster(ClusterRecord(cluster, "https://127.0.0.1:1"), creds)
    membership.register(env.redis, "w-a", ttl=30, meta={}, prefix=env.prefix)


def test_automated_instances_are_requested_when_due_with_a_stable_jitter(
    registry: FleetEnv,
) -> None:
    _setup(registry)
    auto, manual = "jittered", registry.app_name(1)  # a fixed name: a fixed jitter
    registry.add_app(auto, "eu", automated=True, interval_s=60)
    registry.add_app(manual, "eu", automated=False)
    scheduler = Scheduler(registry.store, registry.dispatcher)
    instance = instance_key(auto, "eu")
    assert scheduler.tick(1000.0).dispatched == [instance]
    assert scheduler.tick(1001.0).dispatched == []
    due = 1063.638516538091  # 60 s stretched by jittered@eu's own share of the 10% jitter
    assert scheduler.tick(due - 0.5).dispatched == []
    assert scheduler.tick(due).dispatched == [instance]


def test_an_interval_changed_between_ticks_moves_the_next_due_time(registry: FleetEnv) -> None:
    """The scheduler keeps each instance's jittered period between ticks: a new interval in
    the app's record must replace it at the next tick."""
    _setup(registry)
    name = "jittered"  # the first test's app: 60 s are 63.64 s for jittered@eu
    app = registry.add_app(name, "eu", automated=True, interval_s=60)
    scheduler = Scheduler(registry.store, registry.dispatcher)
    instance = instance_key(name, "eu")
    assert scheduler.tick(1000.0).dispatched == [instance]
    assert scheduler.tick(1001.0).dispatched == []  # its period is known now
    longer = replace(app.sync_policy, interval_s=600)
    registry.store.put_app(replace(app, sync_policy=longer), create=False)
    assert scheduler.tick(1000.0 + 63.64).dispatched == []  # due under the old interval
    assert scheduler.tick(1000.0 + 636.4).dispatched == [instance]  # 600 s, the same share


def test_a_window_that_cannot_be_evaluated_blocks_its_app_once_it_is_due(
    registry: FleetEnv,
) -> None:
    """Nothing due, nothing to block (with or without windows); due, a stored window that
    cannot be evaluated blocks its app, with the reason listed."""
    _setup(registry)
    name = registry.app_name(0)
    never = SyncWindow("deny", "0 0 31 2 *", "1h")  # the 31st of February: never opens
    registry.add_app(name, "eu", automated=True, interval_s=60, sync_windows=(never,))
    scheduler = Scheduler(registry.store, registry.dispatcher)
    instance = instance_key(name, "eu")
    registry.redis.hset(scheduler.last_key, instance, 999.0)  # requested a second ago
    report = scheduler.tick(1000.0)
    assert (report.dispatched, report.blocked) == ([], {})
    report = scheduler.tick(1000.0 + 3600)
    assert report.dispatched == []
    assert "cannot be evaluated" in report.blocked[instance], report.blocked


def test_a_deny_window_keeps_an_instance_due_until_it_closes(registry: FleetEnv) -> None:
    _setup(registry)
    app = registry.app_name(0)
    window = SyncWindow("deny", "0 10 * * *", "1h", timezone="UTC")
    registry.add_app(app, "us", automated=True, sync_windows=(window,))
    scheduler = Scheduler(registry.store, registry.dispatcher)
    inside = 1767261600.0 + 600  # 2026-01-01 10:10 UTC
    report = scheduler.tick(inside)
    assert report.dispatched == []
    assert report.blocked[instance_key(app, "us")].startswith(f"sync blocked: {app} is inside")
    assert registry.redis.hget(registry.store.keys.scheduler_blocked, instance_key(app, "us"))
    assert scheduler.tick(inside + 3600).dispatched == [instance_key(app, "us")]


def test_only_one_scheduler_replica_is_active_and_another_takes_over(registry: FleetEnv) -> None:
    _setup(registry)
    registry.add_app(registry.app_name(0), "eu", automated=True)
    first = Scheduler(registry.store, registry.dispatcher, holder="one", lock_ttl=30)
    second = Scheduler(registry.store, registry.dispatcher, holder="two", lock_ttl=30)
    assert first.tick(10.0).leader
    assert not second.tick(10.0).leader
    first.stop()  # releases the lock
    assert second.tick(11.0).leader


def test_a_deleting_app_is_not_scheduled(registry: FleetEnv) -> None:
    _setup(registry)
    app = registry.add_app(registry.app_name(0), "eu", automated=True)
    registry.store.put_app(replace(app, deleting=True), create=False)
    assert Scheduler(registry.store, registry.dispatcher).tick(5.0).dispatched == []


def test_an_instance_never_requested_gets_a_sync_and_one_requested_before_a_quiet_check(
    registry: FleetEnv,
) -> None:
    """A quiet check of an instance never synced could only hand it on to a sync: the first
    request goes straight to one, and the next due request is a quiet check again. An app with
    a rollout too: the worker pins a newcomer to the stable revision itself."""
    _setup(registry)
    new, known, rolled = registry.app_name(0), registry.app_name(1), registry.app_name(2)
    registry.add_app(new, "eu", automated=True, interval_s=60)
    registry.add_app(known, "eu", automated=True, interval_s=60)
    app = registry.add_app(rolled, "eu", automated=True, interval_s=60)
    steps = (RolloutStep(max_parallel="1"),)
    registry.store.put_app(replace(app, rollout=RolloutSpec(steps=steps)), create=False)
    scheduler = Scheduler(registry.store, registry.dispatcher)
    new_at, known_at = instance_key(new, "eu"), instance_key(known, "eu")
    rolled_at = instance_key(rolled, "eu")
    registry.redis.hset(scheduler.last_key, known_at, 0.0)  # requested long ago: due again
    assert sorted(scheduler.tick(1000.0).dispatched) == sorted([new_at, known_at, rolled_at])
    pending = registry.dispatcher.pending
    assert pending.get(new_at) is not None and pending.get(rolled_at) is not None
    assert pending.get(known_at) is None
    parked = registry.dispatcher.checks.drain("w-a")
    assert [check.instance for check in parked] == [known_at]
    registry.redis.delete(pending.key(new_at))  # as if its sync ran; next due: a check
    assert new_at in scheduler.tick(1000.0 + 3600).dispatched
    assert pending.get(new_at) is None
    assert new_at in [check.instance for check in registry.dispatcher.checks.drain("w-a")]
