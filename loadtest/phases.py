"""Phases 3, 4 and 7a: onboarding, the cold sync, memory per cached object, the no-op cycle.

How a cold sync starts. Apps are automated, so a coordinator whose scheduler runs
(`fleet.control.scheduler`) requests a sync of each new app by itself on its next tick. To time
syncing apart from registering, the workers are stopped while the apps are created through the API
(the scheduler then finds no live worker and requests nothing), and started again: the clock starts
when they are live and the scheduler dispatches every new app. Without a leading scheduler the bench
requests the syncs itself (POST /api/v1/apps/{name}/sync).

How a no-op cycle starts: the bench makes the scheduler's own request for every app,
`Dispatcher.request_sync(app, cluster, trigger="interval")`, as if every interval had passed
at once (the apps' real interval is an hour, so the scheduler never starts one on its own
during a run). Two cycles are measured: the first after the cold sync, and the second, the
steady state that the headline figures report.

Around the cold sync and each no-op cycle, `loadtest.observe` counts the Redis commands the
fleet runs per app (less an idle baseline, measured like the apiserver background) and, with
--profile, records flame graphs of the API and the workers.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from api.views import AppSummary
from fleet.control.routing.dispatch import Dispatcher
from fleet.model import Health, SyncStatus, Trigger
from loadtest.board import Settled
from loadtest.context import (
    Meter,
    Run,
    app_bodies,
    cpu_per_1k,
    percentile,
    sync_requests,
)
from loadtest.fleetrun import PREFIX
from loadtest.memory import MemorySampler
from loadtest.observe import REDIS_UNIT, Observation, idle_rates, redis_meter
from loadtest.probes import (
    RequestKey,
    is_uncached_render,
    queue_waits,
    request_total,
    requests_since,
    stage_breakdown,
)
from loadtest.report import write_partial
from loadtest.workload import App

WATCH_SETTLE_S = 4.0  # self-heal refreshes its watches every 2 s, then lists
IDLE_WINDOW_S = 10.0
_SUMMARIES = TypeAdapter(list[AppSummary])


def timeout_for(apps: int) -> float:
    return 600.0 + apps * 0.5


def onboard(run: Run) -> None:
    """Register every cluster through the API, then create and sync the warm-up apps (their
    own small repository, each on every cluster), so each worker has imported, connected and
    started a watch on every cluster before anything is measured."""
    api = run.api
    for entry in run.entries:
        body = {
            "name": entry["name"],
            "kubeconfig": Path(entry["kubeconfig"]).read_text(),
            "labels": {"bench": "true"},
        }
        api.call("POST", "/api/v1/clusters", body)
    started = time.time()
    names = list(dict.fromkeys(a.name for a in run.warm_up))
    warm = [App(n, "") for n in names]
    api.bulk(app_bodies(run, warm, run.fleet.repo_url("warmup.git"), selector={"bench": "true"}))
    if not run.fleet.scheduler_leads():
        api.bulk(sync_requests(warm))
    run.board.wait(run.warm_up, since=started, timeout=300)
    run.fleet.wait_idle(timeout=300)


@dataclass(frozen=True)
class ColdRun:
    """One cold sync: when its clock started, how each app settled, CPU by group."""

    clock: float
    created_s: float
    creation_cpu: dict[str, float]
    cpu: dict[str, float]
    settled: dict[str, Settled]
    scheduled: bool

    @property
    def seconds(self) -> float:
        return max(s.finished for s in self.settled.values()) - self.clock


def cold_start(
    run: Run,
    apps: Sequence[App],
    *,
    tracing: bool = True,
    progress: Any = None,
    observe: Observation | None = None,
) -> ColdRun:
    """Create `apps` with the workers stopped, start them (tracing on or off) and wait until
    every app is Synced and Healthy; `observe` runs from the workers being live to then."""
    fleet, names = run.fleet, run.params.worker_names()
    fleet.wait_idle(timeout=timeout_for(len(apps)))
    fleet.stop_workers()
    creation = Meter.start({k: v for k, v in run.groups().items() if k != "workers"})
    created_at = time.time()
    create_apps(run, apps)
    created_s, creation_cpu = time.time() - created_at, creation.read()
    run.traces.mark()
    launched = time.time()
    live = fleet.start_workers(names, tracing=tracing)
    meter = Meter.start(run.groups())
    if observe is not None:
        observe.start()
    scheduled = fleet.scheduler_leads()
    if not scheduled:
        live = time.time()
        run.api.bulk(sync_requests(apps), concurrency=run.params.concurrency)
    timeout = timeout_for(len(apps))
    settled = run.board.wait(apps, since=launched, timeout=timeout, progress=progress)
    if observe is not None:
        observe.stop()
    clock = min(live, *(s.started for s in settled.values()))
    return ColdRun(clock, created_s, creation_cpu, meter.read(), settled, scheduled)


def create_apps(run: Run, apps: Sequence[App]) -> None:
    """POST every app, in chunks, noting how long each chunk took: registering gets slower as
    the registry grows, and a long run shows how (also in DIR/partial.json as it goes)."""
    chunk = max(100, len(apps) // 20)
    timeline = run.details.setdefault("creation_timeline", [])
    for start in range(0, len(apps), chunk):
        began = time.time()
        part = apps[start : start + chunk]
        run.api.bulk(
            app_bodies(run, part, run.repo_url()), concurrency=run.params.create_concurrency
        )
        rate = len(part) / (time.time() - began)
        registered = run.params.warm_up_apps + sum(t["apps"] for t in timeline)
        timeline.append({"registered": registered, "apps": len(part), "apps_per_s": round(rate, 2)})
        if len(apps) > chunk:
            write_partial(run.figures, run.details, run.work.parent)


def cold_sync(run: Run) -> None:
    """Phase 3 (and 7a): the cold sync of the N apps, and worker memory as it fills."""
    apps, p = run.apps, run.params
    memory = MemorySampler(run, settle=WATCH_SETTLE_S)
    run.fleet.wait_idle(timeout=timeout_for(len(apps)))
    idle = idle_rates(run, seconds=IDLE_WINDOW_S)
    observed = Observation(run, "cold_sync", idle, apps=len(apps), profile=True)
    requests_before, window_started = request_total(run.clients), time.time()
    cold = cold_start(run, apps, progress=memory.progress, observe=observed)
    requests = requests_since(run.clients, requests_before)  # the testbed's background too
    requests_window_s = time.time() - window_started
    seconds = cold.seconds
    run.add("cold_sync_seconds", seconds, "s from the workers being live")
    run.add("cold_sync_objects_per_s", p.objects / seconds, "objects/s")
    run.add("all_synced_healthy_s", cold.created_s + seconds, "s: app creation + cold sync")
    run.add("apps_created_per_s", len(apps) / cold.created_s, "apps/s over HTTP")
    per_app = 1000 * cold.creation_cpu["api"] / len(apps)
    run.add("app_create_api_cpu_ms_per_app", per_app, "CPU-ms of the API process")
    cold_ratio = run.value("cold_sync_objects_per_s")
    run.add("cold_sync_vs_kubectl", cold_ratio / run.value("kubectl_objects_per_s"), "x")
    ratio = 100 * cold_ratio / run.value("raw_limit_objects_per_s")
    run.add("cold_sync_vs_raw_limit", ratio, "%")
    run.add("redis_ops_per_cold_sync", observed.redis["per_app"], REDIS_UNIT)
    per_sync = sum(requests.values()) / len(apps)
    run.add("cold_sync_api_requests_per_app", per_sync, "apiserver requests per app")
    for group, value in cpu_per_1k(cold.cpu, p.objects).items():
        run.add(f"cold_sync_cpu_{group}_s_per_1k", value, "CPU-s per 1k objects")
    run.traces.settle()
    run.details["cold_sync"] = {
        "clock_starts": "workers live; the scheduler dispatches"
        if cold.scheduled
        else "POST /apps/{name}/sync for every app",
        "api_confirmed_synced_healthy": _confirmed(run),
        "syncs_per_worker": dict(Counter(s.worker for s in cold.settled.values())),
        "cpu_s": {k: round(v, 2) for k, v in cold.cpu.items()},
        "creation_cpu_s": {k: round(v, 2) for k, v in cold.creation_cpu.items()},
        "redis": observed.redis,
        "requests_per_app_by_verb": _per_app(requests, len(apps)),
        "requests_window_s": round(requests_window_s, 1),  # app creation and worker start too
        **where_time_went(run, seconds),
    }
    memory.finish()


def where_time_went(run: Run, seconds: float) -> dict[str, Any]:
    """From the phase's spans: each stage's mean, the queue wait of each sync after its
    request, and how many syncs ran at once on average (summed sync time / wall time)."""
    spans = run.traces.read()
    stages = stage_breakdown(spans)
    waits = queue_waits(spans)
    busy = stages.get("gitfleet.sync", {}).get("total_s", 0.0) / max(seconds, 1e-9)
    return {
        "stages": stages,
        "queue_wait_s": {
            "p50": round(percentile(waits, 50), 3),
            "p95": round(percentile(waits, 95), 3),
            "max": round(max(waits, default=0.0), 3),
        },
        "syncs_running_at_once": round(busy, 2),
    }


def _confirmed(run: Run) -> int:
    """How many of the apps GET /api/v1/apps lists as Synced and Healthy."""
    names = {a.name for a in run.apps}
    listed = _SUMMARIES.validate_python(run.api.call("GET", "/api/v1/apps", timeout=600))
    return sum(
        1
        for a in listed
        if a.name in names and a.sync_status == SyncStatus.SYNCED and a.health == Health.HEALTHY
    )


def _per_app(
    requests: Counter[RequestKey] | dict[RequestKey, float], apps: int
) -> dict[str, float]:
    return {
        f"{verb} {resource}": round(count / max(apps, 1), 3)
        for (verb, resource), count in sorted(requests.items(), key=lambda kv: -kv[1])
        if count / max(apps, 1) >= 0.005
    }


# -- phase 4: the no-op cycle -----------------------------------------------------------------


def noop_cycle(run: Run) -> None:
    """Phase 4: two interval cycles of every app with nothing changed in git or the clusters;
    apiserver requests are counted minus the testbed's own background (measured over an idle
    window just before; the background is a Poisson-like trickle of controller requests, so
    the result carries a noise band of 3 standard deviations), renders as new entries in the
    workers' render caches."""
    run.fleet.wait_idle(timeout=timeout_for(len(run.apps)))
    time.sleep(WATCH_SETTLE_S)
    idle_meter = redis_meter(run)  # the fleet's idle Redis traffic, over the same window
    background = _background(run)
    idle = idle_meter.read().rates()
    n = len(run.apps)
    first = interval_cycle(
        run, background, Observation(run, "noop_first_cycle", idle, apps=n, profile=False)
    )
    second = interval_cycle(run, background, Observation(run, "noop", idle, apps=n, profile=True))
    for prefix, cycle in (("noop_first_cycle", first), ("noop", second)):
        run.add(f"{prefix}_api_requests_per_app", cycle["requests"], "apiserver requests per app")
        run.add(f"{prefix}_renders_per_app", cycle["renders"], "renders per app")
        run.add(f"{prefix}_worker_cpu_ms_per_app", cycle["cpu_ms"], "worker CPU-ms per app")
        run.add(f"{prefix}_cycle_seconds", cycle["seconds"], "s")
        run.add(f"{prefix}_quiet_share", cycle["quiet_share"], "share of apps checked quietly")
    unit = "requests per app: 3 standard deviations of the background over the cycle"
    run.add("noop_noise_band_per_app", second["noise_band"], unit)
    run.add("redis_ops_per_noop_check", second["redis"]["per_app"], REDIS_UNIT)
    run.details["noop"] = second
    run.details["noop_first_cycle"] = first


def _background(run: Run) -> Counter[RequestKey]:
    """Requests per second the testbed serves with gitfleet idle; and what idle costs."""
    meter = Meter.start(run.groups())
    before, started = request_total(run.clients), time.time()
    time.sleep(IDLE_WINDOW_S)
    counts = requests_since(run.clients, before)
    window = time.time() - started
    idle = meter.read()
    run.add("idle_worker_cpu_cores", idle["workers"] / window, "cores used by idle workers")
    run.add("idle_api_cpu_cores", idle["api"] / window, "cores used by the idle API")
    unit = "cores used by the testbed's kube-apiservers and etcd with gitfleet idle"
    run.add("idle_apiservers_etcd_cpu_cores", idle["apiservers_etcd"] / window, unit)
    run.add("background_requests_per_s", sum(counts.values()) / window, "apiserver requests/s")
    return Counter({k: v / window for k, v in counts.items()})


def interval_cycle(
    run: Run, background: Counter[RequestKey], observe: Observation | None = None
) -> dict[str, Any]:
    """Request an interval sync of every app, as the scheduler does, and measure it (the
    requests go through `Fleet.stand_in`: their Redis commands are the scheduler's own)."""
    n, dispatcher = len(run.apps), Dispatcher(run.fleet.stand_in, prefix=PREFIX)
    before, git_before = request_total(run.clients), run.fleet.git_requests()
    renders_before = run.fleet.render_cache_entries()
    run.traces.mark()
    if observe is not None:
        observe.start()
    meter = Meter.start(run.groups())
    started = time.time()
    for app in run.apps:
        dispatcher.request_sync(app.name, app.cluster, trigger=Trigger.INTERVAL)
    settled = run.board.wait(run.apps, since=started, timeout=timeout_for(n))
    run.fleet.wait_idle(timeout=300)
    cpu, window = meter.read(), time.time() - started
    if observe is not None:
        observe.stop()
    requests = requests_since(run.clients, before)
    expected = sum(background.values()) * window
    total = max(sum(requests.values()) - expected, 0.0)
    own = {k: v - background.get(k, 0.0) * window for k, v in requests.items()}
    own = {k: v for k, v in own.items() if v > 0}
    seconds = max(s.finished for s in settled.values()) - started
    run.traces.settle()
    git = run.fleet.git_requests() - git_before
    return {
        "requests": total / n,
        "noise_band": 3 * math.sqrt(max(expected, 1.0)) / n,
        "renders": (run.fleet.render_cache_entries() - renders_before) / n,
        "cpu_ms": 1000 * cpu["workers"] / n,
        "seconds": seconds,
        "quiet_share": sum(s.quiet for s in settled.values()) / n,
        "trigger": "Dispatcher.request_sync(app, cluster, trigger='interval') for every app",
        "requests_per_app_by_verb": _per_app(own, n),
        "raw_requests_per_app": round(sum(requests.values()) / n, 3),
        "git_requests_per_app": {k: round(v / n, 3) for k, v in git.items()},
        "full_syncs": sum(not s.quiet for s in settled.values()),
        "render_spans_uncached": run.traces.count("gitfleet.render", is_uncached_render),
        "cpu_s": {k: round(v, 2) for k, v in cpu.items()},
        "redis": observe.redis if observe is not None else {},
        **where_time_went(run, seconds),
    }
