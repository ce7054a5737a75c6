"""The readers every health rule shares: field access that never raises, conditions, and the
`HealthStatus` builders.

A live object is whatever the API server (or a controller) wrote, so each reader is tolerant of
missing or mistyped fields: a rule built on them never raises, it judges what it can read.
Pure, like the rules: no `fleet.kube`, no urllib3, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from fleet.model import Health, HealthStatus, Manifest, ObjectRef


def field(obj: Any, *path: str) -> Any:
    """The value at `path` inside nested dicts, or None when any step is missing."""
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def count(obj: Any, *path: str, default: int = 0) -> int:
    value = field(obj, *path)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def text(obj: Any, *path: str) -> str:
    value = field(obj, *path)
    return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class Condition:
    """One entry of `status.conditions`."""

    type: str
    status: str
    reason: str = ""
    message: str = ""

    @property
    def is_true(self) -> bool:
        return self.status == "True"

    @property
    def is_false(self) -> bool:
        return self.status == "False"

    def describe(self) -> str:
        """`Ready=False (IssuerNotFound): issuer "x" not found`."""
        reason = f" ({self.reason})" if self.reason else ""
        message = f": {self.message}" if self.message else ""
        return f"{self.type}={self.status}{reason}{message}"


def parse_conditions(raw: Any) -> dict[str, Condition]:
    """Conditions by type from a list of condition dicts; malformed entries are skipped."""
    items = raw if isinstance(raw, list) else []
    found = [
        Condition(text(c, "type"), text(c, "status"), text(c, "reason"), text(c, "message"))
        for c in items
        if isinstance(c, dict) and text(c, "type")
    ]
    return {c.type: c for c in found}


def conditions(obj: Manifest) -> dict[str, Condition]:
    return parse_conditions(field(obj, "status", "conditions"))


healthy = partial(HealthStatus, Health.HEALTHY)
progressing = partial(HealthStatus, Health.PROGRESSING)
degraded = partial(HealthStatus, Health.DEGRADED)
suspended = partial(HealthStatus, Health.SUSPENDED)


def no_status(obj: Manifest, why: str = "") -> HealthStatus:
    """Unknown: a controller is expected to report status and none has (yet)."""
    detail = f" ({why})" if why else ""
    return HealthStatus(
        Health.UNKNOWN, f"no controller has reported status for {ObjectRef.of(obj)}{detail}"
    )


NO_SIGNAL = "no health signal"
"""How a message starts when gitfleet has nothing to judge an object by (see `no_signal`)."""


def no_signal(why: str) -> HealthStatus:
    """An object with no health signal: a built-in kind without a rule, or a custom resource
    with no status whose CustomResourceDefinition declares no status subresource (nothing will
    ever write one). Argo CD gives such objects no health at all; gitfleet maps them to Healthy
    with a message that starts "no health signal", so they neither hold a wave nor lower the
    application's health, and a person can still tell them from a judged Healthy."""
    return HealthStatus(Health.HEALTHY, f"{NO_SIGNAL}: {why}")


def has_no_signal(status: HealthStatus) -> bool:
    """Whether `status` is `no_signal`'s: Healthy only because nothing can be judged."""
    return status.health is Health.HEALTHY and status.message.startswith(NO_SIGNAL)


def unobserved(obj: Manifest, *, required: bool) -> HealthStatus | None:
    """Progressing while the controller has not yet seen the latest spec, else None.

    Built-in workload controllers always report `status.observedGeneration`, so for them a
    missing value (`required`) means "not observed yet". Many custom controllers never report
    it; for those only a value that is present and behind counts.
    """
    generation = field(obj, "metadata", "generation")
    observed = field(obj, "status", "observedGeneration")
    if not isinstance(generation, int) or (observed is None and not required):
        return None
    if isinstance(observed, int) and observed >= generation:
        return None
    return progressing(f"waiting for the controller to observe generation {generation}")


# -- containers and load balancers ------------------------------------------------------------


def containers(obj: Manifest) -> list[dict[str, Any]]:
    """The status of each of a pod's containers, init containers first."""
    found: list[dict[str, Any]] = []
    for key in ("initContainerStatuses", "containerStatuses"):
        items = field(obj, "status", key)
        found += [c for c in items if isinstance(c, dict)] if isinstance(items, list) else []
    return found


def is_waiting_error(reason: str) -> bool:
    """CrashLoopBackOff, ImagePullBackOff, ErrImagePull, CreateContainerConfigError, ..."""
    failing = reason.startswith("Err") or reason.endswith(("Error", "BackOff"))
    return failing or reason == "InvalidImageName"


def waiting(obj: Manifest, *, errors_only: bool) -> str:
    """`container app waiting: CrashLoopBackOff: ...` for the first waiting container, or ``."""
    for c in containers(obj):
        reason = text(c, "state", "waiting", "reason")
        if reason and (is_waiting_error(reason) or not errors_only):
            detail = text(c, "state", "waiting", "message")
            return f"container {text(c, 'name')} waiting: {reason}" + (
                f": {detail}" if detail else ""
            )
    return ""


def terminated(obj: Manifest, *state: str) -> str:
    """`container app terminated: Error (exit code 1)` for the first container so terminated."""
    for c in containers(obj):
        ended = field(c, *state, "terminated")
        if isinstance(ended, dict):
            reason = text(ended, "reason") or "terminated"
            return f"container {text(c, 'name')} {reason} (exit code {count(ended, 'exitCode')})"
    return ""


def lb_addresses(obj: Manifest) -> list[str]:
    """The IP or host name of each load balancer entry in `status.loadBalancer.ingress`."""
    ingress = field(obj, "status", "loadBalancer", "ingress")
    entries = ingress if isinstance(ingress, list) else []
    return [text(e, "ip") or text(e, "hostname") or "(unnamed)" for e in entries]
