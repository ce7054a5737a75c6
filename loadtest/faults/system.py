"""The fleet under fault: `loadtest.fleetrun.Fleet`, plus what the faults do to its processes.

Every process is remembered with its command line and environment, so a fault can kill it
(SIGKILL), pause it (SIGSTOP, SIGCONT) or stop it and start it again exactly as it was: Redis on
its append-only data folder and port, the git server on its port and repositories, the API on
its port. Workers run with the suite's membership and lease TTLs; a killed worker is replaced
by a new one under a new name, as a Deployment replaces a pod, so the fleet has to notice the
old one is gone. Tracing is off: the suite measures faults, not spans.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from deploy.testbed.process import Proc, reap, stop, wait_for
from loadtest.fleetrun import TRACING_VARIABLES, Fleet, answers


class FaultFleet(Fleet):
    """A `Fleet` whose processes can be killed, paused and started again."""

    def __init__(self, folder: Path, *, worker_ttl_s: float, lease_ttl_s: float) -> None:
        super().__init__(folder)
        for variable in TRACING_VARIABLES:
            self.env.pop(variable, None)
        self.worker_args = ["--ttl", str(worker_ttl_s), "--lease-ttl", str(lease_ttl_s)]
        self.commands: dict[str, tuple[list[str], dict[str, str]]] = {}
        self.generation = 0

    def _start(self, name: str, cmd: list[str], env: dict[str, str] | None = None) -> Proc:
        self.commands[name] = (cmd, dict(env or self.env))
        return super()._start(name, cmd, env)

    def start_worker(self, name: str, *, tracing: bool = False) -> Proc:
        cmd = [sys.executable, "-m", "cli.main", "worker", "--name", name, *self.worker_args]
        return self._start(f"worker:{name}", cmd)

    @property
    def redis_port(self) -> int:
        return int(self.env["GITFLEET_REDIS_URL"].rsplit(":", 1)[1].split("/")[0])

    def pid(self, name: str) -> int:
        return self.procs[name].pid

    def kill(self, name: str) -> None:
        """SIGKILL `name` (no goodbye: no deregistration, no hand-back, no flush)."""
        proc = self.procs.pop(name)
        os.kill(proc.pid, signal.SIGKILL)
        wait_for(lambda: not proc.is_running(), what=f"{name} to die", timeout=10, error=None)
        reap([proc])

    def stop_process(self, name: str) -> None:
        stop([self.procs.pop(name)], grace=20)

    def pause(self, name: str) -> None:
        os.kill(self.pid(name), signal.SIGSTOP)

    def resume(self, name: str) -> None:
        os.kill(self.pid(name), signal.SIGCONT)

    def restart(self, name: str) -> None:
        """Start `name` again with the command and environment it had; wait until it answers."""
        cmd, env = self.commands[name]
        proc = super()._start(name, cmd, env)
        port = {"redis": self.redis_port, "api": self.api_port, "git-server": self.git_port}
        if name in port:
            wait_for(lambda: answers(port[name]), what=name, watched=[proc], timeout=60)

    def stop(self) -> None:
        """Workers first, then the API and the git server, Redis last: each process's shutdown
        still finds what it talks to (the API releases its scheduler lock in Redis)."""
        self.stop_workers()
        for name in ("api", "git-server", "redis"):
            if name in self.procs:
                stop([self.procs.pop(name)], grace=20)
        self.procs.clear()
        self.redis.close()

    def replace_worker(self, name: str) -> str:
        """Start a worker in place of the killed `name`, under a new name; returns it."""
        self.generation += 1
        fresh = f"{name.split('.')[0]}.{self.generation}"
        self.start_worker(fresh)
        return fresh
