"""Fencing tokens of instance leases against a real redis-server: each acquisition gets a newer
token, a stale holder can neither renew, pass its guard, nor write its status, and recovery
waits past the old lease's deadline."""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
import redis
from redis.client import Pipeline

from fleet.control.keys import Keys
from fleet.control.routing.leases import HeldLease, Lease, LeaseLost
from tests.support.wait import eventually


@pytest.fixture
def keys(client: redis.Redis) -> Iterator[Keys]:
    keys = Keys(f"test-{uuid.uuid4().hex[:10]}")
    yield keys
    for key in client.scan_iter(keys.pattern):
        client.delete(key)


@pytest.fixture
def lease(client: redis.Redis, keys: Keys) -> Lease:
    return Lease(client, keys.lease, keys.fence)


def _held(lease: Lease, holder: str, ttl: float) -> HeldLease:
    token = lease.take("shop", holder, ttl)
    assert token is not None
    return HeldLease(lease, "shop", holder, ttl, valid_until=time.monotonic() + ttl, token=token)


def test_each_acquisition_gets_a_greater_token(lease: Lease) -> None:
    first = lease.take("shop", "a", ttl=30)
    assert first == 1
    assert lease.take("shop", "b", ttl=30) is None  # held: no token, the counter unchanged
    assert lease.release("shop", "a")
    second = lease.take("shop", "b", ttl=30)
    assert second == 2 and lease.token("shop") == 2
    assert lease.take("other", "a", ttl=30) == 1  # one counter per instance


def test_a_stale_holder_cannot_renew_nor_pass_its_guard(lease: Lease) -> None:
    stale = _held(lease, "a", ttl=0.3)
    stale("wave 0")  # current: passes
    eventually(lambda: lease.holder("shop") is None, timeout=5)
    newer = _held(lease, "b", ttl=30)
    assert newer.token == stale.token + 1
    assert not lease.renew("shop", "a", 30, stale.token)
    with pytest.raises(LeaseLost, match="lost"):
        stale("prune")  # its deadline passed locally: refused without asking Redis
    newer("prune")


def test_the_guard_asks_redis_even_before_the_local_deadline(lease: Lease, keys: Keys) -> None:
    held = _held(lease, "a", ttl=30)
    lease.redis.hincrby(keys.fence("shop"), "token", 1)  # someone took a newer token
    with pytest.raises(LeaseLost, match="no longer current"):
        held("wave 1")
    assert held.lost
    assert not lease.renew("shop", "a", 30, held.token)


def test_a_refused_renewal_marks_the_lease_lost_at_once(lease: Lease) -> None:
    held = _held(lease, "a", ttl=0.6)
    held.start()
    try:
        lease.redis.delete(lease.key("shop"))
        assert lease.take("shop", "b", ttl=30) == held.token + 1
        eventually(lambda: held.lost, timeout=5)
    finally:
        held.stop()
    with pytest.raises(LeaseLost):
        held.check()


def test_status_writes_of_a_stale_holder_are_refused(lease: Lease, client: redis.Redis) -> None:
    target = f"{lease.key('shop')}:status"

    def write(value: str) -> Callable[[Pipeline], None]:
        def commands(pipe: Pipeline) -> None:
            pipe.set(target, value)

        return commands

    stale = _held(lease, "a", ttl=30)
    stale.fenced(write("a-1"))
    assert client.get(target) == b"a-1"
    client.delete(lease.key("shop"))  # expired meanwhile (a pause longer than the TTL)
    newer = _held(lease, "b", ttl=30)
    newer.fenced(write("b-2"))
    with pytest.raises(LeaseLost, match="not written"):
        stale.fenced(write("a-1-late"))
    assert client.get(target) == b"b-2"
    client.delete(target)


def test_recovery_waits_past_the_old_deadline(lease: Lease) -> None:
    assert lease.expired_for("shop") == math.inf  # never taken: nothing to wait for
    lease.take("shop", "a", ttl=0.3)
    assert lease.expired_for("shop") is None  # held
    eventually(lambda: lease.holder("shop") is None, timeout=5)
    gone = lease.expired_for("shop")
    assert gone is not None and 0 <= gone < 2.0
    eventually(lambda: (lease.expired_for("shop") or 0) >= 0.5, timeout=5)


def test_only_the_current_holder_advances_its_token(lease: Lease, keys: Keys) -> None:
    held = _held(lease, "a", ttl=30)
    held.advance(41)  # the cluster carries 41: Redis's counter was reset
    assert held.token == 42 and lease.token("shop") == 42
    held("record")
    lease.redis.hincrby(keys.fence("shop"), "token", 1)  # a newer holder
    with pytest.raises(LeaseLost):
        held.advance(50)
    assert lease.token("shop") == 43
