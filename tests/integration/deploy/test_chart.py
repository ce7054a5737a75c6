"""The Helm chart (`deploy/chart`) and the manifests rendered from it (`deploy/manifests`).

Lint and render need only the helm binary; the rest runs against the testbed: every rendered
object passes the API server's own validation (a server-side dry-run), and a real `helm
install` into a namespace of its own creates every object, its pods become Ready on the kwok
nodes, and `helm upgrade` keeps the secrets the install generated.
"""

from __future__ import annotations

import base64
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from deploy.manifests import CHART, HERE, literal_env, render_all
from deploy.testbed.process import wait_for
from fleet.kube.client import KubeClient
from fleet.model import ObjectRef
from tests.conftest import Cluster

RELEASE = "gitfleet"
VALUES = {"default": (), "ha": ("values-ha.yaml",)}
SERVICE_MONITOR = "monitoring.coreos.com/v1/ServiceMonitor"
GENERATED_KEYS = ("secret-key", "admin-token", "webhook-secret", "redis-password")


def helm(binary: Path, *args: str, kubeconfig: Path | None = None) -> str:
    command = [str(binary), *args]
    if kubeconfig is not None:
        command += ["--kubeconfig", str(kubeconfig)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, f"helm {' '.join(args)} failed:\n{done.stderr}"
    return done.stdout


def values_args(variant: str) -> list[str]:
    return [arg for name in VALUES[variant] for arg in ("--values", str(CHART / name))]


def template(binary: Path, variant: str, namespace: str, *extra: str) -> list[dict[str, Any]]:
    text = helm(
        binary, "template", RELEASE, str(CHART), "-n", namespace, *values_args(variant), *extra
    )
    return [doc for doc in yaml.safe_load_all(text) if doc]


def kinds(objects: list[dict[str, Any]]) -> list[str]:
    return sorted(f"{o['kind']}/{o['metadata']['name']}" for o in objects)


@pytest.mark.parametrize("variant", sorted(VALUES))
def test_chart_lints_with_default_and_ha_values(helm_binary: Path, variant: str) -> None:
    out = helm(helm_binary, "lint", "--strict", str(CHART), *values_args(variant))
    assert "1 chart(s) linted, 0 chart(s) failed" in out


def test_default_render_has_every_component_and_no_servicemonitor_without_its_crd(
    helm_binary: Path,
) -> None:
    objects = template(helm_binary, "default", "gitfleet")
    assert kinds(objects) == [
        "ClusterRole/gitfleet-in-cluster-gitfleet",
        "ClusterRoleBinding/gitfleet-in-cluster-gitfleet",
        "Deployment/gitfleet-api",
        "Deployment/gitfleet-worker",
        "NetworkPolicy/gitfleet-api",
        "NetworkPolicy/gitfleet-redis",
        "NetworkPolicy/gitfleet-worker",
        "PodDisruptionBudget/gitfleet-api",
        "PodDisruptionBudget/gitfleet-worker",
        "Secret/gitfleet-secrets",
        "Service/gitfleet-api",
        "Service/gitfleet-redis",
        "ServiceAccount/gitfleet-api",
        "ServiceAccount/gitfleet-redis",
        "ServiceAccount/gitfleet-worker",
        "StatefulSet/gitfleet-redis",
    ]
    by_name = {f"{o['kind']}/{o['metadata']['name']}": o for o in objects}
    api = by_name["Deployment/gitfleet-api"]["spec"]
    workers = by_name["Deployment/gitfleet-worker"]["spec"]
    assert (api["replicas"], workers["replicas"]) == (2, 2)
    container = api["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert api["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
    assert container["image"] == f"gitfleet:{project_version()}"
    redis = by_name["StatefulSet/gitfleet-redis"]["spec"]
    assert "--appendonly" in redis["template"]["spec"]["containers"][0]["command"]
    assert redis["volumeClaimTemplates"][0]["metadata"]["name"] == "data"


def test_servicemonitor_and_ingress_render_when_asked(helm_binary: Path) -> None:
    extra = ["--api-versions", SERVICE_MONITOR, "--set", "ingress.enabled=true"]
    objects = template(helm_binary, "default", "gitfleet", *extra)
    found = kinds(objects)
    assert "ServiceMonitor/gitfleet-api" in found
    assert "Ingress/gitfleet" in found


def test_ha_render_scales_out_and_uses_the_external_redis(helm_binary: Path) -> None:
    objects = template(helm_binary, "ha", "gitfleet")
    by_name = {f"{o['kind']}/{o['metadata']['name']}": o for o in objects}
    assert by_name["Deployment/gitfleet-api"]["spec"]["replicas"] == 3
    assert by_name["Deployment/gitfleet-worker"]["spec"]["replicas"] == 4
    assert "StatefulSet/gitfleet-redis" not in by_name
    env = by_name["Deployment/gitfleet-worker"]["spec"]["template"]["spec"]["containers"][0]
    url = next(e for e in env["env"] if e["name"] == "GITFLEET_REDIS_URL")
    assert url["valueFrom"]["secretKeyRef"] == {"name": "gitfleet-redis", "key": "redis-url"}


def test_namespaced_rbac_renders_a_role_per_namespace(helm_binary: Path) -> None:
    extra = ["--set", "rbac.inCluster.scope=namespaced", "--set", "rbac.inCluster.namespaces={a,b}"]
    objects = template(helm_binary, "default", "gitfleet", *extra)
    roles = [(o["kind"], o["metadata"].get("namespace")) for o in objects if "Role" in o["kind"]]
    assert ("Role", "a") in roles and ("RoleBinding", "b") in roles
    assert ("ClusterRole", None) in roles  # discovery only
    cluster_roles = [o for o in objects if o["kind"] == "ClusterRole"]
    assert all("*" not in rule.get("resources", []) for rule in cluster_roles[0]["rules"])


def test_manifests_equal_a_fresh_render(helm_binary: Path) -> None:
    fresh = render_all(helm_binary)
    checked_in = {path.name: path.read_text() for path in HERE.glob("*.yaml")}
    assert checked_in == fresh, "deploy/manifests is stale: run `make manifests`"


def test_the_manifests_literal_environment_is_what_the_pods_get() -> None:
    worker = literal_env("worker")
    assert worker["GITFLEET_CACHE_DIR"] == "/var/cache/gitfleet"
    assert worker["GITFLEET_WORKER_HEALTH_PORT"] == "8081"
    assert worker["GITFLEET_REDIS_URL"] == "redis://:$(REDIS_PASSWORD)@gitfleet-redis:6379/0"
    assert literal_env("api")["GITFLEET_IN_CLUSTER"] == "true"
    assert "GITFLEET_SECRET_KEY" not in worker  # a Secret reference, not a literal


def project_version() -> str:
    text = (CHART.parents[1] / "pyproject.toml").read_text()
    line = next(line for line in text.splitlines() if line.startswith("version = "))
    return line.split('"')[1]


def test_chart_app_version_is_the_project_version() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == project_version()


# -- against the testbed ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def servicemonitor_crd(cluster: Cluster) -> Iterator[None]:
    """A minimal ServiceMonitor CRD, so the chart's ServiceMonitor branch can be dry-run."""
    kube = cluster.client()
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
        "spec": {
            "group": "monitoring.coreos.com",
            "names": {"kind": "ServiceMonitor", "plural": "servicemonitors"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }
    kube.apply(crd)
    ref = ObjectRef.of(crd)

    def served() -> bool:
        kube.forget_discovery()
        return kube.has_kind("monitoring.coreos.com/v1", "ServiceMonitor")

    wait_for(served, what="the ServiceMonitor CRD served", timeout=60, period=0.5)
    yield
    kube.delete(ref)
    kube.close()


@pytest.mark.parametrize("variant", sorted(VALUES))
def test_every_rendered_object_passes_a_server_side_dry_run(
    helm_binary: Path, kube: KubeClient, namespace: str, servicemonitor_crd: None, variant: str
) -> None:
    extra = ["--api-versions", SERVICE_MONITOR, "--set", "ingress.enabled=true"]
    objects = template(helm_binary, variant, namespace, *extra)
    assert "ServiceMonitor/gitfleet-api" in kinds(objects)
    kube.forget_discovery()
    failed = []
    for obj in objects:
        if kube.is_namespaced(obj["apiVersion"], obj["kind"]):
            obj["metadata"].setdefault("namespace", namespace)
        try:
            kube.apply(obj, dry_run=True)
        except Exception as e:
            failed.append(f"{obj['kind']}/{obj['metadata']['name']}: {e}")
    assert not failed, "\n".join(failed)
    assert kube.list("apps/v1", "Deployment", namespace=namespace) == []  # dry-run wrote nothing


@pytest.fixture(scope="module")
def release(
    cluster: Cluster, helm_binary: Path, servicemonitor_crd: None
) -> Iterator[tuple[KubeClient, str]]:
    """The chart installed with its default values in a namespace of its own, with a volume
    for Redis's claim (the testbed has no storage provisioner), into a cluster that serves
    ServiceMonitors; uninstalled afterwards."""
    kube = cluster.client()
    namespace = f"t-chart-{uuid.uuid4().hex[:8]}"
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    volume = redis_volume(namespace)
    kube.create(volume)
    helm(
        helm_binary,
        *("install", RELEASE, str(CHART), "-n", namespace),
        kubeconfig=cluster.kubeconfig,
    )
    try:
        yield kube, namespace
    finally:
        helm(helm_binary, "uninstall", RELEASE, "-n", namespace, kubeconfig=cluster.kubeconfig)
        kube.delete(ObjectRef("", "v1", "Namespace", "", namespace))
        kube.delete(ObjectRef.of(volume))
        kube.close()


def redis_volume(namespace: str) -> dict[str, Any]:
    """A PersistentVolume bound in advance to the claim of the chart's Redis in `namespace`."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"{namespace}-redis"},
        "spec": {
            "capacity": {"storage": "8Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "hostPath": {"path": f"/var/lib/gitfleet-test/{namespace}"},
            "claimRef": {"namespace": namespace, "name": f"data-{RELEASE}-redis-0"},
        },
    }


def installed_objects(helm_binary: Path, cluster: Cluster, namespace: str) -> list[ObjectRef]:
    text = helm(
        helm_binary, "get", "manifest", RELEASE, "-n", namespace, kubeconfig=cluster.kubeconfig
    )
    refs = []
    for doc in yaml.safe_load_all(text):
        if doc:
            doc["metadata"].setdefault("namespace", namespace)
            refs.append(ObjectRef.of(doc))
    return refs


def ready_pods(kube: KubeClient, namespace: str, seen: set[str]) -> set[str]:
    """Names of the release's pods seen Ready so far (kwok's nodes flap NotReady now and then,
    which turns Ready off with nothing to turn it back: a pod counts once seen Ready)."""
    for pod in kube.list("v1", "Pod", namespace=namespace):
        conditions = (pod.get("status") or {}).get("conditions") or []
        if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
            seen.add(pod["metadata"]["name"])
    return seen


def may(kube: KubeClient, user: str, verb: str, resource: str) -> bool:
    """Whether the API server lets `user` `verb` `resource` in any namespace (a
    SubjectAccessReview): the in-cluster RBAC the chart binds."""
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": user,
            "groups": ["system:serviceaccounts", "system:authenticated"],
            "resourceAttributes": {"verb": verb, "resource": resource, "group": "*"},
        },
    }
    answer = kube.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=review)
    return bool(answer["status"].get("allowed"))


def test_helm_install_creates_every_object_and_all_pods_become_ready(
    release: tuple[KubeClient, str], helm_binary: Path, cluster: Cluster
) -> None:
    kube, namespace = release
    refs = installed_objects(helm_binary, cluster, namespace)
    assert len(refs) == 17  # the default render's 16 and a ServiceMonitor: its CRD is there
    assert (
        ObjectRef("monitoring.coreos.com", "v1", "ServiceMonitor", namespace, "gitfleet-api")
        in refs
    )
    missing = [str(ref) for ref in refs if kube.get(ref) is None]
    assert not missing, f"not created: {missing}"
    expected = 2 + 2 + 1  # API replicas, one worker per shard, Redis
    seen: set[str] = set()

    def all_ready() -> bool:
        pods = kube.list("v1", "Pod", namespace=namespace)
        ready_pods(kube, namespace, seen)
        return len(pods) == expected and {p["metadata"]["name"] for p in pods} <= seen

    wait_for(all_ready, what=f"{expected} pods Ready in {namespace}", timeout=180, period=1.0)
    assert may(kube, f"system:serviceaccount:{namespace}:gitfleet-worker", "create", "deployments")
    for bound_to_nothing in ("gitfleet-api", "gitfleet-redis"):
        assert not may(kube, f"system:serviceaccount:{namespace}:{bound_to_nothing}", "get", "pods")
    claim = kube.get(
        ObjectRef("", "v1", "PersistentVolumeClaim", namespace, "data-gitfleet-redis-0")
    )
    assert claim is not None and claim["status"]["phase"] == "Bound"


def test_helm_upgrade_keeps_the_generated_secrets(
    release: tuple[KubeClient, str], helm_binary: Path, cluster: Cluster
) -> None:
    kube, namespace = release
    ref = ObjectRef("", "v1", "Secret", namespace, f"{RELEASE}-secrets")
    before = (kube.get(ref) or {}).get("data") or {}
    assert sorted(before) == sorted(GENERATED_KEYS)
    assert all(len(base64.b64decode(value)) >= 32 for value in before.values())
    helm(
        helm_binary,
        *("upgrade", RELEASE, str(CHART), "-n", namespace, "--set", "workers.shards=3"),
        kubeconfig=cluster.kubeconfig,
    )
    after = (kube.get(ref) or {}).get("data") or {}
    assert after == before
    workers = kube.get(ObjectRef("apps", "v1", "Deployment", namespace, f"{RELEASE}-worker"))
    assert workers is not None and workers["spec"]["replicas"] == 3
