"""Apply options an Argo CD user relies on: Replace, create-namespace, ignore rules, force."""

from __future__ import annotations

import uuid
from pathlib import Path

from fleet.engine.diff.compare import IgnoreRules
from fleet.kube.client import KubeClient
from fleet.model import Action, ObjectRef, Trigger
from tests.integration.engine.sync_helpers import scenario_for
from tests.support import manifests as m

REPLACE = "  annotations:\n    gitfleet.io/sync-options: Replace=true\n"


def job(name: str, image: str, meta: str = "") -> str:
    return f"""apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
{meta}spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{{name: run, image: {image}}}]
"""


def test_an_immutable_field_change_names_the_field_and_the_replace_option(
    tmp_path: Path, kube: KubeClient, namespace: str
):
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit({"app/job.yaml": job("migrate", "example.com/m:1")})
    assert s.sync().error == ""
    s.repo.commit({"app/job.yaml": job("migrate", "example.com/m:2")})
    result = s.sync()
    assert result.error_stage == "apply"
    assert f"Job/{namespace}/migrate" in result.error
    assert "immutable" in result.error
    assert "gitfleet.io/sync-options: Replace=true" in result.error
    live = s.get("batch/v1", "Job", "migrate")
    assert live["spec"]["template"]["spec"]["containers"][0]["image"] == "example.com/m:1"


def test_replace_true_recreates_an_object_whose_immutable_field_changed(
    tmp_path: Path, kube: KubeClient, namespace: str
):
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit({"app/job.yaml": job("migrate", "example.com/m:1", REPLACE)})
    assert s.sync().error == ""
    old_uid = s.get("batch/v1", "Job", "migrate")["metadata"]["uid"]
    s.repo.commit({"app/job.yaml": job("migrate", "example.com/m:2", REPLACE)})
    result = s.sync()
    assert result.error == ""
    live = s.get("batch/v1", "Job", "migrate")
    assert live["spec"]["template"]["spec"]["containers"][0]["image"] == "example.com/m:2"
    assert live["metadata"]["uid"] != old_uid


def test_create_namespace_creates_the_missing_destination(tmp_path: Path, kube: KubeClient):
    target = f"made-{uuid.uuid4().hex[:8]}"
    s = scenario_for(tmp_path, kube, target)
    s.repo.commit({"app/cm.yaml": m.configmap("inside")})
    without = s.sync()
    assert without.error != "" and s.get("v1", "ConfigMap", "inside") is None
    result = s.sync(create_namespace=True)
    try:
        assert result.error == ""
        assert s.get("v1", "ConfigMap", "inside") is not None
    finally:
        kube.delete(ObjectRef("", "v1", "Namespace", "", target))


def test_fields_owned_by_an_ignored_manager_are_not_drift(
    tmp_path: Path, kube: KubeClient, namespace: str
):
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit({"app/d.yaml": m.deployment("web", replicas=1)})
    assert s.sync().error == ""
    scale = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {"replicas": 3},
    }
    kube.apply(scale, manager="autoscaler", force=True)
    ignored = s.sync(ignore=IgnoreRules(managers=("autoscaler",)))
    assert ignored.error == ""
    assert [r.action for r in ignored.resources] == [Action.UNCHANGED]
    assert s.get("apps/v1", "Deployment", "web")["spec"]["replicas"] == 3
    reverted = s.sync()
    assert [r.action for r in reverted.resources] == [Action.CONFIGURED]
    assert s.get("apps/v1", "Deployment", "web")["spec"]["replicas"] == 1


def test_an_ignored_json_pointer_is_neither_drift_nor_applied(
    tmp_path: Path, kube: KubeClient, namespace: str
):
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit({"app/cm.yaml": m.configmap("cm", "a: one")})
    assert s.sync().error == ""
    patch = {"data": {"a": "changed-by-hand"}}
    kube.request(
        "PATCH",
        kube.object_path(ObjectRef("", "v1", "ConfigMap", namespace, "cm")),
        body=patch,
        content_type="application/merge-patch+json",
        params={"fieldManager": "kubectl-edit"},
    )
    result = s.sync(ignore=IgnoreRules(json_pointers=("/data/a",)))
    assert [r.action for r in result.resources] == [Action.UNCHANGED]
    assert s.get("v1", "ConfigMap", "cm")["data"]["a"] == "changed-by-hand"


def test_without_force_a_field_owned_by_another_manager_is_a_conflict(
    tmp_path: Path, kube: KubeClient, namespace: str
):
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit({"app/cm.yaml": m.configmap("cm", "a: one")})
    assert s.sync().error == ""
    other = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cm", "namespace": namespace},
        "data": {"a": "theirs"},
    }
    kube.apply(other, manager="other-tool", force=True)
    result = s.sync(force_conflicts=False)
    assert "conflict" in result.error.lower()
    assert s.get("v1", "ConfigMap", "cm")["data"]["a"] == "theirs"
    assert s.sync().error == ""
    assert s.get("v1", "ConfigMap", "cm")["data"]["a"] == "one"


def test_an_automated_sync_leaves_a_self_heal_paused_object_alone_and_a_manual_one_does_not(
    tmp_path: Path, kube: KubeClient, namespace: str
):
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit({"app/cm.yaml": m.configmap("debug-me", "level: info")})
    assert s.sync().error == ""
    ref = ObjectRef("", "v1", "ConfigMap", namespace, "debug-me")
    edit = {
        "metadata": {"annotations": {"gitfleet.io/self-heal": "false"}},
        "data": {"level": "debug"},
    }
    kube.request(
        "PATCH",
        kube.object_path(ref),
        body=edit,
        content_type="application/merge-patch+json",
        params={"fieldManager": "kubectl"},
    )
    automated = s.sync(trigger=Trigger.INTERVAL)
    assert automated.error == ""
    assert [r.action for r in automated.resources] == [Action.SKIPPED]
    assert "self-heal paused" in automated.resources[0].message
    assert automated.sync_status == "OutOfSync"
    assert s.get("v1", "ConfigMap", "debug-me")["data"]["level"] == "debug"
    manual = s.sync(trigger=Trigger.MANUAL)
    assert [r.action for r in manual.resources] == [Action.CONFIGURED]
    assert s.get("v1", "ConfigMap", "debug-me")["data"]["level"] == "info"


def test_the_sync_record_carries_each_stage_duration(
    tmp_path: Path, kube: KubeClient, namespace: str
):
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit({"app/cm.yaml": m.configmap("timed")})
    result = s.sync(prune=True)
    stages = result.to_json()["stages"]
    assert set(stages) == {"source", "render", "order", "diff", "apply", "prune", "record"}
    assert all(isinstance(v, float) and v >= 0 for v in stages.values())
