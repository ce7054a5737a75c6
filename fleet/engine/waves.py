"""Run a sync plan: phases and waves in order, tiers concurrently, health between waves.

Within a wave each tier applies concurrently once the objects its steps wait on are healthy
(a CRD Established before its custom resources, a webhook's backend before the webhook). The
next wave starts only when every object of this one is settled (Healthy or Suspended), so a
timeout names every object still waiting. Hooks run every sync: the previous hook object is
deleted first (BeforeHookCreation, the default) and removed after it succeeds or fails when
its delete policy says so. When a wave fails, SyncFail hooks run before the error surfaces.

Hooks are not compared in stage 4, so this module makes their checks: a hook is applied (and its
previous run deleted) only when no other application tracks the object of that name
(`tracking.Ownership`), and every write and delete is checked against the project's boundaries
at that moment (`Applier.apply_one`, `Applier.check`).

`WaveRunner.run` returns a `StageReport`: each object's action and last known health, the writes
made, and the error the run stopped on, if any; `fleet.engine.sync` folds it with the others.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from fleet.engine.apply import Applier, Decision
from fleet.engine.contract import ResourceResult
from fleet.engine.diff import compare as diff
from fleet.engine.health.wait import assess_live, wait_healthy
from fleet.engine.plan.order import Phase, Step, SyncPlan, Wave
from fleet.engine.plan.tracking import Ownership
from fleet.engine.report import StageReport
from fleet.errors import ApplyError, FleetError, LeaseLost, OwnershipConflict
from fleet.kube.client import KubeClient
from fleet.model import Action, Health, Manifest, ObjectRef
from fleet.telemetry import spans as telemetry

Progress = Callable[[str], None]


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
    ) -> None:
        self.kube = kube
        self.guard = guard  # raises LeaseLost before a wave once the sync's lease is lost
        self.applier = applier
        self.decisions = decisions
        self.ownership = ownership
        self.progress = progress
        self.live: dict[ObjectRef, Manifest] = {}
        self.results: dict[ObjectRef, ResourceResult] = {}

    def run(self, plan: SyncPlan, *, deadline: float, create_namespace: str = "") -> StageReport:
        """Create `create_namespace` if named, then apply every wave; never raises a FleetError
        but reports the one it stopped on, after the objects it reached."""
        writes_before = self.applier.writes
        error: FleetError | None = None
        try:
            self._create_namespace(create_namespace)
            self._run_waves(plan, deadline=deadline)
        except FleetError as e:
            error = e
        return StageReport(
            resources=tuple(self.results.values()),
            writes=self.applier.writes - writes_before,
            error=error,
        )

    def _run_waves(self, plan: SyncPlan, *, deadline: float) -> None:
        try:
            for wave in plan.waves:
                self._check(f"{wave.phase} wave {wave.number}")
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
        """Each poll of a health wait: stop at once if the lease was lost meanwhile."""
        self._check("a health wait")
        if self.progress is not None:
            self.progress(line)

    def _create_namespace(self, name: str) -> None:
        if name:
            self.applier.create_namespace(name, deadline=time.monotonic() + 30)

    def _run_wave(self, wave: Wave, *, deadline: float) -> None:
        label = f"{wave.phase} wave {wave.number}"
        with telemetry.stage("wave", phase=str(wave.phase), wave=wave.number) as span:
            for tier in wave.tiers:
                self._wait_for(tier, deadline=deadline, what=label)
                self._check(label)
                self._apply_tier(tier, deadline=deadline)
            span.set_attribute("gitfleet.objects", len(wave.steps))
            self._settle(wave.steps, deadline=deadline, what=label)
            self._cleanup_hooks(wave.steps, succeeded=True)

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
            return Decision(step.ref, step.obj, None, diff.Drift(changed=("",)), True)
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

    def _delete_previous_hook(self, step: Step, *, deadline: float) -> None:
        policies = step.delete_policies or frozenset({"BeforeHookCreation"})
        if "BeforeHookCreation" not in policies:
            return
        self.applier.check(step.ref)
        if self.kube.delete(step.ref):
            while self.kube.get(step.ref) is not None and time.monotonic() < deadline:
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
            )
        except LeaseLost:
            raise
        except FleetError:
            self._cleanup_hooks(steps, succeeded=False)
            self._refresh_health(refs)
            raise
        for ref, status in statuses.items():
            self._update_health(ref, status.health, status.message)

    def _refresh_health(self, refs: Sequence[ObjectRef]) -> None:
        for ref in refs:
            status = assess_live(self.kube.get(ref), ref)
            self._update_health(ref, status.health, status.message)

    def _cleanup_hooks(self, steps: Sequence[Step], *, succeeded: bool) -> None:
        policy = "HookSucceeded" if succeeded else "HookFailed"
        for step in steps:
            if step.is_hook and policy in step.delete_policies:
                self.applier.check(step.ref)
                self.kube.delete(step.ref)

    def _run_sync_fail(self, steps: Sequence[Step], *, deadline: float) -> None:
        """Run the SyncFail hooks. The wave's error is the one the sync reports, so a hook that
        cannot run (another app's, outside the project) is reported on its own entry."""
        if not steps:
            return
        hooks = [Decision(s.ref, s.obj, None, diff.Drift(changed=("",)), True) for s in steps]
        try:
            self._claim_hooks(steps)
            for step in steps:
                self._delete_previous_hook(step, deadline=deadline)
        except FleetError as e:
            for step in steps:
                self._add(step.ref, step.wave, Action.FAILED, f"SyncFail hook not run: {e}")
            return
        waves = {step.ref: step.wave for step in steps}
        for decision, _, error in self.applier.apply_many(hooks, deadline=deadline):
            if error is not None:
                message = f"SyncFail hook failed: {error}"
                self._add(decision.ref, waves[decision.ref], Action.FAILED, message)


__all__ = ["Phase", "WaveRunner"]
