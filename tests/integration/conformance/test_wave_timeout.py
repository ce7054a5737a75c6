"""A wave that times out or fails: the status tells the truth.

Later waves and prune do not run (nothing is half-pruned), the sync is OutOfSync with every
object it never applied listed as such ("not applied", health Missing, which app health folds
in) and every object it would have pruned listed as not pruned, and the status message says so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import main
from fleet.engine.contract import SyncResult
from fleet.kube.client import KubeClient
from fleet.model import Action, Health, ObjectRef, SyncStatus
from tests.conftest import Cluster
from tests.integration.engine.sync_helpers import new_group, scenario_for
from tests.support import manifests as m
from tests.support.fleet import FleetEnv
from tests.support.gitrepo import GitRepo

LATER = m.configmap("later", extra_meta='  annotations:\n    gitfleet.io/sync-wave: "1"\n')
NOWHERE = "      nodeSelector: {gitfleet.test/no-such-node: 'true'}\n"


def failing_job(name: str) -> str:
    """A Job whose pod is never scheduled and that fails at its deadline (Degraded)."""
    return f"""apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
spec:
  activeDeadlineSeconds: 1
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
{NOWHERE}      containers:
        - name: run
          image: example.com/{name}:1
"""


def stuck_deployment(name: str) -> str:
    """A Deployment whose pod is never scheduled: it never becomes Available."""
    return m.deployment(name).replace("    spec:\n", "    spec:\n" + NOWHERE, 1)


def assert_truthful(result: SyncResult) -> None:
    assert result.sync_status == SyncStatus.OUT_OF_SYNC
    entries = {r.ref.name: r for r in result.resources}
    later = entries["later"]
    assert (later.action, later.health) == (Action.SKIPPED, Health.MISSING)
    assert later.message == "not applied: the sync stopped at Sync wave 0"
    old = entries["old"]
    assert old.action == Action.SKIPPED
    assert old.message == "not pruned: prune did not run, a wave failed"
    assert result.health in (Health.MISSING, Health.DEGRADED)
    assert "the sync stopped at Sync wave 0: 1 object(s) not applied" in result.message
    assert "prune did not run (1 object(s) left to prune)" in result.message


def test_a_wave_timeout_leaves_later_waves_and_prune_undone_and_says_so(
    tmp_path: Path, kube: KubeClient, namespace: str
):
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit({"app/old.yaml": m.configmap("old")})
    assert s.sync(prune=True).error == ""
    group = new_group()
    s.repo.commit(
        {
            "app/old.yaml": None,
            "app/crd.yaml": m.widget_crd(group),
            "app/w.yaml": m.widget(group, "w1"),  # no controller: it never reports health
            "app/later.yaml": LATER,
        }
    )
    crd = ObjectRef(
        "apiextensions.k8s.io", "v1", "CustomResourceDefinition", "", f"widgets.{group}"
    )
    try:
        result = s.sync(prune=True, timeout=5.0)
    finally:
        kube.delete(crd)
    assert result.error_stage == "health"
    assert "timed out waiting for Sync wave 0" in result.error
    assert s.get("v1", "ConfigMap", "later") is None  # wave 1 never ran
    assert s.get("v1", "ConfigMap", "old") is not None  # prune never ran
    assert_truthful(result)
    widget = next(r for r in result.resources if r.ref.kind == "Widget")
    assert widget.action == Action.CREATED


def test_a_failed_wave_leaves_later_waves_and_prune_undone_and_says_so(
    tmp_path: Path, kube: KubeClient, namespace: str
):
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit({"app/old.yaml": m.configmap("old")})
    assert s.sync(prune=True).error == ""
    s.repo.commit(
        {"app/old.yaml": None, "app/job.yaml": failing_job("seed"), "app/later.yaml": LATER}
    )
    result = s.sync(prune=True, timeout=60.0)
    assert result.error_stage == "apply"
    assert f"Job/{namespace}/seed" in result.error
    assert s.get("v1", "ConfigMap", "later") is None
    assert s.get("v1", "ConfigMap", "old") is not None
    assert_truthful(result)
    job = next(r for r in result.resources if r.ref.kind == "Job")
    assert job.health == Health.DEGRADED
    assert result.health == Health.DEGRADED


def test_through_the_fleet_a_timed_out_wave_is_out_of_sync_with_what_was_not_applied(
    fleet: FleetEnv,
):
    app, cluster = fleet.app_name(0), sorted(fleet.clusters)[0]
    fleet.repo.commit({f"apps/{app}/old.yaml": m.configmap("old")})
    fleet.add_app(app, cluster, prune=True, timeout_s=4.0)
    fleet.worker_thread("alpha")
    first = fleet.sync_and_wait(app, cluster)
    assert first["result"] == "succeeded", first
    fleet.repo.commit(
        {
            f"apps/{app}/old.yaml": None,
            f"apps/{app}/web.yaml": stuck_deployment("web"),
            f"apps/{app}/later.yaml": LATER,
        }
    )
    answer = fleet.sync_and_wait(app, cluster)
    assert answer["result"] == "failed", answer
    assert fleet.live(cluster, ObjectRef("", "v1", "ConfigMap", app, "later")) is None
    assert fleet.live(cluster, ObjectRef("", "v1", "ConfigMap", app, "old")) is not None
    status = fleet.status(app, cluster)
    assert status.sync_status == SyncStatus.OUT_OF_SYNC
    assert f"Deployment/{app}/web" in status.message
    assert "the sync stopped at Sync wave 0: 1 object(s) not applied" in status.message
    assert "prune did not run (1 object(s) left to prune)" in status.message
    entries = {r.name: r for r in status.resources}
    assert (entries["later"].action, entries["later"].health) == (Action.SKIPPED, Health.MISSING)
    assert entries["old"].message == "not pruned: prune did not run, a wave failed"
    assert status.health in (Health.MISSING, Health.DEGRADED)


def test_gitfleet_sync_says_what_a_timed_out_wave_left_undone(
    tmp_path: Path,
    cluster: Cluster,
    kube: KubeClient,
    namespace: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setenv("GITFLEET_CACHE_DIR", str(tmp_path / "cache"))
    repo = GitRepo.create(tmp_path / "repo")
    repo.commit({"app/old.yaml": m.configmap("old")})
    args = ["--repo", repo.url, "--path", "app", "--kubeconfig", str(cluster.kubeconfig)]
    args += ["--namespace", namespace, "--app", f"cli-{namespace}", "--prune", "-o", "json"]
    assert main(["sync", *args]) == 0
    capsys.readouterr()
    repo.commit(
        {"app/old.yaml": None, "app/web.yaml": stuck_deployment("web"), "app/l.yaml": LATER}
    )
    code = main(["sync", *args, "--timeout", "4s"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    assert (report["sync_status"], report["error_stage"]) == ("OutOfSync", "health")
    assert "the sync stopped at Sync wave 0: 1 object(s) not applied" in report["message"]
    rows = {r["name"]: r for r in report["resources"]}
    assert (rows["later"]["action"], rows["later"]["health"]) == ("skipped", "Missing")
    assert rows["old"]["message"] == "not pruned: prune did not run, a wave failed"
    assert kube.get(ObjectRef("", "v1", "ConfigMap", namespace, "later")) is None
    assert kube.get(ObjectRef("", "v1", "ConfigMap", namespace, "old")) is not None
