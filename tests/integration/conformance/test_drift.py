"""Drift as Argo CD users expect it: `kubectl scale` and `kubectl edit` on a self-healing app.

`kubectl scale` writes the `/scale` subresource, whose managedFields entry cannot tell "who
wrote last" (no timestamp, or one tied with gitfleet's apply); `kubectl edit` is a plain update
by another manager. Both take a field gitfleet declared away from gitfleet's field manager, and
both are reverted: by `gitfleet sync` (the engine's diff) and, in the fleet, by self-heal within
seconds, with the drift record in the status naming the manager that changed each field.
Replicas a real HorizontalPodAutoscaler owns (the testbed's HPA controller scaling through
`/scale`) are left alone when the app ignores the HPA's manager; without that rule the HPA's
write is drift named by its manager. The sync's own prune, recreate and hooks are neither drift
nor activity that keeps the next check from being quiet.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from fleet.engine.diff.compare import IgnoreRules
from fleet.kube.client import KubeClient
from fleet.model import ObjectRef, Trigger
from tests.integration.engine.sync_helpers import scenario_for
from tests.support import manifests as m
from tests.support.fleet import FleetEnv, WorkerThread, wait_until
from tests.support.traces import trace_id_of

HPA_MANAGER = "kube-controller-manager"  # the HPA controller writes /scale as this manager


def web_ref(namespace: str) -> ObjectRef:
    return ObjectRef("apps", "v1", "Deployment", namespace, "web")


def kubectl_scale(
    kube: KubeClient, ref: ObjectRef, replicas: int, manager: str = "kubectl"
) -> None:
    """What `kubectl scale deployment web --replicas=N` sends: a patch of the /scale
    subresource."""
    kube.request(
        "PATCH",
        kube.object_path(ref) + "/scale",
        body={"spec": {"replicas": replicas}},
        params={"fieldManager": manager},
        content_type="application/merge-patch+json",
    )


def kubectl_edit(kube: KubeClient, ref: ObjectRef, image: str) -> None:
    """What `kubectl edit` sends: an update of the object by the `kubectl-edit` manager."""
    live = kube.get(ref)
    assert live is not None
    live["spec"]["template"]["spec"]["containers"][0]["image"] = image
    kube.request("PUT", kube.object_path(ref), body=live, params={"fieldManager": "kubectl-edit"})


def _replicas(obj: dict[str, Any] | None) -> Any:
    return (obj or {}).get("spec", {}).get("replicas")


def _image(obj: dict[str, Any] | None) -> Any:
    return (
        (obj or {})
        .get("spec", {})
        .get("template", {})
        .get("spec", {})
        .get("containers")[0]["image"]
    )


# -- through `gitfleet sync` (the engine) ----------------------------------------------------


def test_gitfleet_sync_sees_and_reverts_a_scale_subresource_write(
    tmp_path: Any, kube: KubeClient, namespace: str
) -> None:
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit({"app/deploy.yaml": m.deployment("web", replicas=2)})
    first = s.sync(timeout=10.0)
    assert first.error == "", first.error
    kubectl_scale(kube, web_ref(namespace), 5)
    scaled = kube.get(web_ref(namespace))
    assert _replicas(scaled) == 5
    scale_entries = [
        e for e in scaled["metadata"]["managedFields"] if e.get("subresource") == "scale"
    ]
    assert scale_entries and scale_entries[0]["manager"] == "kubectl"
    again = s.sync(timeout=10.0)
    assert again.error == "", again.error
    web = next(r for r in again.resources if r.ref.kind == "Deployment")
    assert web.action == "configured"  # the diff saw the /scale write as drift
    assert _replicas(kube.get(web_ref(namespace))) == 2


def test_gitfleet_sync_leaves_replicas_an_ignored_manager_owns(
    tmp_path: Any, kube: KubeClient, namespace: str
) -> None:
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit({"app/deploy.yaml": m.deployment("web", replicas=2)})
    assert s.sync(timeout=10.0).error == ""
    kubectl_scale(kube, web_ref(namespace), 4, manager=HPA_MANAGER)
    ignore = IgnoreRules(managers=(HPA_MANAGER,))
    again = s.sync(timeout=10.0, ignore=ignore)
    assert again.error == "", again.error
    web = next(r for r in again.resources if r.ref.kind == "Deployment")
    assert web.action == "unchanged"
    assert _replicas(kube.get(web_ref(namespace))) == 4


# -- through the fleet (real workers, self-heal) ----------------------------------------------


def _one_app(fleet: FleetEnv, **policy: Any) -> tuple[str, str]:
    app, cluster = fleet.app_name(0), sorted(fleet.clusters)[0]
    fleet.commit_apps([app])
    fleet.add_app(app, cluster, **policy)
    return app, cluster


def _watching(worker: WorkerThread, cluster: str, app: str) -> bool:
    selfheal = worker.process.selfheal
    assert selfheal is not None
    watch = selfheal.watch_cache(cluster, "apps/v1", "Deployment")
    return watch is not None and watch.get(app, "web") is not None


def _client(fleet: FleetEnv, cluster: str) -> KubeClient:
    client: KubeClient = fleet.clusters[cluster].client()
    return client


def _drift_fields(fleet: FleetEnv, app: str, cluster: str) -> dict[str, str]:
    return {d.field: d.manager for d in fleet.status(app, cluster).drift}


def test_self_heal_reverts_kubectl_scale_and_names_the_manager(
    fleet: FleetEnv, spans: InMemorySpanExporter
) -> None:
    app, cluster = _one_app(fleet, automated=True, self_heal=True)
    worker = fleet.worker_thread("alpha")
    assert fleet.sync_and_wait(app, cluster)["result"] == "succeeded"
    wait_until(lambda: _watching(worker, cluster, app), timeout=30, what="the watch")
    kube = _client(fleet, cluster)
    try:
        kubectl_scale(kube, web_ref(app), 5)
        took = wait_until(
            lambda: (
                _replicas(kube.get(web_ref(app))) == 1
                and len(fleet.store.history(app, cluster)) >= 2
            ),
            timeout=60,
            what="self-heal to revert the scale",
        )
    finally:
        kube.close()
    print(f"\nself-heal reverted kubectl scale in {took:.1f}s")
    heal = fleet.store.history(app, cluster)[0]
    assert (heal.trigger, heal.result) == ("self-heal", "succeeded")
    assert _drift_fields(fleet, app, cluster) == {"spec.replicas": "kubectl"}
    drift = fleet.status(app, cluster).drift[0]
    assert (drift.kind, drift.name, drift.subresource, drift.self_heal) == (
        "Deployment",
        "web",
        "scale",
        True,
    )
    [heal_span] = [s for s in spans.get_finished_spans() if s.name == "gitfleet.self-heal"]
    assert heal_span.attributes is not None
    assert heal_span.attributes["gitfleet.drift"] == (
        f"Deployment/{app}/web spec.replicas changed by kubectl via /scale"
    )
    assert heal.trace_id == trace_id_of(heal_span)  # the heal sync joined the self-heal trace


def test_self_heal_reverts_kubectl_edit_and_names_the_manager(fleet: FleetEnv) -> None:
    app, cluster = _one_app(fleet, automated=True, self_heal=True)
    worker = fleet.worker_thread("alpha")
    assert fleet.sync_and_wait(app, cluster)["result"] == "succeeded"
    wait_until(lambda: _watching(worker, cluster, app), timeout=30, what="the watch")
    kube = _client(fleet, cluster)
    try:
        kubectl_edit(kube, web_ref(app), "example.com/web:edited")
        wait_until(
            lambda: (
                _image(kube.get(web_ref(app))) == "example.com/web:1"
                and len(fleet.store.history(app, cluster)) >= 2
            ),
            timeout=60,
            what="self-heal to revert the edit",
        )
    finally:
        kube.close()
    assert fleet.store.history(app, cluster)[0].trigger == "self-heal"
    fields = _drift_fields(fleet, app, cluster)
    assert fields == {"spec.template.spec.containers[name=app].image": "kubectl-edit"}


def _hpa(namespace: str, minimum: int) -> dict[str, Any]:
    """An HPA on `web` whose minimum is above its replicas: the HPA controller scales the
    Deployment up through /scale at once, metrics or not."""
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": minimum,
            "maxReplicas": minimum + 2,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 80},
                    },
                }
            ],
        },
    }


def _scaled_by(obj: dict[str, Any] | None) -> set[str]:
    entries = (obj or {}).get("metadata", {}).get("managedFields") or []
    return {e["manager"] for e in entries if e.get("subresource") == "scale"}


def test_replicas_an_hpa_owns_are_left_alone_when_the_app_ignores_its_manager(
    fleet: FleetEnv,
) -> None:
    from fleet.control.registry.records import IgnoreDifference

    ignore = (IgnoreDifference(managers=(HPA_MANAGER,)),)
    app, cluster = _one_app(fleet, automated=True, self_heal=True, ignore_differences=ignore)
    worker = fleet.worker_thread("alpha")
    assert fleet.sync_and_wait(app, cluster)["result"] == "succeeded"
    wait_until(lambda: _watching(worker, cluster, app), timeout=30, what="the watch")
    selfheal = worker.process.selfheal
    assert selfheal is not None
    kube = _client(fleet, cluster)
    try:
        kube.create(_hpa(app, 3), manager="platform-team")  # the testbed's HPA controller acts
        wait_until(
            lambda: _replicas(kube.get(web_ref(app))) == 3,
            timeout=90,
            what="the HPA controller to scale web up to its minimum",
        )
        assert _scaled_by(kube.get(web_ref(app))) == {HPA_MANAGER}
        wait_until(lambda: selfheal.seen["ignored"] >= 1, timeout=30, what="the HPA's write")
        assert selfheal.flush(now=float("inf")) == []  # nothing is waiting to heal
        assert fleet.idle()
        # a manual sync applies the rest and still leaves the HPA's replicas alone
        synced = fleet.sync_and_wait(app, cluster)
        assert (synced["result"], synced["sync_status"]) == ("succeeded", "Synced"), synced
        assert _replicas(kube.get(web_ref(app))) == 3
    finally:
        kube.close()
    assert [h.trigger for h in fleet.store.history(app, cluster)] == ["manual", "manual"]
    assert fleet.status(app, cluster).drift == ()


def test_without_the_ignore_rule_an_hpa_write_is_drift_named_by_the_hpa_manager(
    fleet: FleetEnv,
) -> None:
    app, cluster = _one_app(fleet)  # neither automated nor self-healing: reported only
    worker = fleet.worker_thread("alpha")
    assert fleet.sync_and_wait(app, cluster)["result"] == "succeeded"
    wait_until(lambda: _watching(worker, cluster, app), timeout=30, what="the watch")
    kube = _client(fleet, cluster)
    try:
        kube.create(_hpa(app, 2), manager="platform-team")
        wait_until(
            lambda: _drift_fields(fleet, app, cluster) == {"spec.replicas": HPA_MANAGER},
            timeout=90,
            what="the HPA's scaling to be reported as drift",
        )
    finally:
        kube.close()
    assert fleet.status(app, cluster).sync_status == "OutOfSync"


HOOK_MARKER = """apiVersion: v1
kind: ConfigMap
metadata:
  name: marker
  annotations:
    argocd.argoproj.io/hook: PostSync
    argocd.argoproj.io/hook-delete-policy: BeforeHookCreation
data: {ran: "yes"}
"""


SEED_JOB = """apiVersion: batch/v1
kind: Job
metadata:
  generateName: seed-
  annotations:
    argocd.argoproj.io/hook: PostSync
    argocd.argoproj.io/hook-delete-policy: HookSucceeded
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: run
          image: example.com/seed:1
"""


def _immutable(value: str) -> str:
    return f"""apiVersion: v1
kind: ConfigMap
metadata:
  name: swap
  annotations:
    gitfleet.io/sync-options: Replace=true
immutable: true
data: {{k: {value}}}
"""


def _quiet(fleet: FleetEnv, app: str, cluster: str) -> bool:
    return fleet.sync_and_wait(app, cluster, Trigger.INTERVAL)["result"] == "unchanged"


def test_the_syncs_own_prune_recreate_and_hooks_are_neither_drift_nor_activity(
    fleet: FleetEnv,
) -> None:
    app, cluster = fleet.app_name(0), sorted(fleet.clusters)[0]
    fleet.repo.commit(  # no workload: kwok's node flaps would move its status (activity)
        {
            f"apps/{app}/cm.yaml": m.configmap("settings", "k: v1"),
            f"apps/{app}/old.yaml": m.configmap("old"),
            f"apps/{app}/swap.yaml": _immutable("v1"),
            f"apps/{app}/marker.yaml": HOOK_MARKER,
            f"apps/{app}/seed.yaml": SEED_JOB,
        }
    )
    fleet.add_app(app, cluster, automated=True, self_heal=True, prune=True)
    worker = fleet.worker_thread("alpha")
    selfheal = worker.process.selfheal
    assert selfheal is not None
    assert fleet.sync_and_wait(app, cluster)["result"] == "succeeded"
    wait_until(lambda: _quiet(fleet, app, cluster), timeout=60, what="a quiet periodic check")
    swap = ObjectRef("", "v1", "ConfigMap", app, "swap")
    old_uid = fleet.live(cluster, swap)["metadata"]["uid"]

    # a push that prunes one object, recreates another (immutable + Replace) and runs the hooks
    # (a ConfigMap replaced before each run, a Job deleted once it succeeded)
    fleet.repo.commit({f"apps/{app}/old.yaml": None, f"apps/{app}/swap.yaml": _immutable("v2")})
    pushed = fleet.sync_and_wait(app, cluster, Trigger.WEBHOOK)
    assert (pushed["result"], pushed["sync_status"]) == ("succeeded", "Synced"), pushed
    assert fleet.live(cluster, ObjectRef("", "v1", "ConfigMap", app, "old")) is None
    recreated = fleet.live(cluster, swap)
    assert recreated["data"] == {"k": "v2"} and recreated["metadata"]["uid"] != old_uid
    assert fleet.live(cluster, ObjectRef("", "v1", "ConfigMap", app, "marker")) is not None

    # nothing the sync did counts: the next periodic check is quiet at once, nothing heals
    periodic = fleet.sync_and_wait(app, cluster, Trigger.INTERVAL)
    assert periodic["result"] == "unchanged", (periodic, selfheal.seen)
    assert selfheal.seen["drift"] == 0
    assert selfheal.seen["hook"] >= 1 and selfheal.seen["own"] >= 1
    assert selfheal.flush(now=float("inf")) == []
    assert [h.trigger for h in fleet.store.history(app, cluster)][:1] == ["webhook"]
    assert all(h.trigger != "self-heal" for h in fleet.store.history(app, cluster))
    assert fleet.status(app, cluster).drift == ()
