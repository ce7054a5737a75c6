"""The project's boundaries at the moment of a write: scope from the cluster, rule from the project.

Every object a sync applies (hooks and SyncFail hooks, the namespace it creates, a Replace's
delete and re-create) and every object it deletes (a hook's previous run, prune candidates, a
cascading delete) passes `refusal` first, in `fleet.engine.apply`, `fleet.engine.waves` and
`fleet.engine.prune`. The scope (namespaced or cluster-scoped) is the one the target cluster's
discovery reports now, which is also the one the request's path is built from
(`KubeClient.object_path`): what the check judges is what the API server will write. A CRD
applied earlier in the same sync is served by then, so its custom resources are judged by the
scope the cluster really gives them, never by what a rendered document claims.
"""

from __future__ import annotations

from fleet.engine.plan.boundaries import Boundaries
from fleet.errors import OutsideProject
from fleet.kube.client import KubeClient
from fleet.model import ObjectRef

__all__ = ["Boundaries", "enforce", "refusal"]


def refusal(kube: KubeClient, boundaries: Boundaries, ref: ObjectRef) -> str:
    """`Kind/ns/name refused: <rule>` when `ref` is outside `boundaries`; "" when inside.
    Raises KubeApiError when the cluster does not serve the kind (nothing can be written)."""
    if boundaries.namespaces is None and boundaries.cluster_kinds is None:
        return ""
    namespaced = kube.is_namespaced(ref.api_version, ref.kind)
    reason = boundaries.refusal(ref, namespaced=namespaced)
    shown = ref if namespaced else ObjectRef(ref.group, ref.version, ref.kind, "", ref.name)
    return f"{shown} refused: {reason}" if reason else ""


def enforce(kube: KubeClient, boundaries: Boundaries, ref: ObjectRef, *, stage: str) -> None:
    """Raise OutsideProject (for `stage`) when `ref` is outside `boundaries`."""
    reason = refusal(kube, boundaries, ref)
    if reason:
        raise OutsideProject(reason, stage=stage, cluster=kube.name, obj=str(ref))
