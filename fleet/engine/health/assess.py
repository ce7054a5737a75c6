"""Health stage: judge one live object as Healthy, Progressing, Degraded, Suspended or Unknown.

`assess(obj)` is a pure function of one object, as in kstatus: it never logs, sleeps, reads the
clock or talks to a cluster, so it is tested with plain YAML fixtures; polling and timeouts live
in the waiting code that calls it. It dispatches on (API group, kind) to one small rule per kind
(`fleet.engine.health.rules`); every other kind goes through the generic condition rules below. A
kind gitfleet cannot judge is **Unknown, never Healthy**.

Evaluation order: an object being deleted is Progressing ("pending deletion", naming its
finalizers, so a stuck finalizer is visible); then the kind's rule; then the generic rules.

Where Argo CD and kstatus disagree we follow Argo CD, the semantics our users come from, except
where noted:

- **Deployment** does not wait for the Available condition (kstatus does); replica counts decide.
  `spec.paused` is Suspended, a `ProgressDeadlineExceeded` Progressing condition is Degraded.
- **ReplicaSet** with `ReplicaFailure=True` is Degraded (kstatus: InProgress).
- **StatefulSet** is judged on ready replicas, then (RollingUpdate) updated replicas against
  `replicas - partition`, then current/update revision; OnDelete is Healthy once pods are ready.
- **Pod** `Failed` is Degraded (kstatus: Current). Waiting errors (`Err*`, `*Error`, `*BackOff`)
  are Degraded only for restartPolicy Always; a Never/OnFailure pod is expected to run to
  completion like a hook or a Job's pod, so it is Progressing until it Succeeds, and its waiting
  reason goes into the message (the owning Job's own health turns Degraded at its backoffLimit).
  Pending-and-unschedulable stays Progressing: kstatus's "Failed after 15s" needs the clock.
- **Job** that has started but not finished is Progressing until Complete (kstatus: Current;
  Flux's own Job reader agrees with Argo). `Failed` or `FailureTarget` is Degraded, a suspended
  Job is Suspended.
- **CronJob** with `spec.suspend` is Suspended, like a suspended Job or a paused Deployment.
  Argo CD's bundled check says Healthy here on purpose, because one Suspended object turns the
  whole app Suspended there (argo-cd#24428, #19126); with `worst` below, an otherwise healthy app
  reads Suspended too, which we think is the truth. Otherwise Healthy, with the last schedule and
  success times in the message. We do not turn Degraded when the last run failed: the CronJob's
  status cannot tell a failed run from one still running (argo-cd#24429), and yesterday's failed
  run would fail every sync until the next run (argo-cd#25551). Its Jobs carry that signal.
- **Service** of type LoadBalancer is Progressing until `status.loadBalancer.ingress` is set
  (kstatus does not wait).
- **Ingress** is Healthy with or without an address; without one the message says "no load
  balancer address yet". This departs from Argo CD (Progressing until an address), on purpose:
  many controllers publish no address unless configured to (reported for ingress-nginx without
  `--publish-service`, NGINX Inc., Traefik, HAProxy, ngrok, APISIX; argo-cd#14607, #28345), the
  testbed has no controller at all, and Progressing would block every later wave until the
  timeout. Reachability is judged where it is decided: the controller's own LoadBalancer Service.
  kstatus also treats Ingress as Current at once.
- **APIService** needs `Available=True`; anything else is Progressing (no kstatus rule).
- **HorizontalPodAutoscaler** is Degraded on scale or metric failures, Healthy once AbleToScale
  or ScalingLimited is True, else Progressing (no kstatus rule).
- **PodDisruptionBudget** with a False condition other than InsufficientPods is Degraded; no
  status yet is Progressing (kstatus: always Current).
- **CustomResourceDefinition**: NamesAccepted=False or NonStructuralSchema=True is Degraded,
  Established=True Healthy, anything else Progressing (Argo's Lua check; kstatus agrees).
- **PersistentVolumeClaim**: Bound Healthy, Pending Progressing, Lost Degraded. A claim whose
  StorageClass binds on first consumer stays Pending until a pod uses it, so it belongs in its
  consumer's wave. **PersistentVolume** (no rule in either tool): Bound, Available or Released
  Healthy, Pending Progressing, Failed Degraded. **Namespace** (no rule in either tool): Active
  Healthy, Terminating Progressing with the conditions that hold it.
- Kinds no controller acts on (ConfigMap, Secret, RBAC, webhook configurations, ...) are Healthy
  with the message "exists", as both tools do.

Custom resources and every other kind follow kstatus's generic rules (Argo CD gives such objects
no health at all, so an operator's failing resource reads Healthy, argo-cd#15723): a present
`status.observedGeneration` behind `metadata.generation` is Progressing; `Stalled=True` is
Degraded (checked before Reconciling, the reverse of kstatus, since a controller that has given
up is the more useful news); `Reconciling=True` is Progressing; then the first of Ready,
Available and Succeeded decides: True is Healthy, Unknown Progressing, Ready=False with a reason
or Succeeded=False Degraded, any other False Progressing. Unlike kstatus, an object with none of
these conditions is **Unknown**, not Current, and one with no status at all says so by name.

Application health is `worst(...)`, with precedence Degraded > Missing > Progressing > Unknown >
Suspended > Healthy. Argo CD ranks Unknown worst of all; we rank it below Progressing and Missing
because gitfleet reports Unknown for every custom resource it cannot read (where Argo reports no
health and ignores it), so a rollout in progress or a missing object is the more useful headline.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from fleet.engine.health import rules
from fleet.engine.health.rules import Condition, conditions, field, text, unobserved
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
    """Application health: the worst of its objects' (Healthy when there are none)."""
    healths = [s.health if isinstance(s, HealthStatus) else s for s in statuses]
    return max(healths, key=_PRECEDENCE.index, default=Health.HEALTHY)


def _pending_deletion(obj: Manifest) -> HealthStatus | None:
    if not text(obj, "metadata", "deletionTimestamp"):
        return None
    finalizers = field(obj, "metadata", "finalizers")
    names = [f for f in finalizers if isinstance(f, str)] if isinstance(finalizers, list) else []
    waiting = f"; waiting for finalizers: {', '.join(names)}" if names else ""
    return rules.progressing(f"pending deletion{waiting}")


def assess_generic(obj: Manifest) -> HealthStatus:
    """kstatus-style rules for custom resources and any kind without its own rule."""
    if not field(obj, "status"):
        return rules.no_status(obj)
    if pending := unobserved(obj, required=False):
        return pending
    conds = conditions(obj)
    if (stalled := conds.get("Stalled")) and stalled.is_true:
        return rules.degraded(f"stalled: {stalled.describe()}")
    if (reconciling := conds.get("Reconciling")) and reconciling.is_true:
        return rules.progressing(f"reconciling: {reconciling.describe()}")
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
        return rules.healthy(condition.describe())
    failed = condition.type == "Succeeded" or (condition.type == "Ready" and condition.reason)
    if condition.is_false and failed:
        return rules.degraded(condition.describe())
    return rules.progressing(condition.describe())
