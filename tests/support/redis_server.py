"""A real redis-server on a free loopback port, for integration tests."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import redis

from deploy.redis import redis_command
from deploy.testbed.process import free_port


class RedisServer:
    def __init__(self, folder: Path) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        cmd = redis_command(self.port, folder)
        self.proc = subprocess.Popen(
            cmd, stdout=(folder / "redis.log").open("wb"), stderr=subprocess.STDOUT
        )
        self._wait()

    def _wait(self) -> None:
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if client.ping():
                    return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError(f"redis-server did not answer on port {self.port}")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)
