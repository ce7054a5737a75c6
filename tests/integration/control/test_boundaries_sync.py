"""Project bounds travel in every SyncRequest, so the engine refuses what they forbid."""

from __future__ import annotations

from pathlib import Path

from fleet.control.policy import check_app_allowed, request_for
from fleet.control.registry.records import (
    AppDestination,
    AppRecord,
    AppSource,
    Destination,
    ProjectRecord,
)
from fleet.engine import sync
from fleet.engine.caches import SyncCaches
from fleet.kube.client import KubeClient
from fleet.model import ObjectRef, Trigger
from tests.conftest import Cluster
from tests.support.gitrepo import GitRepo
from tests.support.gitserver import GitHttpServer

CONFIGMAP = """apiVersion: v1
kind: ConfigMap
metadata:
  name: {name}
{namespace}data:
  k: v
"""
CLUSTER_ROLE = """apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {name}
rules: []
"""


def app_for(repo_url: str, name: str, namespace: str) -> AppRecord:
    return AppRecord(
        name=name,
        project="team-a",
        source=AppSource(repo=repo_url, path="app"),
        destination=AppDestination(namespace=namespace, cluster="east"),
    )


def configmap(kube: KubeClient, namespace: str, name: str) -> object:
    return kube.get(ObjectRef("", "v1", "ConfigMap", namespace, name))


def test_an_app_aimed_at_a_forbidden_namespace_is_refused_at_create_and_again_at_sync(
    tmp_path: Path, cluster: Cluster, kube: KubeClient, namespace: str
) -> None:
    repo = GitRepo.create(tmp_path / "repo")
    repo.commit({"app/cm.yaml": CONFIGMAP.format(name="settings", namespace="")})
    project = ProjectRecord(
        "team-a", source_repos=("*",), destinations=(Destination("*", "team-*"),)
    )
    with GitHttpServer({"repo": repo.path}) as git:  # a project's repo is a URL, never a path
        app = app_for(git.url_for("repo"), f"bounded-{namespace}", namespace)
        at_create = check_app_allowed(app, project, [cluster.name])
        request = request_for(app, project, cluster.name, trigger=Trigger.MANUAL)
        result = sync.run(request, kube=kube, caches=SyncCaches.at(tmp_path / "cache"))

    assert at_create == [
        f"destination.namespace: namespace {namespace} on cluster {cluster.name} is not an "
        "allowed destination of project team-a (allowed there: team-*)"
    ]
    assert request.allowed_namespaces == ("team-*",)
    assert request.allowed_cluster_kinds == frozenset()
    assert result.error.startswith("the project does not allow:")
    assert (
        f"ConfigMap/{namespace}/settings: namespace {namespace} is not an allowed destination"
        in (result.error)
    )
    assert result.writes == 0
    assert configmap(kube, namespace, "settings") is None


def test_every_rendered_object_outside_the_project_is_refused_even_when_the_app_was_allowed(
    tmp_path: Path, cluster: Cluster, kube: KubeClient, namespace: str
) -> None:
    repo = GitRepo.create(tmp_path / "repo")
    role = f"bounded-{namespace}"
    repo.commit(
        {
            "app/ok.yaml": CONFIGMAP.format(name="ok", namespace=""),
            "app/stray.yaml": CONFIGMAP.format(
                name="stray", namespace="  namespace: kube-system\n"
            ),
            "app/role.yaml": CLUSTER_ROLE.format(name=role),
        }
    )
    project = ProjectRecord(
        "team-a", source_repos=("*",), destinations=(Destination(cluster.name, namespace),)
    )
    with GitHttpServer({"repo": repo.path}) as git:  # a project's repo is a URL, never a path
        app = app_for(git.url_for("repo"), f"bounded-{namespace}", namespace)
        at_create = check_app_allowed(app, project, [cluster.name])
        request = request_for(app, project, cluster.name, trigger=Trigger.MANUAL)
        result = sync.run(request, kube=kube, caches=SyncCaches.at(tmp_path / "cache"))

    assert at_create == []
    assert "ConfigMap/kube-system/stray: namespace kube-system is not an allowed destination" in (
        result.error
    )
    assert (
        f"ClusterRole/{role}: cluster-scoped kind rbac.authorization.k8s.io/ClusterRole is not "
        in (result.error)
    )
    assert configmap(kube, namespace, "ok") is None
    assert kube.get(ObjectRef("rbac.authorization.k8s.io", "v1", "ClusterRole", "", role)) is None
