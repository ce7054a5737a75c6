"""Run a sync plan: phases and waves in order, tiers concurrently, health between waves.

Within a wave each tier applies concurrently once the objects its steps wait on are healthy
(a CRD Established before its custom resources, a webhook's backend before the webhook). The
next wave starts only when every object of this one is settled (Healthy or Suspended), so a
timeout names every object still waiting. Hooks run every sync: the previous hook object is
deleted first (BeforeHookCreation, the default) and removed after it succeeds or fails when
its delete policy says so. When a wave fails, SyncFail hooks run before the error surfaces.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from fleet.engine.apply import Applier, Decision
from fleet.engine.diff import compare as diff
from fleet.engine.health.wait import assess_live, wait_healthy
from fleet.engine.plan.order import Phase, Step, SyncPlan, Wave
from fleet.engine.syncstate import SyncState
from fleet.errors import ApplyError, FleetError
from fleet.kube.client import KubeClient
from fleet.model import Action, Health, Manifest, ObjectRef
from fleet.telemetry import spans as telemetry

Progress = Callable[[str], None]


class WaveRunner:
    def __init__(
        self,
        state: SyncState,
        kube: KubeClient,
        applier: Applier,
        decisions: dict[ObjectRef, Decision],
        *,
        progress: Progress | None = None,
    ) -> None:
        self.state = state
        self.kube = kube
        self.applier = applier
        self.decisions = decisions
        self.progress = progress
        self.live: dict[ObjectRef, Manifest] = {}

    def run(self, plan: SyncPlan, *, deadline: float) -> None:
        self.state.diffed = True
        self._create_namespace()
        try:
            for wave in plan.waves:
                self._run_wave(wave, deadline=deadline)
        except FleetError:
            self._run_sync_fail(plan.sync_fail, deadline=deadline)
            raise

    def _create_namespace(self) -> None:
        name = self.state.create_namespace
        if name:
            self.applier.apply_one(_namespace_decision(name), deadline=time.monotonic() + 30)

    def _run_wave(self, wave: Wave, *, deadline: float) -> None:
        label = f"{wave.phase} wave {wave.number}"
        with telemetry.stage("wave", phase=str(wave.phase), wave=wave.number) as span:
            for tier in wave.tiers:
                self._wait_for(tier, deadline=deadline, what=label)
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
                progress=self.progress,
                what=what,
            )
            self.kube.forget_discovery()

    def _apply_tier(self, tier: Sequence[Step], *, deadline: float) -> None:
        work = [self._decision_for(step) for step in tier]
        todo = [d for d in work if d is not None and d.apply]
        for step in tier:
            if step.is_hook:
                self._delete_previous_hook(step, deadline=deadline)
        failures = []
        waves = {step.ref: step.wave for step in tier}
        for decision, live, error in self.applier.apply_many(todo, deadline=deadline):
            wave = waves.get(decision.ref, 0)
            if error is not None:
                self.state.add(decision.ref, wave, Action.FAILED, _unknown(), str(error))
                failures.append(str(error))
                continue
            self.live[decision.ref] = live or {}
            self.state.add(decision.ref, wave, decision.action, _unknown(), "")
        for d in work:
            if d is not None and not d.apply:
                self.live[d.ref] = d.live or {}
                self.state.add(d.ref, waves.get(d.ref, 0), d.action, _unknown(), d.skip_reason)
        if failures:
            raise ApplyError(
                f"{len(failures)} object(s) failed to apply:\n  " + "\n  ".join(failures)
            )

    def _decision_for(self, step: Step) -> Decision | None:
        if step.is_hook:
            return Decision(step.ref, step.obj, None, diff.Drift(changed=("",)), True)
        return self.decisions.get(step.ref)

    def _delete_previous_hook(self, step: Step, *, deadline: float) -> None:
        policies = step.delete_policies or frozenset({"BeforeHookCreation"})
        if "BeforeHookCreation" in policies and self.kube.delete(step.ref):
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
                progress=self.progress,
                what=what,
            )
        except FleetError:
            self._cleanup_hooks(steps, succeeded=False)
            self._refresh_health(refs)
            raise
        for ref, status in statuses.items():
            self.state.update_health(ref, status.health, status.message)

    def _refresh_health(self, refs: Sequence[ObjectRef]) -> None:
        for ref in refs:
            status = assess_live(self.kube.get(ref), ref)
            self.state.update_health(ref, status.health, status.message)

    def _cleanup_hooks(self, steps: Sequence[Step], *, succeeded: bool) -> None:
        policy = "HookSucceeded" if succeeded else "HookFailed"
        for step in steps:
            if step.is_hook and policy in step.delete_policies:
                self.kube.delete(step.ref)

    def _run_sync_fail(self, steps: Sequence[Step], *, deadline: float) -> None:
        if not steps:
            return
        hooks = [Decision(s.ref, s.obj, None, diff.Drift(changed=("",)), True) for s in steps]
        for step in steps:
            self._delete_previous_hook(step, deadline=deadline)
        self.applier.apply_many(hooks, deadline=deadline)


def _unknown() -> Health:
    return Health.PROGRESSING


def _namespace_decision(name: str) -> Decision:
    obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    return Decision(ObjectRef.of(obj), obj, None, diff.Drift(changed=("",)), True)


__all__ = ["Phase", "WaveRunner"]
