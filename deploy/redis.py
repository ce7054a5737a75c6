"""How gitfleet runs a redis-server for the demo, tests and benchmarks: durable, as production
must be (README, "Operating Redis").

Redis holds the whole registry (clusters, projects, apps, tokens, encrypted credentials), so it
runs with append-only persistence: every write is appended to the AOF under `folder` and
fsynced every second (`appendfsync everysec`), so a crash or a kill -9 loses at most the last
second, and a redis-server restarted on the same folder comes back with every record. RDB
snapshots stay off: the AOF is the one copy, and `gitfleet registry export` the backup.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from deploy.testbed.errors import StartError


def redis_command(port: int, folder: Path, *, password: str | None = None) -> list[str]:
    """A loopback-only redis-server keeping its data in `folder` (append-only file, fsynced
    every second); started again on the same folder, it has every record back.

    With `password` the server requires it (AUTH): it goes into a 0600 config file in `folder`
    rather than onto the command line, where any local user could read it with `ps`. Clients
    put it in the URL: `redis://:PASSWORD@127.0.0.1:PORT/0`.
    """
    binary = shutil.which("redis-server") or "/usr/bin/redis-server"
    if not Path(binary).exists():
        raise StartError("redis-server is not installed: run `make setup` (apt redis-server)")
    config = [_auth_config(folder, password)] if password else []
    return [
        binary,
        *config,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "yes",
        "--appendfsync",
        "everysec",
        "--dir",
        str(folder),
    ]


def _auth_config(folder: Path, password: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9._~-]+", password):
        raise ValueError("password: use URL-safe characters only (it goes into a Redis URL)")
    path = folder / "redis-auth.conf"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f'requirepass "{password}"\n')
    return str(path)
