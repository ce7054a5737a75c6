"""The bench's Redis meter counts what other clients run on a real redis-server, by command, and
leaves out every command of the bench's own counting client (`loadtest.redisops`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from loadtest.redisops import RedisMeter, counting_client
from tests.support.redis_server import RedisServer


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of this test's own: commandstats are server-wide."""
    server = RedisServer(tmp_path)
    yield server
    server.stop()


def test_the_meter_counts_other_clients_commands_by_name_and_leaves_out_the_benchs_own(
    own_server: RedisServer,
) -> None:
    bench, tally = counting_client(own_server.url)
    fleet = redis.Redis.from_url(own_server.url)
    bench.ping()  # each connection's hand-shake falls before the window
    fleet.ping()
    meter = RedisMeter.start(bench, tally)
    bench.set("board", "1")
    bench.get("board")
    transaction = bench.pipeline(transaction=True)  # MULTI, INCRBY, HSET, EXEC
    transaction.incr("n")
    transaction.hset("h", "f", "v")
    transaction.execute()
    batch = bench.pipeline(transaction=False)
    batch.get("a")
    batch.get("b")
    batch.execute()
    fleet.set("status", "synced")
    fleet.get("status")
    theirs = fleet.pipeline(transaction=True)
    theirs.incr("c")
    theirs.incr("c")
    theirs.execute()
    window = meter.read()
    assert window.commands == Counter({"set": 1, "get": 1, "multi": 1, "incrby": 2, "exec": 1})
    assert tally.snapshot()["info"] == 2  # the meter's own reads, left out as well
    assert window.raw_total - window.bench_own == 6
    bench.close()
    fleet.close()
