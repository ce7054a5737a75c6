"""Redis round trips of one cold sync through a real worker (issue 16).

A worker's syncs wait on Redis more than on anything else but the API server, and what costs is
the round trip, not the command: a pipeline or a Lua script of ten commands is one. So the
worker here runs on a client whose connections count both (`loadtest.redisops`), and the test
measures one whole turn of rq's loop around the cold sync of a one-object app: dequeue, claim,
lease, engine, fenced status write, finish, rq's own job bookkeeping, journal. The turn is the
second of three, so Lua scripts are loaded and connections open, as in a worker that has run
for a while; every sync is the app's first. The budgets hold today's figures with a small
margin (before issue 16's changes the same turn took 60 round trips and 148 commands).
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from redis import ConnectionPool, Redis
from rq.job import Job
from rq.queue import Queue

from fleet.model import Trigger
from loadtest.redisops import CommandTally, CountingConnection
from tests.support import manifests as m
from tests.support.fleet import FleetEnv
from worker.process import FleetWorker, register
from worker.runtime import Runtime

ROUND_TRIPS_BUDGET = 23  # 22 measured (30 at cf727ab, 32 at fff53f8, 44 at 5a22892, 60 before)
COMMANDS_BUDGET = (
    72  # 70 measured (76, 82, 96, 148 before), a Lua script's own commands not counted
)


class RoundTrips:
    """Round trips sent by a client's connections; safe to share between threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0

    def add(self) -> None:
        with self._lock:
            self.count += 1


class RoundTripConnection(CountingConnection):
    """`CountingConnection` that also counts round trips: every write to the server (a single
    command, or a whole pipeline or transaction) is one."""

    def __init__(self, *, trips: RoundTrips, **kwargs: Any) -> None:
        self.trips = trips
        super().__init__(**kwargs)

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        self.trips.add()
        super().send_packed_command(command, check_health)  # type: ignore[no-untyped-call]


class MeteredWorker(FleetWorker):
    """Notes the client's (round trips, commands) as each job starts."""

    def __init__(self, runtime: Runtime, tally: CommandTally, trips: RoundTrips) -> None:
        super().__init__(runtime)
        self.tally, self.trips = tally, trips
        self.marks: list[tuple[int, Counter[str]]] = []

    def execute_job(self, job: Job, queue: Queue) -> None:
        self.marks.append((self.trips.count, self.tally.snapshot()))
        super().execute_job(job, queue)


def test_a_cold_sync_of_a_one_object_app_stays_within_its_redis_budget(fleet: FleetEnv) -> None:
    cluster = sorted(fleet.clusters)[0]
    apps = [fleet.app_name(i) for i in range(3)]
    fleet.repo.commit({f"apps/{app}/cm.yaml": m.configmap("settings", "k: v1") for app in apps})
    tally, trips = CommandTally(), RoundTrips()
    pool = ConnectionPool.from_url(
        fleet.redis_url, connection_class=RoundTripConnection, tally=tally, trips=trips
    )
    runtime = Runtime(fleet.settings("metered"), Redis(connection_pool=pool))
    worker = MeteredWorker(runtime, tally, trips)
    register(runtime)
    refs = []
    for app in apps:
        fleet.add_app(app, cluster)
        refs.append(fleet.dispatcher.request_sync(app, cluster, trigger=Trigger.MANUAL))
    worker.work(burst=True, logging_level="WARNING")
    runtime.close()
    answers = [fleet.dispatcher.wait(ref, timeout=5) for ref in refs]
    assert [a and a["result"] for a in answers] == ["succeeded"] * 3
    assert [fleet.status(app, cluster).sync_status for app in apps] == ["Synced"] * 3
    assert len(worker.marks) == 3
    (trips_before, commands_before), (trips_after, commands_after) = worker.marks[1:]
    round_trips = trips_after - trips_before
    commands = commands_after - commands_before
    print(f"\none cold sync: {round_trips} round trips, {commands.total()} commands")
    assert round_trips <= ROUND_TRIPS_BUDGET, commands
    assert commands.total() <= COMMANDS_BUDGET, commands
