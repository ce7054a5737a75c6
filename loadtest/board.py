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

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from redis import Redis

from fleet.control.keys import Keys
from loadtest.fleetrun import PREFIX, BenchError
from loadtest.workload import App

SYNCED, HEALTHY = "Synced", "Healthy"


@dataclass(frozen=True)
class Outcome:
    """How one instance caught up: a full sync (its record), or a quiet check (`quiet`: the
    worker found git and the cluster unchanged and only stamped the status as checked)."""

    app: str
    started: float
    finished: float
    rendered: bool
    revision: str
    worker: str
    quiet: bool = False


def stamp(text: str) -> float:
    return datetime.fromisoformat(text).timestamp() if text else 0.0


def settled(app: str, status: dict[str, Any], since: float, revision: str) -> Outcome | None:
    """The outcome when `status` shows the instance Synced and Healthy by a sync that started
    at or after `since` (at `revision`, when given) or a quiet check made after `since`."""
    if status.get("sync_status") != SYNCED or status.get("health") != HEALTHY:
        return None
    checked = stamp(str(status.get("checked", "")))
    if checked >= since:
        return Outcome(app, checked, checked, False, str(status.get("revision", "")), "", True)
    last = status.get("last_sync") or {}
    started = stamp(str(last.get("started", "")))
    if started < since or (revision and status.get("revision") != revision):
        return None
    return Outcome(
        app=app,
        started=started,
        finished=stamp(str(last.get("finished", ""))),
        rendered=bool(last.get("rendered")),
        revision=str(last.get("revision", "")),
        worker=str(last.get("worker", "")),
    )


Progress = Callable[[int, int], None]


class StatusBoard:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self.keys = Keys(PREFIX)

    def read(self, apps: Sequence[App]) -> dict[str, dict[str, Any] | None]:
        pipe = self.redis.pipeline(transaction=False)
        for app in apps:
            pipe.hget(self.keys.status(app.name), app.cluster)
        raws = pipe.execute()
        return {
            app.name: json.loads(raw) if isinstance(raw, bytes) else None
            for app, raw in zip(apps, raws, strict=True)
        }

    def wait(
        self,
        apps: Sequence[App],
        *,
        since: float,
        timeout: float,
        revision: str = "",
        progress: Progress | None = None,
    ) -> dict[str, Outcome]:
        """Wait until every app settled (see `settled`); `progress(done, total)` after each
        poll; BenchError naming a few laggards on timeout."""
        pending = list(apps)
        done: dict[str, Outcome] = {}
        deadline = time.monotonic() + timeout
        while pending:
            statuses = self.read(pending)
            for name, status in statuses.items():
                found = settled(name, status, since, revision) if status else None
                if found is not None:
                    done[name] = found
            pending = [a for a in pending if a.name not in done]
            if progress is not None:
                progress(len(done), len(apps))
            if not pending:
                break
            if time.monotonic() > deadline:
                raise BenchError(_laggards(pending, statuses, timeout))
            time.sleep(0.2 + len(pending) / 5000)
        return done


def _laggards(pending: Sequence[App], statuses: dict[str, Any], timeout: float) -> str:
    lines = []
    for app in pending[:5]:
        status = statuses.get(app.name) or {}
        said = status.get("message") or status.get("sync_status") or "no sync recorded yet"
        lines.append(f"  {app.name}@{app.cluster}: {said}")
    return (
        f"{len(pending)} app(s) not Synced and Healthy after {timeout:.0f}s, for example:\n"
        + "\n".join(lines)
    )
