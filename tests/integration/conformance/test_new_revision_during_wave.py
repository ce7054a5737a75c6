"""A push arriving while a sync waits on a wave cancels the wait and the sync re-plans with it.

Through the fleet: revision A's wave 0 holds a Deployment that can never become Available, so
the sync waits on it (with a timeout far longer than the test). A push (revision B, the
Deployment fixed) and its webhook trigger arrive meanwhile: the worker's sync stops waiting at
its next poll, re-plans at B, applies B's waves and prunes what B no longer declares; A's later
wave and A's prune never run. The sync's record (its job's answer, `gitfleet app history`) and
its trace say the wait was cancelled for B and the sync re-planned at B; the webhook's own
follow-up then finds B synced.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from fleet.control.registry.syncrecords import SyncRecord
from fleet.engine import sync
from fleet.engine.contract import NewerRequest
from fleet.kube.client import KubeClient
from fleet.model import Action, ObjectRef, SyncStatus, Trigger
from tests.integration.conformance.test_wave_timeout import stuck_deployment
from tests.integration.engine.sync_helpers import scenario_for
from tests.support import manifests as m
from tests.support.fleet import FleetEnv, wait_until
from tests.support.traces import trace_id_of

WAVE_1 = '  annotations:\n    gitfleet.io/sync-wave: "1"\n'


def test_a_push_while_a_wave_waits_cancels_the_wait_and_the_newer_revision_lands(
    fleet: FleetEnv, spans: InMemorySpanExporter
) -> None:
    app, cluster = fleet.app_name(0), sorted(fleet.clusters)[0]
    folder = f"apps/{app}"
    fleet.repo.commit(
        {
            f"{folder}/web.yaml": stuck_deployment("web"),
            f"{folder}/later.yaml": m.configmap("later", "rev: a", extra_meta=WAVE_1),
            f"{folder}/old.yaml": m.configmap("old"),
        }
    )
    fleet.add_app(app, cluster, automated=True, prune=True, timeout_s=300.0)
    fleet.worker_thread("alpha")
    started = time.monotonic()
    first = fleet.dispatcher.request_sync(app, cluster, trigger=Trigger.MANUAL)
    web = ObjectRef("apps", "v1", "Deployment", app, "web")
    wait_until(lambda: fleet.live(cluster, web) is not None, timeout=60, what="wave 0 applied")
    pushed = fleet.repo.commit(
        {
            f"{folder}/web.yaml": m.deployment("web"),
            f"{folder}/later.yaml": m.configmap("later", "rev: b", extra_meta=WAVE_1),
            f"{folder}/old.yaml": None,
        }
    )
    fleet.dispatcher.request_sync(app, cluster, trigger=Trigger.WEBHOOK)
    answer = fleet.dispatcher.wait(first, timeout=120)
    took = time.monotonic() - started
    assert answer is not None
    assert answer["result"] == "succeeded", answer
    assert answer["revision"] == pushed
    assert took < 100, f"the wait was not cancelled early ({took:.0f}s)"
    later = fleet.live(cluster, ObjectRef("", "v1", "ConfigMap", app, "later"))
    assert later is not None and later["data"] == {"rev": "b"}  # A's wave 1 never ran
    assert fleet.live(cluster, ObjectRef("", "v1", "ConfigMap", app, "old")) is None  # B pruned
    live_web = fleet.live(cluster, web)
    assert live_web is not None and "nodeSelector" not in live_web["spec"]["template"]["spec"]
    cancelled_for = f"the health wait of Sync wave 0 cancelled: revision HEAD ({pushed[:12]})"
    assert cancelled_for in answer["message"]
    assert f"the sync re-planned at {pushed[:12]}" in answer["message"]
    record = next(h for h in fleet.store.history(app, cluster) if h.trigger == Trigger.MANUAL)
    assert isinstance(record, SyncRecord)
    assert (record.revision, record.sync_status) == (pushed, SyncStatus.SYNCED)
    assert cancelled_for in record.message
    entries = {r.name: r for r in record.resources}
    assert entries["old"].action == Action.PRUNED
    syncs = [s for s in spans.get_finished_spans() if s.name == "gitfleet.sync"]
    cancelled = [
        e for s in syncs for e in s.events if e.name == "gitfleet.wait_cancelled" and e.attributes
    ]
    assert len(cancelled) == 1
    attributes = cancelled[0].attributes or {}
    assert attributes["gitfleet.newer_revision"] == pushed
    assert attributes["gitfleet.cancelled_revision"] != pushed
    wait_until(fleet.idle, timeout=60, what="the webhook's follow-up sync finished")
    status = fleet.status(app, cluster)
    assert (status.sync_status, status.revision) == (SyncStatus.SYNCED, pushed)


def test_the_engine_re_plans_at_the_newer_commit_its_caller_names(
    tmp_path: Path, kube: KubeClient, namespace: str, spans: InMemorySpanExporter
) -> None:
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit(
        {
            "app/web.yaml": stuck_deployment("web"),
            "app/later.yaml": m.configmap("later", "rev: a", extra_meta=WAVE_1),
        }
    )
    pushed: list[str] = []

    def newer() -> NewerRequest | None:
        """The worker's part, played here: a push lands once wave 0 waits."""
        if not pushed and s.get("apps/v1", "Deployment", "web") is not None:
            fixed = m.configmap("later", "rev: b", extra_meta=WAVE_1)
            pushed.append(
                s.repo.commit({"app/web.yaml": m.deployment("web"), "app/later.yaml": fixed})
            )
        return NewerRequest("HEAD", "push-1") if pushed else None

    result = sync.run(replace(s.request(timeout=120.0), newer=newer), kube=kube, caches=s.caches)
    assert result.error == "", result.error
    assert (result.revision, result.sync_status) == (pushed[0], SyncStatus.SYNCED)
    assert f"cancelled: revision HEAD ({pushed[0][:12]}) requested" in result.message
    assert s.get("v1", "ConfigMap", "later")["data"] == {"rev": "b"}
    traced = [x for x in spans.get_finished_spans() if trace_id_of(x) == result.trace_id]
    waves = [x for x in traced if x.name == "gitfleet.wave"]
    cancelled = [x for x in waves if x.attributes and "gitfleet.cancelled" in x.attributes]
    assert len(cancelled) == 1  # wave 0 of the first plan, ended by the push, not failed
    assert cancelled[0].status.status_code != StatusCode.ERROR
    assert [x.name for x in traced].count("gitfleet.apply") == 2  # the cancelled plan, then B's


def test_a_request_for_the_commit_already_synced_does_not_cancel_the_wait(
    tmp_path: Path, kube: KubeClient, namespace: str
) -> None:
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit({"app/web.yaml": stuck_deployment("web")})
    asked: list[str] = []

    def same() -> NewerRequest:
        asked.append("HEAD")
        return NewerRequest("HEAD", "tick-1")  # an interval tick: the same commit

    result = sync.run(replace(s.request(timeout=4.0), newer=same), kube=kube, caches=s.caches)
    assert asked  # asked at each poll of the wait
    assert result.error_stage == "health" and "cancelled" not in result.message
