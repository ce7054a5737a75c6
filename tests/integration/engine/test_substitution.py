"""Post-build `${var}` substitution through the whole fleet: one app spread over both testbed
clusters by a label selector lands each cluster's own values (its name and labels, the app's
parameters, defaults and escapes), and a variable set nowhere fails the sync naming it and the
file."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from fleet.engine.render.cache import Renderer
from fleet.engine.render.job import RenderParams
from fleet.engine.render.substitute import SubstitutionError, cluster_variables
from fleet.engine.source.cache import SourceCache
from fleet.model import ObjectRef
from tests.support.fleet import FleetEnv
from tests.support.gitrepo import GitRepo

TOKEN = "test-admin-token"

SETTINGS = """apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  cluster: ${cluster_name}
  region: ${cluster_label_region}
  tier: ${tier}
  zone: ${zone:=zone-a}
  script: echo $${HOME}
  replicas: "${replicas}"
"""

UNTOUCHED = """apiVersion: v1
kind: ConfigMap
metadata:
  name: script
  annotations:
    kustomize.toolkit.fluxcd.io/substitute: disabled
data:
  run.sh: echo ${NOT_A_PARAMETER}
"""

DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: web-${cluster_label_region}
spec:
  replicas: ${replicas}
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: registry.local/web:1
"""


@pytest.fixture
def api(fleet_api: Callable[..., TestClient]) -> TestClient:
    return fleet_api(TOKEN)


def _label_clusters(fleet: FleetEnv) -> dict[str, str]:
    """Give each testbed cluster a region label and this test's selector label."""
    regions = {}
    for index, name in enumerate(sorted(fleet.clusters)):
        region = f"region-{index}"
        record = fleet.store.get_cluster(name)
        labels = {"region": region, "fleet": fleet.prefix}
        fleet.store.put_cluster(dataclasses.replace(record, labels=labels))
        regions[name] = region
    return regions


def _create(api: TestClient, fleet: FleetEnv, app: str, params: dict[str, str]) -> None:
    body: dict[str, Any] = {
        "name": app,
        "source": {"repo": fleet.repo_url, "path": f"apps/{app}"},
        "destination": {"namespace": app, "clusterSelector": {"fleet": fleet.prefix}},
        "syncPolicy": {"createNamespace": True},
        "postBuild": {"substitute": params},
    }
    response = api.post("/api/v1/apps", json=body)
    assert response.status_code == 201, response.text
    fleet.created.extend((app, cluster, app) for cluster in fleet.clusters)


def test_each_cluster_gets_its_own_values(fleet: FleetEnv, api: TestClient) -> None:
    regions = _label_clusters(fleet)
    app = fleet.app_name(0)
    fleet.repo.commit(
        {
            f"apps/{app}/settings.yaml": SETTINGS,
            f"apps/{app}/script.yaml": UNTOUCHED,
            f"apps/{app}/deploy.yaml": DEPLOYMENT,
        }
    )
    _create(api, fleet, app, {"tier": "gold", "replicas": "2"})
    shown = api.get(f"/api/v1/apps/{app}").json()
    assert shown["spec"]["postBuild"] == {"substitute": {"tier": "gold", "replicas": "2"}}
    fleet.worker_thread("alpha")
    for cluster in sorted(fleet.clusters):
        answer = fleet.sync_and_wait(app, cluster)
        assert answer["result"] == "succeeded", (answer["error"], answer["message"])
    for cluster, region in regions.items():
        settings = fleet.live(cluster, ObjectRef("", "v1", "ConfigMap", app, "settings"))
        assert settings is not None
        assert settings["data"] == {
            "cluster": cluster,
            "region": region,
            "tier": "gold",
            "zone": "zone-a",
            "script": "echo ${HOME}",
            "replicas": "2",
        }
        script = fleet.live(cluster, ObjectRef("", "v1", "ConfigMap", app, "script"))
        assert script is not None and script["data"] == {"run.sh": "echo ${NOT_A_PARAMETER}"}
        web = fleet.live(cluster, ObjectRef("apps", "v1", "Deployment", app, f"web-{region}"))
        assert web is not None and web["spec"]["replicas"] == 2
    assert len(set(regions.values())) == 2  # two clusters, two different renders


def test_a_variable_set_nowhere_fails_the_sync_naming_it_and_the_file(
    fleet: FleetEnv, api: TestClient
) -> None:
    _label_clusters(fleet)
    app = fleet.app_name(1)
    fleet.repo.commit({f"apps/{app}/settings.yaml": SETTINGS})
    _create(api, fleet, app, {"replicas": "1"})  # no `tier`
    fleet.worker_thread("alpha")
    cluster = sorted(fleet.clusters)[0]
    answer = fleet.sync_and_wait(app, cluster)
    assert answer["error_stage"] == "render", answer
    assert "${tier}" in answer["error"] and f"apps/{app}/settings.yaml" in answer["error"]
    assert fleet.live(cluster, ObjectRef("", "v1", "ConfigMap", app, "settings")) is None


def test_parameter_names_are_checked_by_the_api(fleet: FleetEnv, api: TestClient) -> None:
    app = fleet.app_name(2)
    for bad in ("1tier", "cluster_name"):
        body = {
            "name": app,
            "source": {"repo": fleet.repo_url, "path": f"apps/{app}"},
            "destination": {"namespace": app, "cluster": sorted(fleet.clusters)[0]},
            "postBuild": {"substitute": {bad: "x"}},
        }
        response = api.post("/api/v1/apps", json=body)
        assert response.status_code == 422 and bad in response.text, response.text


CHART_CM = """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
data:
  color: {{ .Values.color | quote }}
  size: {{ .Values.size | quote }}
  cluster: ${cluster_name}
"""


def test_helm_values_and_output_take_the_same_variables(
    helm_binary: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    source: SourceCache,
    renderer: Renderer,
) -> None:
    monkeypatch.setenv("GITFLEET_HELM", str(helm_binary))
    repo = GitRepo.create(tmp_path / "repo")
    repo.commit(
        {
            "chart/Chart.yaml": "apiVersion: v2\nname: web\nversion: 1.0.0\n",
            "chart/values.yaml": "color: blue\nsize: small\n",
            "chart/templates/cm.yaml": CHART_CM,
        }
    )
    resolved = source.resolve(repo.url)

    def render(cluster: str, labels: dict[str, str]) -> dict[str, str]:
        variables = tuple({"size": "large", **cluster_variables(cluster, labels)}.items())
        params = RenderParams(
            release_name="web",
            values=(("size", "${size}"),),
            values_yaml=("color: ${cluster_label_color:=grey}\n",),
            substitute=variables,
        )
        data: dict[str, str] = renderer.render(source, resolved, "chart", params).objects[0]["data"]
        return data

    assert render("east", {"color": "red"}) == {"color": "red", "size": "large", "cluster": "east"}
    assert render("west", {}) == {"color": "grey", "size": "large", "cluster": "west"}
    broken = RenderParams(values=(("size", "${nowhere}"),), substitute=())
    with pytest.raises(SubstitutionError, match=r"helm parameter size.*\$\{nowhere\}"):
        renderer.render(source, resolved, "chart", broken)
