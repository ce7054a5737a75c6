"""Phases 1 and 2: the same objects without gitfleet, by the raw SSA loop and by kubectl.

Both reuse the engine benchmark's measured helpers (`raw_apply`: 8 threads of server-side
apply through `KubeClient`; `kubectl_apply`: `kubectl apply --server-side -f DIR` with its
default client-side validation), once per cluster, all clusters at once, so each baseline gets
the same parallelism across clusters that the fleet has. Objects/s is every object over the
wall time of the whole batch. Each phase works in namespaces of its own, deleted (and waited
for) before the next phase, so gitfleet's cold sync never shares a cluster with their objects.
"""

from __future__ import annotations

import functools
import os
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from deploy.testbed.build import ensure_binaries
from fleet.kube.client import KubeClient
from fleet.model import Manifest, ObjectRef
from loadtest.context import Meter, Run, cpu_per_1k, wait_until
from loadtest.engine_bench import (
    WARM_UP_OBJECTS,
    Bench,
    _kubectl,
    configmaps,
    kubectl_apply,
    raw_apply,
)
from loadtest.workload import by_cluster, write_folders

NAMESPACE_GONE_TIMEOUT = 900.0


def benches(run: Run) -> dict[str, Bench]:
    return {e["name"]: Bench(e, run.work, InMemorySpanExporter(), []) for e in run.entries}


def raw_limit(run: Run) -> None:
    """Phase 1: a concurrent server-side-apply loop of the same objects (objects/s)."""
    grouped = by_cluster(run.apps, run.params.objects_per_app)
    warm = benches(run)
    _each(warm, lambda b, c: raw_apply(b, configmaps(WARM_UP_OBJECTS), label="warm-up"))
    delete_namespaces(run, warm)
    timed = benches(run)
    seconds, cpu = _timed(run, lambda: _each(timed, lambda b, c: raw_apply(b, grouped[c])))
    _figures(run, "raw_limit", seconds, cpu)
    delete_namespaces(run, timed)


def kubectl_baseline(run: Run) -> None:
    """Phase 2: `kubectl apply --server-side -f DIR`, one kubectl per cluster (objects/s)."""
    kubectl = ensure_binaries(announce=False)["kubectl"]
    grouped = by_cluster(run.apps, run.params.objects_per_app)
    folders = write_folders(grouped, run.work / "kubectl")
    timed = benches(run)
    _each(timed, lambda b, c: _warm_discovery(b, kubectl))

    def apply(bench: Bench, cluster: str) -> Any:
        return kubectl_apply(bench, kubectl, folders[cluster], label="kubectl", validate=True)

    seconds, cpu = _timed(run, lambda: _each(timed, apply))
    _figures(run, "kubectl", seconds, cpu)
    run.details["kubectl"] = {
        "command": "kubectl apply --server-side -n NS -f DIR (one per cluster)"
    }
    delete_namespaces(run, timed)


def _warm_discovery(bench: Bench, kubectl: Path) -> None:
    """kubectl's discovery cache filled first, as the engine benchmark does."""
    command = [*_kubectl(bench, kubectl), "get", "configmaps", "-n", "default"]
    subprocess.run(command, capture_output=True, check=True)


def _each(group: dict[str, Bench], action: Callable[[Bench, str], Any]) -> None:
    with ThreadPoolExecutor(len(group)) as pool:
        list(pool.map(lambda cluster: action(group[cluster], cluster), group))


def _timed(run: Run, action: Callable[[], None]) -> tuple[float, dict[str, float]]:
    meter = Meter.start({"apiservers_etcd": run.server_pids, "client": [os.getpid()]})
    children = os.times()
    started = time.perf_counter()
    action()
    seconds = time.perf_counter() - started
    cpu = meter.read()
    after = os.times()
    cpu["client"] += after.children_user + after.children_system
    cpu["client"] -= children.children_user + children.children_system
    return seconds, cpu


def _figures(run: Run, phase: str, seconds: float, cpu: dict[str, float]) -> None:
    objects = run.params.objects
    run.add(f"{phase}_objects_per_s", objects / seconds, "objects/s")
    run.add(f"{phase}_seconds", seconds, "s")
    per_1k = cpu_per_1k(cpu, objects)
    run.add(f"{phase}_client_cpu_s_per_1k", per_1k["client"], "CPU-s per 1k objects")
    unit = "CPU-s per 1k objects (kube-apiservers + etcd)"
    run.add(f"{phase}_server_cpu_s_per_1k", per_1k["apiservers_etcd"], unit)


def delete_namespaces(run: Run, group: dict[str, Bench]) -> None:
    """Delete every namespace the phase made and wait until each is gone."""
    for cluster, bench in group.items():
        kube = run.clients[cluster]
        refs = [ObjectRef("", "v1", "Namespace", "", ns) for ns in bench.namespaces]
        for ref in refs:
            kube.delete(ref)
        for ref in refs:
            wait_until(
                functools.partial(_gone, kube, ref),
                timeout=NAMESPACE_GONE_TIMEOUT,
                what=f"namespace {ref.name} on {cluster} to be deleted",
                period=0.5,
            )


def _gone(kube: KubeClient, ref: ObjectRef) -> bool:
    found: Manifest | None = kube.get(ref)
    return found is None
