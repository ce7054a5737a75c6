"""`gitfleet bench`: the scaled reconcile benchmark of issue 5, side by side in one run.

    gitfleet bench --apps N --objects-per-app K --clusters C --workers W --out DIR
                   [--preset small|large] [--commits 20] [--clusters-json PATH] [--profile]

One run, in this order (each phase in its own module):
1. raw limit and 2. kubectl baseline of the same objects, no gitfleet (`loadtest.baselines`);
then the fleet starts as processes (`loadtest.fleetrun`: Redis, git server, API, W workers),
clusters and warm-up apps are onboarded through the API, and
3. the cold sync of the N apps (`loadtest.phases`), with 7a. worker memory per cached object
   (`loadtest.memory`);
4. two no-op interval cycles, the second one the steady state (`loadtest.phases`);
5. monorepo changes delivered by webhook (`loadtest.changes`);
6. sharding as a worker joins and one leaves, 7b. tracing on versus off (`loadtest.scaling`).
The report goes to DIR (report.json, report.md, PNG charts, `loadtest.report`); logs, the
generated repositories and the trace file stay in DIR/work. With --profile, flame graphs of the
API and each worker during phases 3 and 4 go to DIR/profiles (`loadtest.profiling`).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from deploy.testbed import runner
from deploy.testbed.build import ensure_binaries
from fleet.engine.inventory import NAME_PREFIX
from fleet.kube.client import KubeClient
from fleet.model import ObjectRef
from loadtest import baselines, changes, phases, report, scaling
from loadtest.board import StatusBoard
from loadtest.context import Run
from loadtest.engine_bench import PAYLOAD_BYTES, RAW_THREADS, Bench, machine, server_processes
from loadtest.fleetrun import BenchError, Fleet
from loadtest.presets import Params, add_arguments, resolve
from loadtest.probes import TraceFile
from loadtest.profiling import Profiler
from loadtest.workload import App, create_repo, plan_apps

PHASES: tuple[Callable[[Run], None], ...] = (
    phases.onboard,
    phases.cold_sync,
    phases.noop_cycle,
    changes.monorepo,
    scaling.sharding,
    scaling.tracing,
)
INVENTORY_NAMESPACE = "gitfleet-system"
PACKAGES = ("gitfleet", "dulwich", "fastapi", "rq", "redis", "opentelemetry-sdk", "httpx")


@contextlib.contextmanager
def clusters_for(params: Params, work: Path, listing: Path | None) -> Iterator[list[Any]]:
    """The first C clusters of `listing`, or a C-cluster testbed started here and stopped."""
    if listing is not None:
        entries = json.loads(listing.read_text())
        if len(entries) < params.clusters:
            raise BenchError(f"{listing} lists {len(entries)} clusters, {params.clusters} needed")
        yield entries[: params.clusters]
        return
    folder = work / "testbed"
    entries = runner.up(folder, clusters=params.clusters, nodes=1)
    try:
        yield entries
    finally:
        runner.down(folder)


def prepare(params: Params, work: Path, entries: list[Any]) -> Run:
    """Namespaces, the generated repositories and the (not yet started) fleet."""
    suffix = uuid.uuid4().hex[:4]
    namespace = f"gitfleet-bench-{suffix}"
    clients = {e["name"]: KubeClient.from_kubeconfig(Path(e["kubeconfig"])) for e in entries}
    for kube in clients.values():
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    names = list(clients)
    apps = plan_apps(f"b{suffix}", params.apps, names)
    rounds = len(scaling.TRACING_ORDER)
    subsets = [plan_apps(f"t{i}{suffix}", params.tracing_apps, names) for i in range(rounds)]
    warm_up = [App(f"w{suffix}-{i:02d}", c) for i in range(params.warm_up_apps) for c in names]
    repo = work / "repos" / "bench"
    create_repo(repo, [*apps, *(a for s in subsets for a in s)], params.objects_per_app)
    create_repo(work / "repos" / "warmup", warm_up, 1)
    fleet = Fleet(work, git_server=params.git_server)
    pids = sorted({pid for e in entries for pid in server_processes(e["server"])})
    return Run(
        params=params,
        work=work,
        entries=entries,
        clients=clients,
        fleet=fleet,
        namespace=namespace,
        repo=repo,
        apps=apps,
        subsets=subsets,
        warm_up=warm_up,
        board=StatusBoard(fleet.redis),
        traces=TraceFile(fleet.trace_file),
        server_pids=pids,
        profiler=Profiler(work.parent / "profiles", work / "py-spy") if params.profile else None,
    )


def execute(run: Run) -> None:
    """Every phase in order; the fleet's processes are stopped whatever happens."""
    baselines.raw_limit(run)
    baselines.kubectl_baseline(run)
    repos = {"bench.git": run.repo, "warmup.git": run.work / "repos" / "warmup"}
    try:
        run.fleet.start(repos, run.params.worker_names())
        for phase in PHASES:
            started = time.monotonic()
            print(f"gitfleet bench: {phase.__module__}.{phase.__name__} ...", file=sys.stderr)
            phase(run)
            run.details.setdefault("phase_seconds", {})[phase.__name__] = round(
                time.monotonic() - started, 1
            )
            report.write_partial(run.figures, run.details, run.work.parent)
    finally:
        if run.profiler is not None:  # a phase that failed may have left recorders running
            run.profiler.stop()
        run.fleet.stop()


def clean_up(run: Run) -> None:
    """On clusters the bench did not start: remove its namespace and the apps' inventories."""
    names = [a.name for a in [*run.apps, *run.warm_up, *(a for s in run.subsets for a in s)]]
    for kube in run.clients.values():
        kube.delete(ObjectRef("", "v1", "Namespace", "", run.namespace))
        refs = [
            ObjectRef("", "v1", "ConfigMap", INVENTORY_NAMESPACE, f"{NAME_PREFIX}{n}")
            for n in names
        ]
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(kube.delete, refs))


def versions(run: Run, kubernetes: str) -> dict[str, str]:
    found = {"python": sys.version.split()[0], "kubernetes": kubernetes}
    for package in PACKAGES:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            found[package] = importlib.metadata.version(package)
    kubectl = ensure_binaries(announce=False)["kubectl"]
    done = subprocess.run([str(kubectl), "version", "--client", "-o", "json"], **_TEXT)
    found["kubectl"] = json.loads(done.stdout)["clientVersion"]["gitVersion"]
    redis = shutil.which("redis-server") or "/usr/bin/redis-server"
    found["redis-server"] = subprocess.run([redis, "--version"], **_TEXT).stdout.split()[2]
    return found


_TEXT: dict[str, Any] = {"capture_output": True, "text": True, "check": True}


def assemble(run: Run, load: list[float], testbed: str) -> dict[str, Any]:
    host = machine(Bench(run.entries[0], run.work, InMemorySpanExporter(), []))
    params = run.params.to_json() | {
        "namespace": run.namespace,
        "object": f"ConfigMap with a {PAYLOAD_BYTES}-byte payload, one file per object",
        "raw_threads_per_cluster": RAW_THREADS,
        "testbed": testbed,
        "cpu_pinning": "none (the machine may be shared: see load_average_1m)",
        "load_average_1m": load,
    }
    figures = {k: {"value": round(f.value, 4), "unit": f.unit} for k, f in run.figures.items()}
    missing = [name for name in report.REQUIRED_FIGURES if name not in figures]
    if missing:
        raise BenchError(f"the run produced no figure for {missing}")
    found = {
        "machine": {"cores": host["cores"], "memory_gib": host["memory_gib"]},
        "versions": versions(run, str(host["kubernetes"])),
        "parameters": params,
        "figures": figures,
        "targets": report.targets(figures, params),
        "details": run.details,
        "methods": report.METHODS,
    }
    if run.profiler is not None:  # only with --profile: otherwise the report is as before
        found["methods"] = report.METHODS | {"profiles": report.PROFILES_METHOD}
        found["profiles"] = [p.to_json() for p in run.profiler.entries]
    return found


def bench(params: Params, out: Path, listing: Path | None) -> dict[str, Any]:
    work = out / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    load = [round(os.getloadavg()[0], 2)]
    with clusters_for(params, work, listing) as entries:
        run = prepare(params, work, entries)
        try:
            execute(run)
        finally:
            if listing is not None:
                clean_up(run)
        load.append(round(os.getloadavg()[0], 2))
        testbed = str(listing) if listing else f"own {params.clusters}-cluster testbed"
        found = assemble(run, load, testbed)
        for kube in run.clients.values():
            kube.close()
    return found


def run_command(args: argparse.Namespace) -> int:
    params = resolve(args)
    found = bench(params, args.out, args.clusters_json)
    for path in report.write(found, args.out):
        print(path)
    missed = [t["target"] for t in found["targets"] if t["met"] is False]
    print(f"targets missed: {len(missed)} of {len(found['targets'])}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench", description=__doc__)
    add_arguments(parser)
    return run_command(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
