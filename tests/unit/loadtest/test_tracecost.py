"""Which collapsed stacks count as the span exporter's CPU (`loadtest.tracecost`)."""

from __future__ import annotations

from pathlib import Path

from loadtest.profiling import stacks
from loadtest.tracecost import ExportShare, export_share, export_tail_s, exports, file_share

SYNC = "Thread.run (threading.py:982);run (fleet/engine/sync.py:77)"
ENDING = SYNC + ";Span.end (sdk/trace/__init__.py:1);BatchSpanProcessor.on_end (x.py:2)"
QUEUEING = SYNC + ";SynchronousMultiSpanProcessor.on_end (a.py:1);BatchProcessor.emit (b.py:3)"
EXPORTING = (
    "Thread.run (threading.py:982);BatchProcessor.worker (b.py:9);"
    "FileSpanExporter.export (fleet/telemetry/sdk.py:41);dumps (json.py:1)"
)
SPANS_ONLY = SYNC + ";Tracer.start_span (sdk/trace/__init__.py:1)"


def test_the_processor_queue_and_the_exporters_count_and_making_spans_does_not() -> None:
    assert exports(ENDING) and exports(QUEUEING) and exports(EXPORTING)
    assert not exports(SYNC) and not exports(SPANS_ONLY)
    # a name that merely contains a marker is not a match: frames are compared by their start
    assert not exports(SYNC + ";MyBatchProcessor.run (m.py:1)")


def test_the_share_weighs_each_stack_by_its_count_and_skips_lines_that_are_not_stacks(
    tmp_path: Path,
) -> None:
    lines = [f"{SYNC} 90\n", f"{EXPORTING} 6\n", f"{QUEUEING} 4\n", "garbage\n", "\n", f"{SYNC} x"]
    (tmp_path / "stacks.txt").write_text("".join(lines))
    found = file_share(tmp_path / "stacks.txt")
    assert export_share(stacks(tmp_path / "stacks.txt")) == found
    assert found == ExportShare(samples=100, exporting=10)
    assert found.share == 0.1
    assert (found + ExportShare(100, 0)).share == 0.05
    assert ExportShare(0, 0).share == 0.0


def test_a_missing_file_has_no_samples_and_a_written_one_is_read(tmp_path: Path) -> None:
    assert file_share(tmp_path / "absent.txt") == ExportShare(0, 0)
    written = tmp_path / "round1-on-worker-1.txt"
    written.write_text(f"{SYNC} 7\n{ENDING} 3\n")
    assert file_share(written) == ExportShare(10, 3)


def test_the_profile_outlasts_the_batch_processors_timer_by_a_second() -> None:
    assert export_tail_s({}) == 6.0  # the SDK's default: every 5 s
    assert export_tail_s({"OTEL_BSP_SCHEDULE_DELAY": "500"}) == 1.5
    assert export_tail_s({"OTEL_BSP_SCHEDULE_DELAY": "soon"}) == 6.0  # the SDK ignores it too
