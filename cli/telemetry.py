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

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

_provider: TracerProvider | None = None


class FileSpanExporter(SpanExporter):
    """Appends each finished span as one JSON line (safe across processes: O_APPEND)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = "".join(json.dumps(json.loads(s.to_json())) + "\n" for s in spans)
        with self._lock, self.path.open("a") as sink:
            sink.write(lines)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


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
