"""The coordinator under load: latency of a mixed read/write stream at a fixed rate (issue 12).

    python -m loadtest.apiload --out DIR [--apps 10000] [--rps 200] [--seconds 60]

Starts the fleet's processes as the benchmark does (`loadtest.fleetrun`: Redis with AOF, the git
server, the API, one worker so sync and delete requests are accepted and carried out), one testbed
cluster, registers `--apps` manual-sync applications through the API (one ConfigMap each, in one
monorepo), then sends requests open-loop: request i leaves at
start + i / rps whatever the earlier ones did, and its latency counts from that planned instant,
so a slow answer cannot hide the queue behind it (no coordinated omission). The mix, by share of
requests (`MIX`), reads one app, its history, a page of the app list, the clusters and the
projects, and writes: sync requests, app replacements, app creations and deletions.

DIR/apiload.json holds the figures (overall and per request kind: count, errors, p50, p95, p99,
max in ms; achieved rate; registration rate) and DIR/apiload.md a table of them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from redis import Redis

from deploy.testbed import runner
from loadtest.context import percentile
from loadtest.fleetrun import BenchError, Fleet
from loadtest.rawhttp import Connection, HttpError
from loadtest.timeline import CpuTimeline, per_second
from loadtest.workload import App, create_repo, plan_apps

TARGET_P99_MS = 100.0
PAGE = 50
CONNECTIONS = 64
NAMESPACE = "apiload"
WORKERS = ("worker-1",)  # sync and delete requests need a live worker to be accepted
LATENCY_THRESHOLD_MS = 20  # Redis's latency monitor records events slower than this
WARM_UP_S = 3.0  # sent at the same rate first, not counted: connections, caches

RequestFor = Callable[["Load", int], tuple[str, str, Any]]


@dataclass
class Load:
    """What the request makers draw from: the registered apps and a counter for new ones."""

    apps: list[App]
    repo_url: str
    cluster: str
    rng: random.Random
    created: list[str] = field(default_factory=list)
    serial: int = 0

    def app(self) -> App:
        return self.rng.choice(self.apps)

    def body(self, name: str, path: str, interval: int = 3600) -> dict[str, Any]:
        return {
            "name": name,
            "source": {"repo": self.repo_url, "path": path, "revision": "HEAD"},
            "destination": {"cluster": self.cluster, "namespace": NAMESPACE},
            "syncPolicy": {"automated": False, "interval": interval},
        }


def _get_app(load: Load, _: int) -> tuple[str, str, Any]:
    return "GET", f"/api/v1/apps/{load.app().name}", None


def _history(load: Load, _: int) -> tuple[str, str, Any]:
    return "GET", f"/api/v1/apps/{load.app().name}/history?limit=10", None


def _list_page(load: Load, i: int) -> tuple[str, str, Any]:
    offset = (i * PAGE) % max(len(load.apps), 1)
    return "GET", f"/api/v1/apps?limit={PAGE}&offset={offset}", None


def _clusters(_: Load, __: int) -> tuple[str, str, Any]:
    return "GET", "/api/v1/clusters", None


def _projects(_: Load, __: int) -> tuple[str, str, Any]:
    return "GET", "/api/v1/projects", None


def _sync(load: Load, _: int) -> tuple[str, str, Any]:
    return "POST", f"/api/v1/apps/{load.app().name}/sync", None


def _replace(load: Load, i: int) -> tuple[str, str, Any]:
    app = load.app()
    return "PUT", f"/api/v1/apps/{app.name}", load.body(app.name, app.path, 3600 + i % 600)


def _create(load: Load, _: int) -> tuple[str, str, Any]:
    load.serial += 1
    name = f"load-new-{load.serial:06d}"
    load.created.append(name)
    return "POST", "/api/v1/apps", load.body(name, load.apps[0].path)


def _delete(load: Load, _: int) -> tuple[str, str, Any]:
    if not load.created:
        return _get_app(load, 0)
    return "DELETE", f"/api/v1/apps/{load.created.pop(0)}", None


# (kind, share of requests, maker); reads 80 %, writes 20 %.
MIX: tuple[tuple[str, float, RequestFor], ...] = (
    ("get_app", 0.40, _get_app),
    ("history", 0.15, _history),
    ("list_page", 0.10, _list_page),
    ("clusters", 0.10, _clusters),
    ("projects", 0.05, _projects),
    ("sync", 0.05, _sync),
    ("replace", 0.08, _replace),
    ("create", 0.04, _create),
    ("delete", 0.03, _delete),
)


@dataclass(frozen=True)
class Sample:
    kind: str
    latency_ms: float
    status: int
    at_s: float  # planned send instant, seconds from the start of the measured stream


def schedule(count: int, rng: random.Random) -> list[str]:
    """`count` request kinds in MIX's proportions, shuffled."""
    kinds = [kind for kind, share, _ in MIX for _ in range(round(share * count))]
    rng.shuffle(kinds)
    return kinds


async def _drive(
    server: str, token: str, load: Load, *, rps: float, seconds: float
) -> tuple[list[Sample], float]:
    """Send the schedule open-loop: a pacer puts each request on a queue at its planned
    instant; `CONNECTIONS` senders, one connection each, take them off. Time waiting in the
    queue counts in the latency. The client is `loadtest.rawhttp`, not httpx: on this machine it
    shares the cores with the coordinator, and httpx's CPU per request was queueing charged to
    the coordinator."""
    makers = {kind: maker for kind, _, maker in MIX}
    warm_up = int(rps * WARM_UP_S)
    kinds = schedule(warm_up, load.rng) + schedule(int(rps * seconds), load.rng)
    host, port = _address(server)
    headers = {"Authorization": f"Bearer {token}"}
    samples: list[Sample] = []
    queue: asyncio.Queue[tuple[int, str, float] | None] = asyncio.Queue()

    async def sender() -> None:
        connection = Connection(host, port, headers, timeout=30.0)
        try:
            while (item := await queue.get()) is not None:
                i, kind, planned = item
                method, path, body = makers[kind](load, i)
                try:
                    status = await connection.request(method, path, body)
                except HttpError:
                    status = 0
                if i >= warm_up:
                    latency = (time.perf_counter() - planned) * 1000
                    samples.append(Sample(kind, latency, status, planned - measured))
        finally:
            await connection.close()

    senders = [asyncio.create_task(sender()) for _ in range(CONNECTIONS)]
    start = time.perf_counter() + 0.5
    measured = start + warm_up / rps
    for i, kind in enumerate(kinds):
        planned = start + i / rps
        delay = planned - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        queue.put_nowait((i, kind, planned))
    for _ in senders:
        queue.put_nowait(None)
    await asyncio.gather(*senders)
    return samples, measured


def _address(server: str) -> tuple[str, int]:
    parts = urlsplit(server)
    if parts.hostname is None or parts.port is None:
        raise BenchError(f"the coordinator's address {server} names no host and port")
    return parts.hostname, parts.port


def summarise(samples: Sequence[Sample], *, seconds: float) -> dict[str, Any]:
    """Overall and per-kind percentiles (ms); an error is a transport failure or a 5xx."""

    def figures(group: Sequence[Sample]) -> dict[str, Any]:
        latencies = [s.latency_ms for s in group]
        return {
            "count": len(group),
            "errors": sum(1 for s in group if s.status == 0 or s.status >= 500),
            "p50_ms": round(percentile(latencies, 50), 2),
            "p95_ms": round(percentile(latencies, 95), 2),
            "p99_ms": round(percentile(latencies, 99), 2),
            "max_ms": round(max(latencies, default=0.0), 2),
        }

    kinds = {kind: figures([s for s in samples if s.kind == kind]) for kind, _, _ in MIX}
    overall = figures(samples)
    overall["achieved_rps"] = round(len(samples) / seconds, 1)
    overall["statuses"] = sorted({s.status for s in samples})
    return {"overall": overall, "kinds": kinds}


def register(fleet: Fleet, apps: Sequence[App], load: Load) -> float:
    """Create every app through the API; returns apps per second."""
    began = time.time()
    requests = [("POST", "/api/v1/apps", load.body(a.name, a.path)) for a in apps]
    fleet.api().bulk(requests, concurrency=4)
    return len(apps) / (time.time() - began)


def run(
    out: Path, *, apps: int, rps: float, seconds: float, api_workers: int = 2, seed: int = 7
) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    work = out / "work"
    work.mkdir(exist_ok=True)
    planned = plan_apps("load", apps, ["cluster-1"])
    repo = work / "repo"
    create_repo(repo, planned, 1)
    entries = runner.up(work / "testbed", clusters=1, nodes=1)
    fleet = Fleet(work)
    fleet.env["GITFLEET_API_WORKERS"] = str(api_workers)  # `gitfleet api --workers`
    try:
        fleet.start({"apps.git": repo}, [])
        fleet.start_workers(WORKERS, tracing=False)
        entry = entries[0]
        kubeconfig = Path(entry["kubeconfig"]).read_text()
        fleet.api().call(
            "POST", "/api/v1/clusters", {"name": entry["name"], "kubeconfig": kubeconfig}
        )
        load = Load(planned, fleet.repo_url("apps.git"), entry["name"], random.Random(seed))
        rate = register(fleet, planned, load)
        server, token = f"http://127.0.0.1:{fleet.api_port}", fleet.env["GITFLEET_ADMIN_TOKEN"]
        redis = Redis.from_url(fleet.env["GITFLEET_REDIS_URL"])
        redis.config_set("latency-monitor-threshold", LATENCY_THRESHOLD_MS)
        cpu = CpuTimeline()
        cpu.start()
        try:
            samples, measured = asyncio.run(_drive(server, token, load, rps=rps, seconds=seconds))
        finally:
            cpu_rows = cpu.stop()
        redis_events = redis.execute_command("LATENCY", "LATEST")  # type: ignore[no-untyped-call, unused-ignore]
        persistence = redis.info("persistence")
    finally:
        fleet.stop()
        runner.down(work / "testbed")
    figures = summarise(samples, seconds=seconds)
    figures["params"] = {
        "apps": apps,
        "rps": rps,
        "seconds": seconds,
        "workers": len(WORKERS),
        "api_processes": api_workers,
    }
    figures["registration_apps_per_s"] = round(rate, 1)
    figures["target_p99_ms"] = TARGET_P99_MS
    figures["meets_target"] = figures["overall"]["p99_ms"] < TARGET_P99_MS
    (out / "apiload.json").write_text(json.dumps(figures, indent=2) + "\n")
    seconds_rows = per_second(
        [(s.at_s, s.latency_ms) for s in samples], cpu_rows, measured - cpu.began
    )
    slow = sorted(samples, key=lambda s: s.latency_ms, reverse=True)[:50]
    timeline = {
        "per_second": seconds_rows,
        "slowest": [asdict(s) for s in slow],
        "redis_latency_events_over_ms": LATENCY_THRESHOLD_MS,
        "redis_latency_latest": _decoded(redis_events),
        "redis_persistence": {
            k: persistence.get(k)
            for k in ("aof_rewrites", "aof_delayed_fsync", "aof_last_rewrite_time_sec")
        },
    }
    (out / "timeline.json").write_text(json.dumps(timeline, indent=1) + "\n")
    (out / "apiload.md").write_text(markdown(figures))
    return figures


def _decoded(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list):
        return [_decoded(v) for v in value]
    return value


def markdown(figures: dict[str, Any]) -> str:
    p = figures["params"]
    lines = [
        f"# API under load: {p['apps']} apps, {p['rps']:g} requests/s for {p['seconds']:g} s, "
        f"{p.get('api_processes', 1)} coordinator processes",
        "",
        "| requests | count | errors | p50 ms | p95 ms | p99 ms | max ms |",
        "|---|---|---|---|---|---|---|",
    ]
    rows = [("all", figures["overall"]), *figures["kinds"].items()]
    for name, f in rows:
        lines.append(
            f"| {name} | {f['count']} | {f['errors']} | {f['p50_ms']} | {f['p95_ms']} "
            f"| {f['p99_ms']} | {f['max_ms']} |"
        )
    lines += ["", f"achieved {figures['overall']['achieved_rps']} requests/s; target p99 < "]
    lines[-1] += (
        f"{figures['target_p99_ms']:g} ms: {'met' if figures['meets_target'] else 'NOT met'}"
    )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.apiload", description=__doc__)
    parser.add_argument("--out", type=Path, required=True, help="folder for apiload.json/.md")
    parser.add_argument("--apps", type=int, default=10_000, help="apps registered first")
    parser.add_argument("--rps", type=float, default=200.0, help="requests per second")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to send")
    parser.add_argument(
        "--api-workers", type=int, default=2, help="coordinator processes (gitfleet api --workers)"
    )
    args = parser.parse_args(argv)
    try:
        figures = run(
            args.out,
            apps=args.apps,
            rps=args.rps,
            seconds=args.seconds,
            api_workers=args.api_workers,
        )
    except BenchError as error:
        print(f"apiload: {error}", file=sys.stderr)
        return 1
    print(markdown(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
