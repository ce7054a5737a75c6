"""Dispatching against a real redis-server: owner queues, merging, follow-ups, recovery."""

from __future__ import annotations

import re
import time

import pytest
from rq import Queue
from rq.job import Job

from fleet.control.keys import Queues
from fleet.control.registry.instances import instance_key
from fleet.control.registry.records import ClusterCredentials, ClusterRecord
from fleet.control.routing import membership
from fleet.control.routing.owners import OwnerMap
from fleet.control.routing.pending import Intent
from fleet.control.routing.sharding import NoWorkers
from fleet.model import Trigger
from tests.support.fleet import FleetEnv

WORKERS = ["w-a", "w-b"]


def _setup(env: FleetEnv, apps: int = 4) -> list[str]:
    creds = ClusterCredentials(server="https://127.0.0.1:1", token="t")
    for cluster in ("eu", "us:1"):
        env.store.put_cluster(ClusterRecord(cluster, "https://127.0.0.1:1"), creds)
    names = [env.app_name(i) for i in range(apps)]
    for i, name in enumerate(names):
        env.add_app(name, "eu" if i % 2 else "us:1")
    for worker in WORKERS:
        membership.register(env.redis, worker, ttl=30, meta={}, prefix=env.prefix)
    return names


def _queued(env: FleetEnv, queue: str) -> list[str]:
    return Queue(queue, connection=env.redis).job_ids


def test_a_sync_is_enqueued_on_its_owners_queue_with_a_safe_job_id(registry: FleetEnv) -> None:
    names = _setup(registry)
    ref = registry.dispatcher.request_sync(names[0], "us:1", trigger=Trigger.MANUAL)
    owner = OwnerMap(registry.redis, prefix=registry.prefix).owner(f"{names[0]}@us:1")
    assert ref.queue == Queues(registry.prefix).shard(owner)
    assert ref.merged is False
    assert re.fullmatch(r"[A-Za-z0-9_-]+", ref.job_id), ref.job_id
    assert _queued(registry, ref.queue) == [ref.job_id]
    job = Job.fetch(ref.job_id, connection=registry.redis)
    assert job.failure_ttl == 24 * 3600
    assert job.result_ttl == 600


def test_triggers_merge_into_a_queued_sync_and_a_manual_intent_wins(registry: FleetEnv) -> None:
    names = _setup(registry)
    first = registry.dispatcher.request_sync(
        names[0], "us:1", trigger=Trigger.MANUAL, revision="v2"
    )
    again = registry.dispatcher.request_sync(names[0], "us:1", trigger=Trigger.INTERVAL)
    newest = registry.dispatcher.request_sync(
        names[0], "us:1", trigger=Trigger.MANUAL, revision="v3"
    )
    assert (again.job_id, again.merged) == (first.job_id, True)
    assert newest.job_id == first.job_id
    assert _queued(registry, first.queue) == [first.job_id]
    pending = registry.dispatcher.pending.get(instance_key(names[0], "us:1"))
    assert pending is not None and pending.requests == 3
    assert (pending.intent.trigger, pending.intent.revision) == ("manual", "v3")


def test_a_trigger_during_a_running_sync_makes_exactly_one_follow_up(registry: FleetEnv) -> None:
    names = _setup(registry)
    instance = instance_key(names[1], "eu")
    first = registry.dispatcher.request_sync(names[1], "eu", trigger=Trigger.MANUAL)
    assert registry.dispatcher.claim(instance, first.job_id, worker="w-a") is not None
    follow = registry.dispatcher.request_sync(names[1], "eu", trigger=Trigger.WEBHOOK)
    merged = registry.dispatcher.request_sync(names[1], "eu", trigger=Trigger.INTERVAL)
    assert follow.merged is False and follow.job_id != first.job_id
    assert (merged.job_id, merged.merged) == (follow.job_id, True)
    # no worker dequeues here: the queue still holds the claimed job, and no follow-up yet
    assert _queued(registry, first.queue) == [first.job_id]
    assert registry.dispatcher.finish(instance, first.job_id, fallback_queue="") == follow.job_id
    pending = registry.dispatcher.pending.get(instance)
    assert pending is not None
    assert (pending.state, pending.job_id, pending.requests) == ("queued", follow.job_id, 2)
    assert pending.intent.trigger == "interval"
    assert _queued(registry, pending.queue)[-1] == follow.job_id
    assert registry.dispatcher.claim(instance, follow.job_id, worker="w-a") is not None
    assert registry.dispatcher.finish(instance, follow.job_id, fallback_queue="") is None
    assert registry.dispatcher.pending.get(instance) is None


def test_a_stale_job_cannot_claim_the_instance(registry: FleetEnv) -> None:
    names = _setup(registry)
    instance = instance_key(names[0], "us:1")
    ref = registry.dispatcher.request_sync(names[0], "us:1", trigger=Trigger.MANUAL)
    assert registry.dispatcher.claim(instance, "sync-someone-else", worker="w-a") is None
    assert registry.dispatcher.claim(instance, ref.job_id, worker="w-a") is not None
    assert registry.dispatcher.claim(instance, ref.job_id, worker="w-b") is None


def test_a_claim_says_whether_a_deferred_sync_of_its_instance_waits(registry: FleetEnv) -> None:
    names = _setup(registry)
    instance, other = instance_key(names[0], "us:1"), instance_key(names[1], "eu")
    retry = Intent(trigger=Trigger.RETRY, attempt=1)
    registry.dispatcher.defer(other, retry, delay=60)  # another instance's retry
    ref = registry.dispatcher.request_sync(names[0], "us:1", trigger=Trigger.MANUAL)
    claimed = registry.dispatcher.claim(instance, ref.job_id, worker="w-a")
    assert claimed is not None and claimed.deferred is False
    assert registry.dispatcher.finish(instance, ref.job_id, fallback_queue="") is None
    registry.dispatcher.defer(instance, retry, delay=60)
    ref = registry.dispatcher.request_sync(names[0], "us:1", trigger=Trigger.MANUAL)
    claimed = registry.dispatcher.claim(instance, ref.job_id, worker="w-a")
    assert claimed is not None and claimed.deferred is True
    assert registry.dispatcher.pending.deferred_at(instance) is not None  # a claim drops none
    stored = registry.dispatcher.pending.get(instance)
    assert stored is not None and stored.deferred is True  # unknown outside a claim: may wait


def test_no_live_worker_is_a_clear_retryable_error(registry: FleetEnv) -> None:
    names = _setup(registry)
    for worker in WORKERS:
        membership.deregister(registry.redis, worker, prefix=registry.prefix)
    message = rf"cannot sync {names[0]}@us:1: no live workers \(prefix {registry.prefix}\)"
    with pytest.raises(NoWorkers, match=message) as raised:
        registry.dispatcher.request_sync(names[0], "us:1", trigger=Trigger.MANUAL)
    assert raised.value.retryable


def test_dry_runs_never_merge_and_are_separate_jobs(registry: FleetEnv) -> None:
    names = _setup(registry)
    sync = registry.dispatcher.request_sync(names[0], "us:1", trigger=Trigger.MANUAL)
    one = registry.dispatcher.request_sync(names[0], "us:1", trigger=Trigger.DIFF, dry_run=True)
    two = registry.dispatcher.request_sync(names[0], "us:1", trigger=Trigger.DIFF, dry_run=True)
    assert len({sync.job_id, one.job_id, two.job_id}) == 3
    assert not one.merged and not two.merged
    assert registry.dispatcher.wait(one, timeout=0.3) is None


def test_queued_syncs_of_a_dead_worker_move_to_the_new_owner(registry: FleetEnv) -> None:
    names = _setup(registry, apps=12)
    refs = {
        n: registry.dispatcher.request_sync(n, _cluster(i), trigger=Trigger.MANUAL)
        for i, n in enumerate(names)
    }
    dead = "w-a"
    on_dead = {n for n, r in refs.items() if r.queue.endswith(dead)}
    assert on_dead, "the hash ring gave the first worker no instance"
    membership.deregister(registry.redis, dead, prefix=registry.prefix)
    moved = registry.dispatcher.recover(time.time())
    assert {m.partition("@")[0] for m in moved} == on_dead
    queues = Queues(registry.prefix)
    assert _queued(registry, queues.shard(dead)) == []
    survivor = _queued(registry, queues.shard("w-b"))
    assert len(survivor) == len(names)
    for name in on_dead:
        assert not Job.exists(refs[name].job_id, connection=registry.redis)


def test_a_running_sync_of_a_dead_worker_runs_again_once_its_lease_expired(
    registry: FleetEnv,
) -> None:
    names = _setup(registry)
    instance = instance_key(names[0], "us:1")
    ref = registry.dispatcher.request_sync(names[0], "us:1", trigger=Trigger.MANUAL, revision="v7")
    assert registry.dispatcher.claim(instance, ref.job_id, worker="w-a")
    assert registry.dispatcher.leases.acquire(instance, "w-a/1", ttl=0.5)
    registry.dispatcher.request_sync(names[0], "us:1", trigger=Trigger.INTERVAL)  # a follow-up
    later = time.time() + 60
    assert registry.dispatcher.recover(time.time() + 60) == []  # the lease is still held
    time.sleep(0.6)
    assert registry.dispatcher.recover(later) == []  # expired, but within the recovery margin
    assert registry.dispatcher.recover(later, margin=0.05) == [instance]
    pending = registry.dispatcher.pending.get(instance)
    assert pending is not None and pending.state == "queued"
    assert pending.intent.revision == "v7"  # the person's intent outlives the interval tick
    assert _queued(registry, pending.queue) == [pending.job_id]


def test_deferred_syncs_are_requested_once_when_due(registry: FleetEnv) -> None:
    names = _setup(registry)
    instance = instance_key(names[0], "us:1")
    registry.dispatcher.pending.defer(instance, Intent(Trigger.MANUAL, attempt=2), at=100.0)
    assert registry.dispatcher.pump(99.0) == []
    refs = registry.dispatcher.pump(100.0)
    assert len(refs) == 1
    assert registry.dispatcher.pump(101.0) == []
    pending = registry.dispatcher.pending.get(instance)
    assert pending is not None and pending.intent.attempt == 2


def _cluster(index: int) -> str:
    return "eu" if index % 2 else "us:1"


def test_the_owner_map_is_handed_out_again_only_when_its_stamp_moved(registry: FleetEnv) -> None:
    """`current_if_changed`: a worker's refresh skips its pass over every instance while the
    registry and the live workers stay as they were, and gets the new map once either moves."""
    names = _setup(registry, apps=4)
    owners = OwnerMap(registry.redis, prefix=registry.prefix)
    stamp, first = owners.current_if_changed(None)
    assert first == owners.current()

    again, unchanged = owners.current_if_changed(stamp)
    assert (again, unchanged) == (stamp, None)
    registry.dispatcher.request_sync(
        names[0], "us:1", trigger=Trigger.MANUAL
    )  # not a registry write
    assert owners.current_if_changed(stamp)[1] is None

    registry.add_app(registry.app_name(9), "eu")
    stamp, grown = owners.current_if_changed(stamp)
    assert grown is not None and f"{registry.app_name(9)}@eu" in grown
    membership.register(registry.redis, "w-c", ttl=30, meta={}, prefix=registry.prefix)
    stamp, regrown = owners.current_if_changed(stamp)
    assert regrown == OwnerMap(registry.redis, prefix=registry.prefix).current()  # over 3 workers
    assert owners.current_if_changed(stamp)[1] is None


def test_a_long_lived_owner_map_agrees_with_a_fresh_one_through_every_change(
    registry: FleetEnv,
) -> None:
    """The coordinator's map is updated in place as apps come and go; after each registry or
    membership change it must name the owners a process computing from scratch names."""
    names = _setup(registry, apps=6)
    kept = OwnerMap(registry.redis, prefix=registry.prefix)

    def agrees() -> None:
        fresh = OwnerMap(registry.redis, prefix=registry.prefix).current()
        assert kept.current() == fresh
        assert all(kept.owner(i) == w for i, w in fresh.items())

    agrees()
    for i in range(6, 14):
        registry.add_app(registry.app_name(i), "eu" if i % 3 else "us:1")
        agrees()
    for name in names[:3]:
        registry.store.delete_app(name, force=True)
        agrees()
    membership.register(registry.redis, "w-c", ttl=30, meta={}, prefix=registry.prefix)
    agrees()
    creds = ClusterCredentials(server="https://127.0.0.1:1", token="t")
    registry.store.put_cluster(ClusterRecord("ap", "https://127.0.0.1:1"), creds)
    registry.add_app(registry.app_name(20), "ap")
    agrees()
    membership.deregister(registry.redis, "w-a", prefix=registry.prefix)
    agrees()
    assert f"{registry.app_name(20)}@ap" in kept.current()


def test_a_long_lived_coordinator_loads_its_caches_then_freezes_them(registry: FleetEnv) -> None:
    """`api.app.freeze_loaded`: the registry's records are in memory before the collector's
    freeze, so full collections never walk them again."""
    import gc

    from api.app import freeze_loaded

    names = _setup(registry)
    try:
        freeze_loaded(registry.store, registry.dispatcher)
        frozen = gc.get_freeze_count()
        cached = [a.name for a in registry.store.list_apps_cached()]
    finally:
        gc.unfreeze()
    assert frozen > 0
    assert set(names) <= set(cached)
    assert gc.get_freeze_count() == 0
