"""OpenTelemetry SDK setup for processes (the library uses only the API).

A provider is always installed so every sync has a real trace id to print; spans are exported
over OTLP/HTTP only when OTEL_EXPORTER_OTLP_ENDPOINT (or the traces-specific variable) is set.
"""

from __future__ import annotations

import os

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

_provider: TracerProvider | None = None


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
    trace.set_tracer_provider(provider)
    _provider = provider
    return provider


def flush() -> None:
    if _provider is not None:
        _provider.force_flush(timeout_millis=5000)
