"""The testbed behaves like a real cluster: SSA, conflicts, CRDs, controllers, GC, isolation."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from fleet.errors import KubeApiError
from fleet.kube.client import KubeClient
from fleet.model import Manifest, ObjectRef
from tests.conftest import Cluster
from tests.support.wait import eventually


def configmap(ns: str, name: str, data: dict[str, str]) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns},
        "data": data,
    }


def test_server_side_apply_records_gitfleet_as_apply_manager(kube: KubeClient, namespace: str):
    live = kube.apply(configmap(namespace, "cm", {"a": "1"}))
    entries = [(m["manager"], m["operation"]) for m in live["metadata"]["managedFields"]]
    assert ("gitfleet", "Apply") in entries
    assert live["data"] == {"a": "1"}


def test_second_manager_without_force_gets_a_conflict(kube: KubeClient, namespace: str):
    kube.apply(configmap(namespace, "cm", {"a": "1"}))
    with pytest.raises(KubeApiError) as err:
        kube.apply(configmap(namespace, "cm", {"a": "2"}), manager="someone-else", force=False)
    assert err.value.status == 409
    assert "conflict" in str(err.value).lower()
    assert kube.get(ObjectRef("", "v1", "ConfigMap", namespace, "cm"))["data"] == {"a": "1"}


def widget_crd(group: str) -> Manifest:
    schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


def is_established(kube: KubeClient, name: str) -> bool:
    crd = kube.get(ObjectRef("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "", name))
    conditions = (crd or {}).get("status", {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def test_custom_resource_applies_and_goes_away_with_its_crd(kube: KubeClient, namespace: str):
    group = f"g{uuid.uuid4().hex[:8]}.example.com"
    crd = kube.apply(widget_crd(group))
    eventually(lambda: is_established(kube, crd["metadata"]["name"]), what="CRD Established")
    widget = {
        "apiVersion": f"{group}/v1",
        "kind": "Widget",
        "metadata": {"name": "w1", "namespace": namespace},
        "spec": {"size": 3},
    }
    kube.apply(widget)
    ref = ObjectRef.of(widget)
    assert kube.get(ref)["spec"] == {"size": 3}
    kube.delete(ObjectRef.of(crd))

    def widget_kind_gone() -> bool:
        kube.forget_discovery()
        return not kube.has_kind(f"{group}/v1", "Widget")

    eventually(widget_kind_gone, what="Widget kind removed")
    crd_ref = ObjectRef.of(crd)
    eventually(lambda: kube.get(crd_ref) is None, what="CRD deleted with its resources")


def deployment(ns: str, name: str, replicas: int) -> Manifest:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "example.com/app:1"}]},
            },
        },
    }


def condition(obj: Manifest | None, kind: str) -> str:
    for c in (obj or {}).get("status", {}).get("conditions", []):
        if c["type"] == kind:
            return str(c["status"])
    return ""


def test_deployment_becomes_available_through_kwok(kube: KubeClient, namespace: str):
    ref = ObjectRef.of(kube.apply(deployment(namespace, "web", 2)))

    def available() -> Manifest | None:
        live = kube.get(ref)
        return live if condition(live, "Available") == "True" else None

    live = eventually(available, what="Deployment Available")
    assert live["status"]["availableReplicas"] == 2
    pods = kube.list("v1", "Pod", namespace=namespace, label_selector="app=web")
    assert len(pods) == 2
    assert all(p["status"]["phase"] == "Running" for p in pods)
    assert all(p["spec"]["nodeName"].startswith("kwok-node-") for p in pods)


def test_job_pods_complete_and_the_job_succeeds(kube: KubeClient, namespace: str):
    job: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "once", "namespace": namespace},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "run", "image": "example.com/run:1"}],
                }
            }
        },
    }
    ref = ObjectRef.of(kube.apply(job))
    live = eventually(
        lambda: (j := kube.get(ref)) and condition(j, "Complete") == "True" and j, what="Job done"
    )
    assert live["status"]["succeeded"] == 1


def test_owned_object_is_garbage_collected_after_its_owner(kube: KubeClient, namespace: str):
    owner = kube.apply(configmap(namespace, "owner", {"k": "v"}))
    child = configmap(namespace, "child", {"k": "v"})
    child["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    ]
    kube.apply(child)
    child_ref = ObjectRef.of(child)
    assert kube.get(child_ref) is not None
    kube.delete(ObjectRef.of(owner))
    eventually(lambda: kube.get(child_ref) is None, what="child garbage-collected")


def test_the_two_clusters_are_isolated(testbed: list[Cluster]):
    first, second = (c.client() for c in testbed[:2])
    name = f"iso-{uuid.uuid4().hex[:8]}"
    for client, value in ((first, "one"), (second, "two")):
        client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        client.apply(configmap(name, "same", {"cluster": value}))
    ref = ObjectRef("", "v1", "ConfigMap", name, "same")
    assert first.get(ref)["data"] == {"cluster": "one"}
    assert second.get(ref)["data"] == {"cluster": "two"}
    first.delete(ObjectRef("", "v1", "Namespace", "", name))
    eventually(lambda: first.get(ref) is None, what="namespace content deleted in cluster-1")
    assert second.get(ref)["data"] == {"cluster": "two"}
    second.delete(ObjectRef("", "v1", "Namespace", "", name))
