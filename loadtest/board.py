"""Wait for a set of applications to be Synced and Healthy, reading the workers' status records.

Workers write each instance's status to Redis after every job: a full sync leaves its record
(`last_sync`, timestamps to the microsecond), a quiet periodic check (`worker.quiet`: git and
the cluster unchanged, nothing sent to the apiserver) only stamps `checked`. Reading those
records directly, in one pipeline per poll, costs the system under test nearly nothing, where
listing 10,000 apps through the API every second would take a core from it; the API is asked
once, at the end, to confirm. The time a phase took is the last stamp minus the phase's start,
so the polling period changes when the benchmark notices, never what it measures.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from redis import Redis

from deploy.testbed.process import wait_for
from fleet.control.keys import Keys
from fleet.control.registry.status import SyncLog
from fleet.control.registry.syncrecords import InstanceStatus
from fleet.model import Health, SyncStatus
from loadtest.fleetrun import PREFIX, BenchError
from loadtest.workload import App


@dataclass(frozen=True)
class Settled:
    """How one instance came to be Synced and Healthy: by a full sync (from its record), or by a
    quiet check (`quiet`: the worker found git and the cluster unchanged and only stamped the
    status as checked). `started` and `finished` bound that sync or check."""

    app: str
    started: float
    finished: float
    rendered: bool
    revision: str
    worker: str
    quiet: bool = False


def stamp(moment: datetime | None) -> float:
    """Seconds since the epoch; 0.0 when there is no such moment."""
    return moment.timestamp() if moment is not None else 0.0


def settled(app: str, status: InstanceStatus, since: float, revision: str) -> Settled | None:
    """How the instance settled, when `status` shows it Synced and Healthy by a sync that
    started at or after `since` (at `revision`, when given) or a quiet check made after `since`."""
    if status.sync_status != SyncStatus.SYNCED or status.health != Health.HEALTHY:
        return None
    checked = stamp(status.checked)
    if checked >= since:
        return Settled(app, checked, checked, False, status.revision, "", True)
    last = status.last_sync
    started = stamp(last.started if last else None)
    if last is None or started < since or (revision and status.revision != revision):
        return None
    return Settled(
        app=app,
        started=started,
        finished=stamp(last.finished),
        rendered=last.rendered,
        revision=last.revision,
        worker=last.worker,
    )


Progress = Callable[[int, int], None]


class StatusBoard:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self.keys = Keys(PREFIX)
        self.log = SyncLog(redis, self.keys)

    def read(self, apps: Sequence[App]) -> dict[str, InstanceStatus | None]:
        """Each app's status, in one pipeline."""
        statuses = self.log.many_statuses([(app.name, app.cluster) for app in apps])
        return dict(zip((app.name for app in apps), statuses, strict=True))

    def wait(
        self,
        apps: Sequence[App],
        *,
        since: float,
        timeout: float,
        revision: str = "",
        progress: Progress | None = None,
    ) -> dict[str, Settled]:
        """Wait until every app settled (see `settled`); `progress(done, total)` after each
        poll, the polls further apart the more apps are pending; BenchError naming a few
        laggards on timeout."""
        pending = list(apps)
        done: dict[str, Settled] = {}
        statuses: dict[str, InstanceStatus | None] = {}

        def poll() -> bool:
            nonlocal pending, statuses
            statuses = self.read(pending)
            for name, status in statuses.items():
                found = settled(name, status, since, revision) if status else None
                if found is not None:
                    done[name] = found
            pending = [a for a in pending if a.name not in done]
            if progress is not None:
                progress(len(done), len(apps))
            return not pending

        if pending:
            wait_for(
                poll,
                what="every app to settle",
                timeout=timeout,
                period=lambda: 0.2 + len(pending) / 5000,
                error=lambda _: BenchError(_laggards(pending, statuses, timeout)),
            )
        return done


def _laggards(
    pending: Sequence[App], statuses: dict[str, InstanceStatus | None], timeout: float
) -> str:
    lines = []
    for app in pending[:5]:
        status = statuses.get(app.name)
        said = (status.message or status.sync_status) if status else "no sync recorded yet"
        lines.append(f"  {app.name}@{app.cluster}: {said}")
    return (
        f"{len(pending)} app(s) not Synced and Healthy after {timeout:.0f}s, for example:\n"
        + "\n".join(lines)
    )
