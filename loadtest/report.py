"""The report of `gitfleet bench`: report.json, report.md and the PNG charts, in one folder.

report.json holds `machine`, `versions`, `parameters`, `figures` ({name: {value, unit}}),
`targets` (each target of issue 5 with what was measured and whether it was met; `met` is
null for a target this run cannot judge, such as the large preset's time on a small run),
`details` (what explains the figures) and `methods` (how each figure was measured); with
--profile also `profiles` (each flame graph taken, or why it is missing).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from loadtest import plots, profiling, tracecost

REQUIRED_FIGURES = (
    "raw_limit_objects_per_s",
    "kubectl_objects_per_s",
    "cold_sync_objects_per_s",
    "noop_api_requests_per_app",
    "noop_renders_per_app",
    "monorepo_renders",
    "commit_to_converged_p50_s",
    "commit_to_converged_p95_s",
    "shard_max_over_mean",
    "shard_moved_share_join",
    "shard_moved_share_leave",
    "bytes_per_cached_object",
    "tracing_overhead_share",
    "all_synced_healthy_s",
    "redis_ops_per_cold_sync",
    "redis_ops_per_noop_check",
    "cold_sync_api_requests_per_app",
)
PLOTS = ("throughput.png", "commit_to_converged.png", "shards.png", "noop_cycle.png")
LARGE_APPS = 10_000
PROFILE_FILES = (("svg", "flame graph"), ("collapsed", "collapsed stacks"))
METHODS = {
    "raw limit": "loadtest.engine_bench.raw_apply per cluster (8 threads of server-side apply "
    "through KubeClient), all clusters at once; objects / wall time of the batch",
    "kubectl": "loadtest.engine_bench.kubectl_apply: one `kubectl apply --server-side -f DIR` "
    "per cluster (default validation), all at once, discovery cache warmed first",
    "cold sync": "the workers are stopped, every app is created by POST /api/v1/apps (httpx), "
    "the workers are started; with a leading scheduler (fleet.control.scheduler) it "
    "dispatches the new "
    "apps itself, otherwise the bench POSTs /api/v1/apps/{name}/sync; time from the workers "
    "being live to the last `finished` stamp once every app is Synced and Healthy (read from "
    "the workers' status records in Redis), confirmed once by GET /api/v1/apps. "
    "all_synced_healthy_s adds the app creation time",
    "no-op cycle": "Dispatcher.request_sync(trigger='interval') for every app, the scheduler's "
    "own request, twice (the headline is the second, steady-state cycle); an app is done when "
    "its status shows a sync or a quiet check after the request; apiserver_request_total "
    "deltas over the clusters minus the background rate measured over an idle window just "
    "before; renders = new files in the workers' render caches; worker CPU from /proc",
    "cold sync requests": "apiserver_request_total deltas over the clusters from just before "
    "the apps are created until every app settled (the workers' start-up and the testbed's "
    "background included), divided by the apps: cold_sync_api_requests_per_app, by verb and "
    "resource in details.cold_sync.requests_per_app_by_verb",
    "monorepo": "a commit to one app's first ConfigMap, then a signed GitHub push webhook; "
    "converged = first KubeClient GET (every 20 ms) showing the new value; renders = new "
    "files in the workers' render caches until every triggered app synced or quietly "
    "checked the commit; the fleet is idle before each commit",
    "sharding": "OwnerMap.current() (the live shard map) with W workers, after worker W+1 "
    "joined, after worker-1 left (SIGTERM); load_stats and moved_share from "
    "fleet.control.routing.sharding",
    "memory": "worker RSS (psutil) and the live objects its watches cache (every "
    "app-labelled ConfigMap of each cluster where it owns an instance), sampled when a "
    "quarter of the cold sync is done and after it: RSS growth / objects added. Beside it, "
    "tracemalloc of one fleet.kube.watch.Watch cache of a cluster, built in the bench process",
    "redis": "INFO commandstats (calls summed over commands) read before and after the cold "
    "sync (from the workers being live until every app settled) and each no-op cycle, minus "
    "the commands of the bench's own client (tallied per command as it sends them: status "
    "board, idle waits, these INFO reads) and minus the fleet's idle rate per command "
    "(heartbeats, rq's blocking pops, scheduler ticks) measured over an idle window just "
    "before, times the phase's length; divided by the apps. The no-op cycle's interval "
    "requests, the scheduler's own, count as the fleet's",
    "tracing": "six cold syncs of fresh subsets (manual apps, synced by POST /sync at once, "
    "timed from the first request), each by workers restarted with the span exporter "
    "(GITFLEET_TRACE_FILE) on, off, off, on, on, off and left to settle first; overhead = 1 - "
    "on/off throughput; tracing_cpu_overhead_share = on/off worker CPU per object - 1. Each "
    "round's workers are profiled (py-spy record --gil --nonblocking, "
    f"{tracecost.PROFILE_RATE} samples/s, collapsed stacks): tracing_exporter_cpu_share = "
    "samples whose stack passes through the span export path (loadtest.tracecost."
    "EXPORT_FRAMES) / all samples, over the on-rounds; details.tracing.exporter_samples has "
    "both sides (the off side must have none exporting)",
}

PROFILES_METHOD = (  # in `methods` only when the run profiled (--profile)
    f"py-spy record --gil --nonblocking ({profiling.RATE} samples/s: only the thread holding "
    "the GIL, so the stacks are where Python CPU goes) of the API and each worker "
    "from the start to the end of the cold sync and of the steady-state no-op cycle, stopped "
    "by SIGINT; an SVG flame graph and the collapsed stacks per process, in "
    "profiles/<phase>-<process>.svg|.txt; idle stacks are left out"
)


def targets(figures: Mapping[str, Mapping[str, Any]], params: Mapping[str, Any]) -> list[Any]:
    def v(name: str) -> float:
        return float(figures[name]["value"])

    bound = 1 / (params["workers"] + 1) + 0.02
    large = params["apps"] >= LARGE_APPS and params["clusters"] >= 3
    rows = [
        (
            "cold sync >= 3x kubectl apply --server-side",
            f"{v('cold_sync_vs_kubectl'):.2f}x",
            v("cold_sync_vs_kubectl") >= 3,
        ),
        (
            "cold sync >= 60% of the raw SSA limit",
            f"{v('cold_sync_vs_raw_limit'):.1f}%",
            v("cold_sync_vs_raw_limit") >= 60,
        ),
        (
            "0 API requests per app in the no-op cycle",
            f"{v('noop_api_requests_per_app'):.3f} (noise band {v('noop_noise_band_per_app'):.3f})",
            v("noop_api_requests_per_app") <= v("noop_noise_band_per_app"),
        ),
        (
            "0 renders per app in the no-op cycle",
            f"{v('noop_renders_per_app'):.3f}",
            v("noop_renders_per_app") == 0,
        ),
        (
            "exactly 1 render for a monorepo change of 1 app",
            f"{v('monorepo_renders'):.2f}",
            v("monorepo_renders") == 1,
        ),
        (
            "monorepo commit-to-converged p50 < 1.5 s",
            f"{v('commit_to_converged_p50_s'):.2f} s",
            v("commit_to_converged_p50_s") < 1.5,
        ),
        (
            "max/mean apps per worker <= 1.25",
            f"{v('shard_max_over_mean'):.3f}",
            v("shard_max_over_mean") <= 1.25,
        ),
        (
            f"moved share on join <= 1/N + 2% ({bound:.3f}, N = W+1)",
            f"{v('shard_moved_share_join'):.3f}",
            v("shard_moved_share_join") <= bound,
        ),
        (
            f"moved share on leave <= 1/N + 2% ({bound:.3f}, N = W+1)",
            f"{v('shard_moved_share_leave'):.3f}",
            v("shard_moved_share_leave") <= bound,
        ),
        (
            "<= 2 KB per cached object",
            f"{v('bytes_per_cached_object'):.0f} B (worker RSS growth per object: "
            f"{v('worker_rss_bytes_per_cached_object'):.0f} B)",
            v("bytes_per_cached_object") <= 2048,
        ),
        (
            "tracing costs < 5%",
            f"{100 * v('tracing_overhead_share'):.1f}%",
            v("tracing_overhead_share") < 0.05,
        ),
        (
            "large preset all Synced and Healthy < 5 min on 2 cores",
            f"{v('all_synced_healthy_s'):.0f} s" + ("" if large else f" ({params['apps']} apps)"),
            v("all_synced_healthy_s") < 300 if large else None,
        ),
    ]
    return [{"target": t, "measured": m, "met": met} for t, m, met in rows]


def markdown(report: Mapping[str, Any]) -> str:
    m, p, f = report["machine"], report["parameters"], report["figures"]
    lines = [
        "# gitfleet bench",
        "",
        f"{m['cores']} cores, {m['memory_gib']} GiB; "
        + ", ".join(f"{k} {v}" for k, v in report["versions"].items()),
        "",
        "Parameters: " + "; ".join(f"{k}={v}" for k, v in p.items()),
        "",
        "## Targets",
        "",
        *targets_table(report["targets"]),
        "",
        "## Figures",
        "",
        "| figure | value | unit |",
        "|---|---:|---|",
        *(f"| {k} | {x['value']:g} | {x['unit']} |" for k, x in f.items()),
        "",
        "## Charts",
        "",
        *(f"![{name}]({name})" for name in PLOTS),
        "",
        "## Details",
        "",
        *(f"- **{k}**: `{json.dumps(v)}`" for k, v in report["details"].items()),
        "",
        *profiles_section(report.get("profiles")),
        "## How each figure was measured",
        "",
        *(f"- **{k}**: {v}" for k, v in report["methods"].items()),
    ]
    return "\n".join(lines) + "\n"


def profiles_section(profiles: Sequence[Mapping[str, Any]] | None) -> list[str]:
    """The markdown lines listing each flame graph (or why it is missing); none without
    --profile."""
    if profiles is None:
        return []
    lines = ["## Profiles", ""]
    for p in profiles:
        files = [f"[{label}]({p[key]})" for key, label in PROFILE_FILES if p[key]]
        said = ", ".join([*files, f"{p['samples']} samples"])
        missing = f"; missing: {p['error']}" if p["error"] else ""
        lines.append(f"- {p['phase']} {p['process']} (pid {p['pid']}): {said}{missing}")
    return [*lines, ""]


def targets_table(targets: Sequence[Mapping[str, Any]]) -> list[str]:
    """The markdown rows of a report's target lines (target, measured, met)."""
    return [
        "| target | measured | met |",
        "|---|---:|---|",
        *(f"| {t['target']} | {t['measured']} | {_met(t['met'])} |" for t in targets),
    ]


def _met(met: bool | None) -> str:
    return "n/a" if met is None else "yes" if met else "NO"


def write(report: dict[str, Any], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "report.md").write_text(markdown(report))
    return [out / "report.json", out / "report.md", *plots.write_all(report, out)]


def write_partial(figures: Mapping[str, Any], details: Mapping[str, Any], out: Path) -> None:
    """The figures so far, after each phase: a long run that stops early still tells."""
    found = {k: {"value": round(f.value, 4), "unit": f.unit} for k, f in figures.items()}
    text = json.dumps({"figures": found, "details": details}, indent=2, default=str)
    (out / "partial.json").write_text(text + "\n")
