"""Run a sync plan: phases and waves in order, tiers concurrently, health between waves.

Within a wave each tier applies concurrently once the objects its steps wait on are healthy
(a CRD Established before its custom resources, a webhook's backend before the webhook). The
next wave starts only when every object of this one is settled (Healthy or Suspended), so a
timeout names every object still waiting. Hooks run in every sync that runs them
(`fleet.engine.plan.hooks.runs_hooks`): the earlier instances of the same hook, found by the
identity label `gitfleet.io/hook-id` (a generateName hook has a new name each run), are deleted
first (BeforeHookCreation, the default); each hook is awaited with its wave, and deleted
afterwards when its delete policy names its outcome (HookSucceeded when it ended Healthy,
HookFailed when it failed). When a wave fails, SyncFail hooks run, are awaited (given at least
`SYNC_FAIL_GRACE` seconds even after a timeout) and cleaned up the same way, before the wave's
error surfaces.

Hooks are not compared in stage 4, so this module makes their checks: a hook is applied (and its
previous run deleted) only when no other application tracks the object of that name
(`tracking.Ownership`); an earlier instance found by its label is deleted only when its
tracking id names this app and that very object (`Ownership.owns`: a copied label is not
enough); and every write and delete is checked against the project's boundaries at that moment
(`Applier.apply_one`, `Applier.check`).

`WaveRunner.run` returns a `StageReport`: each object's action and last known health, the writes
made, and the error the run stopped on, if any; `fleet.engine.sync` folds it with the others.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from fleet.engine.apply import Applier, Decision
from fleet.engine.contract import ResourceResult, WaveTiming
from fleet.engine.health.assess import DEFAULT_OPTIONS, HealthOptions
from fleet.engine.health.wait import assess_live, wait_healthy
from fleet.engine.plan.hooks import HOOK_ID_LABEL
from fleet.engine.plan.hooks import identity_of as hook_id
from fleet.engine.plan.order import Phase, Step, SyncPlan, Wave
from fleet.engine.plan.tracking import Ownership
from fleet.engine.report import StageReport
from fleet.engine.supersede import NewerRevision
from fleet.errors import ApplyError, FleetError, LeaseLost, OwnershipConflict
from fleet.kube.client import KubeClient
from fleet.model import Action, Health, Manifest, ObjectRef
from fleet.telemetry import spans as telemetry

Progress = Callable[[str], None]
SYNC_FAIL_GRACE = 30.0  # seconds SyncFail hooks may run after the sync's own deadline


class WaveRunner:
    """One run of a plan's waves; what it did to each object is in `results` as it goes."""

    def __init__(
        self,
        kube: KubeClient,
        applier: Applier,
        decisions: dict[ObjectRef, Decision],
        *,
        ownership: Ownership,
        progress: Progress | None = None,
        guard: Callable[[str], None] | None = None,
        superseded: Callable[[str], None] | None = None,
        health: HealthOptions = DEFAULT_OPTIONS,
    ) -> None:
        self.kube = kube
        self.health = health  # the app's health choices, for every wait and judgement
        self.guard = guard  # raises LeaseLost before a wave once the sync's lease is lost
        # raises `supersede.NewerRevision` during a wave's health wait once a newer revision
        # was requested (the safe point: every write of the wave has returned)
        self.superseded = superseded
        self.waiting = ""  # the wave whose health wait may be cancelled ("" outside one)
        self.reached = ""  # the last wave started, named in what a failed run reports
        self.applier = applier
        self.decisions = decisions
        self.ownership = ownership
        self.progress = progress
        self.live: dict[ObjectRef, Manifest] = {}
        self.results: dict[ObjectRef, ResourceResult] = {}
        self.origin = time.monotonic()  # when `run` started: the waves' offsets count from it
        self.timings: list[WaveTiming] = []  # each wave run so far, SyncFail hooks included

    def run(self, plan: SyncPlan, *, deadline: float, create_namespace: str = "") -> StageReport:
        """Create `create_namespace` if named, then apply every wave; never raises a FleetError
        but reports the one it stopped on, after the objects it reached."""
        writes_before = self.applier.writes
        self.origin = time.monotonic()
        error: FleetError | None = None
        missed = 0
        try:
            self._create_namespace(create_namespace)
            self._run_waves(plan, deadline=deadline)
        except FleetError as e:
            error = e
            if not isinstance(e, LeaseLost):
                missed = self._not_applied(plan)
        where = self.reached or "its first wave"
        note = f"the sync stopped at {where}: {missed} object(s) not applied" if missed else ""
        return StageReport(
            resources=tuple(self.results.values()),
            writes=self.applier.writes - writes_before,
            undone=bool(missed),
            note=note,
            waves=tuple(self.timings),
            error=error,
        )

    @contextmanager
    def _timed(self, phase: str, number: int, objects: int) -> Iterator[list[bool]]:
        """Time one wave (or the SyncFail hooks) into `timings`, failed when it raised (a wave
        cancelled for a newer revision did not fail) or when the caller sets the flag it gets."""
        started = time.monotonic()
        flag = [False]
        try:
            yield flag
        except NewerRevision:
            raise
        except BaseException:
            flag[0] = True
            raise
        finally:
            failed = flag[0]
            self.timings.append(
                WaveTiming(
                    phase=phase,
                    number=number,
                    offset=round(started - self.origin, 4),
                    seconds=round(time.monotonic() - started, 4),
                    objects=objects,
                    failed=failed,
                )
            )

    def _not_applied(self, plan: SyncPlan) -> int:
        """After a failed run: every object of the plan it never reached gets an entry, the
        ones it would have applied as skipped "not applied" (health Missing when the object
        does not exist, so app health counts it); returns how many were not applied."""
        why = f"not applied: the sync stopped at {self.reached or 'its first wave'}"
        count = 0
        for step in (s for wave in plan.waves for s in wave.steps):
            decision = self._decision_for(step)
            if step.ref in self.results or decision is None:
                continue
            live = None if step.is_hook else decision.live
            state = (
                assess_live(live, step.ref, kube=self.kube, options=self.health).health
                if live is not None
                else Health.MISSING
            )
            if decision.apply:
                entry = ResourceResult(step.ref, step.wave, Action.SKIPPED, state, why)
                count += 1
            else:
                entry = ResourceResult(
                    step.ref, step.wave, decision.action, state, decision.skip_reason
                )
            self.results[step.ref] = entry
        return count

    def _run_waves(self, plan: SyncPlan, *, deadline: float) -> None:
        try:
            for wave in plan.waves:  # `_run_wave` checks the lease before each tier's writes
                self._run_wave(wave, deadline=deadline)
        except LeaseLost:
            raise  # not ours any more: no SyncFail hooks either
        except FleetError:
            self._run_sync_fail(plan.sync_fail, deadline=deadline)
            raise

    def _check(self, step: str) -> None:
        if self.guard is not None:
            self.guard(step)

    def _polled(self, line: str) -> None:
        """Each poll of a health wait: stop at once if the lease was lost meanwhile, or (in a
        wave's wait) if a newer revision was requested."""
        self._check("a health wait")
        if self.superseded is not None and self.waiting:
            self.superseded(f"the health wait of {self.waiting}")
        if self.progress is not None:
            self.progress(line)

    def _create_namespace(self, name: str) -> None:
        if name:
            self.applier.create_namespace(name, deadline=time.monotonic() + 30)

    def _run_wave(self, wave: Wave, *, deadline: float) -> None:
        label = f"{wave.phase} wave {wave.number}"
        self.reached = self.waiting = label
        cancelled: NewerRevision | None = None
        with (
            self._timed(str(wave.phase), wave.number, len(wave.steps)),
            telemetry.stage("wave", phase=str(wave.phase), wave=wave.number) as span,
        ):
            try:
                for tier in wave.tiers:
                    self._wait_for(tier, deadline=deadline, what=label)
                    self._check(label)
                    self._apply_tier(tier, deadline=deadline)
                span.set_attribute("gitfleet.objects", len(wave.steps))
                self._settle(wave.steps, deadline=deadline, what=label)
            except NewerRevision as newer:  # no failure: the span says why it ended here
                span.set_attribute("gitfleet.cancelled", str(newer))
                cancelled = newer
            finally:
                self.waiting = ""  # SyncFail hooks and cleanup are never cancelled
            if cancelled is None:
                self._cleanup_hooks(wave.steps)
        if cancelled is not None:
            raise cancelled

    def _wait_for(self, tier: Sequence[Step], *, deadline: float, what: str) -> None:
        gates = {ref for step in tier for ref in step.wait_healthy}
        if gates:
            wait_healthy(
                self.kube,
                gates,
                deadline=deadline,
                known=self.live,
                progress=self._polled,
                what=what,
                options=self.health,
            )
            self.kube.forget_discovery()

    def _apply_tier(self, tier: Sequence[Step], *, deadline: float) -> None:
        work = [self._decision_for(step) for step in tier]
        todo = [d for d in work if d is not None and d.apply]
        self._claim_hooks([step for step in tier if step.is_hook])
        for step in tier:
            if step.is_hook:
                self._delete_previous_hook(step, deadline=deadline)
        failures = []
        waves = {step.ref: step.wave for step in tier}
        for decision, live, error in self.applier.apply_many(todo, deadline=deadline):
            wave = waves.get(decision.ref, 0)
            if error is not None:
                self._add(decision.ref, wave, Action.FAILED, str(error))
                failures.append(str(error))
                continue
            self.live[decision.ref] = live or {}
            self._add(decision.ref, wave, decision.action, "")
        for d in work:
            if d is not None and not d.apply:
                self.live[d.ref] = d.live or {}
                self._add(d.ref, waves.get(d.ref, 0), d.action, d.skip_reason)
        if failures:
            raise ApplyError(
                f"{len(failures)} object(s) failed to apply:\n  " + "\n  ".join(failures)
            )

    def _add(self, ref: ObjectRef, wave: int, action: Action, message: str) -> None:
        """An object just applied (or left alone): Progressing until its wave settles."""
        self.results[ref] = ResourceResult(ref, wave, action, Health.PROGRESSING, message)

    def _update_health(self, ref: ObjectRef, health: Health, message: str) -> None:
        """The health the wait saw; a failed object stays as it failed, and a skipped one
        keeps the reason it was skipped."""
        old = self.results.get(ref)
        if old is not None and old.action != Action.FAILED:
            keep = old.action == Action.SKIPPED and old.message
            text = old.message if keep else message
            self.results[ref] = ResourceResult(ref, old.wave, old.action, health, text)

    def _decision_for(self, step: Step) -> Decision | None:
        if step.is_hook:
            return Decision.unconditional(step.ref, step.obj)
        return self.decisions.get(step.ref)

    def _claim_hooks(self, steps: Sequence[Step]) -> None:
        """Raise OwnershipConflict naming every hook whose object another application tracks
        (a hook is applied over, or deleted before it runs, so it must be ours or new)."""
        taken = []
        for step in steps:
            live = self.kube.get(step.ref)
            other = self.ownership.other_owner(live, step.ref) if live is not None else None
            if other:
                taken.append(f"{step.ref} is tracked by {other}")
                self._add(step.ref, step.wave, Action.FAILED, f"tracked by {other}")
        if taken:
            raise OwnershipConflict(
                "hooks owned by another application were not run: " + "; ".join(taken)
            )

    def _instances(self, step: Step) -> list[ObjectRef]:
        """The live instances of the hook `step` runs that this app owns: every object of its
        kind and namespace labelled with its identity (earlier runs of a generateName hook),
        and the object of its own name (an instance written before the label existed)."""
        found = {step.ref} if self.kube.get(step.ref) is not None else set()
        identity = hook_id(step.obj)
        if identity:
            ref = step.ref
            selector = f"{HOOK_ID_LABEL}={identity}"
            for live in self.kube.list(
                ref.api_version, ref.kind, namespace=ref.namespace, label_selector=selector
            ):
                other = dataclasses.replace(ObjectRef.of(live), version=ref.version)
                if self.ownership.owns(live, other):
                    found.add(other)
        return sorted(found)

    def _delete_previous_hook(self, step: Step, *, deadline: float) -> None:
        """BeforeHookCreation: delete every earlier instance of the hook and wait until they
        are gone, so the new instance never meets the old one."""
        policies = step.delete_policies or frozenset({"BeforeHookCreation"})
        if "BeforeHookCreation" not in policies:
            return
        earlier = self._instances(step)
        for ref in earlier:
            self.applier.check(ref)
        gone = [ref for ref in earlier if self.kube.delete(ref)]
        while gone and time.monotonic() < deadline:
            gone = [ref for ref in gone if self.kube.get(ref) is not None]
            if gone:
                time.sleep(0.1)

    def _settle(self, steps: Sequence[Step], *, deadline: float, what: str) -> None:
        refs = [s.ref for s in steps]
        try:
            statuses = wait_healthy(
                self.kube,
                refs,
                deadline=deadline,
                known=self.live,
                progress=self._polled,
                what=what,
                options=self.health,
            )
        except LeaseLost:
            raise
        except FleetError:
            self._refresh_health(refs)
            self._cleanup_hooks(steps)
            raise
        for ref, status in statuses.items():
            self._update_health(ref, status.health, status.message)

    def _refresh_health(self, refs: Sequence[ObjectRef]) -> None:
        for ref in refs:
            status = assess_live(self.kube.get(ref), ref, kube=self.kube, options=self.health)
            self._update_health(ref, status.health, status.message)

    def _cleanup_hooks(self, steps: Sequence[Step]) -> None:
        """Delete each hook whose delete policy names how it ended: HookSucceeded when its
        last known health is Healthy, HookFailed when Degraded (failed). A hook still running
        (its wave timed out) or never applied stays. Its entry keeps the health it ended with."""
        for step in steps:
            result = self.results.get(step.ref)
            if not step.is_hook or result is None:
                continue
            if result.action == Action.FAILED or result.health == Health.DEGRADED:
                policy = "HookFailed"
            elif result.health == Health.HEALTHY:
                policy = "HookSucceeded"
            else:
                continue
            if policy in step.delete_policies:
                for ref in self._instances(step):
                    self.applier.check(ref)
                    self.kube.delete(ref)

    def _run_sync_fail(self, steps: Sequence[Step], *, deadline: float) -> None:
        """Run the SyncFail hooks, wait for them (at least `SYNC_FAIL_GRACE` seconds, as the
        sync's own deadline may be what failed) and clean them up. The wave's error is the one
        the sync reports, so a hook that cannot run (another app's, outside the project) or
        that fails is reported on its own entry."""
        if not steps:
            return
        with self._timed(str(Phase.SYNC_FAIL), min(s.wave for s in steps), len(steps)) as failed:
            self._sync_fail(steps, deadline=deadline)
            ended = [self.results.get(s.ref) for s in steps]
            failed[0] = any(
                r is None or r.action == Action.FAILED or r.health == Health.DEGRADED for r in ended
            )

    def _sync_fail(self, steps: Sequence[Step], *, deadline: float) -> None:
        deadline = max(deadline, time.monotonic() + SYNC_FAIL_GRACE)
        hooks = [Decision.unconditional(s.ref, s.obj) for s in steps]
        try:
            self._claim_hooks(steps)
            for step in steps:
                self._delete_previous_hook(step, deadline=deadline)
        except FleetError as e:
            for step in steps:
                self._add(step.ref, step.wave, Action.FAILED, f"SyncFail hook not run: {e}")
            return
        by_ref = {step.ref: step for step in steps}
        applied = []
        for decision, live, error in self.applier.apply_many(hooks, deadline=deadline):
            step = by_ref[decision.ref]
            if error is not None:
                self._add(step.ref, step.wave, Action.FAILED, f"SyncFail hook failed: {error}")
                continue
            self.live[step.ref] = live or {}
            self._add(step.ref, step.wave, decision.action, "")
            applied.append(step)
        try:
            self._settle(applied, deadline=deadline, what="SyncFail hooks")
        except LeaseLost:
            raise
        except FleetError:
            return  # each hook's entry says how it ended; _settle cleaned up the failed ones
        self._cleanup_hooks(applied)


__all__ = ["Phase", "WaveRunner"]
