"""A target cluster's API server taken away and brought back, for real.

The testbed's kube-apiserver of one cluster is stopped (SIGTERM, SIGKILL after `STOP_GRACE_S`)
and started again with the same command line, certificates and log, so the cluster comes back
as it was, its objects kept in etcd. The testbed's state file is updated with the new pid, so
`gitfleet testbed down` still stops it. The testbed's folder is the one holding the cluster's
folder (`<testbed>/<cluster>/kubeconfig`), whether the suite started it or was given it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deploy.testbed import process, runner
from fleet.errors import FleetError
from fleet.kube.client import KubeClient

# An apiserver with watch clients waits up to its request timeout (60 s) on SIGTERM, serving
# meanwhile: after this grace it is killed, so the outage starts when the fault does.
STOP_GRACE_S = 2.0


@dataclass(frozen=True)
class StoppedServer:
    """What it takes to start a stopped kube-apiserver again."""

    folder: Path
    old: process.Proc
    command: list[str]


def stop(entry: dict[str, Any]) -> StoppedServer:
    """Stop the kube-apiserver of the cluster `entry` (a clusters.json entry)."""
    folder = Path(entry["kubeconfig"]).parent.parent
    state = runner.TestbedState.load(folder)
    proc = next(
        p for p in state.procs if p.cluster == entry["name"] and p.component == "kube-apiserver"
    )
    raw = Path(f"/proc/{proc.pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    process.stop([proc], grace=STOP_GRACE_S)
    return StoppedServer(folder, proc, [part.decode() for part in raw])


def start(stopped: StoppedServer, entry: dict[str, Any]) -> None:
    """Start it again as it was and wait until it answers."""
    old = stopped.old
    fresh = process.start(old.cluster, old.component, stopped.command, Path(old.log))
    state = runner.TestbedState.load(stopped.folder)
    state.procs = [fresh if p.pid == old.pid else p for p in state.procs]
    state.save()
    process.wait_for(lambda: answers(entry), what="the API server to answer again", timeout=120)


def answers(entry: dict[str, Any]) -> bool:
    kube = KubeClient.from_kubeconfig(Path(entry["kubeconfig"]))
    try:
        kube.list("v1", "Namespace")
        return True
    except FleetError:
        return False
    finally:
        kube.close()
