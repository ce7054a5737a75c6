"""OpenTelemetry SDK setup for processes (the library uses only the API).

A provider is always installed so every sync has a real trace id to print; spans are exported
over OTLP/HTTP only when OTEL_EXPORTER_OTLP_ENDPOINT (or the traces-specific variable) is set,
and as JSON lines to a file when GITFLEET_TRACE_FILE is set (the demo uses this, so traces can
be read without running a collector).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanContext, SpanKind, StatusCode

_provider: TracerProvider | None = None
_KINDS = {kind: str(kind) for kind in SpanKind}  # an enum's str and name are slow to compute
_STATUS_CODES = {code: code.name for code in StatusCode}


class FileSpanExporter(SpanExporter):
    """Appends each finished span as one JSON line (safe across processes: O_APPEND), in the
    shape of the SDK's `ReadableSpan.to_json`. Built directly and encoded with orjson: the
    SDK's own method indents, then re-parses the resource for every span, which made export
    most of what tracing cost a worker. The resource is encoded once (an orjson fragment) and
    timestamps are formatted by `iso_of`, not the SDK's datetime formatting, which was a third
    of what exporting a span cost."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._resources: dict[int, tuple[Resource, orjson.Fragment]] = {}
        self._stamps = _Stamps()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = b"".join(orjson.dumps(self._record(s), default=str) + b"\n" for s in spans)
        with self._lock, self.path.open("ab") as sink:
            sink.write(lines)
        return SpanExportResult.SUCCESS

    def _record(self, span: ReadableSpan) -> dict[str, Any]:
        status: dict[str, Any] = {"status_code": _STATUS_CODES[span.status.status_code]}
        if span.status.description:
            status["description"] = span.status.description
        return {
            "name": span.name,
            "context": _context(span.context) if span.context else None,
            "kind": _KINDS[span.kind],
            "parent_id": f"0x{span.parent.span_id:016x}" if span.parent else None,
            "start_time": self._stamps.iso_of(span.start_time) if span.start_time else None,
            "end_time": self._stamps.iso_of(span.end_time) if span.end_time else None,
            "status": status,
            "attributes": dict(span.attributes or {}),
            "events": [
                {
                    "name": e.name,
                    "timestamp": self._stamps.iso_of(e.timestamp),
                    "attributes": dict(e.attributes or {}),
                }
                for e in span.events
            ],
            "links": [
                {"context": _context(link.context), "attributes": dict(link.attributes or {})}
                for link in span.links
            ],
            "resource": self._resource(span.resource),
        }

    def _resource(self, resource: Resource) -> orjson.Fragment:
        known = self._resources.get(id(resource))
        if known is None or known[0] is not resource:
            encoded = orjson.dumps(json.loads(resource.to_json()), default=str)
            known = (resource, orjson.Fragment(encoded))
            self._resources[id(resource)] = known
        return known[1]

    def shutdown(self) -> None:
        return None


class _Stamps:
    """Formats span timestamps (ns since the epoch, UTC) as the SDK's `ns_to_iso_str` does
    ("2026-12-07T23:05:29.304685Z", rounded to the nearest microsecond), keeping the formatted
    second of the last stamp: the spans of one batch fall within a few seconds, so the date is
    rarely formatted again. The SDK rounds through a float, this from the exact integer, so
    the two can differ by a microsecond when a stamp falls within 0.25 us of a half."""

    def __init__(self) -> None:
        self._last = (-1, "")  # (second, its formatted date): one tuple, read and set whole,
        # so a thread never pairs one second with another's date

    def iso_of(self, nanoseconds: int) -> str:
        second, micro = divmod((nanoseconds + 500) // 1000, 1_000_000)
        last = self._last
        if last[0] != second:
            last = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
            self._last = last
        return f"{last[1]}.{micro:06d}Z"


def _context(context: SpanContext) -> dict[str, str]:
    state = context.trace_state
    return {
        "trace_id": f"0x{context.trace_id:032x}",
        "span_id": f"0x{context.span_id:016x}",
        "trace_state": repr(state) if state else "[]",
    }


def setup_tracing(service: str) -> TracerProvider:
    """Install the global tracer provider once per process and return it."""
    global _provider
    if _provider is not None:
        return _provider
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        _provider = current
        return current
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    ):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    if os.environ.get("GITFLEET_TRACE_FILE"):
        exporter = FileSpanExporter(Path(os.environ["GITFLEET_TRACE_FILE"]))
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    _provider = provider
    return provider


def flush() -> None:
    if _provider is not None:
        _provider.force_flush(timeout_millis=5000)
