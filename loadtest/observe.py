"""What the bench records around a measured phase besides CPU: Redis commands and flame graphs.

A phase (the cold sync, each no-op cycle) makes an `Observation`, starts it once the processes
it measures are running and stops it when they are done: it counts the Redis commands the
fleet ran (`loadtest.redisops`: the server's counts minus the bench's own and minus an idle
baseline) and, with `--profile`, records a flame graph of the API and of every worker
(`loadtest.profiling`, files under DIR/profiles/, listed in report.json's `profiles`).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

from loadtest.context import Run
from loadtest.redisops import RedisMeter, per_app

REDIS_UNIT = "Redis commands per app"


def redis_meter(run: Run) -> RedisMeter:
    """Start counting the fleet's Redis commands (the bench's own left out)."""
    return RedisMeter.start(run.fleet.redis, run.fleet.tally)


def idle_rates(run: Run, *, seconds: float) -> Counter[str]:
    """The fleet's Redis commands per second, by name, over `seconds` of doing nothing."""
    meter = redis_meter(run)
    time.sleep(seconds)
    return meter.read().rates()


def processes(run: Run) -> dict[str, int]:
    """The fleet's Python processes to profile: the API and every running worker."""
    workers = {name: proc.pid for name, proc in sorted(run.fleet.workers().items())}
    return {"api": run.fleet.procs["api"].pid, **workers}


class Observation:
    """Redis commands per app over one phase (and its flame graphs when the run profiles and
    `profile` is set); `redis` holds the result once stopped (`loadtest.redisops.per_app`)."""

    def __init__(
        self, run: Run, phase: str, idle: Mapping[str, float], *, apps: int, profile: bool
    ) -> None:
        self.run = run
        self.phase = phase
        self.idle = idle
        self.apps = apps
        self.profiler = run.profiler if profile else None
        self.meter: RedisMeter | None = None
        self.redis: dict[str, Any] = {}

    def start(self) -> None:
        if self.profiler is not None:  # attaching takes a moment: before the Redis window
            self.profiler.start(self.phase, processes(self.run))
        self.meter = redis_meter(self.run)

    def stop(self) -> None:
        if self.meter is None:
            raise RuntimeError(f"Observation of {self.phase} stopped before it started")
        self.redis = per_app(self.meter.read(), self.idle, self.apps)
        if self.profiler is not None:
            self.profiler.stop()
