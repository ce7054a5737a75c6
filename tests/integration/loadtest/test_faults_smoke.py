"""`gitfleet bench --preset faults` runs end to end and writes a complete faults.json.

One fault (the API killed with SIGKILL and started again), `--quick` durations, four apps on
the session's testbed (`--clusters-json`), so it stays under a minute. Only the shape of the
file is checked, and the invariants that must be zero whatever the timing: benchmarks report
figures, tests never assert on how long recovery took.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import REPO_ROOT

FIGURES = (
    "outage_s",
    "detect_s",
    "recover_s",
    "syncs_lost",
    "syncs_duplicated",
    "objects_wrongly_written",
    "objects_wrongly_pruned",
    "records_lost",
)


@pytest.mark.timeout(300)
def test_the_faults_preset_measures_one_fault_and_writes_faults_json(
    testbed: list[Any], tmp_path: Path
) -> None:
    listing = tmp_path / "clusters.json"
    cluster = testbed[0]
    entry = {"name": cluster.name, "server": cluster.server, "kubeconfig": str(cluster.kubeconfig)}
    listing.write_text(json.dumps([entry]))
    out = tmp_path / "out"
    command = [sys.executable, "-m", "cli.main", "bench", "--preset", "faults", "--quick"]
    command += ["--fault", "api-kill", "--apps", "4", "--clusters", "1"]
    command += ["--clusters-json", str(listing), "--out", str(out)]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads((out / "faults.json").read_text())
    assert report["settings"]["quick"] and report["settings"]["apps"] == 4
    assert "detect_s" in report["methods"]
    [fault] = report["faults"]
    assert fault["fault"] == "api-kill"
    assert all(name in fault for name in FIGURES)
    assert fault["detect_s"] is not None and fault["recover_s"] is not None
    zeros = ("syncs_duplicated", "objects_wrongly_written", "objects_wrongly_pruned")
    assert {name: fault[name] for name in (*zeros, "records_lost")} == dict.fromkeys(
        (*zeros, "records_lost"), 0
    )
    assert report["totals"]["records_lost"] == 0
