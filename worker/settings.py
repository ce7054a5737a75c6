"""A worker's settings, from the command line and the environment.

Everything a worker needs to join the fleet: where Redis is (GITFLEET_REDIS_URL), the key that
decrypts cluster and git credentials (GITFLEET_SECRET_KEY, the same on every process), the key
prefix (GITFLEET_PREFIX, so several fleets or tests can share one Redis), and where its warm
caches live (GITFLEET_CACHE_DIR, one folder per worker name so two workers on one machine never
share a git cache lock). The timings are settings because tests shrink them: a membership TTL
of seconds makes a killed worker drop out quickly.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from fleet.engine.caches import default_cache_dir


def is_true(flag: str) -> bool:
    return flag.strip().lower() in ("1", "true", "yes", "on")


def default_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True)
class WorkerSettings:
    """name: the shard member's name (its queue is `<prefix>-shard-<name>`).
    ttl: membership TTL in seconds; the heartbeat runs every ttl/3.
    lease_ttl: the per-instance lease TTL; a dead worker's running sync moves after it.
    debounce: seconds a self-heal trigger waits for the object to stop changing.
    fight_limit: self-heal attempts on one object within `fight_window` before giving up.
    concurrency: syncs the worker runs at once (rq workers on its queue, sharing its caches);
    4 by default, as Flux's controllers: a sync mostly waits on the API server and Redis.
    insecure_dev: `--insecure-dev`, may run without secret_key (a key kept in Redis instead).
    insecure_git_hosts: hosts (`host` or `host:port`) the worker may fetch over plain http
    (GITFLEET_INSECURE_GIT_HOSTS, comma-separated); every other repository is https or ssh.
    require_impersonation: refuse to sync an app whose project (other than `default`) names no
    ServiceAccount for the destination (GITFLEET_REQUIRE_IMPERSONATION).
    health_port, health_host: where `worker.health` serves /healthz for the kubelet
    (GITFLEET_WORKER_HEALTH_PORT, GITFLEET_WORKER_HEALTH_HOST); 0, the default, serves none."""

    name: str = field(default_factory=default_name)
    redis_url: str = field(default="redis://127.0.0.1:6379/0", repr=False)  # may hold a password
    secret_key: str | None = field(default=None, repr=False)
    prefix: str = "gitfleet"
    cache_root: Path = field(default_factory=default_cache_dir)
    ttl: float = 15.0
    lease_ttl: float = 30.0
    debounce: float = 1.0
    fight_limit: int = 5
    fight_window: float = 300.0
    self_heal: bool = True
    concurrency: int = 4
    insecure_dev: bool = False
    insecure_git_hosts: tuple[str, ...] = ()
    require_impersonation: bool = False
    health_port: int = 0
    health_host: str = "0.0.0.0"

    @property
    def cache_dir(self) -> Path:
        return self.cache_root / "workers" / self.name

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> WorkerSettings:
        env = os.environ if env is None else env
        values: dict[str, object] = {}
        if env.get("GITFLEET_REDIS_URL"):
            values["redis_url"] = env["GITFLEET_REDIS_URL"]
        if env.get("GITFLEET_SECRET_KEY"):
            values["secret_key"] = env["GITFLEET_SECRET_KEY"]
        if env.get("GITFLEET_PREFIX"):
            values["prefix"] = env["GITFLEET_PREFIX"]
        if env.get("GITFLEET_CACHE_DIR"):
            values["cache_root"] = Path(env["GITFLEET_CACHE_DIR"])
        if env.get("GITFLEET_INSECURE_GIT_HOSTS"):
            hosts = env["GITFLEET_INSECURE_GIT_HOSTS"].split(",")
            values["insecure_git_hosts"] = tuple(h.strip() for h in hosts if h.strip())
        if env.get("GITFLEET_WORKER_CONCURRENCY"):
            values["concurrency"] = int(env["GITFLEET_WORKER_CONCURRENCY"])
        if env.get("GITFLEET_WORKER_HEALTH_PORT"):
            values["health_port"] = int(env["GITFLEET_WORKER_HEALTH_PORT"])
        if env.get("GITFLEET_WORKER_HEALTH_HOST"):
            values["health_host"] = env["GITFLEET_WORKER_HEALTH_HOST"]
        if env.get("GITFLEET_REQUIRE_IMPERSONATION"):
            values["require_impersonation"] = is_true(env["GITFLEET_REQUIRE_IMPERSONATION"])
        values.update({k: v for k, v in overrides.items() if v is not None})
        settings = cls(**values)  # type: ignore[arg-type]
        if settings.concurrency < 1:
            raise ValueError(f"concurrency: must be at least 1, not {settings.concurrency}")
        return settings
