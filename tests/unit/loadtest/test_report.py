"""The markdown of the bench reports, written out in full for small reports."""

from __future__ import annotations

from typing import Any

from loadtest import engine_bench, report

TARGETS = [
    {"target": "shard max/mean <= 1.25", "measured": "1.045", "met": True},
    {"target": "cold sync >= 3x kubectl", "measured": "0.19x", "met": False},
    {"target": "10,000 apps Synced and Healthy < 300 s", "measured": "5 s", "met": None},
]
BENCH: dict[str, Any] = {
    "machine": {"cores": 2, "memory_gib": 23.5},
    "versions": {"kubernetes": "v1.35.0", "gitfleet": "0.1.0"},
    "parameters": {"preset": "small", "apps": 200},
    "figures": {
        "cold_sync_objects_per_s": {"value": 46.6, "unit": "objects/s"},
        "shard_max_over_mean": {"value": 1.045, "unit": "ratio"},
    },
    "targets": TARGETS,
    "details": {"sharding": {"workers": 2}},
    "methods": {"sharding": "OwnerMap.current()"},
}
BENCH_MARKDOWN = """# gitfleet bench

2 cores, 23.5 GiB; kubernetes v1.35.0, gitfleet 0.1.0

Parameters: preset=small; apps=200

## Targets

| target | measured | met |
|---|---:|---|
| shard max/mean <= 1.25 | 1.045 | yes |
| cold sync >= 3x kubectl | 0.19x | NO |
| 10,000 apps Synced and Healthy < 300 s | 5 s | n/a |

## Figures

| figure | value | unit |
|---|---:|---|
| cold_sync_objects_per_s | 46.6 | objects/s |
| shard_max_over_mean | 1.045 | ratio |

## Charts

![throughput.png](throughput.png)
![commit_to_converged.png](commit_to_converged.png)
![shards.png](shards.png)
![noop_cycle.png](noop_cycle.png)

## Details

- **sharding**: `{"workers": 2}`

## How each figure was measured

- **sharding**: OwnerMap.current()
"""
ENGINE: dict[str, Any] = {
    "machine": {"cores": 2, "memory_gib": 23.5, "python": "3.11.9", "kubernetes": "v1.35.0"},
    "parameters": {
        "kubectl": "v1.35.0",
        "objects": 500,
        "object": "1 KiB of data",
        "noop_objects": 100,
        "testbed": "kwok",
        "cluster": "c1",
        "cpu_pinning": "none",
        "rounds": 2,
        "load_average_1m": [0.5, 1.25],
    },
    "figures": {
        "cold_sync_objects_per_s": {"value": 400.0, "unit": "objects/s"},
        "raw_apply_vs_kubectl": {"value": 2.125, "unit": "x"},
    },
    "rounds": {"cold_sync": [390.5, 410.0]},
    "targets": TARGETS[:1],
}
ENGINE_MARKDOWN = """# gitfleet engine benchmark

2 cores, 23.5 GiB, Python 3.11.9, Kubernetes v1.35.0, kubectl v1.35.0; 500 ConfigMaps \
(1 KiB of data), no-op app of 100; kwok, cluster c1; CPU pinning: none; rounds: 2; \
1-minute load average 0.50 -> 1.25 (the machine may be shared).

| figure | value | unit |
|---|---:|---|
| cold_sync_objects_per_s | 400 | objects/s |
| raw_apply_vs_kubectl | 2.125 | x |

## Objects/s in each round

| phase | rounds |
|---|---|
| cold_sync | 390.5, 410 |

## Targets

| target | measured | met |
|---|---:|---|
| shard max/mean <= 1.25 | 1.045 | yes |

The raw SSA limit itself is 2.12x kubectl here: no engine that writes through this API server \
can beat kubectl by more.
"""


def test_the_bench_report_lists_targets_figures_charts_details_and_methods() -> None:
    assert report.markdown(BENCH) == BENCH_MARKDOWN


def test_the_engine_report_lists_figures_rounds_targets_and_the_raw_limit() -> None:
    assert engine_bench.markdown(ENGINE) == ENGINE_MARKDOWN


PROFILES = [
    {
        "phase": "cold_sync",
        "process": "worker-1",
        "pid": 41,
        "svg": "profiles/cold_sync-worker-1.svg",
        "collapsed": "profiles/cold_sync-worker-1.txt",
        "samples": 912,
        "error": None,
    },
    {
        "phase": "noop",
        "process": "api",
        "pid": 40,
        "svg": None,
        "collapsed": None,
        "samples": 0,
        "error": "Permission Denied",
    },
]


def test_a_profiled_report_lists_each_flame_graph_and_why_one_is_missing() -> None:
    text = report.markdown(BENCH | {"profiles": PROFILES})
    section = text.split("## Profiles\n\n", 1)[1].split("\n\n", 1)[0]
    assert section.splitlines() == [
        "- cold_sync worker-1 (pid 41): [flame graph](profiles/cold_sync-worker-1.svg), "
        "[collapsed stacks](profiles/cold_sync-worker-1.txt), 912 samples",
        "- noop api (pid 40): 0 samples; missing: Permission Denied",
    ]
    assert text.index("## Profiles") < text.index("## How each figure was measured")
