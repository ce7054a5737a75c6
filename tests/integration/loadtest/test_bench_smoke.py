"""`gitfleet bench` runs end to end, on a testbed of its own, and writes a complete report.

This is the small preset itself (200 one-object apps, 2 clusters, 2 workers, 20 monorepo
commits), about three minutes on a 2-core machine. Only the report's shape is checked:
benchmarks report figures, tests never assert on wall-clock time or on whether a target was
met.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loadtest.report import markdown
from tests.support.paths import REPO_ROOT

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SECTIONS = {"machine", "versions", "parameters", "figures", "targets", "details", "methods"}
FIGURES = (  # the headline figures every report carries
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
)
CHARTS = ("throughput.png", "commit_to_converged.png", "shards.png", "noop_cycle.png")


def run_bench(out: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "cli.main", "bench", "--preset", "small", "--out", str(out)]
    return subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=840)


@pytest.mark.timeout(900)
def test_bench_writes_every_figure_with_a_unit_and_every_chart_as_a_png(
    tmp_path: Path, testbed_binaries: dict[str, Path]
) -> None:
    out = tmp_path / "out"
    done = run_bench(out)
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads((out / "report.json").read_text())
    assert set(report) >= SECTIONS
    assert report["machine"]["cores"] >= 1 and report["machine"]["memory_gib"] > 0
    assert {"kubernetes", "kubectl", "gitfleet", "python"} <= set(report["versions"])
    params = report["parameters"]
    assert (params["apps"], params["clusters"], params["workers"]) == (200, 2, 2)
    assert (params["preset"], params["objects_per_app"], params["commits"]) == ("small", 1, 20)
    figures = report["figures"]
    assert [name for name in FIGURES if name not in figures] == []
    for name, figure in figures.items():
        value, unit = figure["value"], figure["unit"]
        assert isinstance(value, int | float) and not isinstance(value, bool), name
        assert isinstance(unit, str) and unit.strip(), name
    assert len(report["targets"]) == 12
    stages = report["details"]["cold_sync"]["stages"]  # read back from the workers' trace file
    assert {"gitfleet.sync", "gitfleet.render", "gitfleet.apply"} <= set(stages)
    assert all(t["met"] in (True, False, None) and t["measured"] for t in report["targets"])
    for phase in ("cold_sync", "noop"):  # Redis commands: the sum and what it is made of
        redis = report["details"][phase]["redis"]
        assert redis["per_app_by_command"], phase  # a sync or a check runs some commands
        assert redis["server_commands"] > redis["bench_own_commands"] > 0, phase
    assert figures["redis_ops_per_cold_sync"]["unit"] == "Redis commands per app"
    # the tracing rounds' own profiles: the exporter's share is read where it runs, and a
    # worker without an exporter has no sample in the export path
    exporter = report["details"]["tracing"]["exporter_samples"]
    assert exporter["on"]["samples"] > 0 and exporter["off"]["samples"] > 0
    assert exporter["off"]["exporting"] == 0
    share = exporter["on"]["exporting"] / exporter["on"]["samples"]
    assert figures["tracing_exporter_cpu_share"]["value"] == pytest.approx(share, abs=1e-4)
    assert "profiles" not in report and not (out / "profiles").exists()  # no --profile
    for name in CHARTS:
        assert (out / name).read_bytes().startswith(PNG_SIGNATURE), name
    text = (out / "report.md").read_text()
    assert text == markdown(report)
    assert all(f"| {name} |" in text for name in FIGURES)
