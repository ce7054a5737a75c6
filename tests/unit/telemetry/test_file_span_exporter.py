"""GITFLEET_TRACE_FILE lines have the shape of the SDK's own `ReadableSpan.to_json`."""

from __future__ import annotations

import json
from pathlib import Path

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode, use_span

from fleet.telemetry.sdk import FileSpanExporter


def test_each_span_is_one_line_equal_to_the_sdk_json(tmp_path: Path) -> None:
    sink = tmp_path / "traces.jsonl"
    provider = TracerProvider(resource=Resource.create({"service.name": "gitfleet-test"}))
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(sink)))
    tracer = provider.get_tracer("test")
    attributes = {"gitfleet.app": "shop"}
    # fixed stamps, none near a half microsecond, where the SDK's float rounding may go either
    # way (tests/unit/telemetry/test_span_stamps.py)
    at = 1_796_684_729_123_456_000
    o = tracer.start_span("gitfleet.sync", attributes=attributes, start_time=at)
    with use_span(o, end_on_exit=False):
        inner = tracer.start_span("gitfleet.apply", start_time=at + 1_000_100)
        inner.add_event("retry", {"attempt": 2}, timestamp=at + 2_000_900)
        inner.set_status(Status(StatusCode.ERROR, "conflict"))
        inner.end(end_time=at + 999_999_999_000)
    o.end(end_time=at + 1_000_000_000_000)
    lines = sink.read_text().splitlines()
    assert [json.loads(line) for line in lines] == [
        json.loads(inner.to_json()),  # type: ignore[attr-defined]
        json.loads(o.to_json()),  # type: ignore[attr-defined]
    ]
    assert json.loads(lines[0])["parent_id"] == json.loads(lines[1])["context"]["span_id"]
