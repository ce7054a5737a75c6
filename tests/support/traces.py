"""Reading finished spans in tests."""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan


def trace_id_of(span: ReadableSpan) -> str:
    """The span's trace id as 32 hex digits, as gitfleet reports it (`trace_id` in records)."""
    assert span.context is not None
    return format(span.context.trace_id, "032x")
