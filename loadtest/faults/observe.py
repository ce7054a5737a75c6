"""What the clusters hold, read as the suite's invariants need it, and watched while faults run.

`read` lists the bench's ConfigMaps on every cluster (one LIST each): per app, the value of each
of its objects. `Watch` does that every `period_s` in a thread and keeps the events that must
never happen: an object whose value went back (a smaller value after a larger one was seen: a
stale write), and an object that was there and is gone (a wrong prune). A cluster whose API
server does not answer is skipped for that read, not counted as empty.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from fleet.errors import FleetError
from fleet.kube.client import KubeClient

LABEL = "bench=gitfleet"

Values = dict[str, dict[int, int]]  # app -> object index -> value


@dataclass(frozen=True)
class Reading:
    """One read of every cluster: the values found, and the clusters that did not answer."""

    values: Values
    unreachable: frozenset[str]

    def value(self, app: str) -> int:
        """The value of the app's first object (the one the stream changes); -1 when absent."""
        return self.values.get(app, {}).get(0, -1)


def read(clients: Mapping[str, KubeClient], namespace: str) -> Reading:
    values: Values = {}
    unreachable = set()
    for cluster, kube in clients.items():
        try:
            items = kube.list("v1", "ConfigMap", namespace=namespace, label_selector=LABEL)
        except FleetError:
            unreachable.add(cluster)
            continue
        for item in items:
            app, _, index = item["metadata"]["name"].rpartition("-")
            value = (item.get("data") or {}).get("value", "-1")
            values.setdefault(app, {})[int(index)] = int(value)
    return Reading(values, frozenset(unreachable))


@dataclass(frozen=True)
class Event:
    """`regressed`: the object's value went from `before` to `after` < `before`; `vanished`:
    the object was there and is gone (`after` -1)."""

    kind: str
    app: str
    index: int
    at: float
    before: int
    after: int


@dataclass
class Watch:
    clients: Mapping[str, KubeClient]
    namespace: str
    app_clusters: Mapping[str, str]  # app -> its cluster
    period_s: float = 1.0
    events: list[Event] = field(default_factory=list)
    _seen: Values = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def between(self, start: float, end: float) -> list[Event]:
        return [e for e in list(self.events) if start <= e.at <= end]

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            self.observe(read(self.clients, self.namespace), time.time())

    def observe(self, reading: Reading, at: float) -> None:
        for app, cluster in self.app_clusters.items():
            if cluster in reading.unreachable:
                continue
            self._compare(app, reading.values.get(app, {}), at)

    def _compare(self, app: str, found: dict[int, int], at: float) -> None:
        seen = self._seen.setdefault(app, {})
        for index, before in seen.items():
            after = found.get(index, -1)
            if after == -1:
                self.events.append(Event("vanished", app, index, at, before, after))
            elif after < before:
                self.events.append(Event("regressed", app, index, at, before, after))
        for index, value in found.items():
            seen[index] = max(value, seen.get(index, value))
        for index in [i for i in seen if i not in found]:
            del seen[index]  # reported once; counted again only if it comes back and goes
