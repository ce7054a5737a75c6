"""Prepare rendered objects for ordering and apply: namespaces, names, ownership, boundaries.

Pure: the caller passes `scope_of`, which says whether a kind is namespaced (from discovery, or
from a CRD rendered in the same sync), so this module never talks to a cluster.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fleet.engine.plan import tracking
from fleet.errors import ApplyError, RenderError
from fleet.model import Manifest, ObjectRef

ScopeOf = Callable[[str, str], bool | None]  # (apiVersion, kind) -> namespaced? None: unknown


@dataclass(frozen=True)
class Boundaries:
    """What a project lets an app deploy. None means unrestricted."""

    namespaces: tuple[str, ...] | None = None
    cluster_kinds: frozenset[str] | None = None


def crd_scopes(objects: Sequence[Manifest]) -> dict[tuple[str, str], bool]:
    """{(group, kind): namespaced} for every CRD in the render."""
    scopes: dict[tuple[str, str], bool] = {}
    for obj in objects:
        if obj.get("kind") == "CustomResourceDefinition":
            spec = obj.get("spec") or {}
            kind = (spec.get("names") or {}).get("kind", "")
            scopes[(spec.get("group", ""), kind)] = spec.get("scope") != "Cluster"
    return scopes


def prepare(
    objects: Sequence[Manifest],
    *,
    app: str,
    namespace: str,
    scope_of: ScopeOf,
    revision: str,
    boundaries: Boundaries = Boundaries(),
) -> list[Manifest]:
    """Copies of `objects` with namespaces set, hook names generated and ownership marked."""
    prepared = []
    unknown: list[str] = []
    for obj in objects:
        namespaced = scope_of(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        if namespaced is None:
            unknown.append(str(ObjectRef.of(obj)))
            continue
        prepared.append(tracking.mark(_placed(obj, namespaced, namespace, revision), app))
    if unknown:
        raise RenderError(
            "unknown kinds (the cluster does not serve them and no CRD in this sync defines "
            "them): " + ", ".join(unknown)
        )
    check_boundaries(prepared, boundaries)
    return prepared


def _placed(obj: Manifest, namespaced: bool, namespace: str, revision: str) -> Manifest:
    meta = dict(obj.get("metadata") or {})
    if namespaced:
        meta["namespace"] = meta.get("namespace") or namespace
    else:
        meta.pop("namespace", None)
    if not meta.get("name") and meta.get("generateName"):
        meta["name"] = f"{meta.pop('generateName')}{revision[:7]}"
    return {**obj, "metadata": meta}


def check_boundaries(objects: Sequence[Manifest], boundaries: Boundaries) -> None:
    """Raise one ApplyError listing every object outside the project's boundaries."""
    refused = [reason for obj in objects if (reason := _refusal(ObjectRef.of(obj), boundaries))]
    if refused:
        raise ApplyError("the project does not allow: " + "; ".join(refused))


def _refusal(ref: ObjectRef, boundaries: Boundaries) -> str:
    if ref.namespace and boundaries.namespaces is not None:
        if not any(fnmatch.fnmatchcase(ref.namespace, g) for g in boundaries.namespaces):
            return f"{ref}: namespace {ref.namespace} is not an allowed destination"
        return ""
    allowed = boundaries.cluster_kinds
    if not ref.namespace and allowed is not None and not {ref.group_kind, ref.kind} & allowed:
        return f"{ref}: cluster-scoped kind {ref.group_kind} is not allowed"
    return ""
