"""Typed errors, one family per stage, each with a message a person can act on.

Every error says which stage failed, on which cluster and object where known, whether a retry
can help, and who is at fault: the manifests (`source`), the cluster, or gitfleet itself.
"""

from __future__ import annotations

from enum import StrEnum


class Fault(StrEnum):
    MANIFESTS = "manifests"
    CLUSTER = "cluster"
    GITFLEET = "gitfleet"
    USER = "user"


class FleetError(Exception):
    """Base of every error gitfleet raises on purpose."""

    stage = "gitfleet"
    fault = Fault.GITFLEET
    retryable = False

    def __init__(self, message: str, *, cluster: str = "", obj: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.cluster = cluster
        self.obj = obj

    def __str__(self) -> str:
        return self.message


class UsageError(FleetError):
    stage = "usage"
    fault = Fault.USER


class SourceError(FleetError):
    """The git source could not be fetched or read (missing repo, revision or path)."""

    stage = "source"
    fault = Fault.MANIFESTS


class RenderError(FleetError):
    """Manifests could not be rendered: malformed YAML, a failing kustomize or helm run."""

    stage = "render"
    fault = Fault.MANIFESTS


class OrderError(FleetError):
    stage = "order"
    fault = Fault.MANIFESTS


class ClusterUnreachable(FleetError):
    stage = "cluster"
    fault = Fault.CLUSTER
    retryable = True


class KubeApiError(FleetError):
    """The API server answered with an error status."""

    stage = "kube"
    fault = Fault.CLUSTER

    def __init__(
        self, message: str, *, status: int, reason: str = "", cluster: str = "", obj: str = ""
    ) -> None:
        super().__init__(message, cluster=cluster, obj=obj)
        self.status = status
        self.reason = reason


class DiffError(FleetError):
    stage = "diff"


class ApplyError(FleetError):
    """One or more objects could not be applied; the message lists every one."""

    stage = "apply"
    fault = Fault.MANIFESTS


class HealthTimeout(FleetError):
    """Objects did not become healthy in time; the message names each and what it waits for."""

    stage = "health"
    fault = Fault.CLUSTER
    retryable = True


class PruneError(FleetError):
    stage = "prune"
    fault = Fault.CLUSTER


class OwnershipConflict(FleetError):
    """An object is tracked by another application."""

    stage = "apply"
    fault = Fault.MANIFESTS


class ImpersonationRequired(FleetError):
    """The fleet requires projects to act as a ServiceAccount (GITFLEET_REQUIRE_IMPERSONATION)
    and the project names none for this destination."""

    stage = "policy"
    fault = Fault.USER


class OutsideProject(FleetError):
    """An object a sync would apply or delete lies outside its project's boundaries (namespaces
    and cluster-scoped kinds); the message names the object and the rule. `stage` is the stage
    that refused it: apply (hooks included) or prune (a cascading delete's too)."""

    stage = "apply"
    fault = Fault.MANIFESTS

    def __init__(self, message: str, *, stage: str = "apply", cluster: str = "", obj: str = ""):
        super().__init__(message, cluster=cluster, obj=obj)
        self.stage = stage


class LeaseLost(FleetError):
    """The sync's lease expired or was taken (a newer fencing token exists) while it ran; it
    stopped before writing anything more. Another worker owns the instance now."""

    stage = "lease"
    retryable = True
