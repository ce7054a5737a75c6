"""Health stage: judge one live object as Healthy, Progressing, Degraded, Suspended or Unknown.

`assess(obj)` is a pure function of one object, as in kstatus: it never logs, sleeps, reads the
clock or talks to a cluster, so it is tested with plain YAML fixtures; polling and timeouts live
in the waiting code that calls it (`fleet.engine.health.wait`). A custom resource whose
controller should report and has not is **Unknown**; an object nothing will ever report on has
**no health signal** (Healthy, and its message says so), never a silent Healthy.

Order of dispatch:

1. An object being deleted is Progressing ("pending deletion", naming its finalizers, so a
   stuck finalizer is visible), whatever its kind.
2. The rule for its (API group, kind) in `RULES`: one small function per kind in
   `fleet.engine.health.rules`, each with its reasons in its own docstring; kinds no controller
   acts on share `rules.exists`.
3. Every other kind, custom resources included, goes through `assess_generic`, kstatus's
   generic condition rules. What it cannot judge has **no health signal** (`readers.no_signal`:
   Healthy, with a message starting "no health signal", so it never holds a wave or lowers the
   application's health): a built-in kind without a rule, and a custom resource with no status
   whose CustomResourceDefinition declares no status subresource. A custom resource whose CRD
   declares one waits for its controller (Unknown until it reports). Whether the CRD declares
   one is the caller's knowledge (`expects_status`): the waiting code reads the CRD, and
   `gitfleet health` reads it from its input.

`HealthOptions` carries an application's choices (today: whether an Ingress needs an address).

Application health is `worst(...)` of its objects' health; its docstring gives the precedence.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from fleet.engine.health import rules
from fleet.engine.health.readers import (
    Condition,
    conditions,
    degraded,
    field,
    healthy,
    no_signal,
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

BUILTIN_GROUPS = frozenset(
    {
        "",
        "apps",
        "batch",
        "autoscaling",
        "policy",
        "extensions",
        *(
            f"{name}.k8s.io"
            for name in (
                "networking",
                "rbac.authorization",
                "storage",
                "coordination",
                "discovery",
                "scheduling",
                "node",
                "admissionregistration",
                "apiregistration",
                "apiextensions",
                "certificates",
                "events",
                "flowcontrol.apiserver",
                "resource",
                "storagemigration",
                "internal.apiserver",
                "authentication",
                "authorization",
            )
        ),
    }
)
"""API groups Kubernetes itself serves; a kind in them without a rule has no health signal."""


@dataclass(frozen=True)
class HealthOptions:
    """An application's health choices. `ingress_needs_address`: an Ingress is Progressing
    until its controller publishes an address (Argo CD's rule) rather than Healthy at once.
    `custom_resource_health`: custom resources without a rule are judged by their kstatus
    conditions (`assess_generic`); off, they have no health signal, as in Argo CD."""

    ingress_needs_address: bool = False
    custom_resource_health: bool = True


DEFAULT_OPTIONS = HealthOptions()

_INGRESS = {("networking.k8s.io", "Ingress"), ("extensions", "Ingress")}

RULES: Mapping[tuple[str, str], rules.Rule] = {
    ("apps", "Deployment"): rules.deployment,
    ("apps", "StatefulSet"): rules.statefulset,
    ("apps", "DaemonSet"): rules.daemonset,
    ("apps", "ReplicaSet"): rules.replicaset,
    # the extensions/v1beta1 kinds of old manifests, judged as their apps/v1 successors
    ("extensions", "Deployment"): rules.deployment,
    ("extensions", "DaemonSet"): rules.daemonset,
    ("extensions", "ReplicaSet"): rules.replicaset,
    ("extensions", "Ingress"): rules.ingress,
    ("argoproj.io", "Workflow"): rules.argo_workflow,
    ("argoproj.io", "Application"): rules.argo_application,
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


def assess(
    obj: Manifest,
    options: HealthOptions = DEFAULT_OPTIONS,
    *,
    expects_status: bool | None = None,
) -> HealthStatus:
    """The health of one live object, with a reason a person can read.

    `expects_status`: for a custom resource, whether its CustomResourceDefinition declares a
    status subresource (True), declares none (False), or is not known (None: a custom resource
    with no status is then Unknown, since gitfleet cannot tell whether a controller will write
    one)."""
    if deleting := _pending_deletion(obj):
        return deleting
    ref = ObjectRef.of(obj)
    key = (ref.group, ref.kind)
    if key in _INGRESS and options.ingress_needs_address:
        return rules.ingress_address_required(obj)
    if (rule := RULES.get(key)) is not None:
        return rule(obj)
    if not options.custom_resource_health and is_custom(ref):
        return no_signal(
            f"{ref} is a custom resource and this app does not judge custom resources by their "
            "conditions (syncPolicy.customResourceHealth: false, Argo CD's behaviour)"
        )
    return assess_generic(obj, expects_status=expects_status)


def is_custom(ref: ObjectRef) -> bool:
    """Whether `ref`'s kind is served by a CustomResourceDefinition (or an aggregated API),
    not by Kubernetes itself."""
    return ref.group not in BUILTIN_GROUPS


def status_subresource(crd: Manifest, version: str) -> bool:
    """Whether `crd` declares a status subresource for `version` (any version when it does not
    list `version`)."""
    versions = field(crd, "spec", "versions")
    entries = [v for v in versions if isinstance(v, dict)] if isinstance(versions, list) else []
    chosen = [v for v in entries if v.get("name") == version] or entries
    return any(isinstance(field(v, "subresources", "status"), dict) for v in chosen)


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
    Unknown for a custom resource whose controller has not reported yet (where Argo CD reports
    no health and ignores it), so a rollout in progress or a missing object is the more useful
    headline. An object with no health signal is Healthy (`readers.no_signal`), so it never
    lowers the application's health.
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


def assess_generic(obj: Manifest, *, expects_status: bool | None = None) -> HealthStatus:
    """kstatus-style rules for custom resources and any kind without its own rule.

    Argo CD gives such objects no health at all, so an operator's failing resource reads
    Healthy there (argo-cd#15723). In order: an object with no status at all has no health
    signal when it is a built-in kind or its CRD declares no status subresource
    (`expects_status` False), and is Unknown, waiting for a controller, otherwise; a present
    `status.observedGeneration` behind `metadata.generation` is Progressing; `Stalled=True` is
    Degraded (checked before Reconciling, the reverse of kstatus, since a controller that has
    given up is the more useful news); `Reconciling=True` is Progressing; then the first of
    Ready, Available and Succeeded decides: True is Healthy, Unknown Progressing,
    Ready=False with a reason or Succeeded=False Degraded, any other False Progressing.
    Unlike kstatus, a custom resource with a status but none of these conditions is
    **Unknown**, not Current; a built-in kind in that case has no health signal.
    """
    ref = ObjectRef.of(obj)
    builtin = not is_custom(ref)
    if not field(obj, "status"):
        if builtin:
            return no_signal(f"{ref.kind} has no health rule and {ref} reports no status")
        if expects_status is False:
            return no_signal(
                f"{ref} reports no status and its CustomResourceDefinition declares no status "
                "subresource, so no controller will report one"
            )
        if expects_status:
            return no_status(
                obj,
                "its CustomResourceDefinition declares a status subresource: waiting for its "
                "controller; is the controller installed?",
            )
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
    if builtin:
        return no_signal(f"{ref.kind} has no health rule and reports no condition to judge")
    return HealthStatus(
        Health.UNKNOWN,
        f"{ref} reports no Ready, Available, Succeeded, Reconciling or Stalled "
        "condition gitfleet can judge",
    )


def _judge_condition(condition: Condition) -> HealthStatus:
    if condition.is_true:
        return healthy(condition.describe())
    failed = condition.type == "Succeeded" or (condition.type == "Ready" and condition.reason)
    if condition.is_false and failed:
        return degraded(condition.describe())
    return progressing(condition.describe())
