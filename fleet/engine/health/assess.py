"""Health stage: judge one live object as Healthy, Progressing, Degraded, Suspended or Unknown.

`assess(obj)` is a pure function of one object, as in kstatus: it never logs, sleeps, reads the
clock or talks to a cluster, so it is tested with plain YAML fixtures; polling and timeouts live
in the waiting code that calls it (`fleet.engine.health.wait`). A kind gitfleet cannot judge is
**Unknown, never Healthy**.

Order of dispatch:

1. An object being deleted is Progressing ("pending deletion", naming its finalizers, so a
   stuck finalizer is visible), whatever its kind.
2. The rule for its (API group, kind) in `RULES`: one small function per kind in
   `fleet.engine.health.rules`, each with its reasons in its own docstring; kinds no controller
   acts on share `rules.exists`.
3. Every other kind, custom resources included, goes through `assess_generic`, kstatus's
   generic condition rules.

Application health is `worst(...)` of its objects' health; its docstring gives the precedence.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from fleet.engine.health import rules
from fleet.engine.health.readers import (
    Condition,
    conditions,
    degraded,
    field,
    healthy,
    no_status,
    progressing,
    text,
    unobserved,
)
from fleet.model import Health, HealthStatus, Manifest, ObjectRef

_STATIC_KINDS = {
    "": ("ConfigMap", "Secret", "ServiceAccount", "ResourceQuota", "LimitRange", "Endpoints"),
    "rbac.authorization.k8s.io": ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"),
    "networking.k8s.io": ("NetworkPolicy", "IngressClass"),
    "discovery.k8s.io": ("EndpointSlice",),
    "scheduling.k8s.io": ("PriorityClass",),
    "storage.k8s.io": ("StorageClass",),
    "node.k8s.io": ("RuntimeClass",),
    "admissionregistration.k8s.io": (
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ),
}

RULES: Mapping[tuple[str, str], rules.Rule] = {
    ("apps", "Deployment"): rules.deployment,
    ("apps", "StatefulSet"): rules.statefulset,
    ("apps", "DaemonSet"): rules.daemonset,
    ("apps", "ReplicaSet"): rules.replicaset,
    ("", "Pod"): rules.pod,
    ("batch", "Job"): rules.job,
    ("batch", "CronJob"): rules.cronjob,
    ("", "PersistentVolumeClaim"): rules.persistentvolumeclaim,
    ("", "PersistentVolume"): rules.persistentvolume,
    ("", "Namespace"): rules.namespace,
    ("", "Service"): rules.service,
    ("networking.k8s.io", "Ingress"): rules.ingress,
    ("apiregistration.k8s.io", "APIService"): rules.apiservice,
    ("autoscaling", "HorizontalPodAutoscaler"): rules.horizontalpodautoscaler,
    ("policy", "PodDisruptionBudget"): rules.poddisruptionbudget,
    ("apiextensions.k8s.io", "CustomResourceDefinition"): rules.customresourcedefinition,
    **{(group, kind): rules.exists for group, kinds in _STATIC_KINDS.items() for kind in kinds},
}
"""One rule per (API group, kind); versions of a group share the rule."""

_PRECEDENCE = (
    Health.HEALTHY,
    Health.SUSPENDED,
    Health.UNKNOWN,
    Health.PROGRESSING,
    Health.MISSING,
    Health.DEGRADED,
)


def assess(obj: Manifest) -> HealthStatus:
    """The health of one live object, with a reason a person can read."""
    if deleting := _pending_deletion(obj):
        return deleting
    ref = ObjectRef.of(obj)
    rule = RULES.get((ref.group, ref.kind), assess_generic)
    return rule(obj)


def assess_missing(ref: ObjectRef) -> HealthStatus:
    """The health of an object we declare but the cluster does not have."""
    return HealthStatus(Health.MISSING, "not found in the cluster")


def is_ready(status: HealthStatus) -> bool:
    """Whether a wave may move past this object: Healthy only.

    Suspended is not ready either, so a paused Deployment or a suspended CronJob holds its wave
    until the waiting code's timeout; the waiting code decides whether to treat it as settled.
    """
    return status.health is Health.HEALTHY


def worst(statuses: Iterable[HealthStatus | Health]) -> Health:
    """Application health: the worst of its objects' (Healthy when there are none).

    Precedence: Degraded > Missing > Progressing > Unknown > Suspended > Healthy. Argo CD ranks
    Unknown worst of all; we rank it below Progressing and Missing because gitfleet reports
    Unknown for every custom resource it cannot read (where Argo CD reports no health and
    ignores it), so a rollout in progress or a missing object is the more useful headline.
    """
    healths = [s.health if isinstance(s, HealthStatus) else s for s in statuses]
    return max(healths, key=_PRECEDENCE.index, default=Health.HEALTHY)


def _pending_deletion(obj: Manifest) -> HealthStatus | None:
    if not text(obj, "metadata", "deletionTimestamp"):
        return None
    finalizers = field(obj, "metadata", "finalizers")
    names = [f for f in finalizers if isinstance(f, str)] if isinstance(finalizers, list) else []
    waiting = f"; waiting for finalizers: {', '.join(names)}" if names else ""
    return progressing(f"pending deletion{waiting}")


def assess_generic(obj: Manifest) -> HealthStatus:
    """kstatus-style rules for custom resources and any kind without its own rule.

    Argo CD gives such objects no health at all, so an operator's failing resource reads
    Healthy there (argo-cd#15723). In order: a present `status.observedGeneration` behind
    `metadata.generation` is Progressing; `Stalled=True` is Degraded (checked before
    Reconciling, the reverse of kstatus, since a controller that has given up is the more useful
    news); `Reconciling=True` is Progressing; then the first of Ready, Available and Succeeded
    decides: True is Healthy, Unknown Progressing, Ready=False with a reason or Succeeded=False
    Degraded, any other False Progressing. Unlike kstatus, an object with none of these
    conditions is **Unknown**, not Current, and one with no status at all says so by name.
    """
    if not field(obj, "status"):
        return no_status(obj)
    if pending := unobserved(obj, required=False):
        return pending
    conds = conditions(obj)
    if (stalled := conds.get("Stalled")) and stalled.is_true:
        return degraded(f"stalled: {stalled.describe()}")
    if (reconciling := conds.get("Reconciling")) and reconciling.is_true:
        return progressing(f"reconciling: {reconciling.describe()}")
    for kind in ("Ready", "Available", "Succeeded"):
        if kind in conds:
            return _judge_condition(conds[kind])
    return HealthStatus(
        Health.UNKNOWN,
        f"{ObjectRef.of(obj)} reports no Ready, Available, Succeeded, Reconciling or Stalled "
        "condition gitfleet can judge",
    )


def _judge_condition(condition: Condition) -> HealthStatus:
    if condition.is_true:
        return healthy(condition.describe())
    failed = condition.type == "Succeeded" or (condition.type == "Ready" and condition.reason)
    if condition.is_false and failed:
        return degraded(condition.describe())
    return progressing(condition.describe())
