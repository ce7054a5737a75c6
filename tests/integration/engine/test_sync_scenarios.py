"""The boundaries Argo CD and Flux users judge a sync engine on, each against the testbed."""

from __future__ import annotations

from pathlib import Path

from fleet.kube.client import KubeClient
from fleet.model import Action, Health, SyncStatus
from tests.integration.engine.sync_helpers import WidgetController, new_group, scenario_for
from tests.support import manifests as m


def test_first_install_of_a_crd_with_its_custom_resources_in_one_sync(
    tmp_path: Path, kube: KubeClient, namespace: str
):
    s = scenario_for(tmp_path, kube, namespace)
    group = new_group()
    s.repo.commit({"app/crd.yaml": m.widget_crd(group), "app/w.yaml": m.widget(group, "w1")})
    with WidgetController(kube, group, namespace):
        result = s.sync()
    assert result.error == ""
    assert (result.sync_status, result.health) == (SyncStatus.SYNCED, Health.HEALTHY)
    actions = {r.ref.kind: r.action for r in result.resources}
    assert actions == {"CustomResourceDefinition": Action.CREATED, "Widget": Action.CREATED}
    assert s.get(f"{group}/v1", "Widget", "w1")["spec"] == {"size": 1}


def test_a_deployment_mounting_a_configmap_becomes_available(
    tmp_path: Path, kube: KubeClient, namespace: str
):
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit(
        {
            "app/cm.yaml": m.configmap("settings"),
            "app/deploy.yaml": m.deployment("web", replicas=2, configmap="settings"),
        }
    )
    result = s.sync()
    assert (result.sync_status, result.health) == (SyncStatus.SYNCED, Health.HEALTHY), result
    live = s.get("apps/v1", "Deployment", "web")
    assert live["status"]["availableReplicas"] == 2
    cm = s.get("v1", "ConfigMap", "settings")
    assert cm["metadata"]["labels"]["gitfleet.io/app"] == s.app
    uid = s.request().owner.uid  # no registry: a uid derived from the app name
    assert uid
    assert (
        cm["metadata"]["annotations"]["gitfleet.io/tracking"]
        == f"{s.app}@{uid}:/ConfigMap:{namespace}/settings"
    )


def test_waves_wait_for_health_before_the_next_wave(
    tmp_path: Path, kube: KubeClient, namespace: str
):
    s = scenario_for(tmp_path, kube, namespace)
    group = new_group()
    s.repo.commit(
        {
            "app/crd.yaml": m.widget_crd(group),
            "app/w.yaml": m.widget(group, "first", wave=0),
            "app/later.yaml": m.configmap(
                "later", extra_meta='  annotations:\n    gitfleet.io/sync-wave: "1"\n'
            ),
        }
    )
    with WidgetController(kube, group, namespace) as controller:
        controller.before_ready = lambda w: s.get("v1", "ConfigMap", "later") is None
        result = s.sync()
    assert result.error == ""
    assert controller.observations == [True]  # wave 1 was not applied before wave 0 was healthy
    waves = {r.ref.name: r.wave for r in result.resources}
    assert waves["first"] == 0 and waves["later"] == 1
    assert s.get("v1", "ConfigMap", "later") is not None


def test_custom_resource_without_a_controller_is_unknown_then_times_out_by_name(
    tmp_path: Path, kube: KubeClient, namespace: str
):
    s = scenario_for(tmp_path, kube, namespace)
    group = new_group()
    s.repo.commit({"app/crd.yaml": m.widget_crd(group), "app/w.yaml": m.widget(group, "w1")})
    result = s.sync(timeout=4.0)
    assert result.error_stage == "health"
    assert f"no controller has reported status for Widget/{namespace}/w1" in result.error
    widget = next(r for r in result.resources if r.ref.kind == "Widget")
    assert widget.health == Health.UNKNOWN
    assert result.health != Health.HEALTHY


def test_an_invalid_object_means_nothing_is_written(
    tmp_path: Path, kube: KubeClient, namespace: str
):
    s = scenario_for(tmp_path, kube, namespace)
    bad = m.deployment("broken").replace("replicas: 1", "replicas: -3")
    s.repo.commit({"app/ok.yaml": m.configmap("fine"), "app/bad.yaml": bad})
    result = s.sync()
    assert result.error_stage == "apply"
    assert f"Deployment/{namespace}/broken" in result.error
    assert "replicas" in result.error
    assert s.get("v1", "ConfigMap", "fine") is None
    assert result.writes == 0


def test_two_apps_claiming_one_configmap_fail_naming_the_owner(
    tmp_path: Path, kube: KubeClient, namespace: str
):
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit(
        {
            "a/cm.yaml": m.configmap("shared", "owner: a"),
            "b/cm.yaml": m.configmap("shared", "owner: b"),
        }
    )
    assert s.sync("a", app=f"a-{namespace}").error == ""
    result = s.sync("b", app=f"b-{namespace}")
    assert result.error_stage == "apply"
    assert f"ConfigMap/{namespace}/shared is tracked by app a-{namespace}" in result.error
    assert s.get("v1", "ConfigMap", "shared")["data"] == {"owner": "a"}
    failed = [r for r in result.resources if r.action == Action.FAILED]
    assert [r.ref.name for r in failed] == ["shared"]


def test_an_empty_render_prunes_nothing(tmp_path: Path, kube: KubeClient, namespace: str):
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit({"app/cm.yaml": m.configmap("keep-me"), "app/README.txt": "docs"})
    assert s.sync(prune=True).error == ""
    s.repo.commit({"app/cm.yaml": None})
    result = s.sync(prune=True)
    assert "--allow-empty" in result.error
    assert s.get("v1", "ConfigMap", "keep-me") is not None
    allowed = s.sync(prune=True, allow_empty=True)
    assert allowed.error == ""
    assert [(r.ref.name, r.action) for r in allowed.resources] == [("keep-me", Action.PRUNED)]


def test_renaming_the_app_directory_updates_objects_and_keeps_what_is_not_ours(
    tmp_path: Path, kube: KubeClient, namespace: str
):
    s = scenario_for(tmp_path, kube, namespace)
    group = new_group()
    s.repo.commit(
        {
            "apps/shop/crd.yaml": m.widget_crd(group),
            "apps/shop/cm.yaml": m.configmap("settings", "color: blue"),
            "apps/shop/old.yaml": m.configmap("retired"),
            "apps/other/cm.yaml": m.configmap("neighbour"),
        }
    )
    assert s.sync("apps/shop", prune=True).error == ""
    assert s.sync("apps/other", app=f"other-{namespace}", prune=True).error == ""
    kube.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "by-hand", "namespace": namespace},
        }
    )
    s.repo.rename("apps/shop", "apps/store")
    s.repo.commit(
        {
            "apps/store/crd.yaml": None,
            "apps/store/old.yaml": None,
            "apps/store/cm.yaml": m.configmap("settings", "color: green"),
        }
    )
    result = s.sync("apps/store", prune=True)
    assert result.error == ""
    assert s.get("v1", "ConfigMap", "settings")["data"] == {"color": "green"}
    assert s.get("v1", "ConfigMap", "retired") is None
    assert s.get("v1", "ConfigMap", "neighbour") is not None
    assert s.get("v1", "ConfigMap", "by-hand") is not None
    crd = s.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", f"widgets.{group}", "")
    assert crd is not None
    kept = {r.ref.kind: r for r in result.resources if r.action == Action.SKIPPED}
    assert "never pruned" in kept["CustomResourceDefinition"].message


def test_a_second_unchanged_sync_writes_nothing_and_renders_nothing(
    tmp_path: Path, kube: KubeClient, namespace: str
):
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit(
        {f"app/cm{i}.yaml": m.configmap(f"cm{i}") for i in range(20)}
        | {"app/deploy.yaml": m.deployment("web", configmap="cm0")}
    )
    first = s.sync(prune=True)
    assert first.error == "" and first.rendered and first.writes > 0
    s.repo.commit({"unrelated/readme.txt": "a commit that does not touch the app"})
    writes_before = sum(kube.requests[v] for v in ("PATCH", "POST", "PUT", "DELETE"))
    second = s.sync(prune=True)
    writes_after = sum(kube.requests[v] for v in ("PATCH", "POST", "PUT", "DELETE"))
    assert second.error == ""
    assert (second.rendered, second.writes, writes_after - writes_before) == (False, 0, 0)
    assert {r.action for r in second.resources} == {Action.UNCHANGED}
    assert s.caches.renderer.renders == 1


WEBHOOK = """apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: {name}
webhooks:
  - name: check.example.com
    admissionReviewVersions: ["v1"]
    sideEffects: None
    failurePolicy: Fail
    objectSelector:
      matchLabels: {{webhook-test: "{name}"}}
    clientConfig:
      service: {{name: hook-backend, namespace: {namespace}, path: /validate}}
    rules:
      - operations: ["CREATE"]
        apiGroups: [""]
        apiVersions: ["v1"]
        resources: ["configmaps"]
"""

SERVICE = """apiVersion: v1
kind: Service
metadata:
  name: hook-backend
spec:
  selector: {app: hook-backend}
  ports: [{port: 443, targetPort: 8443}]
"""


def test_a_webhook_configuration_with_its_backend_in_the_same_sync_does_not_deadlock(
    tmp_path: Path, kube: KubeClient, namespace: str
):
    s = scenario_for(tmp_path, kube, namespace)
    name = f"hook-{namespace}"
    s.repo.commit(
        {
            "app/webhook.yaml": WEBHOOK.format(name=name, namespace=namespace),
            "app/service.yaml": SERVICE,
            "app/backend.yaml": m.deployment("hook-backend"),
            "app/cm.yaml": m.configmap("plain"),
        }
    )
    result = s.sync(prune=True, timeout=60.0)
    assert result.error == ""
    assert (result.sync_status, result.health) == (SyncStatus.SYNCED, Health.HEALTHY)
    hook = s.get("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", name, "")
    backend = s.get("apps/v1", "Deployment", "hook-backend")
    assert hook is not None and backend is not None
    # the webhook was written only after its backend was Available
    ready_at = next(
        c["lastTransitionTime"] for c in backend["status"]["conditions"] if c["type"] == "Available"
    )
    assert hook["metadata"]["creationTimestamp"] >= ready_at
    kube.delete(s.kube_ref_of(hook))
