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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.util import ns_to_iso_str
from opentelemetry.trace import SpanContext

_provider: TracerProvider | None = None


class FileSpanExporter(SpanExporter):
    """Appends each finished span as one JSON line (safe across processes: O_APPEND), in the
    shape of the SDK's `ReadableSpan.to_json`. Built directly and encoded with orjson: the
    SDK's own method indents, then re-parses the resource for every span, which made export
    most of what tracing cost a worker."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._resources: dict[int, tuple[Resource, dict[str, Any]]] = {}

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = b"".join(orjson.dumps(self._record(s), default=str) + b"\n" for s in spans)
        with self._lock, self.path.open("ab") as sink:
            sink.write(lines)
        return SpanExportResult.SUCCESS

    def _record(self, span: ReadableSpan) -> dict[str, Any]:
        status: dict[str, Any] = {"status_code": span.status.status_code.name}
        if span.status.description:
            status["description"] = span.status.description
        return {
            "name": span.name,
            "context": _context(span.context) if span.context else None,
            "kind": str(span.kind),
            "parent_id": f"0x{span.parent.span_id:016x}" if span.parent else None,
            "start_time": ns_to_iso_str(span.start_time) if span.start_time else None,
            "end_time": ns_to_iso_str(span.end_time) if span.end_time else None,
            "status": status,
            "attributes": dict(span.attributes or {}),
            "events": [
                {
                    "name": e.name,
                    "timestamp": ns_to_iso_str(e.timestamp),
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

    def _resource(self, resource: Resource) -> dict[str, Any]:
        known = self._resources.get(id(resource))
        if known is None or known[0] is not resource:
            known = (resource, json.loads(resource.to_json()))
            self._resources[id(resource)] = known
        return known[1]

    def shutdown(self) -> None:
        return None


def _context(context: SpanContext) -> dict[str, str]:
    return {
        "trace_id": f"0x{context.trace_id:032x}",
        "span_id": f"0x{context.span_id:016x}",
        "trace_state": repr(context.trace_state),
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
