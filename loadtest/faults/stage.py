"""What every fault and every measure shares: the settings, the fleet, the clusters, the apps,
the commit stream and the watch over the clusters' objects."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from api.client import CoordinatorClient
from fleet.control.registry.instances import instance_key
from fleet.control.registry.syncrecords import InstanceStatus
from fleet.control.routing.dispatch import Dispatcher
from fleet.kube.client import KubeClient
from loadtest.board import StatusBoard
from loadtest.faults.observe import Reading, Watch, read
from loadtest.faults.settings import FaultSettings
from loadtest.faults.stream import CommitStream
from loadtest.faults.system import FaultFleet
from loadtest.fleetrun import PREFIX
from loadtest.workload import App

UPCOMING = 3  # commits ahead that choose a fault's worker


@dataclass
class Stage:
    settings: FaultSettings
    fleet: FaultFleet
    entries: list[dict[str, Any]]  # the testbed's clusters.json entries
    clients: dict[str, KubeClient]
    namespace: str
    apps: list[App]
    stream: CommitStream
    watch: Watch
    board: StatusBoard

    @property
    def api(self) -> CoordinatorClient:
        return self.fleet.api()

    def read(self) -> Reading:
        return read(self.clients, self.namespace)

    def statuses(self, cluster: str = "") -> list[InstanceStatus]:
        """The status of every app (on `cluster`, if given), in one Redis pipeline."""
        apps = [a for a in self.apps if cluster in ("", a.cluster)]
        return [s for s in self.board.read(apps).values() if s is not None]

    def worker_names(self) -> list[str]:
        return sorted(self.fleet.workers())

    def busy_worker(self) -> str:
        """The worker that owns the most of the apps the next few commits change, so the fault
        that takes it away finds syncs queued for it (the first worker when none is known)."""
        dispatcher = Dispatcher(self.fleet.redis, prefix=PREFIX)
        owners = Counter(
            dispatcher.worker_of(dispatcher.queue_for(instance_key(app.name, app.cluster)))
            for app in self.stream.upcoming(UPCOMING)
        )
        names = self.worker_names()
        return max(names, key=lambda name: (owners[name], name == names[0]))
