"""A worker told to stop the moment it has joined the fleet drains and exits 0.

Between registering in the membership and entering rq's loop (which installs rq's signal
handlers), a worker used to die of the SIGTERM itself (exit -15): a rolling update that
stopped a pod just after it joined looked like a crash. Run as a user runs it: `python -m
worker` against a real redis-server, the signal sent as soon as the membership shows it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from redis import Redis

from fleet.control.routing.membership import live_workers
from tests.support.paths import REPO_ROOT
from tests.support.processenv import process_env
from tests.support.redis_server import RedisServer


def test_a_sigterm_right_after_joining_drains_and_exits_cleanly(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    redis, prefix = Redis.from_url(redis_server.url), f"early{os.getpid()}"
    env = process_env(redis_server.url, tmp_path, GITFLEET_PREFIX=prefix)
    codes = []
    for i in range(3):
        name = f"early-{i}"
        log = (tmp_path / f"{name}.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "worker", "--name", name],
            cwd=REPO_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while name not in live_workers(redis, prefix=prefix):
            assert proc.poll() is None and time.monotonic() < deadline, "the worker never joined"
            time.sleep(0.005)
        proc.send_signal(signal.SIGTERM)
        codes.append(proc.wait(timeout=60))
        assert name not in live_workers(redis, prefix=prefix)  # it left the fleet on its way out
    assert codes == [0, 0, 0]
