"""A kustomize overlay whose base sits outside the app's path, in the same repository.

The layout most kustomize users keep: `bases/web` (a Deployment, a Service and a generated
ConfigMap), a shared `components/labels` component, and `envs/prod` (the app's path) building
from both with a name prefix and a replicas patch. The render reads outside the app's path but
inside the repository (`fleet.engine.render.kustomize` refuses only what leaves it), the sync
applies what kustomize built, and a change to the base alone re-syncs the app (the render's
inputs include the base), pruning the ConfigMap the old content generated.
"""

from __future__ import annotations

from pathlib import Path

from fleet.control.registry.records import AppDestination, AppRecord, AppSource, SyncPolicy
from fleet.kube.client import KubeClient
from fleet.model import Health, ObjectRef, SyncStatus, Trigger
from tests.integration.engine.sync_helpers import scenario_for
from tests.support.fleet import FleetEnv

COMPONENT = """apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
labels:
- pairs: {team: shop}
"""


def layout(root: str = "") -> dict[str, str | bytes | None]:
    return {
        f"{root}bases/web/kustomization.yaml": """resources:
- deployment.yaml
- service.yaml
configMapGenerator:
- name: web-config
  files:
  - config/app.properties
""",
        f"{root}bases/web/config/app.properties": "greeting=hello\n",
        f"{root}bases/web/deployment.yaml": """apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: example.com/web:1
          volumeMounts: [{name: config, mountPath: /etc/web}]
      volumes:
        - name: config
          configMap: {name: web-config}
""",
        f"{root}bases/web/service.yaml": """apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
""",
        f"{root}components/labels/kustomization.yaml": COMPONENT,
        f"{root}envs/prod/kustomization.yaml": """namePrefix: prod-
resources:
- ../../bases/web
components:
- ../../components/labels
patches:
- path: replicas.yaml
""",
        f"{root}envs/prod/replicas.yaml": """apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
""",
    }


def generated_configmaps(kube: KubeClient, namespace: str) -> list[str]:
    listed = kube.list("v1", "ConfigMap", namespace=namespace)
    return sorted(
        c["metadata"]["name"]
        for c in listed
        if c["metadata"]["name"].startswith("prod-web-config-")
    )


def test_an_overlay_with_its_base_outside_the_app_path_renders_and_syncs(
    tmp_path: Path, kube: KubeClient, namespace: str
):
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit(layout())
    result = s.sync("envs/prod", prune=True)
    assert result.error == "", result.error
    assert (result.sync_status, result.health) == (SyncStatus.SYNCED, Health.HEALTHY)
    assert {"envs/prod", "bases/web", "components/labels"} <= set(result.inputs)
    web = s.get("apps/v1", "Deployment", "prod-web")
    assert web is not None and web["spec"]["replicas"] == 2
    assert web["metadata"]["labels"]["team"] == "shop"
    assert s.get("v1", "Service", "prod-web") is not None
    first = generated_configmaps(kube, namespace)
    assert len(first) == 1
    volume = web["spec"]["template"]["spec"]["volumes"][0]["configMap"]["name"]
    assert volume == first[0]  # kustomize rewrote the reference to the generated name
    s.repo.commit({"bases/web/config/app.properties": "greeting=bonjour\n"})
    again = s.sync("envs/prod", prune=True)
    assert again.error == "" and again.rendered
    second = generated_configmaps(kube, namespace)
    assert len(second) == 1 and second != first  # the old generated ConfigMap was pruned
    assert s.get("v1", "ConfigMap", second[0])["data"] == {"app.properties": "greeting=bonjour\n"}


def test_through_the_fleet_an_overlay_with_an_outside_base_syncs_and_follows_base_changes(
    fleet: FleetEnv,
):
    app, cluster = fleet.app_name(0), sorted(fleet.clusters)[0]
    root = f"{app}/"
    fleet.repo.commit(layout(root))
    fleet.store.put_app(
        AppRecord(
            name=app,
            source=AppSource(repo=fleet.repo_url, path=f"{root}envs/prod"),
            destination=AppDestination(namespace=app, cluster=cluster),
            sync_policy=SyncPolicy(
                automated=True, create_namespace=True, prune=True, interval_s=3600
            ),
        ),
        create=True,
    )
    fleet.created.append((app, cluster, app))  # its namespace is deleted after the test
    fleet.worker_thread("alpha")
    answer = fleet.sync_and_wait(app, cluster)
    assert answer["result"] == "succeeded", answer
    status = fleet.status(app, cluster)
    assert (status.sync_status, status.health) == (SyncStatus.SYNCED, Health.HEALTHY)
    web = fleet.live(cluster, ObjectRef("apps", "v1", "Deployment", app, "prod-web"))
    assert web is not None and web["spec"]["replicas"] == 2
    kube = fleet.clusters[cluster].client()
    try:
        first = generated_configmaps(kube, app)
        fleet.repo.commit({f"{root}bases/web/config/app.properties": "greeting=hola\n"})
        pushed = fleet.sync_and_wait(app, cluster, trigger=Trigger.WEBHOOK)
        assert pushed["result"] == "succeeded", pushed
        second = generated_configmaps(kube, app)
    finally:
        kube.close()
    assert len(second) == 1 and second != first
