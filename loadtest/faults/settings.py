"""The fault suite's settings and command line, kept to the standard library.

`cli.bench` builds `gitfleet bench`'s parser at every start of the CLI, and `--preset faults`
adds `--quick` to it, so this module imports nothing heavy. The defaults are the issue's: an API
server and a git server down for a minute, a worker paused past its lease, a few hundred apps;
`--quick` shortens every duration (and the fleet's TTLs with them) for a run of a few minutes.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

FAULT_NAMES = (
    "apiserver-down",
    "redis-restart",
    "api-kill",
    "worker-kill",
    "worker-pause",
    "git-outage",
)
"""The faults of `loadtest.faults.kinds`, in the order they run (spelled here for `--help`)."""


@dataclass(frozen=True)
class FaultSettings:
    """What one run of the suite does.

    apps x objects_per_app ConfigMaps over `clusters` clusters, `workers` worker processes with
    membership TTL `worker_ttl_s` and lease TTL `lease_ttl_s`; one commit every
    `commit_every_s` (each app also polls git every `interval_s`, the fallback for a webhook
    that could not be delivered). Outages: an API server and the git server `outage_s`, Redis
    `redis_down_s`; a killed process is started again `restart_after_s` later (as a supervisor
    would); a worker is paused `lease_ttl_s + pause_margin_s`. Each wait for recovery gives up
    after `recover_timeout_s`; `calm_s` of steady stream separates two faults."""

    apps: int = 200
    objects_per_app: int = 2
    clusters: int = 2
    workers: int = 2
    worker_ttl_s: float = 15.0
    lease_ttl_s: float = 30.0
    commit_every_s: float = 1.0
    interval_s: int = 180
    outage_s: float = 60.0
    redis_down_s: float = 10.0
    restart_after_s: float = 5.0
    pause_margin_s: float = 10.0
    recover_timeout_s: float = 300.0
    calm_s: float = 10.0
    quick: bool = False
    only: tuple[str, ...] = ()

    @property
    def pause_s(self) -> float:
        return self.lease_ttl_s + self.pause_margin_s

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "pause_s": self.pause_s, "only": list(self.only)}


QUICK = FaultSettings(
    apps=30,
    clusters=1,
    worker_ttl_s=4.0,
    lease_ttl_s=8.0,
    interval_s=30,
    outage_s=15.0,
    redis_down_s=3.0,
    restart_after_s=2.0,
    pause_margin_s=4.0,
    recover_timeout_s=120.0,
    calm_s=4.0,
    quick=True,
)


def add_arguments(parser: argparse.ArgumentParser, *, standalone: bool = True) -> None:
    """The suite's options; `standalone` False for `gitfleet bench`, whose parser already has
    --out, --apps, --clusters, --workers and --clusters-json."""
    if standalone:
        parser.add_argument("--out", type=Path, required=True, help="folder for faults.json")
        parser.add_argument("--apps", type=int, help="applications (200; quick: 30)")
        parser.add_argument("--clusters", type=int, help="testbed clusters (2; quick: 1)")
        parser.add_argument("--workers", type=int, help="worker processes (2)")
        parser.add_argument(
            "--clusters-json", type=Path, help="use this testbed's clusters instead of starting one"
        )
    parser.add_argument(
        "--quick", action="store_true", help="short outages and TTLs: a run of a few minutes"
    )
    parser.add_argument("--outage", type=float, help="API server and git outage seconds (60)")
    parser.add_argument(
        "--fault",
        action="append",
        dest="only",
        metavar="NAME",
        help=f"run only this fault (repeatable): {', '.join(FAULT_NAMES)}",
    )


def resolve(args: argparse.Namespace) -> FaultSettings:
    """The defaults (or `--quick`'s), overridden by every option given; checked for sense."""
    chosen = QUICK if getattr(args, "quick", False) else FaultSettings()
    given = {
        "apps": getattr(args, "apps", None),
        "clusters": getattr(args, "clusters", None),
        "workers": getattr(args, "workers", None),
        "outage_s": getattr(args, "outage", None),
    }
    chosen = replace(chosen, **{k: v for k, v in given.items() if v is not None})
    chosen = replace(chosen, only=tuple(getattr(args, "only", None) or ()))
    for name in ("apps", "clusters", "workers", "outage_s"):
        if getattr(chosen, name) <= 0:
            raise SystemExit(f"faults: --{name.removesuffix('_s')} must be positive")
    if chosen.workers < 2:
        raise SystemExit("faults: --workers must be at least 2 (a fault takes one away)")
    return chosen
