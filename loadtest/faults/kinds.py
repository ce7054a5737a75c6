"""The fault table: what each fault does, how long it lasts, and how the fleet shows it noticed.

Each fault injects at once, is healed after `hold_s` (the outage; for a killed process, the
time a supervisor takes to start it again), and has a `detected` signal, the first sign that
the fleet (not the suite) saw it:

- apiserver-down: the last cluster's kube-apiserver stops; started again as it was (its
  state is in etcd); detected when an instance on it says ClusterUnreachable.
- redis-restart: SIGKILL to Redis; started again on its append-only data folder; detected
  when the API's /readyz answers 503.
- api-kill: SIGKILL to the API; started again on its port (the supervisor); detected when its
  liveness probe (/healthz) fails.
- worker-kill: SIGKILL to the worker that owns the apps of the next commits; a new worker
  replaces it; detected when the membership drops the dead one.
- worker-pause: SIGSTOP to that worker, past its lease TTL; SIGCONT; detected when the
  membership drops the paused one.
- git-outage: the git server stops; started again on its port; detected when an instance's
  status names the failing remote.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from typing import ClassVar

import httpx

from loadtest.faults import apiserver
from loadtest.faults.settings import FAULT_NAMES, FaultSettings
from loadtest.faults.stage import Stage

PROBE_TIMEOUT_S = 1.0


class Fault(ABC):
    """One kind of fault: `inject` it, keep it `hold_s`, `heal` it; `detected` says whether the
    fleet shows it noticed (asked again and again, so it reads, never waits)."""

    name: ClassVar[str]
    what: ClassVar[str]
    detected_by: ClassVar[str]

    def hold_s(self, settings: FaultSettings) -> float:
        return settings.outage_s

    @abstractmethod
    def inject(self, stage: Stage) -> None: ...

    @abstractmethod
    def heal(self, stage: Stage) -> None: ...

    @abstractmethod
    def detected(self, stage: Stage) -> bool: ...


class ApiServerDown(Fault):
    name = "apiserver-down"
    what = "the kube-apiserver of the last cluster stopped for the outage"
    detected_by = "an instance on that cluster has status ClusterUnreachable"

    def __init__(self) -> None:
        self.stopped: apiserver.StoppedServer | None = None

    def inject(self, stage: Stage) -> None:
        self.stopped = apiserver.stop(stage.entries[-1])

    def heal(self, stage: Stage) -> None:
        assert self.stopped is not None
        apiserver.start(self.stopped, stage.entries[-1])

    def detected(self, stage: Stage) -> bool:
        statuses = stage.statuses(stage.entries[-1]["name"])
        return any("ClusterUnreachable" in s.message for s in statuses)


class RedisRestart(Fault):
    name = "redis-restart"
    what = "Redis killed (SIGKILL) and started again on its append-only data folder"
    detected_by = "the API's /readyz answers 503"

    def hold_s(self, settings: FaultSettings) -> float:
        return settings.redis_down_s

    def inject(self, stage: Stage) -> None:
        stage.fleet.kill("redis")

    def heal(self, stage: Stage) -> None:
        stage.fleet.restart("redis")

    def detected(self, stage: Stage) -> bool:
        return _status_code(stage, "/readyz") == 503


class ApiKill(Fault):
    name = "api-kill"
    what = "the API process killed (SIGKILL), started again by the supervisor"
    detected_by = "the API's liveness probe (/healthz) fails"

    def hold_s(self, settings: FaultSettings) -> float:
        return settings.restart_after_s

    def inject(self, stage: Stage) -> None:
        stage.fleet.kill("api")

    def heal(self, stage: Stage) -> None:
        stage.fleet.restart("api")

    def detected(self, stage: Stage) -> bool:
        return _status_code(stage, "/healthz") != 200


class WorkerKill(Fault):
    name = "worker-kill"
    what = "a worker killed (SIGKILL) mid-stream, replaced by a new worker"
    detected_by = "the worker membership drops the dead worker"

    def __init__(self) -> None:
        self.victim = ""

    def hold_s(self, settings: FaultSettings) -> float:
        return settings.restart_after_s

    def inject(self, stage: Stage) -> None:
        self.victim = stage.busy_worker()
        stage.fleet.kill(f"worker:{self.victim}")

    def heal(self, stage: Stage) -> None:
        stage.fleet.replace_worker(self.victim)

    def detected(self, stage: Stage) -> bool:
        return self.victim not in stage.fleet.live()


class WorkerPause(Fault):
    name = "worker-pause"
    what = "a worker paused (SIGSTOP) past its lease TTL, then resumed (SIGCONT)"
    detected_by = "the worker membership drops the paused worker"

    def __init__(self) -> None:
        self.paused = ""

    def hold_s(self, settings: FaultSettings) -> float:
        return settings.pause_s

    def inject(self, stage: Stage) -> None:
        self.paused = stage.busy_worker()
        stage.fleet.pause(f"worker:{self.paused}")

    def heal(self, stage: Stage) -> None:
        stage.fleet.resume(f"worker:{self.paused}")

    def detected(self, stage: Stage) -> bool:
        return self.paused not in stage.fleet.live()


class GitOutage(Fault):
    name = "git-outage"
    what = "the git server stopped for the outage"
    detected_by = "an instance's status names the failing remote"

    def inject(self, stage: Stage) -> None:
        stage.fleet.stop_process("git-server")

    def heal(self, stage: Stage) -> None:
        stage.fleet.restart("git-server")

    def detected(self, stage: Stage) -> bool:
        url = stage.fleet.repo_url("bench.git")
        return any(url in s.message for s in stage.statuses())


FAULTS: tuple[type[Fault], ...] = (
    ApiServerDown,
    RedisRestart,
    ApiKill,
    WorkerKill,
    WorkerPause,
    GitOutage,
)
NAMES = tuple(kind.name for kind in FAULTS)
assert NAMES == FAULT_NAMES, "settings.FAULT_NAMES spells the table's names for --help"


def chosen(only: tuple[str, ...]) -> list[Fault]:
    """A fresh instance of every fault, or of those named in `only`, in the table's order."""
    unknown = sorted(set(only) - set(NAMES))
    if unknown:
        raise SystemExit(f"faults: unknown fault {unknown}; known: {', '.join(NAMES)}")
    return [kind() for kind in FAULTS if not only or kind.name in only]


def _status_code(stage: Stage, path: str) -> int:
    """The API's answer to `path`; 0 when it does not answer at all."""
    with contextlib.suppress(httpx.HTTPError):
        url = f"http://127.0.0.1:{stage.fleet.api_port}{path}"
        return httpx.get(url, timeout=PROBE_TIMEOUT_S).status_code
    return 0
