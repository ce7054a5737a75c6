"""Why a workload is not progressing, read from its pods and events: "not yet" told from "never".

A Deployment's own status says only "0 of 1 updated replicas available"; the reason is on its
pods (the scheduler's Unschedulable condition, a container waiting in ImagePullBackOff or
CrashLoopBackOff, a container that exited) or in the Warning events recorded against it. These
functions turn what the waiting code read (`fleet.engine.health.wait`) into one short cause a
person can act on. Pure, like the rules: no `fleet.kube`, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fleet.engine.health.readers import conditions, field, terminated, text, waiting
from fleet.model import Manifest, ObjectRef

WORKLOADS = frozenset(
    {
        ("apps", "Deployment"),
        ("apps", "StatefulSet"),
        ("apps", "DaemonSet"),
        ("apps", "ReplicaSet"),
        ("extensions", "Deployment"),
        ("extensions", "DaemonSet"),
        ("extensions", "ReplicaSet"),
        ("batch", "Job"),
    }
)
"""Kinds whose pods are read for a cause (selected by the workload's own label selector)."""


def is_workload(ref: ObjectRef) -> bool:
    return (ref.group, ref.kind) in WORKLOADS


def label_selector(obj: Manifest) -> str:
    """`spec.selector` as a label selector string (`app=web,tier in (a,b)`); "" when the
    workload has none (then its pods are not read: an empty selector would match all)."""
    selector = field(obj, "spec", "selector")
    if not isinstance(selector, dict):
        return ""
    labels = selector.get("matchLabels")
    parts = [f"{k}={v}" for k, v in labels.items()] if isinstance(labels, dict) else []
    expressions = selector.get("matchExpressions")
    for e in expressions if isinstance(expressions, list) else []:
        parts += [_expression(e)] if isinstance(e, dict) else []
    return ",".join(p for p in parts if p)


def _expression(e: dict[str, Any]) -> str:
    key, op = text(e, "key"), text(e, "operator")
    values = e.get("values")
    listed = ",".join(str(v) for v in values) if isinstance(values, list) else ""
    return {
        "In": f"{key} in ({listed})",
        "NotIn": f"{key} notin ({listed})",
        "Exists": key,
        "DoesNotExist": f"!{key}",
    }.get(op, "")


def pod_cause(pods: Sequence[Manifest]) -> str:
    """The first reason found, most specific first: a pod the scheduler cannot place
    (`pod web-1 Unschedulable: 0/3 nodes are available: ...`), a container waiting on an error
    (ImagePullBackOff, CrashLoopBackOff, CreateContainerConfigError, ...), a container that
    exited in error; "" when the pods show nothing wrong (they may just be starting)."""
    for pod in pods:
        scheduled = conditions(pod).get("PodScheduled")
        if scheduled and scheduled.is_false:
            reason = scheduled.reason or "not scheduled"
            detail = f": {scheduled.message}" if scheduled.message else ""
            return f"pod {_name(pod)} {reason}{detail}"
    for pod in pods:
        if error := waiting(pod, errors_only=True):
            return f"pod {_name(pod)} {error}"
    for pod in pods:
        if ended := terminated(pod, "lastState") or _failed(pod):
            return f"pod {_name(pod)} {ended}"
    return ""


def _failed(pod: Manifest) -> str:
    if text(pod, "status", "phase") != "Failed":
        return ""
    return f"failed: {text(pod, 'status', 'reason') or terminated(pod, 'state') or 'no reason'}"


def event_cause(events: Sequence[Manifest]) -> str:
    """The latest Warning event (`FailedCreate: pods "web-1" is forbidden: exceeded quota`)."""
    warnings = [e for e in events if text(e, "type") == "Warning"]
    if not warnings:
        return ""
    latest = max(warnings, key=_when)
    reason, message = text(latest, "reason"), text(latest, "message")
    return f"event {reason}: {message}" if message else f"event {reason}"


def _when(event: Manifest) -> str:
    return (
        text(event, "lastTimestamp")
        or text(event, "eventTime")
        or text(event, "metadata", "creationTimestamp")
    )


def _name(pod: Manifest) -> str:
    return text(pod, "metadata", "name") or "(unnamed)"
