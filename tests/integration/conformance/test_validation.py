"""Validation before the first write covers the whole sync, hooks included.

One invalid object anywhere (a Service with nodePort 99999 in a later kind tier and a later
wave, a hook Job, a custom resource the CRD's schema refuses) fails the sync with the API
server's message naming it, and nothing is written. The only writes allowed earlier are the
Namespaces and CRDs the same sync declares, when the objects in them cannot be dry-run without
them; those objects are dry-run right after, before any other write.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from cli.main import main
from fleet.kube.client import KubeClient
from fleet.model import Action, Health, ObjectRef, SyncStatus
from tests.conftest import Cluster
from tests.integration.engine.sync_helpers import new_group, scenario_for
from tests.support import manifests as m
from tests.support.fleet import FleetEnv
from tests.support.gitrepo import GitRepo

CONFIGMAPS = ("alpha", "beta", "gamma")


def bad_service(namespace: str = "") -> str:
    """A NodePort Service the API server refuses (nodePort out of range), in wave 1."""
    where = f"  namespace: {namespace}\n" if namespace else ""
    return f"""apiVersion: v1
kind: Service
metadata:
  name: edge
{where}  annotations:
    gitfleet.io/sync-wave: "1"
spec:
  type: NodePort
  selector: {{app: web}}
  ports:
    - port: 80
      nodePort: 99999
"""


def configmaps(folder: str, namespace: str = "") -> dict[str, str | bytes | None]:
    extra = f"  namespace: {namespace}\n" if namespace else ""
    return {f"{folder}/{name}.yaml": m.configmap(name, extra_meta=extra) for name in CONFIGMAPS}


def test_an_invalid_object_in_a_later_tier_and_wave_means_nothing_is_written(
    tmp_path: Path, kube: KubeClient, namespace: str
):
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit({**configmaps("app"), "app/svc.yaml": bad_service()})
    result = s.sync()
    assert result.error_stage == "apply"
    assert f"Service/{namespace}/edge" in result.error
    assert "nodePort: Invalid value: 99999: provided port is not in the valid range" in result.error
    assert "nothing was written" in result.error
    assert result.writes == 0
    for name in CONFIGMAPS:
        assert s.get("v1", "ConfigMap", name) is None
    assert s.get("v1", "Service", "edge") is None
    assert result.sync_status == SyncStatus.OUT_OF_SYNC
    entries = {r.ref.name: r for r in result.resources}
    assert entries["edge"].action == Action.FAILED
    assert "99999" in entries["edge"].message
    for name in CONFIGMAPS:
        assert entries[name].action == Action.SKIPPED
        assert entries[name].message.startswith("not applied: the server-side dry-run refused")
        assert entries[name].health == Health.MISSING
    assert result.health == Health.MISSING


def test_objects_in_a_namespace_the_sync_declares_are_dry_run_once_only_it_is_written(
    tmp_path: Path, kube: KubeClient, namespace: str
):
    s = scenario_for(tmp_path, kube, namespace)
    fresh = f"t-{uuid.uuid4().hex[:10]}"
    ns_yaml = f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {fresh}\n"
    broken = m.configmap("broken", '"not a key!": x', extra_meta=f"  namespace: {fresh}\n")
    s.repo.commit({"app/ns.yaml": ns_yaml, **configmaps("app", fresh), "app/bad.yaml": broken})
    try:
        result = s.sync()
        assert result.error_stage == "apply"
        assert f"ConfigMap/{fresh}/broken dry-run refused (Invalid)" in result.error
        assert "a valid config key must consist of alphanumeric characters" in result.error
        assert f"only Namespace/{fresh} was written" in result.error
        assert kube.get(ObjectRef("", "v1", "Namespace", "", fresh)) is not None
        for name in CONFIGMAPS:
            assert s.get("v1", "ConfigMap", name, namespace=fresh) is None
        entries = {(r.ref.kind, r.ref.name): r for r in result.resources}
        assert entries[("Namespace", fresh)].action == Action.CREATED
        assert entries[("ConfigMap", "broken")].action == Action.FAILED
        assert entries[("ConfigMap", "alpha")].action == Action.SKIPPED
        assert result.sync_status == SyncStatus.OUT_OF_SYNC
    finally:
        kube.delete(ObjectRef("", "v1", "Namespace", "", fresh))


def test_an_invalid_hook_fails_the_sync_before_any_write(
    tmp_path: Path, kube: KubeClient, namespace: str
):
    s = scenario_for(tmp_path, kube, namespace)
    hook = """apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
  annotations:
    argocd.argoproj.io/hook: PreSync
spec:
  template:
    spec:
      restartPolicy: Always
      containers:
        - name: run
          image: example.com/migrate:1
"""
    s.repo.commit({**configmaps("app"), "app/hook.yaml": hook})
    result = s.sync()
    assert result.error_stage == "apply"
    assert "Job/" in result.error and "restartPolicy" in result.error
    assert result.writes == 0
    assert kube.list("batch/v1", "Job", namespace=namespace) == []
    for name in CONFIGMAPS:
        assert s.get("v1", "ConfigMap", name) is None


def test_a_custom_resource_of_a_crd_in_the_sync_is_dry_run_once_the_crd_is_established(
    tmp_path: Path, kube: KubeClient, namespace: str
):
    s = scenario_for(tmp_path, kube, namespace)
    group = new_group()
    strict = m.widget_crd(group).replace(
        "          x-kubernetes-preserve-unknown-fields: true\n",
        "          properties:\n"
        "            spec:\n"
        "              type: object\n"
        "              properties:\n"
        "                size: {type: integer, maximum: 10}\n",
    )
    widget = m.widget(group, "huge").replace("size: 1", "size: 500")
    s.repo.commit({"app/crd.yaml": strict, "app/w.yaml": widget, **configmaps("app")})
    crd = ObjectRef(
        "apiextensions.k8s.io", "v1", "CustomResourceDefinition", "", f"widgets.{group}"
    )
    try:
        result = s.sync()
        assert result.error_stage == "apply"
        assert f"Widget/{namespace}/huge" in result.error
        assert "spec.size" in result.error
        assert f"only CustomResourceDefinition/widgets.{group} was written" in result.error
        assert kube.get(crd) is not None  # the one write allowed: the CRD the Widget needs
        for name in CONFIGMAPS:
            assert s.get("v1", "ConfigMap", name) is None
        assert kube.list(f"{group}/v1", "Widget", namespace=namespace) == []
    finally:
        kube.delete(crd)


def test_through_the_fleet_an_invalid_object_writes_nothing_and_the_status_says_why(
    fleet: FleetEnv,
):
    app, cluster = fleet.app_name(0), sorted(fleet.clusters)[0]
    fleet.repo.commit({**configmaps(f"apps/{app}"), f"apps/{app}/svc.yaml": bad_service()})
    fleet.add_app(app, cluster)  # with create_namespace, yet not even its namespace is written
    fleet.worker_thread("alpha")
    answer = fleet.sync_and_wait(app, cluster)
    assert answer["result"] == "failed", answer
    for name in CONFIGMAPS:
        assert fleet.live(cluster, ObjectRef("", "v1", "ConfigMap", app, name)) is None
    assert fleet.live(cluster, ObjectRef("", "v1", "Service", app, "edge")) is None
    status = fleet.status(app, cluster)
    assert status.sync_status == SyncStatus.OUT_OF_SYNC
    assert f"Service/{app}/edge" in status.message and "99999" in status.message
    assert "nothing was written" in status.message
    assert fleet.live(cluster, ObjectRef("", "v1", "Namespace", "", app)) is None
    entries = {r.name: r for r in status.resources}
    assert entries["edge"].action == Action.FAILED
    assert all(entries[name].action == Action.SKIPPED for name in CONFIGMAPS)
    assert status.health == Health.MISSING


def test_gitfleet_sync_refuses_the_invalid_object_and_writes_nothing(
    tmp_path: Path,
    cluster: Cluster,
    kube: KubeClient,
    namespace: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setenv("GITFLEET_CACHE_DIR", str(tmp_path / "cache"))
    repo = GitRepo.create(tmp_path / "repo")
    repo.commit({**configmaps("app"), "app/svc.yaml": bad_service()})
    args = ["--repo", repo.url, "--path", "app", "--kubeconfig", str(cluster.kubeconfig)]
    code = main(["sync", *args, "--namespace", namespace, "--app", f"cli-{namespace}"])
    out, _ = capsys.readouterr()
    assert code == 1
    assert "OutOfSync" in out
    assert "error (apply): server-side dry-run refused 1 object(s); nothing was written" in out
    assert f"Service/{namespace}/edge refused before the write (Invalid)" in out
    for name in CONFIGMAPS:
        assert kube.get(ObjectRef("", "v1", "ConfigMap", namespace, name)) is None
