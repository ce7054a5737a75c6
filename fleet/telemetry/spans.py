"""Tracing for the pipeline, on the OpenTelemetry API only.

The SDK (provider, exporters) is set up by the process entry points (`fleet.telemetry.sdk`); without
it every span is a no-op and the trace id is all zeros. Spans are named `gitfleet.<stage>`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode

tracer = trace.get_tracer("gitfleet")


@contextmanager
def stage(name: str, **attributes: Any) -> Iterator[Span]:
    """A child span for one stage; an exception is recorded on it and re-raised."""
    with tracer.start_as_current_span(
        f"gitfleet.{name}", attributes=_clean(attributes), record_exception=True
    ) as span:
        yield span


def trace_id_of(span: Span) -> str:
    ctx = span.get_span_context()
    return format(ctx.trace_id, "032x") if ctx.trace_id else ""


def current_trace_id() -> str:
    """The trace id of the current context ("" outside any trace)."""
    return trace_id_of(trace.get_current_span())


def mark_failed(span: Span, message: str) -> None:
    span.set_status(Status(StatusCode.ERROR, message))


def _clean(attributes: dict[str, Any]) -> dict[str, Any]:
    return {f"gitfleet.{k}": v for k, v in attributes.items() if v is not None}
