"""Redis commands the system under test runs in a phase, per app (issue 16).

Redis counts every command it executes in `INFO commandstats` (calls per command, whoever sent
it). The bench's own Redis client polls the same server (the status board, `wait_idle`,
membership and shard-map reads, and these INFO reads themselves), so it is built on
`CountingConnection`, which tallies every command it sends by the name commandstats gives it;
the tally is subtracted from the server's counts. Commands the bench sends in a component's
place (the scheduler's interval requests, `Fleet.stand_in`) go through an uncounted client and
stay in the figure.

What is left still holds the fleet's idle traffic (worker heartbeats, rq's blocking pops, the
scheduler's ticks): a rate per command measured over an idle window just before the phase is
subtracted, the way the apiserver request counts subtract the testbed's background
(`loadtest.phases`). The figures are commands per app.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from redis import ConnectionPool, Redis
from redis.connection import Connection

# commands whose first argument names a subcommand: commandstats says `client|setname`
CONTAINERS = frozenset(
    {
        *("acl", "client", "cluster", "command", "config", "function", "latency", "memory"),
        *("module", "object", "pubsub", "script", "slowlog", "xgroup", "xinfo"),
    }
)


def command_name(args: tuple[Any, ...]) -> str:
    """The name `INFO commandstats` files a command under: `hget`, `client|setname`."""
    words = [a.decode() if isinstance(a, bytes) else str(a) for a in args[:2]] or [""]
    if " " in words[0]:  # redis-py sends some as one argument: "CLIENT SETNAME", name
        words = words[0].split()
    name = words[0].lower()
    if name in CONTAINERS and len(words) > 1:
        return f"{name}|{words[1].lower()}"
    return name


class CommandTally:
    """Commands sent by one client's connections, by name; safe to share between threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def add(self, name: str) -> None:
        with self._lock:
            self._counts[name] += 1

    def snapshot(self) -> Counter[str]:
        with self._lock:
            return Counter(self._counts)


class CountingConnection(Connection):
    """A redis-py connection that tallies each command it sends: single commands (including
    the health-check PINGs and the hand-shake) through `send_command`, pipelines and
    transactions (MULTI and EXEC too, as Redis counts them) through `pack_commands`."""

    def __init__(self, *, tally: CommandTally, **kwargs: Any) -> None:
        self.tally = tally
        super().__init__(**kwargs)  # type: ignore[no-untyped-call, unused-ignore]

    def send_command(self, *args: Any, **kwargs: Any) -> None:
        self.tally.add(command_name(args))
        super().send_command(*args, **kwargs)  # type: ignore[no-untyped-call, unused-ignore]

    def pack_commands(self, commands: Any) -> Any:
        commands = list(commands)
        for args in commands:
            self.tally.add(command_name(tuple(args)))
        return super().pack_commands(commands)  # type: ignore[no-untyped-call, unused-ignore]


def counting_client(url: str) -> tuple[Redis, CommandTally]:
    """A client for `url` whose every command is tallied, and the tally."""
    tally = CommandTally()
    pool = ConnectionPool.from_url(url, connection_class=CountingConnection, tally=tally)
    return Redis(connection_pool=pool), tally


def command_calls(redis: Redis) -> Counter[str]:
    """Calls per command the server has executed since it started (`INFO commandstats`)."""
    stats: Mapping[str, Any] = redis.info("commandstats")
    return Counter({name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()})


@dataclass(frozen=True)
class Window:
    """Commands others than the bench ran between `RedisMeter.start` and `read`."""

    commands: Counter[str]
    seconds: float
    raw_total: int  # every command the server ran, the bench's own included
    bench_own: int

    def rates(self) -> Counter[str]:
        """Commands per second, by name: the idle baseline when the window was idle."""
        return Counter({k: v / max(self.seconds, 1e-9) for k, v in self.commands.items()})


@dataclass
class RedisMeter:
    """The server's command counts minus the bench's own, between `start` and `read`."""

    redis: Redis
    tally: CommandTally
    started: float
    server: Counter[str]
    own: Counter[str]

    @classmethod
    def start(cls, redis: Redis, tally: CommandTally) -> RedisMeter:
        own = tally.snapshot()  # before the INFO below, which the server counts in `read`
        return cls(redis, tally, time.monotonic(), command_calls(redis), own)

    def read(self) -> Window:
        own = self.tally.snapshot() - self.own
        server = command_calls(self.redis)
        gross = Counter({k: v - self.server.get(k, 0) for k, v in server.items()})
        net = Counter({k: v - own.get(k, 0) for k, v in gross.items()})
        return Window(
            commands=+net,
            seconds=time.monotonic() - self.started,
            raw_total=sum(gross.values()),
            bench_own=sum(own.values()),
        )


def per_app(window: Window, idle: Mapping[str, float], apps: int) -> dict[str, Any]:
    """Commands per app in `window` less the idle rates over its length: the total (its idle
    share subtracted as a whole, then floored at 0) and each command's share (kept when at
    least 0.005 per app), with what was subtracted, so a reader can redo the sum."""
    expected = sum(idle.values()) * window.seconds
    total = max(sum(window.commands.values()) - expected, 0.0)
    n = max(apps, 1)
    own = {k: v - idle.get(k, 0.0) * window.seconds for k, v in window.commands.items()}
    return {
        "per_app": total / n,
        "per_app_by_command": {
            k: round(v / n, 3)
            for k, v in sorted(own.items(), key=lambda kv: -kv[1])
            if v / n >= 0.005
        },
        "window_s": round(window.seconds, 2),
        "server_commands": window.raw_total,
        "bench_own_commands": window.bench_own,
        "idle_commands_expected": round(expected, 1),
    }
