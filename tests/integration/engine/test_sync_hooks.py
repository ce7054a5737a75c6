"""Argo CD hooks: PreSync before the resources, PostSync after, SyncFail when a sync fails."""

from __future__ import annotations

from pathlib import Path

from fleet.kube.client import KubeClient
from tests.integration.engine.sync_helpers import scenario_for
from tests.support import manifests as m


def hook_job(name: str, phase: str, policy: str = "") -> str:
    delete = f"    argocd.argoproj.io/hook-delete-policy: {policy}\n" if policy else ""
    return f"""apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  annotations:
    argocd.argoproj.io/hook: {phase}
{delete}spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{{name: run, image: example.com/{name}:1}}]
"""


def test_presync_runs_before_and_postsync_after_the_resources(
    tmp_path: Path, kube: KubeClient, namespace: str
):
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit(
        {
            "app/pre.yaml": hook_job("migrate", "PreSync"),
            "app/post.yaml": hook_job("smoke", "PostSync"),
            "app/cm.yaml": m.configmap("settings"),
        }
    )
    result = s.sync()
    assert result.error == ""
    order = sorted(result.resources, key=lambda r: r.ref.name)
    assert [r.ref.name for r in order] == ["migrate", "settings", "smoke"]
    migrate = s.get("batch/v1", "Job", "migrate")
    settings = s.get("v1", "ConfigMap", "settings")
    smoke = s.get("batch/v1", "Job", "smoke")
    done = next(c for c in migrate["status"]["conditions"] if c["type"] == "Complete")
    assert settings["metadata"]["creationTimestamp"] >= done["lastTransitionTime"]
    assert smoke["metadata"]["creationTimestamp"] >= settings["metadata"]["creationTimestamp"]


def test_a_hook_with_hook_succeeded_policy_is_deleted_after_it_succeeds(
    tmp_path: Path, kube: KubeClient, namespace: str
):
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit(
        {
            "app/pre.yaml": hook_job("once", "PreSync", "HookSucceeded"),
            "app/cm.yaml": m.configmap("settings"),
        }
    )
    result = s.sync()
    assert result.error == ""
    assert s.get("batch/v1", "Job", "once") is None
    assert s.get("v1", "ConfigMap", "settings") is not None


def test_hooks_run_again_on_every_sync_replacing_the_previous_run(
    tmp_path: Path, kube: KubeClient, namespace: str
):
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit({"app/pre.yaml": hook_job("migrate", "PreSync"), "app/cm.yaml": m.configmap("c")})
    assert s.sync().error == ""
    first = s.get("batch/v1", "Job", "migrate")["metadata"]["uid"]
    assert s.sync().error == ""
    assert s.get("batch/v1", "Job", "migrate")["metadata"]["uid"] != first


def test_syncfail_hook_runs_when_the_sync_fails(tmp_path: Path, kube: KubeClient, namespace: str):
    s = scenario_for(tmp_path, kube, namespace)
    group = f"h{namespace[2:]}.example.com"
    s.repo.commit(
        {
            "app/crd.yaml": m.widget_crd(group),
            "app/w.yaml": m.widget(group, "never-ready"),
            "app/fail.yaml": hook_job("notify", "SyncFail"),
        }
    )
    result = s.sync(timeout=4.0)
    assert result.error_stage == "health"
    assert s.get("batch/v1", "Job", "notify") is not None
