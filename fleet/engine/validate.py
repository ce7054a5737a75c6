"""Validation before the first write: the whole sync passes a server-side dry-run.

Stage 4 (`fleet.engine.apply.diff_live`) dry-runs every out-of-sync object the cluster can
dry-run as it is; `validate_sync` adds the hooks (SyncFail hooks included: every hook this sync
may run) and fails the sync, naming every object the API server refused with its message,
before anything is written. A sync with one invalid object in its last wave writes nothing.

Some objects cannot be dry-run yet: those in a Namespace this sync creates (the server answers
NotFound for the namespace) and custom resources of a CRD this sync installs (no kind to match).
Those Namespaces and CRDs, and only those, are written first, as the one exception (Argo CD
skips the dry-run of such objects instead); the CRDs are awaited until Established, and every
object that waited for them is dry-run right after, before any other write. A refusal then
leaves only those Namespaces and CRDs written, and the error says so. A preview (`dry_run`)
writes nothing at all: those objects are reported as not validated.

The writes go through `Applier.apply_one` (project boundaries checked) after the lease guard,
like every other write of a sync.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from fleet.engine.apply import Applier, Decision, LiveDiff
from fleet.engine.contract import ResourceResult, SyncRequest
from fleet.engine.health import assess as health
from fleet.engine.health.wait import wait_healthy
from fleet.engine.report import StageReport
from fleet.errors import ApplyError, FleetError, KubeApiError
from fleet.model import Action, Health, Manifest, ObjectRef

CRD_KIND = ("apiextensions.k8s.io", "CustomResourceDefinition")


@dataclass(frozen=True)
class Validated:
    """What validation did: its report (the early writes, or the refusal as its error) and the
    app's namespace still to be created by the apply stage ("" when created here)."""

    report: StageReport
    create_namespace: str


def validate_sync(
    request: SyncRequest,
    applier: Applier,
    diffed: LiveDiff,
    *,
    hooks: Sequence[Manifest],
    waves: Mapping[ObjectRef, int],
    deadline: float,
    before_writes: Callable[[], None] = lambda: None,
) -> Validated:
    """Dry-run what stage 4 could not (hooks, then the objects that wait for a Namespace or
    CRD of this sync, once those are written); report any refusal as the report's error.
    `before_writes` runs before the first of those writes (the sync's inventory check)."""
    decisions = list(diffed.decisions.values())
    checks = [_hook_decision(obj) for obj in _unique(hooks)]
    now = [d for d in checks if _can_dry_run(applier, d, diffed.new_namespaces)]
    for hook in now:
        applier.confirm_hook(hook)
    for d in decisions + checks:
        if d.apply and not d.dry_run_error:
            d.dry_run_error = dry_run_gap(d.ref, d.desired)
    refusal = _refused(decisions + checks, waves, written=())
    if refusal is not None:
        return Validated(refusal, diffed.create_namespace)
    objects = [d for d in decisions if d.apply and not d.validated]
    waiting = [d for d in checks if not d.validated]
    later = objects + waiting
    if not later or request.dry_run:
        return Validated(StageReport(), diffed.create_namespace)
    request.check_lease("the Namespaces and CRDs the dry-run needs")
    before_writes()
    written: list[ResourceResult] = []
    created = ""
    try:
        created = _write_prerequisites(applier, diffed, later, waves, written, deadline=deadline)
        for d in objects:
            applier.confirm(d)
        for d in waiting:
            applier.confirm_hook(d)
    except FleetError as e:
        stopped = StageReport(resources=tuple(written), writes=len(written), undone=True, error=e)
        return Validated(stopped, "")
    refusal = _refused(decisions + checks, waves, written=written)
    if refusal is not None:
        return Validated(refusal, "")
    create = "" if created else diffed.create_namespace
    return Validated(StageReport(resources=tuple(written), writes=len(written)), create)


def dry_run_gap(ref: ObjectRef, obj: Manifest) -> str:
    """What the API server refuses on a real write but accepts in a dry-run, phrased as it
    phrases it ("" when none): the dry-run skips the node port allocator, so a Service's
    nodePort that is no port number at all passes it (kubernetes/kubernetes, `portallocator`
    in dry-run mode only checks that the port is free). A port outside a cluster's own range
    but below 65536 cannot be known before the write (the range is an API server flag)."""
    if (ref.group, ref.kind) != ("", "Service"):
        return ""
    ports = (obj.get("spec") or {}).get("ports") or []
    for index, port in enumerate(ports):
        node_port = port.get("nodePort") if isinstance(port, dict) else None
        if isinstance(node_port, int) and not 0 < node_port < 65536:
            return (
                f"{ref} refused before the write (Invalid): spec.ports[{index}].nodePort: "
                f"Invalid value: {node_port}: provided port is not in the valid range "
                "(a port number is 1-65535; the API server's dry-run does not check node ports)"
            )
    return ""


def _unique(objects: Sequence[Manifest]) -> list[Manifest]:
    """Each hook once (a hook in several phases is one object)."""
    seen: dict[ObjectRef, Manifest] = {}
    for obj in objects:
        seen.setdefault(ObjectRef.of(obj), obj)
    return list(seen.values())


def _hook_decision(obj: Manifest) -> Decision:
    return Decision.unconditional(ObjectRef.of(obj), obj)


def _can_dry_run(applier: Applier, d: Decision, new_namespaces: frozenset[str]) -> bool:
    ref = d.ref
    return applier.kube.has_kind(ref.api_version, ref.kind) and ref.namespace not in new_namespaces


def _write_prerequisites(
    applier: Applier,
    diffed: LiveDiff,
    later: list[Decision],
    waves: Mapping[ObjectRef, int],
    written: list[ResourceResult],
    *,
    deadline: float,
) -> str:
    """Write the Namespaces and CRDs of this sync that `later` cannot be dry-run without;
    return the app's namespace when it was created here ("" otherwise)."""
    kube = applier.kube
    namespaces = {d.ref.namespace for d in later if d.ref.namespace in diffed.new_namespaces}
    missing = {
        (d.ref.api_version, d.ref.kind)
        for d in later
        if not kube.has_kind(d.ref.api_version, d.ref.kind)
    }
    missing_kinds = {(api.rpartition("/")[0], kind) for api, kind in missing}
    created = ""
    by_name = {
        d.ref.name: d
        for d in diffed.decisions.values()
        if (d.ref.group, d.ref.kind) == ("", "Namespace")
    }
    for name in sorted(namespaces):
        declared = by_name.get(name)
        if declared is not None and declared.apply:
            _write(applier, declared, waves, written, deadline=deadline)
        elif name == diffed.create_namespace:
            live = applier.create_namespace(name, deadline=deadline)
            ref = ObjectRef("", "v1", "Namespace", "", name)
            written.append(_entry(ref, 0, Action.CREATED, live))
            created = name
    crds = [
        d
        for d in diffed.decisions.values()
        if (d.ref.group, d.ref.kind) == CRD_KIND
        and d.apply
        and _defines(d.desired) in missing_kinds
    ]
    for crd in crds:
        _write(applier, crd, waves, written, deadline=deadline)
    if crds:
        wait_healthy(
            kube,
            [crd.ref for crd in crds],
            deadline=deadline,
            what="the CRDs this sync's objects are dry-run against",
        )
        kube.forget_discovery()
        defined = {_defines(crd.desired) for crd in crds}
        new_kinds = [
            (api, kind) for api, kind in missing if (api.rpartition("/")[0], kind) in defined
        ]
        _wait_served(applier, sorted(new_kinds), deadline=min(deadline, time.monotonic() + 30))
    return created


def _wait_served(applier: Applier, kinds: list[tuple[str, str]], *, deadline: float) -> None:
    """Wait until the API server lists each new kind: just after a CRD is Established it may
    answer 429 "storage is (re)initializing" (or not serve the kind yet) for a moment."""
    kube = applier.kube
    for api_version, kind in kinds:
        while True:
            try:
                kube.list(api_version, kind)
                break
            except KubeApiError as e:
                if e.status not in (404, 429, 503) or time.monotonic() > deadline:
                    break  # the dry-run that follows reports it
                kube.forget_discovery()
                time.sleep(0.2)


def _defines(crd: Manifest) -> tuple[str, str]:
    spec = crd.get("spec") or {}
    return str(spec.get("group", "")), str((spec.get("names") or {}).get("kind", ""))


def _write(
    applier: Applier,
    decision: Decision,
    waves: Mapping[ObjectRef, int],
    written: list[ResourceResult],
    *,
    deadline: float,
) -> None:
    """Apply one Namespace or CRD now; the apply stage then leaves it as written."""
    action = decision.action
    live = applier.apply_one(decision, deadline=deadline)
    decision.live, decision.apply, decision.written_early = live, False, action
    written.append(_entry(decision.ref, waves.get(decision.ref, 0), action, live))


def _entry(ref: ObjectRef, wave: int, action: Action, live: Manifest) -> ResourceResult:
    status = health.assess(live)
    note = "written before the rest of the sync was dry-run: objects in it need it to exist"
    return ResourceResult(ref, wave, action, status.health, note)


def _refused(
    decisions: Sequence[Decision],
    waves: Mapping[ObjectRef, int],
    *,
    written: Sequence[ResourceResult],
) -> StageReport | None:
    """None when the server refused nothing; else a report whose error names every refused
    object with the server's message, the refused ones failed and the rest not applied."""
    refused = [d for d in decisions if d.dry_run_error]
    if not refused:
        return None
    early = ", ".join(str(r.ref) for r in written)
    nothing = f"only {early} was written" if early else "nothing was written"
    error = ApplyError(
        f"server-side dry-run refused {len(refused)} object(s); {nothing}:\n  "
        + "\n  ".join(d.dry_run_error for d in refused)
    )
    entries = list(written)
    for d in decisions:
        wave = waves.get(d.ref, 0)
        if d.dry_run_error:
            entries.append(_not_written(d, wave, Action.FAILED, d.dry_run_error))
        elif d.apply:
            message = "not applied: the server-side dry-run refused other objects of the sync"
            entries.append(_not_written(d, wave, Action.SKIPPED, message))
    return StageReport(resources=tuple(entries), writes=len(written), error=error)


def _not_written(d: Decision, wave: int, action: Action, message: str) -> ResourceResult:
    """A refused or held-back object: Missing when it does not exist, else its live health."""
    state = health.assess(d.live).health if d.live is not None else Health.MISSING
    return ResourceResult(d.ref, wave, action, state, message)
