"""Per-application leases against a real redis-server: one holder at a time, expiry, renewal."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
import redis

from fleet.control.keys import Keys
from fleet.control.routing.leases import Lease, LeaseBusy, LeaseLost
from tests.support.wait import eventually


@pytest.fixture
def lease(client: redis.Redis) -> Iterator[Lease]:
    keys = Keys(f"test-{uuid.uuid4().hex[:10]}")
    yield Lease(client, keys.lease)
    for key in client.scan_iter(keys.pattern):
        client.delete(key)


def test_of_many_contending_holders_exactly_one_wins(lease: Lease) -> None:
    start = threading.Barrier(8)
    wins: list[str] = []

    def contend(holder: str) -> None:
        start.wait()
        if lease.acquire("shop", holder, ttl=30):
            wins.append(holder)

    threads = [threading.Thread(target=contend, args=(f"worker-{i}",)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(wins) == 1
    assert lease.holder("shop") == wins[0]


def test_an_expired_lease_can_be_taken_by_another_holder(lease: Lease) -> None:
    assert lease.acquire("shop", "worker-a", ttl=0.3)
    assert not lease.acquire("shop", "worker-b", ttl=30)
    eventually(lambda: lease.acquire("shop", "worker-b", ttl=30), timeout=5, what="expiry")
    assert lease.holder("shop") == "worker-b"


def test_a_non_holder_cannot_release_or_renew(lease: Lease) -> None:
    assert lease.acquire("shop", "worker-a", ttl=30)
    assert not lease.release("shop", "worker-b")
    assert not lease.renew("shop", "worker-b", ttl=60)
    assert lease.holder("shop") == "worker-a"
    assert lease.release("shop", "worker-a")
    assert lease.holder("shop") is None


def test_renewal_extends_the_lease_from_now(lease: Lease, client: redis.Redis) -> None:
    assert lease.acquire("shop", "worker-a", ttl=0.5)
    assert lease.renew("shop", "worker-a", ttl=30)
    assert client.pttl(lease.key("shop")) > 10_000


def test_a_held_lease_outlives_its_ttl_and_is_released_after(lease: Lease) -> None:
    with lease.held("shop", "worker-a", ttl=0.3) as kept:
        until = time.monotonic() + 1.2  # four TTLs: only renewals can keep it this long
        while time.monotonic() < until:
            assert lease.holder("shop") == "worker-a"
            time.sleep(0.05)
        assert not kept.lost
    assert lease.holder("shop") is None


def test_holding_a_lease_someone_else_holds_fails_naming_the_holder(lease: Lease) -> None:
    assert lease.acquire("shop", "worker-a", ttl=30)
    busy = pytest.raises(LeaseBusy, match="shop: lease is held by worker-a")
    with busy, lease.held("shop", "worker-b", ttl=30):
        pytest.fail("the block must not run without the lease")


def test_a_lost_lease_is_flagged_and_raised_on_leaving(lease: Lease, client: redis.Redis) -> None:
    lost = pytest.raises(LeaseLost, match="shop: lease of worker-a was lost")
    with lost, lease.held("shop", "worker-a", ttl=0.3) as kept:
        client.set(lease.key("shop"), "worker-b")  # as if it expired and another worker took it
        eventually(lambda: kept.lost, timeout=5, what="the renewal to fail")
        with pytest.raises(LeaseLost):
            kept.check()
    assert lease.holder("shop") == "worker-b"


def test_an_error_inside_the_block_still_releases_the_lease(lease: Lease) -> None:
    failing = pytest.raises(RuntimeError, match="apply failed")
    with failing, lease.held("shop", "worker-a", ttl=30):
        raise RuntimeError("apply failed")
    assert lease.holder("shop") is None


def test_one_thread_renews_every_lease_held_at_once(lease: Lease) -> None:
    """Five leases held at once, each for four of its TTLs: all stay held, by renewals from
    the one renewer thread of their `Lease`, and none is renewed once released."""
    names = [f"shop-{i}" for i in range(5)]
    with contextlib.ExitStack() as stack:
        kept = [stack.enter_context(lease.held(name, "worker-a", ttl=0.3)) for name in names]
        assert lease.renewer.holding() == 5
        until = time.monotonic() + 1.2
        while time.monotonic() < until:
            assert [lease.holder(name) for name in names] == ["worker-a"] * 5
            time.sleep(0.05)
        assert not any(k.lost for k in kept)
        renewers = [t for t in threading.enumerate() if t.name == "lease-renewer"]
        assert len(renewers) >= 1 and all(t.daemon for t in renewers)
        ours = lease.renewer._thread
        assert ours is not None and ours in renewers
        assert not any(t.name.startswith("lease-shop") for t in threading.enumerate())
    assert lease.renewer.holding() == 0
    assert [lease.holder(name) for name in names] == [None] * 5


def test_a_renewal_that_fails_oddly_stops_no_other_lease(
    lease: Lease, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One renewer thread keeps every lease of its `Lease`: a renewal that raises something
    other than a Redis error (found by an attack review) is logged and tried again, and must
    neither end the thread nor cost the other leases theirs."""
    real = lease.renew
    failed: list[str] = []

    def flaky(app: str, holder: str, ttl: float, token: int = 0) -> bool:
        if app == "a" and not failed:
            failed.append(app)
            raise ValueError("not a Redis error")
        return real(app, holder, ttl, token)

    monkeypatch.setattr(lease, "renew", flaky)
    with lease.held("a", "w", ttl=0.6) as a, lease.held("b", "w", ttl=0.6) as b:
        until = time.monotonic() + 1.5  # past both TTLs: only renewals keep them
        while time.monotonic() < until:
            time.sleep(0.05)
        assert failed == ["a"]
        assert (lease.holder("a"), lease.holder("b")) == ("w", "w")
        assert not a.lost and not b.lost
        assert lease.renewer._thread is not None and lease.renewer._thread.is_alive()
