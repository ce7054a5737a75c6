"""Project boundaries and where scope comes from: `Boundaries.refusal` and `prepare.crd_scopes`
are pure, so the rules are tested here with plain documents."""

from __future__ import annotations

from typing import Any

import pytest

from fleet.engine.plan.boundaries import Boundaries
from fleet.engine.plan.prepare import crd_scopes, prepare
from fleet.engine.plan.tracking import Owner
from fleet.errors import OutsideProject, RenderError
from fleet.model import Manifest, ObjectRef

RBAC = "rbac.authorization.k8s.io"
TEAM = Boundaries(namespaces=("team-*",), cluster_kinds=frozenset(), project="team-a")
WITH_CRDS = Boundaries(
    namespaces=("team-*",),
    cluster_kinds=frozenset({"apiextensions.k8s.io/CustomResourceDefinition"}),
    project="team-a",
)


def crd(group: str, kind: str, *, scope: str = "Namespaced", hook: str = "") -> Manifest:
    meta: dict[str, Any] = {"name": f"{kind.lower()}s.{group}"}
    if hook:
        meta["annotations"] = {"argocd.argoproj.io/hook": hook}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": meta,
        "spec": {"group": group, "scope": scope, "names": {"kind": kind}},
    }


@pytest.mark.parametrize(
    ("ref", "namespaced", "expected"),
    [
        (ObjectRef("", "v1", "ConfigMap", "team-x", "a"), True, ""),
        (
            ObjectRef("", "v1", "ConfigMap", "kube-system", "a"),
            True,
            "namespace kube-system is not an allowed destination of project team-a "
            "(allowed there: team-*)",
        ),
        (
            ObjectRef(RBAC, "v1", "ClusterRoleBinding", "team-x", "pwn"),
            False,
            f"cluster-scoped kind {RBAC}/ClusterRoleBinding is not allowed: project team-a "
            "allows no cluster-scoped kinds",
        ),
    ],
    ids=["allowed-namespace", "other-namespace", "cluster-scoped-despite-a-namespace"],
)
def test_refusal_judges_namespaced_objects_by_namespace_and_others_by_kind(
    ref: ObjectRef, namespaced: bool, expected: str
) -> None:
    assert TEAM.refusal(ref, namespaced=namespaced) == expected


def test_refusal_lists_the_cluster_scoped_kinds_a_project_allows() -> None:
    bounds = Boundaries(cluster_kinds=frozenset({"Namespace", f"{RBAC}/ClusterRole"}), project="p")
    binding = ObjectRef(RBAC, "v1", "ClusterRoleBinding", "", "x")

    assert bounds.refusal(binding, namespaced=False) == (
        f"cluster-scoped kind {RBAC}/ClusterRoleBinding is not allowed: project p allows only "
        f"the cluster-scoped kinds Namespace, {RBAC}/ClusterRole"
    )
    assert bounds.refusal(ObjectRef("", "v1", "Namespace", "", "n"), namespaced=False) == ""
    assert Boundaries().refusal(binding, namespaced=False) == ""


@pytest.mark.parametrize(
    ("objects", "bounds", "expected"),
    [
        ([crd("example.com", "Widget")], WITH_CRDS, {("example.com", "Widget"): True}),
        ([crd("example.com", "Gadget", scope="Cluster")], None, {("example.com", "Gadget"): False}),
        ([crd(RBAC, "ClusterRoleBinding", hook="Skip")], WITH_CRDS, {}),
        ([crd(RBAC, "ClusterRoleBinding", hook="PreSync")], WITH_CRDS, {}),
        ([crd(RBAC, "ClusterRoleBinding", hook="PreDelete")], WITH_CRDS, {}),
        ([crd("example.com", "Widget")], TEAM, {}),
        ([{**crd("example.com", "Widget"), "apiVersion": "evil.example.com/v1"}], None, {}),
    ],
    ids=[
        "applied-and-allowed",
        "unrestricted-project",
        "skip-hook-is-never-applied",
        "hook-is-not-a-resource-of-the-sync",
        "delete-hook-is-never-applied",
        "project-allows-no-crds",
        "kind-named-crd-in-another-group",
    ],
)
def test_only_crds_the_sync_applies_and_the_project_allows_give_a_scope(
    objects: list[Manifest], bounds: Boundaries | None, expected: dict[tuple[str, str], bool]
) -> None:
    assert crd_scopes(objects, bounds or Boundaries()) == expected


def test_two_crds_that_disagree_on_a_scope_are_refused() -> None:
    both = [crd("example.com", "Widget"), crd("example.com", "Widget", scope="Cluster")]
    with pytest.raises(RenderError, match="different scopes"):
        crd_scopes(both)


def test_a_rendered_crd_cannot_change_the_scope_of_a_kind_the_cluster_serves() -> None:
    """The orchestrator asks discovery first (`fleet.engine.sync._prepare`); a fake CRD for a
    served kind changes nothing, so the binding is judged as the cluster-scoped object it is."""
    served = {(f"{RBAC}/v1", "ClusterRoleBinding"): False, ("v1", "ServiceAccount"): True}
    served[("apiextensions.k8s.io/v1", "CustomResourceDefinition")] = False
    binding: Manifest = {
        "apiVersion": f"{RBAC}/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "pwn"},
    }
    objects = [crd(RBAC, "ClusterRoleBinding", hook="Skip"), binding]
    scopes = crd_scopes(objects, TEAM)

    def scope_of(api_version: str, kind: str) -> bool | None:
        found = served.get((api_version, kind))
        return found if found is not None else scopes.get((api_version.rpartition("/")[0], kind))

    with pytest.raises(OutsideProject) as err:
        prepare(
            objects,
            owner=Owner("shop", "u1", "team-a"),
            namespace="team-x",
            scope_of=scope_of,
            revision="abc1234",
            boundaries=TEAM,
        )
    assert f"ClusterRoleBinding/pwn: cluster-scoped kind {RBAC}/ClusterRoleBinding" in str(
        err.value
    )
