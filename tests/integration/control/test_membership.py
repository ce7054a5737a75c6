"""Worker membership against a real redis-server: heartbeats, expiry, and the shard map over it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis

from fleet.control.keys import Keys
from fleet.control.routing import membership
from fleet.control.routing.sharding import NoWorkers, moved_share
from tests.support.wait import eventually

APPS = [f"shop-{i}" for i in range(300)]
TTL = 0.5


@pytest.fixture
def prefix(client: redis.Redis) -> Iterator[str]:
    name = f"test-{uuid.uuid4().hex[:10]}"
    yield name
    for key in client.scan_iter(Keys(name).pattern):
        client.delete(key)


def register_all(client: redis.Redis, prefix: str, names: list[str], ttl: float) -> None:
    for name in names:
        membership.register(client, name, ttl=ttl, meta={"pid": 1}, prefix=prefix)


def test_registered_workers_are_live_and_sorted(client: redis.Redis, prefix: str) -> None:
    register_all(client, prefix, ["worker-c", "worker-a", "worker-b"], ttl=30)
    assert membership.live_workers(client, prefix=prefix) == ["worker-a", "worker-b", "worker-c"]
    assert membership.worker_meta(client, "worker-a", prefix=prefix) == {"pid": 1}


def test_a_worker_whose_heartbeat_stops_drops_out_and_its_apps_move(
    client: redis.Redis, prefix: str
) -> None:
    register_all(client, prefix, ["worker-a", "worker-b", "worker-c"], ttl=TTL)
    before = membership.shard_map(client, APPS, prefix=prefix)
    assert set(before.values()) == {"worker-a", "worker-b", "worker-c"}

    def only_c_gone() -> list[str] | None:
        for name in ("worker-a", "worker-b"):  # these keep beating, worker-c has stopped
            assert membership.heartbeat(client, name, ttl=TTL, prefix=prefix)
        live = membership.live_workers(client, prefix=prefix)
        return live if live == ["worker-a", "worker-b"] else None

    eventually(only_c_gone, timeout=5, what="worker-c to expire")
    after = membership.shard_map(client, APPS, prefix=prefix)
    assert set(after.values()) == {"worker-a", "worker-b"}
    kept = [app for app, worker in before.items() if worker != "worker-c"]
    assert sum(after[app] != before[app] for app in kept) <= 0.02 * len(APPS)
    assert moved_share(before, after) < 0.5
    assert membership.worker_meta(client, "worker-c", prefix=prefix) is None


def test_a_heartbeat_after_expiry_is_refused_until_the_worker_registers_again(
    client: redis.Redis, prefix: str
) -> None:
    register_all(client, prefix, ["worker-a"], ttl=0.2)
    eventually(lambda: not membership.live_workers(client, prefix=prefix), timeout=5, what="expiry")
    assert not membership.heartbeat(client, "worker-a", ttl=30, prefix=prefix)
    assert membership.live_workers(client, prefix=prefix) == []
    register_all(client, prefix, ["worker-a"], ttl=30)
    assert membership.heartbeat(client, "worker-a", ttl=30, prefix=prefix)
    assert membership.live_workers(client, prefix=prefix) == ["worker-a"]


def test_a_heartbeat_extends_the_deadline(client: redis.Redis, prefix: str) -> None:
    register_all(client, prefix, ["worker-a"], ttl=0.3)
    assert membership.heartbeat(client, "worker-a", ttl=30, prefix=prefix)
    deadline = client.zscore(Keys(prefix).workers, "worker-a")
    seconds, micros = client.time()
    assert deadline is not None
    assert deadline - (seconds * 1000 + micros // 1000) > 10_000


def test_a_heartbeat_from_an_unknown_worker_is_refused(client: redis.Redis, prefix: str) -> None:
    assert not membership.heartbeat(client, "worker-x", ttl=30, prefix=prefix)
    assert membership.live_workers(client, prefix=prefix) == []


def test_deregister_removes_a_worker_at_once(client: redis.Redis, prefix: str) -> None:
    register_all(client, prefix, ["worker-a", "worker-b"], ttl=30)
    assert membership.deregister(client, "worker-a", prefix=prefix)
    assert not membership.deregister(client, "worker-a", prefix=prefix)
    assert membership.live_workers(client, prefix=prefix) == ["worker-b"]
    assert set(membership.shard_map(client, APPS, prefix=prefix).values()) == {"worker-b"}
    assert membership.worker_meta(client, "worker-a", prefix=prefix) is None


def test_shard_map_without_live_workers_raises_no_workers(client: redis.Redis, prefix: str) -> None:
    with pytest.raises(NoWorkers, match="no live workers"):
        membership.shard_map(client, APPS, prefix=prefix)


def test_registries_under_different_prefixes_do_not_see_each_other(
    client: redis.Redis, prefix: str
) -> None:
    register_all(client, prefix, ["worker-a"], ttl=30)
    assert membership.live_workers(client, prefix=f"{prefix}-other") == []


@pytest.mark.parametrize("ttl", [0.0, -1.0])
def test_a_non_positive_ttl_is_rejected(client: redis.Redis, prefix: str, ttl: float) -> None:
    with pytest.raises(ValueError, match="ttl: must be positive"):
        membership.register(client, "worker-a", ttl=ttl, meta={}, prefix=prefix)
