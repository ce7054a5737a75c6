"""Project boundaries: where one sync may write, as the rule a refusal names.

A project lets an app deploy into some namespaces of a cluster (globs) and some cluster-scoped
kinds (none unless listed). `fleet.control.policy.boundaries_for` turns a project into the
`Boundaries` of one cluster; they travel in the `SyncRequest`. The engine asks `refusal` for
every object twice: when the render is prepared (`fleet.engine.plan.prepare`, every object
before anything is written), and at the moment it is applied or deleted (`fleet.engine.scope`,
hooks, the namespace a sync creates, prune candidates and cascading deletes included).

Whether an object is namespaced is the caller's answer, taken from the target cluster's
discovery: a namespaced object is judged by its namespace, a cluster-scoped one by its kind.
`metadata.namespace` on a cluster-scoped object means nothing to the API server, so it means
nothing here either.

Pure: no cluster, no clock, no logging.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from fleet.model import ObjectRef

__all__ = ["UNBOUNDED", "Boundaries"]


@dataclass(frozen=True)
class Boundaries:
    """What a project lets an app deploy on one cluster. None means unrestricted.

    namespaces: globs of the namespaces namespaced objects may live in.
    cluster_kinds: cluster-scoped kinds allowed, as `group/Kind` (`Kind` for the core group).
    project, cluster: named in refusals.
    """

    namespaces: tuple[str, ...] | None = None
    cluster_kinds: frozenset[str] | None = None
    project: str = ""
    cluster: str = ""

    def refusal(self, ref: ObjectRef, *, namespaced: bool) -> str:
        """Why `ref` is outside the boundaries (the rule, without the object); "" if inside."""
        if namespaced:
            return self.namespace_refusal(ref.namespace)
        return self._kind_refusal(ref)

    def namespace_refusal(self, namespace: str) -> str:
        """Why a namespaced object in `namespace` is outside; "" if inside."""
        globs = self.namespaces
        if globs is None or any(fnmatchcase(namespace, glob) for glob in globs):
            return ""
        where = f" on cluster {self.cluster}" if self.cluster else ""
        return (
            f"namespace {namespace or '(none)'} is not an allowed destination of "
            f"{self._project()}{where} (allowed there: {_listed(globs, 'none')})"
        )

    def _kind_refusal(self, ref: ObjectRef) -> str:
        allowed = self.cluster_kinds
        if allowed is None or {ref.group_kind, ref.kind} & allowed:
            return ""
        kinds = _listed(sorted(allowed), "no cluster-scoped kinds")
        if allowed:
            kinds = f"only the cluster-scoped kinds {kinds}"
        return (
            f"cluster-scoped kind {ref.group_kind} is not allowed: {self._project()} allows {kinds}"
        )

    def _project(self) -> str:
        return f"project {self.project}" if self.project else "the project"


UNBOUNDED = Boundaries()  # no project: the one-shot CLI, and the default for callers


def _listed(items: tuple[str, ...] | list[str], none: str) -> str:
    return ", ".join(items) if items else none
