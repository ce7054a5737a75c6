"""GITFLEET_TRACE_FILE lines have the shape of the SDK's own `ReadableSpan.to_json`."""

from __future__ import annotations

import json
from pathlib import Path

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode

from fleet.telemetry.sdk import FileSpanExporter


def test_each_span_is_one_line_equal_to_the_sdk_json(tmp_path: Path) -> None:
    sink = tmp_path / "traces.jsonl"
    provider = TracerProvider(resource=Resource.create({"service.name": "gitfleet-test"}))
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(sink)))
    tracer = provider.get_tracer("test")
    attributes = {"gitfleet.app": "shop"}
    with (
        tracer.start_as_current_span("gitfleet.sync", attributes=attributes) as o,
        tracer.start_as_current_span("gitfleet.apply") as inner,
    ):
        inner.add_event("retry", {"attempt": 2})
        inner.set_status(Status(StatusCode.ERROR, "conflict"))
    lines = sink.read_text().splitlines()
    assert [json.loads(line) for line in lines] == [
        json.loads(inner.to_json()),  # type: ignore[attr-defined]
        json.loads(o.to_json()),  # type: ignore[attr-defined]
    ]
    assert json.loads(lines[0])["parent_id"] == json.loads(lines[1])["context"]["span_id"]
