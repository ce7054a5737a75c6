"""Every sync is one trace: a root span, a child per stage and a span per wave."""

from __future__ import annotations

from pathlib import Path

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from fleet.kube.client import KubeClient
from tests.integration.engine.sync_helpers import scenario_for
from tests.support import manifests as m
from tests.support.traces import trace_id_of


def test_a_sync_is_one_trace_with_a_span_per_stage_and_per_wave(
    tmp_path: Path, kube: KubeClient, namespace: str, spans: InMemorySpanExporter
):
    s = scenario_for(tmp_path, kube, namespace)
    wave1 = '  annotations:\n    gitfleet.io/sync-wave: "1"\n'
    s.repo.commit(
        {"app/a.yaml": m.configmap("a"), "app/b.yaml": m.configmap("b", extra_meta=wave1)}
    )
    result = s.sync(prune=True)
    assert result.error == ""
    trace_spans = [sp for sp in spans.get_finished_spans() if trace_id_of(sp) == result.trace_id]
    names = [sp.name for sp in trace_spans]
    for stage in ("sync", "source", "render", "order", "diff", "apply", "prune", "record"):
        assert names.count(f"gitfleet.{stage}") == 1, names
    assert names.count("gitfleet.wave") == 2
    root = next(sp for sp in trace_spans if sp.name == "gitfleet.sync")
    assert root.parent is None
    assert root.attributes is not None
    assert root.attributes["gitfleet.app"] == s.app
    assert root.attributes["gitfleet.cluster"] == kube.name
    assert root.attributes["gitfleet.revision"] == result.revision
    assert root.attributes["gitfleet.outcome"] == "succeeded"
    stages = [sp for sp in trace_spans if sp.name not in ("gitfleet.sync", "gitfleet.wave")]
    assert all(sp.parent is not None and sp.parent.span_id == root.context.span_id for sp in stages)
    render = next(sp for sp in trace_spans if sp.name == "gitfleet.render")
    assert render.attributes is not None and render.attributes["gitfleet.objects"] == 2


def test_a_failed_sync_marks_its_root_span_as_an_error(
    tmp_path: Path, kube: KubeClient, namespace: str, spans: InMemorySpanExporter
):
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit({"app/a.yaml": "kind: [unclosed\n"})
    result = s.sync()
    root = next(
        sp
        for sp in spans.get_finished_spans()
        if sp.name == "gitfleet.sync" and trace_id_of(sp) == result.trace_id
    )
    assert root.status.status_code.name == "ERROR"
    assert "app/a.yaml" in (root.status.description or "")
