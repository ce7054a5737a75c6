"""Wait until objects are healthy: the polling half of the health stage.

`health.assess` judges one object; this module polls the cluster for the objects not yet
settled, gives up early on Degraded, and at the deadline turns "not yet" into a HealthTimeout
that names every object still waiting and what it waits for. Suspended counts as settled: a
paused Deployment or suspended CronJob is what the user asked for.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from fleet.engine.health import assess as health
from fleet.errors import ApplyError, HealthTimeout
from fleet.kube.client import KubeClient
from fleet.model import Health, HealthStatus, Manifest, ObjectRef

SETTLED = frozenset({Health.HEALTHY, Health.SUSPENDED})
Progress = Callable[[str], None]


def assess_live(live: Manifest | None, ref: ObjectRef) -> HealthStatus:
    return health.assess(live) if live is not None else health.assess_missing(ref)


def wait_healthy(
    kube: KubeClient,
    refs: Iterable[ObjectRef],
    *,
    deadline: float,
    known: dict[ObjectRef, Manifest] | None = None,
    progress: Progress | None = None,
    what: str = "",
) -> dict[ObjectRef, HealthStatus]:
    """Poll until every ref is settled; return the last status of each."""
    statuses = {ref: assess_live((known or {}).get(ref), ref) for ref in refs}
    pause = 0.1
    while True:
        waiting = [ref for ref, s in statuses.items() if s.health not in SETTLED]
        _fail_on_degraded(statuses)
        if not waiting:
            return statuses
        if time.monotonic() > deadline:
            raise HealthTimeout(_timeout_message(statuses, waiting, what))
        if progress:
            progress(_progress_line(statuses, waiting, what))
        time.sleep(pause)
        pause = min(pause * 1.5, 1.0)
        for ref in waiting:
            statuses[ref] = assess_live(kube.get(ref), ref)


def _fail_on_degraded(statuses: dict[ObjectRef, HealthStatus]) -> None:
    degraded = [f"{ref}: {s.message}" for ref, s in statuses.items() if s.health == Health.DEGRADED]
    if degraded:
        raise ApplyError("degraded: " + "; ".join(sorted(degraded)))


def _timeout_message(
    statuses: dict[ObjectRef, HealthStatus], waiting: list[ObjectRef], what: str
) -> str:
    lines = [f"{ref} is {statuses[ref].health}: {statuses[ref].message}" for ref in sorted(waiting)]
    head = f"timed out waiting for {what or 'objects'} to become healthy"
    return head + ":\n  " + "\n  ".join(lines)


def _progress_line(
    statuses: dict[ObjectRef, HealthStatus], waiting: list[ObjectRef], what: str
) -> str:
    done = len(statuses) - len(waiting)
    first = waiting[0]
    return (
        f"{what}: {done}/{len(statuses)} healthy, waiting for {first} ({statuses[first].message})"
    )
