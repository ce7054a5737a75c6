"""What every phase of `gitfleet bench` shares: parameters, clusters, the fleet, the figures.

A phase is a function `(Run) -> None` that adds figures (name -> value and unit) and details
(whatever the report and the plots need to explain a figure) to the run. Phases run in the
order `loadtest.bench` gives; each says in its docstring what it assumes of the ones before.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from api.appschemas import MAX_BATCH
from api.client import CoordinatorClient
from deploy.testbed.process import wait_for
from fleet.kube.client import KubeClient
from loadtest.board import StatusBoard
from loadtest.engine_bench import Figure
from loadtest.fleetrun import BenchError, Fleet
from loadtest.presets import Params
from loadtest.probes import TraceFile, cpu_seconds
from loadtest.profiling import Profiler
from loadtest.workload import App


@dataclass
class Run:
    params: Params
    work: Path
    entries: list[dict[str, Any]]
    clients: dict[str, KubeClient]
    fleet: Fleet
    namespace: str
    repo: Path
    apps: list[App]
    subsets: list[list[App]]
    warm_up: list[App]
    board: StatusBoard
    traces: TraceFile
    figures: dict[str, Figure] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    server_pids: list[int] = field(default_factory=list)
    profiler: Profiler | None = None  # with --profile (`loadtest.observe`)

    @property
    def api(self) -> CoordinatorClient:
        return self.fleet.api()

    def repo_url(self) -> str:
        return self.fleet.repo_url("bench.git")

    def add(self, name: str, value: float, unit: str) -> None:
        self.figures[name] = Figure(float(value), unit)

    def value(self, name: str) -> float:
        return self.figures[name].value

    def groups(self) -> dict[str, list[int]]:
        """Processes whose CPU the phases report, by role."""
        procs = self.fleet.procs
        return {
            "workers": [p.pid for p in self.fleet.workers().values()],
            "api": [procs["api"].pid],
            "redis": [procs["redis"].pid],
            "git_server": [procs["git-server"].pid],
            "apiservers_etcd": list(self.server_pids),
        }


@dataclass
class Meter:
    """Wall time and CPU seconds per process group between `start` and `read`."""

    groups: dict[str, list[int]]
    wall: float
    cpu: dict[str, float]

    @classmethod
    def start(cls, groups: dict[str, list[int]]) -> Meter:
        return cls(groups, time.time(), {k: cpu_seconds(p) for k, p in groups.items()})

    def read(self) -> dict[str, float]:
        return {k: cpu_seconds(p) - self.cpu[k] for k, p in self.groups.items()}


def percentile(values: Sequence[float], percent: int) -> float:
    """The `percent`th percentile (1 to 99), interpolated linearly between the closest ranks
    (`statistics.quantiles`' inclusive method, numpy's default); 0.0 when there are no values."""
    if len(values) < 2:  # quantiles needs two values before Python 3.13
        return float(values[0]) if values else 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[percent - 1]


def wait_until(check: Callable[[], bool], *, timeout: float, what: str, period: float) -> float:
    """Poll `check` (`wait_for`); return the time.time() at which it first held; BenchError on
    timeout."""
    wait_for(check, what=what, timeout=timeout, period=period, error=BenchError)
    return time.time()


def cpu_per_1k(cpu: dict[str, float], objects: int) -> dict[str, float]:
    return {k: round(v * 1000 / max(objects, 1), 3) for k, v in cpu.items()}


def app_bodies(
    run: Run,
    apps: Iterable[App],
    repo_url: str,
    *,
    selector: dict[str, str] | None = None,
    automated: bool = True,
) -> list[tuple[str, str, Any]]:
    """POST /api/v1/apps/batch requests of at most MAX_BATCH apps each, as a platform team
    onboards a fleet: automated (unless told otherwise), prune and self-heal on, a long interval
    (the cycles here are triggered on purpose, never by the clock); each app on its cluster, or
    on every cluster matching `selector`."""
    policy = {
        "automated": automated,
        "prune": True,
        "selfHeal": True,
        "interval": run.params.interval_s,
    }
    bodies = [
        {
            "name": app.name,
            "source": {"repo": repo_url, "path": app.path, "revision": "HEAD"},
            "destination": {"namespace": run.namespace}
            | ({"clusterSelector": selector} if selector else {"cluster": app.cluster}),
            "syncPolicy": policy,
        }
        for app in apps
    ]
    return [
        ("POST", "/api/v1/apps/batch", {"apps": bodies[i : i + MAX_BATCH]})
        for i in range(0, len(bodies), MAX_BATCH)
    ]


def sync_requests(apps: Iterable[App]) -> list[tuple[str, str, Any]]:
    return [("POST", f"/api/v1/apps/{app.name}/sync", None) for app in apps]
