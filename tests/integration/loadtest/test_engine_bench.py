"""The engine benchmark runs end to end on the session testbed and reports every figure.

Only the report's shape is checked: benchmarks report figures, tests never assert on time.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from loadtest.engine_bench import markdown
from tests.conftest import Cluster
from tests.support.paths import REPO_ROOT

PHASES = ("raw_apply", "raw_validated", "kubectl", "kubectl_novalidate", "cold_sync")
STAGES = ("source", "render", "order", "diff", "apply", "prune", "record", "other")
VERBS = ("get", "apply", "dry_run", "post", "put", "delete")
FIGURES = (
    *(f"{p}_{t}" for p in PHASES for t in ("objects_per_s", "seconds", "client_cpu_s_per_1k")),
    "cold_sync_vs_kubectl",
    "cold_sync_vs_kubectl_novalidate",
    "cold_sync_vs_raw",
    "cold_sync_vs_raw_validated",
    "raw_apply_vs_kubectl",
    *(f"cold_sync_stage_{s}_seconds" for s in STAGES),
    *(f"cold_sync_requests_{v}" for v in (*VERBS, "total")),
    *(f"cold_sync_request_seconds_{v}" for v in VERBS),
    "noop_seconds",
    "noop_writes",
    "noop_renders",
    *(f"noop_requests_{v}" for v in (*VERBS, "total")),
)


def test_engine_bench_writes_a_report_with_every_figure_for_a_small_run(
    tmp_path: Path, testbed: list[Cluster]
):
    clusters = tmp_path / "clusters.json"
    entries = [
        {"name": c.name, "server": c.server, "kubeconfig": str(c.kubeconfig)} for c in testbed
    ]
    clusters.write_text(json.dumps(entries))
    out = tmp_path / "out"
    command = [sys.executable, "-m", "loadtest.engine_bench", "--out", str(out)]
    command += ["--objects", "20", "--noop-objects", "10", "--rounds", "2"]
    command += ["--clusters-json", str(clusters)]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((out / "engine-report.json").read_text())
    assert set(report) == {"machine", "parameters", "figures", "rounds", "targets"}
    assert set(report["machine"]) == {"cores", "memory_gib", "python", "kubernetes"}
    assert report["parameters"]["objects"] == 20 and report["parameters"]["noop_objects"] == 10
    figures = report["figures"]
    missing = [name for name in FIGURES if name not in figures]
    assert missing == []
    for name, figure in figures.items():
        assert isinstance(figure["value"], int | float) and figure["unit"], name
    assert all(len(objects_per_s) == 2 for objects_per_s in report["rounds"].values())
    assert len(report["targets"]) == 4
    assert all(isinstance(t["met"], bool) for t in report["targets"])
    text = (out / "engine-report.md").read_text()
    assert text == markdown(report)
    assert all(f"| {name} |" in text for name in FIGURES)
    assert text in done.stdout
