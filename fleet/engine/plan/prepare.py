"""Prepare rendered objects for ordering and apply: namespaces, names, ownership, boundaries.

Pure: the caller passes `scope_of`, which says whether a kind is namespaced, so this module never
talks to a cluster. The caller asks the target cluster's discovery first; `crd_scopes` answers
only for the kinds the cluster does not serve yet, from the CRDs this sync will really apply:
`crd_scopes` counts a CustomResourceDefinition only when it is a normal resource of the sync
(not a hook, not skipped) and the project allows it. A rendered document can therefore never
change the scope of a kind the cluster serves (a "CRD" claiming ClusterRoleBinding is namespaced
is ignored), nor define one through an object that is never applied.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from fleet.engine.plan import hooks, tracking
from fleet.engine.plan.boundaries import UNBOUNDED, Boundaries
from fleet.engine.plan.order import hook_phases, is_hook
from fleet.engine.plan.references import CRD_GROUP_KIND
from fleet.errors import OrderError, OutsideProject, RenderError
from fleet.model import Manifest, ObjectRef

ScopeOf = Callable[[str, str], bool | None]  # (apiVersion, kind) -> namespaced? None: unknown

__all__ = ["Boundaries", "ScopeOf", "check_boundaries", "crd_scopes", "prepare"]


def crd_scopes(
    objects: Sequence[Manifest], boundaries: Boundaries = UNBOUNDED
) -> dict[tuple[str, str], bool]:
    """{(group, kind): namespaced} from the CRDs of the render that this sync applies as normal
    resources and that `boundaries` allow (see the module docstring). Two such CRDs that
    disagree on a kind's scope raise RenderError."""
    scopes: dict[tuple[str, str], bool] = {}
    for obj in objects:
        if not _applied_crd(obj, boundaries):
            continue
        spec = obj.get("spec") or {}
        key = (str(spec.get("group", "")), str((spec.get("names") or {}).get("kind", "")))
        namespaced = spec.get("scope") != "Cluster"
        if scopes.setdefault(key, namespaced) != namespaced:
            raise RenderError(
                f"two CRDs of this sync give kind {key[1]} of group {key[0]} "
                "different scopes; keep one",
                obj=str(ObjectRef.of(obj)),
            )
    return scopes


def _applied_crd(obj: Manifest, boundaries: Boundaries) -> bool:
    ref = ObjectRef.of(obj)
    if (ref.group, ref.kind) != CRD_GROUP_KIND or is_hook(obj) or not hook_phases(obj):
        return False
    return not boundaries.refusal(ref, namespaced=False)  # a CRD is cluster-scoped


def prepare(
    objects: Sequence[Manifest],
    *,
    owner: tracking.Owner,
    namespace: str,
    scope_of: ScopeOf,
    revision: str,
    boundaries: Boundaries = UNBOUNDED,
    run_id: str = "",
) -> list[Manifest]:
    """Copies of `objects` with namespaces set, hooks labelled with their identity and
    generateName hooks named for the sync run `run_id` (the revision when empty), and ownership
    marked."""
    prepared = []
    unknown: list[str] = []
    generated: dict[ObjectRef, str] = {}
    for obj in objects:
        namespaced = scope_of(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        if namespaced is None:
            unknown.append(str(ObjectRef.of(obj)))
            continue
        placed = _placed(obj, namespaced, namespace)
        if is_hook(placed):
            prefix = hooks.generate_name(placed)
            placed = hooks.name_instance(placed, app=owner.app, run_id=run_id or revision)
            if prefix:
                _check_generated(generated, ObjectRef.of(placed), prefix)
        prepared.append(tracking.mark(placed, owner))
    if unknown:
        raise RenderError(
            "unknown kinds (the cluster does not serve them, and no CRD that this sync applies "
            "and the project allows defines them): " + ", ".join(unknown)
        )
    check_boundaries(prepared, boundaries)
    return prepared


def _placed(obj: Manifest, namespaced: bool, namespace: str) -> Manifest:
    meta = dict(obj.get("metadata") or {})
    if namespaced:
        meta["namespace"] = meta.get("namespace") or namespace
    else:
        meta.pop("namespace", None)
    return {**obj, "metadata": meta}


def _check_generated(seen: dict[ObjectRef, str], ref: ObjectRef, prefix: str) -> None:
    """Two generateName hooks with one identity would be one hook: refuse, naming them."""
    if ref in seen:
        where = "/".join(filter(None, (ref.kind, ref.namespace, f"{prefix}*")))
        raise OrderError(
            f"{where} is declared twice: two hooks of the same kind and namespace share "
            "generateName and phases; give one of them another generateName",
            obj=where,
        )
    seen[ref] = prefix


def check_boundaries(objects: Sequence[Manifest], boundaries: Boundaries) -> None:
    """Raise one OutsideProject listing every object outside the project's boundaries. Each
    object's namespace was set from `scope_of` (`_placed`): set means namespaced."""
    refused = [
        f"{ref}: {reason}"
        for ref in map(ObjectRef.of, objects)
        if (reason := boundaries.refusal(ref, namespaced=bool(ref.namespace)))
    ]
    if refused:
        raise OutsideProject("the project does not allow: " + "; ".join(refused))
