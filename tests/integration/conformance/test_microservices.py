"""A thirty-object microservice app, written the way public charts are, schedules on the testbed.

Ten services, each a Deployment, a Service and a ConfigMap, every pod template with
`nodeSelector: kubernetes.io/os: linux` (what most public charts and Argo CD's sock-shop example
set), one of them also spread over zones by `topology.kubernetes.io/zone`. Synced through the
engine as `gitfleet sync` runs it, the app is Synced and Healthy: the kwok nodes carry the
well-known labels real nodes have (`deploy.testbed.runner.node_labels`), so the scheduler
places every pod.
"""

from __future__ import annotations

from pathlib import Path

from deploy.testbed.runner import NODE_REGION, NODE_ZONES
from fleet.kube.client import KubeClient
from fleet.model import Action, Health, SyncStatus
from tests.integration.engine.sync_helpers import scenario_for

SERVICES = (
    "front-end",
    "catalogue",
    "carts",
    "orders",
    "payment",
    "shipping",
    "user",
    "queue-master",
    "rabbitmq",
    "session-db",
)
WELL_KNOWN = (
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "kubernetes.io/hostname",
    "node.kubernetes.io/instance-type",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
)


def microservice(name: str, *, replicas: int = 1, spread: bool = False) -> str:
    """A Deployment, its Service and its ConfigMap, as a chart renders them."""
    spread_rule = (
        f"""      topologySpreadConstraints:
        - maxSkew: 1
          topologyKey: topology.kubernetes.io/zone
          whenUnsatisfiable: DoNotSchedule
          labelSelector: {{matchLabels: {{app: {name}}}}}
"""
        if spread
        else ""
    )
    return f"""apiVersion: v1
kind: ConfigMap
metadata:
  name: {name}-config
  labels: {{app: {name}}}
data:
  LOG_LEVEL: info
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  labels: {{app: {name}}}
spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      nodeSelector:
        kubernetes.io/os: linux
{spread_rule}      containers:
        - name: {name}
          image: example.com/sock-shop/{name}:0.4.8
          ports: [{{containerPort: 8080}}]
          envFrom: [{{configMapRef: {{name: {name}-config}}}}]
---
apiVersion: v1
kind: Service
metadata:
  name: {name}
  labels: {{app: {name}}}
spec:
  selector: {{app: {name}}}
  ports: [{{port: 80, targetPort: 8080}}]
"""


def test_the_testbeds_nodes_carry_the_well_known_labels_spread_over_zones(
    kube: KubeClient,
) -> None:
    nodes = kube.list("v1", "Node")

    assert len(nodes) >= 2
    for node in nodes:
        labels = node["metadata"]["labels"]
        assert set(WELL_KNOWN) <= set(labels), labels
        assert labels["kubernetes.io/os"] == "linux"
        assert labels["kubernetes.io/arch"] == "amd64"
        assert labels["kubernetes.io/hostname"] == node["metadata"]["name"]
        assert labels["topology.kubernetes.io/region"] == NODE_REGION
        assert labels["topology.kubernetes.io/zone"] in NODE_ZONES
    zones = {n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in nodes}
    assert len(zones) == min(len(nodes), len(NODE_ZONES))


def test_a_thirty_object_app_selecting_linux_nodes_is_synced_and_healthy(
    tmp_path: Path, kube: KubeClient, namespace: str
) -> None:
    s = scenario_for(tmp_path, kube, namespace)
    files: dict[str, str | bytes | None] = {
        f"app/{name}.yaml": microservice(
            name, replicas=2 if name == "front-end" else 1, spread=name == "front-end"
        )
        for name in SERVICES
    }
    s.repo.commit(files)

    result = s.sync(timeout=60.0)

    assert result.error == "", result.error
    assert len(result.resources) == 30
    assert result.sync_status == SyncStatus.SYNCED
    assert result.health == Health.HEALTHY
    assert {r.action for r in result.resources} == {Action.CREATED}
    unhealthy = [
        f"{r.ref}: {r.health} {r.message}" for r in result.resources if r.health != Health.HEALTHY
    ]
    assert unhealthy == []
    pods = kube.list("v1", "Pod", namespace=namespace)
    assert len(pods) == 11
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in kube.list("v1", "Node")}
    assert all(nodes[p["spec"]["nodeName"]]["kubernetes.io/os"] == "linux" for p in pods)
    front = [p for p in pods if p["metadata"]["labels"]["app"] == "front-end"]
    zones = {nodes[p["spec"]["nodeName"]]["topology.kubernetes.io/zone"] for p in front}
    assert len(zones) == 2  # spread over zones, as the chart asks

    again = s.sync(timeout=60.0)
    assert again.error == "" and again.writes == 0  # in sync: nothing to apply the second time
