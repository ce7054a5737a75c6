"""Phases 6 and 7b: the shard map as workers join and leave, and what tracing costs.

Sharding reads the live shard map the way every process computes it (`fleet.control.routing.owners.
OwnerMap`, over the registered instances and the live workers) with the configured W workers,
after starting worker W+1, and after stopping worker-1 (SIGTERM: it finishes its job and
deregisters). Balance is max/mean instances per worker
(`fleet.control.routing.sharding.load_stats`); movement is the share of instances whose owner
changed (`fleet.control.routing.sharding.moved_share`). The coordinator's own /metrics
(`gitfleet_worker_apps`) is read beside it as a cross-check.

Tracing: six cold syncs of fresh app subsets, the workers restarted for each with the span
exporter on (GITFLEET_TRACE_FILE) or off, in the order on, off, off, on, on, off, so a drift of
the shared machine over time weighs on both sides alike and each side's mean has three
samples. Each round waits until the restarted workers have settled (watches listed, startup
refresh done: with 10,000 apps that takes seconds) before its apps exist, then creates them as
manual apps and requests their syncs at once, so the clock covers syncing only. Every round's
workers are also profiled (py-spy `--gil`, at the same rate on both sides), and the exporter's
share of the on-rounds' samples is the figure that does not move with the machine
(`loadtest.tracecost`); in the off-rounds that share must be nil.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from fleet.control.routing.owners import OwnerMap
from fleet.control.routing.sharding import load_stats, moved_share
from loadtest.context import Meter, Run, app_bodies, sync_requests
from loadtest.fleetrun import PREFIX
from loadtest.phases import WATCH_SETTLE_S, timeout_for
from loadtest.profiling import Profile, Profiler
from loadtest.tracecost import PROFILE_RATE, ExportShare, export_tail_s, file_share
from loadtest.workload import App

TRACING_ORDER = (True, False, False, True, True, False)


def sharding(run: Run) -> None:
    fleet, names = run.fleet, run.params.worker_names()
    fleet.wait_idle(timeout=timeout_for(len(run.apps)))
    owners = OwnerMap(fleet.redis, prefix=PREFIX)
    before, metrics = owners.current(), worker_apps(run.api.metrics())
    extra, leaver = f"worker-{len(names) + 1}", names[0]
    fleet.start_worker(extra)
    fleet.wait_live({*names, extra})
    joined = owners.current()
    fleet.stop_worker(leaver)
    fleet.wait_live({*names, extra} - {leaver})
    left = owners.current()
    states = {
        "before": (before, names),
        "after join": (joined, [*names, extra]),
        "after leave": (left, [n for n in [*names, extra] if n != leaver]),
    }
    counts = {}
    for state, (assignment, workers) in states.items():
        ratio, counts[state] = load_stats(assignment, workers)
        suffix = "" if state == "before" else "_" + state.replace("after ", "after_")
        run.add(f"shard_max_over_mean{suffix}", ratio, "max / mean instances per worker")
    run.add("shard_moved_share_join", moved_share(before, joined), "share of instances moved")
    run.add("shard_moved_share_leave", moved_share(joined, left), "share of instances moved")
    run.add("shard_moved_ideal_share", 1 / (len(names) + 1), "1 / (W + 1)")
    run.details["sharding"] = {
        **counts,
        "instances": len(before),
        "joined": extra,
        "left": leaver,
        "metrics_worker_apps_before": metrics,
    }


def worker_apps(text: str) -> dict[str, int]:
    """`gitfleet_worker_apps{worker}` from the coordinator's /metrics."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "gitfleet_worker_apps":
                found[sample.labels["worker"]] = int(sample.value)
    return found


def tracing(run: Run) -> None:
    profiler = Profiler(
        run.work / "tracing-profiles", run.work / "py-spy", rate=PROFILE_RATE, formats=("raw",)
    )
    rows = [
        traced_cold_sync(run, subset, enabled=enabled, profiler=profiler, round_=i)
        for i, (enabled, subset) in enumerate(zip(TRACING_ORDER, run.subsets, strict=True))
    ]
    on = [r for r in rows if r["tracing"]]
    off = [r for r in rows if not r["tracing"]]
    on_rate, off_rate = _mean(on, "objects_per_s"), _mean(off, "objects_per_s")
    run.add("tracing_on_objects_per_s", on_rate, f"objects/s (mean of {len(on)} cold syncs)")
    run.add("tracing_off_objects_per_s", off_rate, f"objects/s (mean of {len(off)} cold syncs)")
    unit = "share of throughput lost with the span exporter on (negative: within noise)"
    run.add("tracing_overhead_share", 1 - on_rate / off_rate, unit)
    cpu_on, cpu_off = _mean(on, "worker_cpu_ms_per_object"), _mean(off, "worker_cpu_ms_per_object")
    run.add("tracing_cpu_overhead_share", cpu_on / cpu_off - 1, "extra worker CPU per object")
    profiled = _profiled(on), _profiled(off)
    if all(p.samples for p in profiled):  # else py-spy failed: the rows' profiles say why
        unit = "share of worker CPU samples in the span export path (py-spy --gil, exporter on)"
        run.add("tracing_exporter_cpu_share", profiled[0].share, unit)
    run.details["tracing"] = {
        "rounds": rows,
        "exporter_samples": {
            side: {"samples": p.samples, "exporting": p.exporting}
            for side, p in zip(("on", "off"), profiled, strict=True)
        },
    }


def traced_cold_sync(
    run: Run, subset: list[App], *, enabled: bool, profiler: Profiler, round_: int
) -> dict[str, Any]:
    """A cold sync of `subset` (fresh apps) by settled workers started with tracing `enabled`,
    each worker profiled from just before the sync requests until the spans of the last sync
    are exported (`export_tail_s` after every app settled; as long with the exporter off)."""
    fleet, timeout = run.fleet, timeout_for(len(subset))
    fleet.wait_idle(timeout=timeout)
    fleet.stop_workers()
    fleet.start_workers(run.params.worker_names(), tracing=enabled)
    time.sleep(WATCH_SETTLE_S)
    fleet.wait_idle(timeout=timeout)
    bodies = app_bodies(run, subset, run.repo_url(), automated=False)
    run.api.bulk(bodies, concurrency=run.params.create_concurrency)
    workers = {name: proc.pid for name, proc in sorted(fleet.workers().items())}
    profiler.start(f"round{round_ + 1}-{'on' if enabled else 'off'}", workers)
    meter, started = Meter.start(run.groups()), time.time()
    try:
        run.api.bulk(sync_requests(subset), concurrency=run.params.concurrency)
        settled = run.board.wait(subset, since=started, timeout=timeout)
        seconds, cpu = max(s.finished for s in settled.values()) - started, meter.read()
        time.sleep(export_tail_s(fleet.env))  # the spans still queued: exported while profiled
    finally:
        profiles = profiler.stop()
    objects = len(subset) * run.params.objects_per_app
    return {
        "tracing": enabled,
        "apps": len(subset),
        "seconds": round(seconds, 3),
        "objects_per_s": round(objects / seconds, 2),
        "worker_cpu_ms_per_object": round(1000 * cpu["workers"] / objects, 3),
        "profiles": [_round_profile(run, p) for p in profiles],
    }


def _round_profile(run: Run, profile: Profile) -> dict[str, Any]:
    found = _share(run, profile)
    row = {"worker": profile.process, "samples": found.samples, "exporting": found.exporting}
    return row | ({"error": profile.error} if profile.error else {})


def _share(run: Run, profile: Profile) -> ExportShare:
    if profile.collapsed is None:
        return ExportShare(0, 0)
    return file_share(run.work / profile.collapsed)


def _profiled(rows: list[dict[str, Any]]) -> ExportShare:
    total = ExportShare(0, 0)
    for row in rows:
        for p in row["profiles"]:
            total += ExportShare(p["samples"], p["exporting"])
    return total


def _mean(rows: list[dict[str, Any]], key: str) -> float:
    return sum(float(r[key]) for r in rows) / max(len(rows), 1)
