"""`python -m loadtest.faults --out DIR` (and `gitfleet bench --preset faults`): the fault suite.

One run: a testbed (its own, or `--clusters-json`'s), then the fleet as processes
(`loadtest.faults.system`: Redis with append-only persistence, the git server, the API, the
workers), the clusters and apps registered through the API and synced, a few more records
(`records.seed`); then the commit stream starts and every fault of the table
(`loadtest.faults.kinds`) is injected in turn, one at a time, each measured
(`loadtest.faults.measure`) with `calm_s` of steady stream between two. DIR/faults.json gets
the settings, the definitions and one entry per fault (rewritten after each, so a run cut short
keeps what it measured); logs, the repository and the testbed stay in DIR/work.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from deploy.testbed import runner
from fleet.engine.inventory import NAME_PREFIX
from fleet.kube.client import KubeClient
from fleet.model import ObjectRef
from loadtest import extra
from loadtest.board import StatusBoard
from loadtest.faults import kinds, measure, records
from loadtest.faults.observe import Watch
from loadtest.faults.settings import FaultSettings, add_arguments, resolve
from loadtest.faults.stage import Stage
from loadtest.faults.stream import CommitStream
from loadtest.faults.system import FaultFleet
from loadtest.workload import App, create_repo, plan_apps

SETTLE_TIMEOUT_S = 600.0
TOTALS = (
    "syncs_lost",
    "syncs_duplicated",
    "objects_wrongly_written",
    "objects_wrongly_pruned",
    "records_lost",
)


@contextlib.contextmanager
def testbed(settings: FaultSettings, work: Path, listing: Path | None) -> Iterator[list[Any]]:
    """The first C clusters of `listing`, or a C-cluster testbed started here and stopped."""
    if listing is not None:
        yield json.loads(listing.read_text())[: settings.clusters]
        return
    folder = work / "testbed"
    entries = runner.up(folder, clusters=settings.clusters, nodes=1)
    try:
        yield entries
    finally:
        runner.down(folder)


def prepare(settings: FaultSettings, work: Path, entries: list[dict[str, Any]]) -> Stage:
    """The namespace on every cluster, the repository, the (not yet started) fleet."""
    suffix = uuid.uuid4().hex[:4]
    namespace = f"gitfleet-faults-{suffix}"
    clients = _clients(entries)
    for kube in clients.values():
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    apps = plan_apps(f"f{suffix}", settings.apps, list(clients))
    repo = work / "repos" / "bench"
    create_repo(repo, apps, settings.objects_per_app)
    fleet = FaultFleet(work, worker_ttl_s=settings.worker_ttl_s, lease_ttl_s=settings.lease_ttl_s)
    stream = CommitStream(
        repo=repo,
        repo_url="",  # known once the git server runs: set in `start`
        apps=apps,
        per_app=settings.objects_per_app,
        every_s=settings.commit_every_s,
        deliver=lambda event: fleet.api().push(fleet.env["GITFLEET_WEBHOOK_SECRET"], event),
    )
    app_clusters = {a.name: a.cluster for a in apps}
    watch = Watch(_clients(entries), namespace, app_clusters)
    board = StatusBoard(fleet.redis)
    return Stage(settings, fleet, entries, clients, namespace, apps, stream, watch, board)


def _clients(entries: list[dict[str, Any]]) -> dict[str, KubeClient]:
    return {e["name"]: KubeClient.from_kubeconfig(Path(e["kubeconfig"])) for e in entries}


def start(stage: Stage) -> None:
    """Start the fleet, register and sync everything, then start the stream and the watch."""
    names = [f"worker-{i + 1}" for i in range(stage.settings.workers)]
    stage.fleet.start({"bench.git": stage.stream.repo}, names)
    stage.stream.repo_url = stage.fleet.repo_url("bench.git")
    api = stage.api
    for entry in stage.entries:
        body = {"name": entry["name"], "kubeconfig": Path(entry["kubeconfig"]).read_text()}
        api.call("POST", "/api/v1/clusters", body)
    records.seed(api)
    created = time.time()
    api.bulk([("POST", "/api/v1/apps", _app_body(stage, app)) for app in stage.apps])
    if not stage.fleet.scheduler_leads():
        api.bulk([("POST", f"/api/v1/apps/{a.name}/sync", None) for a in stage.apps])
    stage.board.wait(stage.apps, since=created, timeout=SETTLE_TIMEOUT_S)
    stage.stream.start()
    stage.watch.start()


def _app_body(stage: Stage, app: App) -> dict[str, Any]:
    """Automated with prune and self-heal, as an Argo CD user runs production apps."""
    policy = {
        "automated": True,
        "prune": True,
        "selfHeal": True,
        "interval": stage.settings.interval_s,
    }
    return {
        "name": app.name,
        "source": {"repo": stage.stream.repo_url, "path": app.path, "revision": "HEAD"},
        "destination": {"namespace": stage.namespace, "cluster": app.cluster},
        "syncPolicy": policy,
    }


def inject_all(stage: Stage, out: Path, document: dict[str, Any]) -> None:
    """Every chosen fault in turn; faults.json rewritten after each."""
    for fault in kinds.chosen(stage.settings.only):
        print(f"faults: {fault.name} ...", file=sys.stderr, flush=True)
        result = measure.run_fault(stage, fault)
        document["faults"].append(result.to_json())
        write(out, document)
        time.sleep(stage.settings.calm_s)


def write(out: Path, document: dict[str, Any]) -> Path:
    faults = document["faults"]
    document["totals"] = {k: sum(int(f[k]) for f in faults) for k in TOTALS}
    path = out / "faults.json"
    path.write_text(json.dumps(document, indent=2) + "\n")
    return path


def stop(stage: Stage, *, clean: bool) -> None:
    stage.stream.stop()
    stage.watch.stop()
    stage.fleet.stop()
    if clean:  # a testbed the suite did not start: leave nothing of its own behind
        _clean(stage)
    for kube in [*stage.clients.values(), *stage.watch.clients.values()]:
        kube.close()


def _clean(stage: Stage) -> None:
    for kube in stage.clients.values():
        kube.delete(ObjectRef("", "v1", "Namespace", "", stage.namespace))
        for app in stage.apps:
            ref = ObjectRef("", "v1", "ConfigMap", "gitfleet-system", NAME_PREFIX + app.name)
            kube.delete(ref)


def run(settings: FaultSettings, out: Path, listing: Path | None) -> dict[str, Any]:
    work = out / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    document: dict[str, Any] = {
        "suite": "gitfleet fault suite (issue 12)",
        "settings": settings.to_json(),
        "testbed": str(listing) if listing else f"own {settings.clusters}-cluster testbed",
        "load_average_1m": [round(os.getloadavg()[0], 2)],
        "methods": measure.__doc__,
        "faults": [],
    }
    kinds.chosen(settings.only)  # an unknown name fails before anything starts
    with testbed(settings, work, listing) as entries:
        stage = prepare(settings, work, entries)
        try:
            start(stage)
            inject_all(stage, out, document)
        finally:
            stop(stage, clean=listing is not None)
    document["load_average_1m"].append(round(os.getloadavg()[0], 2))
    write(out, document)
    return document


def run_command(args: argparse.Namespace) -> int:
    """Run with `args` (from this module's parser or `gitfleet bench --preset faults`)."""
    if missing := extra.missing():
        raise SystemExit(extra.message(missing))
    settings = resolve(args)
    args.out.mkdir(parents=True, exist_ok=True)
    document = run(settings, args.out, getattr(args, "clusters_json", None))
    print(args.out / "faults.json")
    print(json.dumps(document["totals"]), file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m loadtest.faults",
        description="Inject faults into a running gitfleet while commits stream in; write "
        "DIR/faults.json with, per fault, time to detect and recover, syncs lost and "
        "duplicated, objects wrongly written or pruned, records lost.",
    )
    add_arguments(parser)
    return run_command(parser.parse_args(argv))
