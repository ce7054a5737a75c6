"""Per-kind health rules: one small pure function per kind, built on the shared field readers
of `fleet.engine.health.readers`.

`fleet.engine.health.assess` holds the dispatch table and the generic rules for custom resources
and every other kind without a rule here. Each rule's docstring gives its reasons. Where Argo CD
and kstatus disagree we follow Argo CD, the semantics our users come from, except where a rule
says otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from fleet.engine.health.readers import (
    Condition,
    conditions,
    count,
    degraded,
    field,
    healthy,
    lb_addresses,
    no_signal,
    no_status,
    parse_conditions,
    progressing,
    suspended,
    terminated,
    text,
    unobserved,
    waiting,
)
from fleet.model import Health, HealthStatus, Manifest

Rule = Callable[[Manifest], HealthStatus]


def exists(obj: Manifest) -> HealthStatus:
    """Kinds with no controller behind them (ConfigMap, Secret, RBAC, webhook configurations,
    ...): existing is all there is to being healthy. Healthy with the message "exists", as both
    Argo CD and kstatus do."""
    return healthy("exists")


# -- workloads ----------------------------------------------------------------------------------


def deployment(obj: Manifest) -> HealthStatus:
    """Replica counts decide; we do not wait for the Available condition (kstatus does).
    `spec.paused` is Suspended; a Progressing condition with reason ProgressDeadlineExceeded is
    Degraded."""
    if field(obj, "spec", "paused") is True:
        return suspended("rollout is paused (spec.paused)")
    if pending := unobserved(obj, required=True):
        return pending
    progress = conditions(obj).get("Progressing")
    if progress and progress.reason == "ProgressDeadlineExceeded":
        return degraded(f"progress deadline exceeded: {progress.message or progress.describe()}")
    want = count(obj, "spec", "replicas", default=1)
    updated = count(obj, "status", "updatedReplicas")
    total = count(obj, "status", "replicas")
    available = count(obj, "status", "availableReplicas")
    if updated < want:
        return progressing(f"rollout in progress: {updated} of {want} replicas updated")
    if total > updated:
        return progressing(f"rollout in progress: {total - updated} old replicas still terminating")
    if available < updated:
        return progressing(
            f"rollout in progress: {available} of {updated} updated replicas available"
        )
    return healthy(f"{available} of {want} replicas available")


def statefulset(obj: Manifest) -> HealthStatus:
    """Judged on ready replicas, then (RollingUpdate) updated replicas against
    `replicas - partition`, then the current against the update revision. With update strategy
    OnDelete it is Healthy once its pods are ready."""
    if pending := unobserved(obj, required=True):
        return pending
    want = count(obj, "spec", "replicas", default=1)
    ready = count(obj, "status", "readyReplicas")
    if ready < want:
        return progressing(f"{ready} of {want} replicas ready")
    if text(obj, "spec", "updateStrategy", "type") == "OnDelete":
        return healthy(
            f"{ready} replicas ready; update strategy OnDelete replaces pods only when deleted"
        )
    return _statefulset_rollout(obj, want)


def _statefulset_rollout(obj: Manifest, want: int) -> HealthStatus:
    partition = count(obj, "spec", "updateStrategy", "rollingUpdate", "partition")
    updated = count(obj, "status", "updatedReplicas")
    target = max(want - partition, 0)
    held = f" ({partition} held back by partition)" if partition else ""
    if updated < target:
        return progressing(
            f"rolling update in progress: {updated} of {target} replicas updated{held}"
        )
    if partition:
        return healthy(f"partitioned rollout complete: {updated} replicas updated{held}")
    current, update = text(obj, "status", "currentRevision"), text(obj, "status", "updateRevision")
    if current and update and current != update:
        return progressing(f"rolling update in progress: revision {update} replacing {current}")
    return healthy(f"{want} replicas ready at revision {update or current or 'unknown'}")


def daemonset(obj: Manifest) -> HealthStatus:
    """Progressing until the generation is observed, then until every scheduled pod is
    updated and then available; with update strategy OnDelete it is Healthy once observed
    (pods are replaced only when deleted)."""
    if pending := unobserved(obj, required=True):
        return pending
    if text(obj, "spec", "updateStrategy", "type") == "OnDelete":
        return healthy("update strategy OnDelete replaces pods only when deleted")
    desired = count(obj, "status", "desiredNumberScheduled")
    updated = count(obj, "status", "updatedNumberScheduled")
    available = count(obj, "status", "numberAvailable")
    if updated < desired:
        return progressing(f"rollout in progress: {updated} of {desired} pods updated")
    if available < desired:
        return progressing(f"rollout in progress: {available} of {desired} pods available")
    return healthy(f"{available} of {desired} pods available")


def replicaset(obj: Manifest) -> HealthStatus:
    """`ReplicaFailure=True` is Degraded (kstatus: InProgress); otherwise available replicas
    against `spec.replicas` decide."""
    if pending := unobserved(obj, required=True):
        return pending
    failure = conditions(obj).get("ReplicaFailure")
    if failure and failure.is_true:
        return degraded(failure.describe())
    want = count(obj, "spec", "replicas", default=1)
    available = count(obj, "status", "availableReplicas")
    if available < want:
        return progressing(f"{available} of {want} replicas available")
    return healthy(f"{available} of {want} replicas available")


# -- batch --------------------------------------------------------------------------------------


def job(obj: Manifest) -> HealthStatus:
    """A Job that has started but not finished is Progressing until Complete (kstatus: Current;
    Flux's own Job reader agrees with Argo CD). `Failed` or `FailureTarget` is Degraded; a
    suspended Job is Suspended."""
    conds = conditions(obj)
    for kind in ("Failed", "FailureTarget"):
        if (failed := conds.get(kind)) and failed.is_true:
            return degraded(f"job failed: {failed.describe()}")
    succeeded = count(obj, "status", "succeeded")
    if (complete := conds.get("Complete")) and complete.is_true:
        return healthy(f"job complete: {succeeded} succeeded")
    paused = conds.get("Suspended")
    if (paused and paused.is_true) or field(obj, "spec", "suspend") is True:
        return suspended("job is suspended (spec.suspend)")
    active, failures = count(obj, "status", "active"), count(obj, "status", "failed")
    return progressing(f"job running: {active} active, {succeeded} succeeded, {failures} failed")


def cronjob(obj: Manifest) -> HealthStatus:
    """`spec.suspend` is Suspended, like a suspended Job or a paused Deployment. Argo CD's
    bundled check says Healthy here on purpose, because one Suspended object turns the whole app
    Suspended there (argo-cd#24428, #19126); with `assess.worst`, an otherwise healthy app reads
    Suspended too, which we think is the truth.

    Otherwise Healthy, with the last schedule and success times in the message. We do not turn
    Degraded when the last run failed: the CronJob's status cannot tell a failed run from one
    still running (argo-cd#24429), and yesterday's failed run would fail every sync until the
    next run (argo-cd#25551). Its Jobs carry that signal.
    """
    if field(obj, "spec", "suspend") is True:
        return suspended("cron job is suspended (spec.suspend); no new jobs are scheduled")
    last = text(obj, "status", "lastScheduleTime")
    success = text(obj, "status", "lastSuccessfulTime")
    active = field(obj, "status", "active")
    parts = [f"last scheduled at {last}" if last else "not scheduled yet"]
    if success:
        parts.append(f"last succeeded at {success}")
    if isinstance(active, list) and active:
        parts.append(f"{len(active)} job(s) running")
    return healthy("; ".join(parts))


# -- pods ---------------------------------------------------------------------------------------


def pod(obj: Manifest) -> HealthStatus:
    """`Failed` is Degraded (kstatus: Current). Waiting errors (`Err*`, `*Error`, `*BackOff`)
    are Degraded only for restartPolicy Always: a Never/OnFailure pod is expected to run to
    completion like a hook or a Job's pod, so it is Progressing until it Succeeds, and its
    waiting reason goes into the message (the owning Job's own health turns Degraded at its
    backoffLimit). Pending-and-unschedulable stays Progressing: kstatus's "Failed after 15s"
    needs the clock."""
    phase = text(obj, "status", "phase")
    policy = text(obj, "spec", "restartPolicy") or "Always"
    if phase == "Running" and text(obj, "metadata", "annotations", _IGNORE_RESTART_POLICY):
        policy = "Always"  # Argo CD's annotation: a long-running pod with restartPolicy Never
    if policy == "Always" and (error := waiting(obj, errors_only=True)):
        return degraded(error)
    if phase == "Pending":
        return progressing(_pending_reason(obj))
    if phase == "Succeeded":
        return healthy("pod succeeded")
    if phase == "Failed":
        why = text(obj, "status", "message") or terminated(obj, "state") or "no reason given"
        return degraded(f"pod failed: {why}")
    if phase == "Running":
        return _running_pod(obj, policy)
    return _unknown_phase(obj, phase)


_IGNORE_RESTART_POLICY = "argocd.argoproj.io/ignore-restart-policy"


def _pending_reason(obj: Manifest) -> str:
    scheduled = conditions(obj).get("PodScheduled")
    if scheduled and scheduled.is_false:
        return f"pending, not scheduled: {scheduled.describe()}"
    return f"pending: {waiting(obj, errors_only=False) or 'waiting to start'}"


def _running_pod(obj: Manifest, policy: str) -> HealthStatus:
    if policy != "Always":
        note = waiting(obj, errors_only=False)
        expected = f"running; a pod with restartPolicy {policy} is healthy once it succeeds"
        return progressing("; ".join(filter(None, [expected, note])))
    ready = conditions(obj).get("Ready")
    if ready and ready.is_true:
        return healthy("running and ready")
    if restarted := terminated(obj, "lastState"):
        return degraded(f"running but not ready after a restart: {restarted}")
    return progressing(f"running, not ready: {ready.describe() if ready else 'no Ready condition'}")


# -- storage and namespaces ---------------------------------------------------------------------


def persistentvolumeclaim(obj: Manifest) -> HealthStatus:
    """Bound is Healthy, Pending Progressing, Lost Degraded. A claim whose StorageClass binds on
    first consumer stays Pending until a pod uses it, so it belongs in its consumer's wave."""
    phase = text(obj, "status", "phase")
    volume = text(obj, "spec", "volumeName") or "a volume"
    if phase == "Bound":
        return healthy(f"bound to {volume}")
    if phase == "Pending":
        return progressing("waiting for a volume to be bound")
    if phase == "Lost":
        return degraded(f"claim lost its volume {volume}")
    return _unknown_phase(obj, phase)


def persistentvolume(obj: Manifest) -> HealthStatus:
    """No rule in Argo CD or kstatus: Bound, Available or Released is Healthy, Pending
    Progressing, Failed Degraded."""
    phase = text(obj, "status", "phase")
    if phase in ("Bound", "Available", "Released"):
        return healthy(f"exists ({phase})")
    if phase == "Pending":
        return progressing("volume is pending")
    if phase == "Failed":
        return degraded(f"volume failed: {text(obj, 'status', 'message') or 'reclaim failed'}")
    return _unknown_phase(obj, phase)


def namespace(obj: Manifest) -> HealthStatus:
    """No rule in Argo CD or kstatus: Active is Healthy, Terminating Progressing with the
    conditions that hold it."""
    phase = text(obj, "status", "phase")
    if phase == "Active":
        return healthy("active")
    if phase == "Terminating":
        blocking = [c.describe() for c in conditions(obj).values() if c.is_true]
        return progressing("; ".join(["namespace is terminating", *blocking]))
    return _unknown_phase(obj, phase)


def _unknown_phase(obj: Manifest, phase: str) -> HealthStatus:
    if not phase:
        return no_status(obj)
    return HealthStatus(Health.UNKNOWN, f"unrecognised phase {phase}")


# -- networking and API ------------------------------------------------------------------------


def service(obj: Manifest) -> HealthStatus:
    """A LoadBalancer is Progressing until `status.loadBalancer.ingress` is set (kstatus does
    not wait); every other type is Healthy."""
    kind = text(obj, "spec", "type") or "ClusterIP"
    if kind != "LoadBalancer":
        return healthy(f"exists ({kind})")
    if addresses := lb_addresses(obj):
        return healthy(f"load balancer address: {', '.join(addresses)}")
    return progressing("waiting for a load balancer address (status.loadBalancer.ingress)")


INGRESS_WITHOUT_ADDRESS = (
    "no load balancer address yet; Healthy without one by gitfleet's default (Argo CD waits: "
    "Progressing); set the app's syncPolicy.ingressNeedsAddress to wait for an address"
)


def ingress(obj: Manifest) -> HealthStatus:
    """Healthy with or without an address; without one the message says so, and how to wait.

    This departs from Argo CD (Progressing until an address), on purpose and per application:
    many controllers publish no address unless configured to (reported for ingress-nginx
    without `--publish-service`, NGINX Inc., Traefik, HAProxy, ngrok, APISIX; argo-cd#14607,
    #28345), the testbed has no controller at all, and Progressing would block every later
    wave until the timeout. kstatus also treats Ingress as Current at once. An application
    whose Ingress controller does publish addresses sets `syncPolicy.ingressNeedsAddress`
    (`HealthOptions.ingress_needs_address`), and its Ingresses are judged by
    `ingress_address_required`, Argo CD's rule.
    """
    if addresses := lb_addresses(obj):
        return healthy(f"load balancer address: {', '.join(addresses)}")
    return healthy(INGRESS_WITHOUT_ADDRESS)


def ingress_address_required(obj: Manifest) -> HealthStatus:
    """Argo CD's rule: Progressing until `status.loadBalancer.ingress` has an entry."""
    if addresses := lb_addresses(obj):
        return healthy(f"load balancer address: {', '.join(addresses)}")
    return progressing(
        "waiting for the ingress controller to publish an address (status.loadBalancer.ingress;"
        " the app sets syncPolicy.ingressNeedsAddress)"
    )


def apiservice(obj: Manifest) -> HealthStatus:
    """Needs `Available=True`; anything else is Progressing (no kstatus rule)."""
    available = conditions(obj).get("Available")
    if available and available.is_true:
        return healthy("available")
    if available:
        return progressing(f"not available yet: {available.describe()}")
    return progressing("waiting for the aggregator to report the Available condition")


_HPA_FAILURES = {
    "AbleToScale": {"FailedGetScale", "FailedUpdateScale"},
    "ScalingActive": {"FailedComputeMetricsReplicas", "InvalidSelector"}
    | {
        f"FailedGet{s}Metric"
        for s in ("Resource", "ContainerResource", "Object", "Pods", "External")
    },
}
_HPA_V1_CONDITIONS = "autoscaling.alpha.kubernetes.io/conditions"


def _hpa_condition_list(obj: Manifest) -> list[Condition]:
    """The conditions in the order the controller wrote them (the v1 annotation included)."""
    raw = field(obj, "status", "conditions")
    if not isinstance(raw, list) or not raw:
        try:
            raw = json.loads(text(obj, "metadata", "annotations", _HPA_V1_CONDITIONS))
        except ValueError:
            raw = []
    return list(parse_conditions(raw).values()) if isinstance(raw, list) else []


def horizontalpodautoscaler(obj: Manifest) -> HealthStatus:
    """Argo CD's rule, in its order: the conditions are read as the controller wrote them
    (AbleToScale, ScalingActive, ScalingLimited) and the first that decides wins: a scale or
    metric failure reason (whatever its status) is Degraded; AbleToScale=True or
    ScalingLimited=True is Healthy. None deciding is Progressing (no kstatus rule).

    So an HPA able to scale is Healthy even when a later ScalingActive=False reports a metric
    failure (Argo CD's hpa-v1-healthy fixture): the failure is kept in the message."""
    conds = _hpa_condition_list(obj)
    current = count(obj, "status", "currentReplicas")
    desired = count(obj, "status", "desiredReplicas")
    for c in conds:
        if c.reason in _HPA_FAILURES.get(c.type, set()):
            return degraded(c.describe())
        if c.type in ("AbleToScale", "ScalingLimited") and c.is_true:
            later = [d.describe() for d in conds if d.reason in _HPA_FAILURES.get(d.type, set())]
            note = f"; also {'; '.join(later)}" if later else ""
            return healthy(f"{current} replicas, {desired} desired{note}")
    return progressing("waiting for the autoscaler to report that it is able to scale")


def poddisruptionbudget(obj: Manifest) -> HealthStatus:
    """A False condition other than InsufficientPods is Degraded; no status yet is Progressing
    (kstatus: always Current)."""
    if not field(obj, "status"):
        return progressing("waiting for the disruption controller to report status")
    if pending := unobserved(obj, required=False):
        return pending
    for c in conditions(obj).values():
        if c.is_false and c.reason != "InsufficientPods":
            return degraded(c.describe())
    allowed = count(obj, "status", "disruptionsAllowed")
    current = count(obj, "status", "currentHealthy")
    expected = count(obj, "status", "expectedPods")
    return healthy(f"{allowed} disruptions allowed; {current} of {expected} pods healthy")


def customresourcedefinition(obj: Manifest) -> HealthStatus:
    """NamesAccepted=False or NonStructuralSchema=True is Degraded, Established=True Healthy,
    anything else Progressing (Argo CD's Lua check; kstatus agrees)."""
    conds = conditions(obj)
    if not conds:
        return progressing("waiting for the API server to report the Established condition")
    for kind, bad in (("NamesAccepted", "False"), ("NonStructuralSchema", "True")):
        if (c := conds.get(kind)) and c.status == bad:
            return degraded(c.describe())
    if (terminating := conds.get("Terminating")) and terminating.is_true:
        return progressing(terminating.describe())
    established = conds.get("Established")
    if established and established.is_true:
        return healthy("established")
    detail = established.describe() if established else "no Established condition yet"
    return progressing(f"waiting to be established: {detail}")


# -- Argo CD's own kinds ------------------------------------------------------------------------


def argo_workflow(obj: Manifest) -> HealthStatus:
    """argoproj.io Workflow, Argo CD's built-in rule: Pending or Running (or no phase yet) is
    Progressing, Succeeded Healthy, Failed or Error Degraded; the workflow's message is kept."""
    phase = text(obj, "status", "phase")
    message = text(obj, "status", "message")
    shown = f"workflow {phase.lower() or 'not started'}" + (f": {message}" if message else "")
    if phase == "Succeeded":
        return healthy(shown)
    if phase in ("Failed", "Error"):
        return degraded(shown)
    if phase in ("", "Pending", "Running"):
        return progressing(shown)
    return HealthStatus(Health.UNKNOWN, f"unrecognised workflow phase {phase}")


def argo_application(obj: Manifest) -> HealthStatus:
    """argoproj.io Application: no health signal, as in Argo CD since 1.8 (a child app's health
    is its own controller's business; argo-cd#3781)."""
    return no_signal(
        "an Argo CD Application's health is not judged (Argo CD removed this check in 1.8)"
    )
