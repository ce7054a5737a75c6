"""The reconcile scheduler driven tick by tick against a real redis-server."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from fleet.control.registry.instances import instance_key
from fleet.control.registry.records import (
    ClusterCredentials,
    ClusterRecord,
    RolloutSpec,
    RolloutStep,
)
from fleet.control.rollouts.state import Phase, RolloutState, RolloutStore, StepState
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
    request goes straight to one, and the next due request is a quiet check again."""
    _setup(registry)
    new, known = registry.app_name(0), registry.app_name(1)
    registry.add_app(new, "eu", automated=True, interval_s=60)
    registry.add_app(known, "eu", automated=True, interval_s=60)
    scheduler = Scheduler(registry.store, registry.dispatcher)
    new_at, known_at = instance_key(new, "eu"), instance_key(known, "eu")
    registry.redis.hset(scheduler.last_key, known_at, 0.0)  # requested long ago: due again
    assert sorted(scheduler.tick(1000.0).dispatched) == sorted([new_at, known_at])
    pending = registry.dispatcher.pending
    assert pending.get(new_at) is not None
    assert pending.get(known_at) is None
    parked = registry.dispatcher.checks.drain("w-a")
    assert [check.instance for check in parked] == [known_at]
    registry.redis.delete(pending.key(new_at))  # as if its sync ran; next due: a check
    assert new_at in scheduler.tick(1000.0 + 3600).dispatched
    assert pending.get(new_at) is None
    assert new_at in [check.instance for check in registry.dispatcher.checks.drain("w-a")]


def test_a_cluster_that_joins_mid_rollout_is_pinned_to_the_stable_revision_before_any_sync(
    registry: FleetEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tick's rollout step runs before its dispatch: a newcomer's first (direct) sync is
    requested only once the cluster is pinned to the stable revision, so no worker can sync
    it at the branch head being rolled out."""
    _setup(registry)
    app = registry.add_app(registry.app_name(0), "eu", automated=True, interval_s=60)
    spec = RolloutSpec(steps=(RolloutStep(max_parallel="1", pause_manual=True),), poll_s=3600)
    selector = {"rollout": registry.prefix}
    destination = replace(app.destination, cluster="", selector=selector)
    registry.store.put_app(replace(app, destination=destination, rollout=spec), create=False)
    eu = registry.store.get_cluster("eu")
    registry.store.put_cluster(replace(eu, labels=selector))
    stable, rolling = "a" * 40, "b" * 40
    states = RolloutStore(registry.redis, prefix=registry.prefix)
    paused = RolloutState(
        app.name,
        rolling,
        uid=registry.store.get_app(app.name).uid,
        stable=stable,
        phase=Phase.PAUSED,
        steps=(StepState(clusters=("eu",), started=900.0),),
        checked=1000.0,
    )
    states.update(app.name, lambda _: paused)
    states.set_pins(app.name, {"eu": rolling})
    scheduler = Scheduler(registry.store, registry.dispatcher)
    scheduler.tick(1000.0)  # eu: requested once, in its step
    us = registry.store.get_cluster("us")
    registry.store.put_cluster(replace(us, labels=selector))  # joins mid-rollout
    pinned_when_asked: list[tuple[str, str]] = []
    request = registry.dispatcher.request_sync

    def noting(app_name: str, cluster: str, **kwargs: Any) -> Any:
        pinned_when_asked.append((str(kwargs.get("trigger")), states.pin(app_name, cluster)))
        return request(app_name, cluster, **kwargs)

    monkeypatch.setattr(registry.dispatcher, "request_sync", noting)
    report = scheduler.tick(1001.0)

    assert instance_key(app.name, "us") in report.dispatched
    assert states.pins(app.name) == {"eu": rolling, "us": stable}
    assert pinned_when_asked and all(pin == stable for _, pin in pinned_when_asked)
    assert ("interval", stable) in pinned_when_asked
