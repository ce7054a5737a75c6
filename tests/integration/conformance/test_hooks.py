"""Hooks as Argo CD runs them, from repository layouts our users keep.

A database migration Job written for Argo CD (`generateName`, a PreSync hook) gets a new name on
every sync run and each delete policy finds its earlier runs by the hook identity label; Helm's
hook annotations on a chart rendered by the real helm map onto the same phases and policies; a
SyncFail hook runs when the sync fails; and a periodic or webhook sync of an app in sync runs no
hook, while a sync a person asks for, or one that applies something, does.

On the testbed kwok plays the kubelet: a Job's pods complete as soon as they are scheduled, and
a Job whose pods cannot be scheduled fails at its `activeDeadlineSeconds` (DeadlineExceeded).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.engine.contract import ResourceResult, SyncResult
from fleet.engine.plan.hooks import HOOK_ID_LABEL
from fleet.kube.client import KubeClient
from fleet.model import Action, Health, Manifest, ObjectRef, Trigger
from tests.integration.engine.sync_helpers import Scenario, scenario_for
from tests.support import manifests as m
from tests.support.fleet import FleetEnv, wait_until

UNSCHEDULABLE = "      nodeSelector: {gitfleet.test/no-such-node: 'true'}\n"


def hook_job(
    prefix: str,
    phase: str,
    policy: str = "",
    *,
    failing: bool = False,
    helm: bool = False,
    weight: int | None = None,
) -> str:
    """A hook Job with `generateName`, annotated the Argo CD way (or Helm's with `helm`)."""
    hook_key, policy_key = "argocd.argoproj.io/hook", "argocd.argoproj.io/hook-delete-policy"
    if helm:
        hook_key, policy_key = "helm.sh/hook", "helm.sh/hook-delete-policy"
    notes = f"    {hook_key}: {phase}\n"
    notes += f"    {policy_key}: {policy}\n" if policy else ""
    notes += f'    helm.sh/hook-weight: "{weight}"\n' if weight is not None else ""
    deadline = "  activeDeadlineSeconds: 1\n  backoffLimit: 0\n" if failing else ""
    return f"""apiVersion: batch/v1
kind: Job
metadata:
  generateName: {prefix}
  annotations:
{notes}spec:
{deadline}  template:
    spec:
      restartPolicy: Never
{UNSCHEDULABLE if failing else ""}      containers:
        - name: run
          image: example.com/{prefix.rstrip("-")}:1
"""


def instances(kube: KubeClient, namespace: str, prefix: str) -> list[Manifest]:
    """The live hook Jobs of `namespace` whose name starts with `prefix`, oldest first."""
    jobs = kube.list("batch/v1", "Job", namespace=namespace, label_selector=HOOK_ID_LABEL)
    found = [j for j in jobs if j["metadata"]["name"].startswith(prefix)]
    return sorted(found, key=lambda j: j["metadata"]["creationTimestamp"])


def entry(result: SyncResult, prefix: str) -> ResourceResult:
    return next(r for r in result.resources if r.ref.name.startswith(prefix))


def completed_at(job: Manifest) -> str:
    conditions = job["status"]["conditions"]
    return str(next(c for c in conditions if c["type"] == "Complete")["lastTransitionTime"])


@pytest.fixture
def scenario(tmp_path: Path, kube: KubeClient, namespace: str) -> Scenario:
    return scenario_for(tmp_path, kube, namespace)


def test_a_generatename_migration_gets_a_new_instance_each_run_and_replaces_the_last(
    scenario: Scenario, kube: KubeClient, namespace: str
) -> None:
    s = scenario
    s.repo.commit(
        {
            "app/migrate.yaml": hook_job("migrate-", "PreSync", "BeforeHookCreation"),
            "app/cm.yaml": m.configmap("settings"),
        }
    )
    first = s.sync(trigger=Trigger.CLI, timeout=30.0)
    assert first.error == ""
    [job] = instances(kube, namespace, "migrate-")
    name = job["metadata"]["name"]
    assert name != "migrate-" and len(name) == len("migrate-") + 8
    identity = job["metadata"]["labels"][HOOK_ID_LABEL]
    assert entry(first, "migrate-").ref.name == name
    assert entry(first, "migrate-").health == Health.HEALTHY
    settings = s.get("v1", "ConfigMap", "settings")
    assert settings is not None
    assert settings["metadata"]["creationTimestamp"] >= completed_at(job)  # PreSync ran first

    second = s.sync(trigger=Trigger.CLI, timeout=30.0)
    assert second.error == ""
    [again] = instances(kube, namespace, "migrate-")
    assert again["metadata"]["name"] != name  # a new run, a new name
    assert again["metadata"]["labels"][HOOK_ID_LABEL] == identity  # the same hook
    assert s.get("batch/v1", "Job", name) is None  # the first run was found by label, deleted
    assert "Complete" in {c["type"] for c in again["status"]["conditions"]}
    assert entry(second, "migrate-").action == Action.CREATED


SIMPLE_POD = {
    "spec": {
        "restartPolicy": "Never",
        "containers": [{"name": "run", "image": "example.com/by-hand:1"}],
    }
}


def test_an_object_with_a_copied_hook_label_is_not_taken_for_an_earlier_run(
    scenario: Scenario, kube: KubeClient, namespace: str
) -> None:
    s = scenario
    s.repo.commit({"app/migrate.yaml": hook_job("migrate-", "PreSync")})
    assert s.sync(timeout=30.0).error == ""
    [ours] = instances(kube, namespace, "migrate-")
    copy = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "migrate-by-hand",
            "namespace": namespace,
            "labels": {HOOK_ID_LABEL: ours["metadata"]["labels"][HOOK_ID_LABEL]},
        },
        "spec": {"template": SIMPLE_POD},
    }
    kube.create(copy)
    assert s.sync(timeout=30.0).error == ""
    names = {j["metadata"]["name"] for j in instances(kube, namespace, "migrate-")}
    assert "migrate-by-hand" in names and ours["metadata"]["name"] not in names
    assert len(names) == 2


def waved(text: str, wave: int) -> str:
    return text.replace(
        "  annotations:\n", f'  annotations:\n    argocd.argoproj.io/sync-wave: "{wave}"\n'
    )


def test_a_maintenance_page_layout_runs_hooks_and_resources_wave_by_wave(
    scenario: Scenario, kube: KubeClient, namespace: str
) -> None:
    """Schema upgrade before everything, maintenance page up, the backend, page down: hooks
    in several waves of the Sync phase, mixed with resources (the layout of Argo CD's
    sync-waves example, written anew)."""
    s = scenario
    s.repo.commit(
        {
            "app/01-schema.yaml": hook_job("upgrade-sql-schema", "PreSync"),
            "app/02-page-up.yaml": waved(hook_job("maint-page-up-", "Sync"), 1),
            "app/03-backend.yaml": m.deployment("backend", wave=2),
            "app/04-page-down.yaml": waved(
                hook_job("maint-page-down-", "Sync", "BeforeHookCreation"), 3
            ),
        }
    )
    result = s.sync(timeout=60.0)
    assert result.error == ""
    [schema] = instances(kube, namespace, "upgrade-sql-schema")
    [up] = instances(kube, namespace, "maint-page-up-")
    [down] = instances(kube, namespace, "maint-page-down-")
    backend = s.get("apps/v1", "Deployment", "backend")
    assert backend is not None
    assert up["metadata"]["creationTimestamp"] >= completed_at(schema)
    assert backend["metadata"]["creationTimestamp"] >= completed_at(up)
    assert down["metadata"]["creationTimestamp"] >= backend["metadata"]["creationTimestamp"]
    assert {r.ref.name: r.wave for r in result.resources if r.ref.kind == "Job"} == {
        schema["metadata"]["name"]: 0,
        up["metadata"]["name"]: 1,
        down["metadata"]["name"]: 3,
    }
    assert all(r.health == Health.HEALTHY for r in result.resources)


def test_a_hook_succeeded_hook_is_deleted_once_it_succeeds(
    scenario: Scenario, kube: KubeClient, namespace: str
) -> None:
    s = scenario
    s.repo.commit(
        {
            "app/seed.yaml": hook_job("seed-", "PostSync", "HookSucceeded"),
            "app/cm.yaml": m.configmap("settings"),
        }
    )
    result = s.sync(timeout=30.0)
    assert result.error == ""
    assert entry(result, "seed-").health == Health.HEALTHY
    assert instances(kube, namespace, "seed-") == []
    assert s.get("v1", "ConfigMap", "settings") is not None


def test_a_failing_hook_failed_hook_is_deleted_and_the_sync_fails_with_its_reason(
    scenario: Scenario, kube: KubeClient, namespace: str
) -> None:
    s = scenario
    s.repo.commit(
        {
            "app/migrate.yaml": hook_job("migrate-", "PreSync", "HookFailed", failing=True),
            "app/cm.yaml": m.configmap("settings"),
        }
    )
    result = s.sync(timeout=30.0)
    assert "DeadlineExceeded" in result.error
    assert "migrate-" in result.error
    assert not result.succeeded
    failed = entry(result, "migrate-")
    assert failed.health == Health.DEGRADED and "DeadlineExceeded" in failed.message
    wait_until(lambda: instances(kube, namespace, "migrate-") == [], timeout=10, what="deletion")
    assert s.get("v1", "ConfigMap", "settings") is None  # the Sync phase never ran


def test_a_syncfail_hook_runs_and_is_awaited_when_a_presync_hook_fails(
    scenario: Scenario, kube: KubeClient, namespace: str
) -> None:
    s = scenario
    s.repo.commit(
        {
            "app/migrate.yaml": hook_job("migrate-", "PreSync", failing=True),
            "app/notify.yaml": hook_job("notify-", "SyncFail"),
            "app/cleanup.yaml": hook_job("cleanup-", "SyncFail", "HookSucceeded"),
            "app/cm.yaml": m.configmap("settings"),
        }
    )
    result = s.sync(timeout=30.0)
    assert "DeadlineExceeded" in result.error
    [failed] = instances(kube, namespace, "migrate-")  # BeforeHookCreation keeps it to read
    assert failed["metadata"]["name"] == entry(result, "migrate-").ref.name
    [notify] = instances(kube, namespace, "notify-")
    assert completed_at(notify) >= failed["metadata"]["creationTimestamp"]
    assert entry(result, "notify-").health == Health.HEALTHY  # awaited, not only created
    assert entry(result, "cleanup-").health == Health.HEALTHY
    assert instances(kube, namespace, "cleanup-") == []  # and cleaned up by its policy
    assert s.get("v1", "ConfigMap", "settings") is None


def test_an_in_sync_periodic_or_webhook_sync_runs_no_hook_but_a_manual_or_changing_one_does(
    scenario: Scenario, kube: KubeClient, namespace: str
) -> None:
    s = scenario
    s.repo.commit(
        {
            "app/migrate.yaml": hook_job("migrate-", "PreSync"),
            "app/cm.yaml": m.configmap("settings"),
        }
    )
    assert s.sync(trigger=Trigger.CLI, timeout=30.0).error == ""
    [first] = instances(kube, namespace, "migrate-")

    for trigger in (Trigger.INTERVAL, Trigger.WEBHOOK):
        quiet = s.sync(trigger=trigger, timeout=30.0)
        assert quiet.error == "" and quiet.succeeded
        assert [r for r in quiet.resources if r.ref.kind == "Job"] == []
        [still] = instances(kube, namespace, "migrate-")
        assert still["metadata"]["uid"] == first["metadata"]["uid"]  # not run, not pruned

    manual = s.sync(trigger=Trigger.MANUAL, timeout=30.0)
    assert manual.error == ""
    [second] = instances(kube, namespace, "migrate-")
    assert second["metadata"]["name"] != first["metadata"]["name"]

    retried = s.sync(trigger=Trigger.INTERVAL, retry=True, timeout=30.0)  # a failed sync's retry
    assert retried.error == ""
    [after_retry] = instances(kube, namespace, "migrate-")
    assert after_retry["metadata"]["name"] != second["metadata"]["name"]
    second = after_retry

    s.repo.commit({"app/cm.yaml": m.configmap("settings", "k: v2")})
    changed = s.sync(trigger=Trigger.INTERVAL, timeout=30.0)
    assert changed.error == ""
    [third] = instances(kube, namespace, "migrate-")
    assert third["metadata"]["name"] not in {first["metadata"]["name"], second["metadata"]["name"]}
    assert s.get("v1", "ConfigMap", "settings")["data"] == {"k": "v2"}


def test_an_invalid_syncfail_hook_is_refused_by_the_dry_run_before_anything_is_written(
    scenario: Scenario, kube: KubeClient, namespace: str
) -> None:
    s = scenario
    broken = hook_job("notify-", "SyncFail").replace("          image: example.com/notify:1\n", "")
    s.repo.commit(
        {
            "app/migrate.yaml": hook_job("migrate-", "PreSync"),
            "app/notify.yaml": broken,
            "app/cm.yaml": m.configmap("settings"),
        }
    )
    result = s.sync(timeout=30.0)
    assert "notify-" in result.error and "image" in result.error
    assert instances(kube, namespace, "") == []  # not even the PreSync hook ran
    assert s.get("v1", "ConfigMap", "settings") is None


def test_prune_never_deletes_a_hook_instance_of_a_kind_the_app_also_declares(
    scenario: Scenario, kube: KubeClient, namespace: str
) -> None:
    s = scenario
    report = """apiVersion: v1
kind: ConfigMap
metadata:
  generateName: release-notes-
  annotations: {argocd.argoproj.io/hook: PostSync}
data: {k: v}
"""
    s.repo.commit({"app/notes.yaml": report, "app/cm.yaml": m.configmap("settings")})
    assert s.sync(trigger=Trigger.CLI, prune=True, timeout=30.0).error == ""
    found = kube.list("v1", "ConfigMap", namespace=namespace, label_selector=HOOK_ID_LABEL)
    [notes] = [c["metadata"]["name"] for c in found]
    quiet = s.sync(trigger=Trigger.INTERVAL, prune=True, timeout=30.0)
    assert quiet.error == ""
    assert [r for r in quiet.resources if r.action == Action.PRUNED] == []
    assert s.get("v1", "ConfigMap", notes) is not None


def test_an_object_with_generatename_that_is_no_hook_is_a_render_error_naming_its_file(
    scenario: Scenario,
) -> None:
    s = scenario
    plain = hook_job("worker-", "PreSync").replace(
        "  annotations:\n    argocd.argoproj.io/hook: PreSync\n", ""
    )
    s.repo.commit({"app/worker.yaml": plain, "app/cm.yaml": m.configmap("settings")})
    result = s.sync(timeout=30.0)
    assert result.error_stage == "render"
    assert "app/worker.yaml document 1" in result.error
    assert "generateName" in result.error and "only hooks" in result.error
    assert s.get("v1", "ConfigMap", "settings") is None


CHART = "apiVersion: v2\nname: shop\nversion: 1.0.0\n"
CHART_CM = """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
data:
  color: {{ .Values.color | quote }}
"""


@pytest.fixture
def helm(helm_binary: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GITFLEET_HELM", str(helm_binary))
    return helm_binary


def test_helm_hook_annotations_of_a_rendered_chart_map_onto_phases_and_policies(
    scenario: Scenario, kube: KubeClient, namespace: str, helm: Path
) -> None:
    s = scenario
    pre = hook_job(
        "db-init-",
        "pre-install,pre-upgrade",
        "before-hook-creation,hook-succeeded",
        helm=True,
        weight=-1,
    )
    post = hook_job("smoke-", "post-install,post-upgrade", "before-hook-creation", helm=True)
    s.repo.commit(
        {
            "chart/Chart.yaml": CHART,
            "chart/values.yaml": "color: blue\n",
            "chart/templates/cm.yaml": CHART_CM,
            "chart/templates/db-init.yaml": pre,
            "chart/templates/smoke.yaml": post,
        }
    )
    first = s.sync("chart", trigger=Trigger.CLI, timeout=30.0)
    assert first.error == ""
    assert entry(first, "db-init-").health == Health.HEALTHY
    assert instances(kube, namespace, "db-init-") == []  # hook-succeeded
    [smoke] = instances(kube, namespace, "smoke-")
    settings = [r for r in first.resources if r.ref.kind == "ConfigMap"]
    [cm] = [s.get("v1", "ConfigMap", r.ref.name) for r in settings]
    assert cm is not None
    assert smoke["metadata"]["creationTimestamp"] >= cm["metadata"]["creationTimestamp"]

    second = s.sync("chart", trigger=Trigger.CLI, timeout=30.0)
    assert second.error == ""
    [again] = instances(kube, namespace, "smoke-")  # before-hook-creation, found by label
    assert again["metadata"]["name"] != smoke["metadata"]["name"]
    assert instances(kube, namespace, "db-init-") == []


def test_generatename_hooks_work_through_the_fleet(fleet: FleetEnv) -> None:
    app, cluster = fleet.app_name(0), sorted(fleet.clusters)[0]
    fleet.repo.commit(
        {
            f"apps/{app}/cm.yaml": m.configmap("settings"),
            f"apps/{app}/migrate.yaml": hook_job("migrate-", "PreSync"),
            f"apps/{app}/seed.yaml": hook_job("seed-", "PostSync", "HookSucceeded"),
        }
    )
    fleet.add_app(app, cluster, automated=True)
    fleet.worker_thread("alpha")
    kube = fleet.clusters[cluster].client()
    try:
        assert fleet.sync_and_wait(app, cluster, Trigger.MANUAL)["result"] == "succeeded"
        [first] = instances(kube, app, "migrate-")
        assert instances(kube, app, "seed-") == []
        assert fleet.live(cluster, ObjectRef("", "v1", "ConfigMap", app, "settings")) is not None
        status = fleet.status(app, cluster)
        assert status.sync_status == "Synced"
        jobs = {r.name: r for r in status.resources if r.kind == "Job"}
        assert jobs[first["metadata"]["name"]].health == Health.HEALTHY
        [seed] = [r for name, r in jobs.items() if name.startswith("seed-")]
        assert seed.health == Health.HEALTHY  # it ran and was deleted after it succeeded

        periodic = fleet.sync_and_wait(app, cluster, Trigger.INTERVAL)
        assert periodic["result"] in {"succeeded", "unchanged"}
        assert [r for r in periodic.get("resources", []) if r["kind"] == "Job"] == []
        [same] = instances(kube, app, "migrate-")
        assert same["metadata"]["uid"] == first["metadata"]["uid"]

        assert fleet.sync_and_wait(app, cluster, Trigger.MANUAL)["result"] == "succeeded"
        [second] = instances(kube, app, "migrate-")
        assert second["metadata"]["name"] != first["metadata"]["name"]
        assert fleet.status(app, cluster).sync_status == "Synced"
    finally:
        kube.close()
