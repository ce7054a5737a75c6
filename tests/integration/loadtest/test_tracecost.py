"""The exporter's share of a real Python process's profile (`loadtest.tracecost`), from py-spy
`--gil` through `loadtest.profiling`: a process that ends spans with gitfleet's file exporter
behind a batch processor has samples in the export path; the same process with no exporter has
none. This pins `EXPORT_FRAMES` to the frame names the installed OpenTelemetry SDK really has."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from loadtest.profiling import Profiler
from loadtest.tracecost import ExportShare, file_share
from tests.support.paths import REPO_ROOT

# makes spans the way a sync does (nested, with attributes), for a while, then exits
SPANS = """
import sys, time
from pathlib import Path
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from fleet.telemetry.sdk import FileSpanExporter
provider = TracerProvider()
if sys.argv[2] != "-":
    provider.add_span_processor(BatchSpanProcessor(FileSpanExporter(Path(sys.argv[2]))))
tracer = provider.get_tracer("test")
print("ready", flush=True)
sys.stdin.readline()
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    with tracer.start_as_current_span("gitfleet.sync") as span:
        span.set_attribute("gitfleet.app", "a")
        for stage in ("source", "render", "apply"):
            with tracer.start_as_current_span(f"gitfleet.{stage}"):
                sum(range(2_000))
provider.shutdown()
"""


def profiled_share(tmp_path: Path, name: str, trace_file: str) -> ExportShare:
    child = subprocess.Popen(
        [sys.executable, "-c", SPANS, "2", trace_file],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        profiler = Profiler(tmp_path / "profiles", tmp_path / "logs", rate=100, formats=("raw",))
        profiler.start(name, {"worker": child.pid})
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.wait(timeout=60) == 0
        [profile] = profiler.stop()
    finally:
        child.kill()
    assert profile.error is None and profile.svg is None, profile  # raw only, as asked
    assert profile.collapsed is not None
    return file_share(tmp_path / profile.collapsed)


def test_a_process_exporting_spans_has_samples_in_the_export_path(tmp_path: Path) -> None:
    found = profiled_share(tmp_path, "on", str(tmp_path / "spans.jsonl"))
    assert found.samples > 20
    assert found.exporting > 0
    assert (tmp_path / "spans.jsonl").stat().st_size > 0  # it really exported


def test_the_same_process_without_an_exporter_has_none(tmp_path: Path) -> None:
    found = profiled_share(tmp_path, "off", "-")
    assert found.samples > 20
    assert found.exporting == 0


def test_a_profiler_must_write_the_collapsed_stacks_it_counts_samples_from(
    tmp_path: Path,
) -> None:
    with pytest.raises(ValueError, match="raw"):
        Profiler(tmp_path, tmp_path, formats=("flamegraph",))
