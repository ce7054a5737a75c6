"""The engine benchmark runs end to end on the session testbed and reports every figure.

Only the report's shape is checked: benchmarks report figures, tests never assert on time.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from loadtest.engine_bench import FIGURE_NAMES, markdown
from tests.conftest import Cluster
from tests.support.paths import REPO_ROOT


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
    missing = [name for name in FIGURE_NAMES if name not in figures]
    assert missing == []
    for name, figure in figures.items():
        assert isinstance(figure["value"], int | float) and figure["unit"], name
    assert all(len(objects_per_s) == 2 for objects_per_s in report["rounds"].values())
    assert len(report["targets"]) == 4
    assert all(isinstance(t["met"], bool) for t in report["targets"])
    text = (out / "engine-report.md").read_text()
    assert text == markdown(report)
    assert all(f"| {name} |" in text for name in FIGURE_NAMES)
    assert text in done.stdout
