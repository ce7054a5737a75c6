"""`python -m loadtest.apiload` runs end to end on a testbed of its own and writes its figures.

A small run (40 apps, 20 requests a second for 3 s): only the report's shape and the answers'
statuses are checked, never whether the latency target was met (benchmarks report figures;
tests check behaviour).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loadtest.apiload import MIX
from tests.support.paths import REPO_ROOT


@pytest.mark.timeout(600)
def test_apiload_sends_the_whole_mix_and_reports_percentiles_per_request_kind(
    tmp_path: Path, testbed_binaries: dict[str, Path]
) -> None:
    out = tmp_path / "out"
    command = [sys.executable, "-m", "loadtest.apiload", "--out", str(out)]
    command += ["--apps", "40", "--rps", "20", "--seconds", "3"]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=540)

    assert done.returncode == 0, done.stderr[-4000:]
    figures = json.loads((out / "apiload.json").read_text())
    params = {"apps": 40, "rps": 20.0, "seconds": 3.0, "workers": 1, "api_processes": 2}
    assert figures["params"] == params
    overall = figures["overall"]
    assert overall["count"] == 60
    assert {k: figures["kinds"][k]["count"] for k, _, _ in MIX} == {
        kind: round(share * 60) for kind, share, _ in MIX
    }
    assert overall["errors"] == 0, figures
    assert all(200 <= status < 300 for status in overall["statuses"]), overall["statuses"]
    for kind, _, _ in MIX:
        row = figures["kinds"][kind]
        assert row["count"] > 0, kind
        assert 0 < row["p50_ms"] <= row["p95_ms"] <= row["p99_ms"] <= row["max_ms"], kind
    assert isinstance(figures["meets_target"], bool)
    assert "| get_app |" in (out / "apiload.md").read_text()
    timeline = json.loads((out / "timeline.json").read_text())
    assert sum(row["requests"] for row in timeline["per_second"]) == 60
    assert [row["second"] for row in timeline["per_second"]] == [0, 1, 2]
    assert any(row["cpu"].get("api", 0) > 0 for row in timeline["per_second"]), timeline
    assert len(timeline["slowest"]) == 50
    assert abs(timeline["slowest"][0]["latency_ms"] - overall["max_ms"]) < 0.01
