"""Wait until objects are healthy: the polling half of the health stage.

`health.assess` judges one object; this module polls the cluster for the objects not yet
settled, gives up early on Degraded, and at the deadline turns "not yet" into a HealthTimeout
that names every object still waiting and what it waits for. Suspended counts as settled: a
paused Deployment or suspended CronJob is what the user asked for; so does an object with no
health signal (Healthy by `readers.no_signal`).

What the pure judgement cannot know, `LiveHealth` reads from the cluster:

- whether a custom resource's CustomResourceDefinition declares a status subresource (read once
  per kind per wait): with none, a custom resource without status has no health signal and does
  not hold its wave; with one, it waits for its controller, and a missing controller ends in a
  timeout naming it;
- "not yet" versus "never": a workload that is not progressing (or has failed) gets the cause
  read from its pods and events (`causes`): Unschedulable with the scheduler's reason,
  ImagePullBackOff, CrashLoopBackOff, the latest Warning event. The reads are bounded: pods by
  the workload's own label selector, in its own namespace, at most `POD_LIMIT`; events by the
  workload's uid, at most `EVENT_LIMIT`; each workload at most once per `CAUSE_EVERY` seconds.
  They stay inside the project's scope: only the namespace of an object this sync declared (and
  the boundaries checked when it was written), with the sync's own client, so an app that acts
  as a ServiceAccount reads with that account's RBAC. A read that is refused or fails leaves the
  message as it was; it never fails the wait.

A condition that waiting cannot resolve fails at once, not at the timeout: the rules make it
Degraded (a Deployment's ProgressDeadlineExceeded, a Job past its backoff limit, with the Job's
reason), and a Degraded object ends the wait on the poll that sees it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from fleet.engine.health import assess as health
from fleet.engine.health import causes
from fleet.engine.health.readers import field, text
from fleet.errors import ApplyError, FleetError, HealthTimeout
from fleet.kube.client import KubeClient
from fleet.model import Health, HealthStatus, Manifest, ObjectRef

SETTLED = frozenset({Health.HEALTHY, Health.SUSPENDED})
Progress = Callable[[str], None]
POD_LIMIT = 20
EVENT_LIMIT = 50
CAUSE_EVERY = 2.0
_CRD_GROUP = "apiextensions.k8s.io"


class LiveHealth:
    """Judges live objects of one cluster with what only the cluster knows (see the module
    docstring); one per wait, so its caches live as long as the wait."""

    def __init__(
        self, kube: KubeClient | None, options: health.HealthOptions = health.DEFAULT_OPTIONS
    ):
        self.kube = kube
        self.options = options
        self._status_subresource: dict[tuple[str, str, str], bool | None] = {}
        self._causes: dict[ObjectRef, tuple[float, str]] = {}

    def assess(self, live: Manifest | None, ref: ObjectRef) -> HealthStatus:
        if live is None:
            return health.assess_missing(ref)
        expects = self.expects_status(ref) if self._needs_crd(live, ref) else None
        status = health.assess(live, self.options, expects_status=expects)
        if status.health in (Health.PROGRESSING, Health.DEGRADED) and causes.is_workload(ref):
            return self._with_cause(status, live, ref, force=status.health is Health.DEGRADED)
        return status

    def explain(self, status: HealthStatus, live: Manifest | None, ref: ObjectRef) -> HealthStatus:
        """`status` with the cause read now (used just before a timeout is reported)."""
        if live is None or not causes.is_workload(ref) or status.health in SETTLED:
            return status
        return self._with_cause(status, live, ref, force=True)

    # -- custom resources -------------------------------------------------------------------

    def _needs_crd(self, live: Manifest, ref: ObjectRef) -> bool:
        known = (ref.group, ref.kind) in health.RULES
        return not known and health.is_custom(ref) and not field(live, "status")

    def expects_status(self, ref: ObjectRef) -> bool | None:
        """Whether the CRD serving `ref`'s kind declares a status subresource for its version;
        None when there is no such CRD (an aggregated API) or it cannot be read."""
        key = (ref.group, ref.version, ref.kind)
        if key not in self._status_subresource:
            self._status_subresource[key] = self._read_crd(ref)
        return self._status_subresource[key]

    def _read_crd(self, ref: ObjectRef) -> bool | None:
        if self.kube is None:
            return None
        try:
            plural = self.kube.resource_for(ref.api_version, ref.kind).plural
            crd = self.kube.get(
                ObjectRef(_CRD_GROUP, "v1", "CustomResourceDefinition", "", f"{plural}.{ref.group}")
            )
        except FleetError:
            return None
        return health.status_subresource(crd, ref.version) if crd is not None else None

    # -- causes -----------------------------------------------------------------------------

    def _with_cause(
        self, status: HealthStatus, live: Manifest, ref: ObjectRef, *, force: bool
    ) -> HealthStatus:
        now = time.monotonic()
        when, cause = self._causes.get(ref, (float("-inf"), ""))
        if force or now - when >= CAUSE_EVERY:
            cause = self._read_cause(live, ref)
            self._causes[ref] = (now, cause)
        if not cause or cause in status.message:
            return status
        return HealthStatus(status.health, f"{status.message}; {cause}")

    def _read_cause(self, live: Manifest, ref: ObjectRef) -> str:
        if self.kube is None or not ref.namespace:
            return ""
        try:
            cause = ""
            if selector := causes.label_selector(live):
                cause = causes.pod_cause(self._list("Pod", ref.namespace, labelSelector=selector))
            if not cause and (uid := text(live, "metadata", "uid")):
                by_uid = f"involvedObject.uid={uid}"
                cause = causes.event_cause(self._list("Event", ref.namespace, fieldSelector=by_uid))
        except FleetError:
            return ""  # not allowed to read, or the cluster did not answer: no cause, no failure
        return cause

    def _list(self, kind: str, namespace: str, **params: str) -> list[Manifest]:
        assert self.kube is not None
        limit = POD_LIMIT if kind == "Pod" else EVENT_LIMIT
        path = self.kube.resource_for("v1", kind).path(namespace)
        body = self.kube.request("GET", path, params={**params, "limit": str(limit)})
        items = body.get("items") if isinstance(body, dict) else None
        return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def assess_live(
    live: Manifest | None,
    ref: ObjectRef,
    *,
    kube: KubeClient | None = None,
    options: health.HealthOptions = health.DEFAULT_OPTIONS,
) -> HealthStatus:
    """One object's health; with `kube`, judged with what the cluster knows (`LiveHealth`)."""
    return LiveHealth(kube, options).assess(live, ref)


def wait_healthy(
    kube: KubeClient,
    refs: Iterable[ObjectRef],
    *,
    deadline: float,
    known: dict[ObjectRef, Manifest] | None = None,
    progress: Progress | None = None,
    what: str = "",
    options: health.HealthOptions = health.DEFAULT_OPTIONS,
) -> dict[ObjectRef, HealthStatus]:
    """Poll until every ref is settled; return the last status of each."""
    judge = LiveHealth(kube, options)
    lives = {ref: (known or {}).get(ref) for ref in refs}
    statuses = {ref: judge.assess(live, ref) for ref, live in lives.items()}
    pause = 0.1
    while True:
        waiting = [ref for ref, s in statuses.items() if s.health not in SETTLED]
        _fail_on_degraded(statuses)
        if not waiting:
            return statuses
        if time.monotonic() > deadline:
            for ref in waiting:
                statuses[ref] = judge.explain(statuses[ref], lives[ref], ref)
            raise HealthTimeout(_timeout_message(statuses, waiting, what))
        if progress:
            progress(_progress_line(statuses, waiting, what))
        time.sleep(pause)
        pause = min(pause * 1.5, 1.0)
        for ref in waiting:
            lives[ref] = kube.get(ref)
            statuses[ref] = judge.assess(lives[ref], ref)


def _fail_on_degraded(statuses: dict[ObjectRef, HealthStatus]) -> None:
    degraded = [f"{ref}: {s.message}" for ref, s in statuses.items() if s.health == Health.DEGRADED]
    if degraded:
        raise ApplyError("degraded: " + "; ".join(sorted(degraded)))


def _timeout_message(
    statuses: dict[ObjectRef, HealthStatus], waiting: list[ObjectRef], what: str
) -> str:
    lines = [f"{ref} is {statuses[ref].health}: {statuses[ref].message}" for ref in sorted(waiting)]
    head = f"timed out waiting for {what or 'objects'} to become healthy"
    return head + ":\n  " + "\n  ".join(lines)


def _progress_line(
    statuses: dict[ObjectRef, HealthStatus], waiting: list[ObjectRef], what: str
) -> str:
    done = len(statuses) - len(waiting)
    first = waiting[0]
    return (
        f"{what}: {done}/{len(statuses)} healthy, waiting for {first} ({statuses[first].message})"
    )
