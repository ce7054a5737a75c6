"""How gitfleet runs a throwaway redis-server for the demo, tests and benchmarks."""

from __future__ import annotations

import shutil
from pathlib import Path

from deploy.testbed.errors import StartError


def redis_command(port: int, folder: Path) -> list[str]:
    """A loopback-only redis-server without persistence (state lives for one run)."""
    binary = shutil.which("redis-server") or "/usr/bin/redis-server"
    if not Path(binary).exists():
        raise StartError("redis-server is not installed: run `make setup` (apt redis-server)")
    return [
        binary,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(folder),
    ]
