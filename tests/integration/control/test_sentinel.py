"""`fleet.control.connection.connect` with a Sentinel URL, against a real redis-server
and a real Sentinel (`redis-server --sentinel`) watching it."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from deploy.redis import redis_command
from deploy.testbed.process import free_port, wait_for
from fleet.control.connection import RedisUnavailable, connect
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.redis  # starts redis-servers of its own

PASSWORD = "sentinel-test-pw"
MASTER = "gitfleet"


@pytest.fixture
def master(tmp_path: Path) -> Iterator[RedisServer]:
    folder = tmp_path / "master"
    folder.mkdir()
    server = RedisServer(folder, password=PASSWORD)
    yield server
    server.stop()


@pytest.fixture
def sentinel(master: RedisServer, tmp_path: Path) -> Iterator[int]:
    """A Sentinel monitoring `master`; yields its port."""
    port = free_port()
    config = tmp_path / "sentinel.conf"  # Sentinel rewrites its config: a file of its own
    config.write_text(
        f"port {port}\nbind 127.0.0.1\ndir {tmp_path}\n"
        f"sentinel monitor {MASTER} 127.0.0.1 {master.port} 1\n"
        f"sentinel auth-pass {MASTER} {PASSWORD}\n"
    )
    log = (tmp_path / "sentinel.log").open("wb")
    proc = subprocess.Popen(["redis-server", str(config), "--sentinel"], stdout=log, stderr=log)
    probe = redis.Redis(host="127.0.0.1", port=port)

    def knows_master() -> bool:
        try:
            return probe.sentinel_get_master_addr_by_name(MASTER) is not None
        except redis.ConnectionError:
            return False

    try:
        wait_for(knows_master, what="Sentinel watching the master", timeout=15, period=0.1)
        yield port
    finally:
        probe.close()
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


def test_a_sentinel_url_reaches_the_master_with_its_password_and_database(
    master: RedisServer, sentinel: int
) -> None:
    client = connect(f"redis+sentinel://:{PASSWORD}@127.0.0.1:{sentinel}/{MASTER}/3")
    try:
        client.set("written-through-sentinel", "yes")
    finally:
        client.close()

    assert client.connection_pool.connection_kwargs.get("socket_timeout") is None  # BLPOP waits
    direct = redis.Redis.from_url(master.url_for(password=PASSWORD, db=3))
    assert direct.get("written-through-sentinel") == b"yes"
    direct.close()


def test_the_client_follows_a_failover_to_the_promoted_replica(
    master: RedisServer, sentinel: int, tmp_path: Path
) -> None:
    folder = tmp_path / "replica"
    folder.mkdir()
    port = free_port()
    command = redis_command(port, folder, password=PASSWORD)
    command += ["--replicaof", "127.0.0.1", str(master.port), "--masterauth", PASSWORD]
    replica = subprocess.Popen(
        command, stdout=(folder / "redis.log").open("wb"), stderr=subprocess.STDOUT
    )
    client = connect(f"redis+sentinel://:{PASSWORD}@127.0.0.1:{sentinel}/{MASTER}/0")
    probe = redis.Redis(host="127.0.0.1", port=sentinel)
    try:
        client.set("before", "1")
        in_sync = redis.Redis(host="127.0.0.1", port=port, password=PASSWORD)
        wait_for(
            lambda: in_sync.get("before") == b"1",
            what="the replica in sync",
            timeout=15,
            period=0.1,
        )
        in_sync.close()

        def failover_started() -> bool:
            """Sentinel refuses (NOGOODSLAVE) until it has seen the replica's link up."""
            try:
                return bool(probe.sentinel_failover(MASTER))
            except redis.ResponseError as e:
                if "NOGOODSLAVE" not in str(e):
                    raise
                return False

        wait_for(failover_started, what="Sentinel starting a failover", timeout=40, period=0.5)

        def promoted() -> bool:
            address = probe.sentinel_get_master_addr_by_name(MASTER)
            return address is not None and int(address[1]) == port

        wait_for(promoted, what="the replica promoted", timeout=30, period=0.2)
        # A forced failover leaves the old master writable until Sentinel demotes it (a dead
        # one takes no writes): write once it is a replica, which refuses the write.
        old = redis.Redis.from_url(master.url)

        def demoted() -> bool:
            try:
                return bool(old.role()[0] == b"slave")
            except redis.ConnectionError:  # a demoted master drops its clients' connections
                return False

        wait_for(demoted, what="the old master demoted", timeout=30)
        old.close()

        def written() -> bool:
            try:
                client.set("after", "2")
            except (redis.ConnectionError, redis.ReadOnlyError):
                return False  # the old connection: the pool asks the sentinels again
            return True

        wait_for(written, what="a write after the failover", timeout=30, period=0.2)
        on_new_master = redis.Redis(host="127.0.0.1", port=port, password=PASSWORD)
        assert on_new_master.get("after") == b"2"
        on_new_master.close()
    finally:
        client.close()
        probe.close()
        replica.terminate()
        replica.wait(timeout=10)


def test_a_sentinel_url_without_the_password_is_refused_saying_so(
    master: RedisServer, sentinel: int
) -> None:
    with pytest.raises(RedisUnavailable, match="requires a password, and the URL gives none"):
        connect(f"redis+sentinel://127.0.0.1:{sentinel}/{MASTER}/0")


def test_an_unknown_master_name_or_a_url_without_one_is_a_clear_error(
    sentinel: int,
) -> None:
    with pytest.raises(RedisUnavailable, match=r"cannot connect to Redis at .*elsewhere"):
        connect(f"redis+sentinel://:{PASSWORD}@127.0.0.1:{sentinel}/elsewhere/0")
    with pytest.raises(RedisUnavailable, match="MASTER_NAME") as error:
        connect(f"redis+sentinel://:{PASSWORD}@127.0.0.1:{sentinel}")
    assert PASSWORD not in str(error.value)
