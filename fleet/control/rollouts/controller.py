"""The rollout controller: one idempotent step per scheduler tick, every decision kept in Redis.

For each automated app with a `rollout`, `tick(now)`:

1. looks up the newest commit of the app's revision, at most every `poll_s` (`heads`). The
   first time, the baseline is the revision every instance runs (an app that gains a
   rollout), else that newest commit (a new app: there is no older revision to keep), and
   every instance is pinned to it. A different commit starts a rollout from the first step (also
   mid-rollout: the clusters not yet reached stay pinned at the stable revision), with one
   root span `gitfleet.rollout` whose context every sync of the rollout carries;
2. starts the current step: pins its clusters to the new revision and asks for their syncs
   (`Trigger.ROLLOUT`), then records when the step started. Pins first, state last, so a leader
   that dies in between leaves a step the next leader starts again (a repeated request merges
   into the pending sync);
3. judges a started step (`judge`) on the sync records at the new revision that started after
   it: all Synced and Healthy passes it (then its pause, or the next step, or Completed);
   one failure or Degraded fails the rollout with the reason, and stops it there;
4. while a step's pause runs, fails the rollout if one of its instances turns Degraded at
   the new revision; for an Aborted rollout, pins every instance back to the stable revision;
   for a Completed one, pins every instance (a cluster that joined meanwhile too) to its revision.

A pin that changes asks for a sync of that instance, so an instance moved back (a restart, an
abort) returns to the stable revision without waiting for its interval.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime

from opentelemetry import context, propagate
from opentelemetry.trace import Span

from fleet.control.notifications.events import ROLLOUT_STEP_DONE, ROLLOUT_STEP_FAILED
from fleet.control.notifications.outbox import notify
from fleet.control.registry.records import AppRecord, ClusterRecord
from fleet.control.registry.store import Store
from fleet.control.rollouts.heads import Heads
from fleet.control.rollouts.judge import judge
from fleet.control.rollouts.plan import plan_steps
from fleet.control.rollouts.state import Phase, RolloutState, RolloutStore, StepState, with_step
from fleet.control.routing.dispatch import Dispatcher
from fleet.control.routing.sharding import NoWorkers
from fleet.errors import FleetError
from fleet.model import Health, Trigger
from fleet.telemetry import spans as telemetry

log = logging.getLogger("gitfleet.rollouts")


class RolloutController:
    def __init__(self, store: Store, dispatcher: Dispatcher, heads: Heads) -> None:
        self.store = store
        self.dispatcher = dispatcher
        self.heads = heads
        self.states = RolloutStore(store.redis, dispatcher.prefix)

    def tick(self, now: float, clusters: list[ClusterRecord] | None = None) -> list[str]:
        """Advance every rollout one step; returns the apps whose rollout changed."""
        clusters = self.store.list_clusters() if clusters is None else clusters
        changed, apps = [], self.store.list_apps_cached()
        self._forget_gone({a.name for a in apps if a.rollout is not None})
        for app in apps:
            if app.rollout is None or app.deleting or not app.sync_policy.automated:
                continue
            try:
                if self.advance(app, clusters, now):
                    changed.append(app.name)
            except NoWorkers:
                raise
            except Exception:  # one app's rollout must never stop the others
                log.exception("app=%s rollout not advanced", app.name)
        return changed

    def advance(self, app: AppRecord, clusters: list[ClusterRecord], now: float) -> bool:
        labels = {c.name: c.labels for c in clusters}
        targets = {c: labels[c] for c in self.store.instances(app, clusters)}
        before = self.states.get(app.name)
        if before is not None and before.uid != app.uid:  # a deleted app's, of the same name
            self.states.forget(app.name)
            before = None
        state = self._revision(app, before, targets, now)
        if state is None:
            return False
        if state.phase == Phase.PROGRESSING:
            state = self._progress(app, state, now)
        elif state.phase == Phase.PAUSED:
            state = self._paused(app, state, now)
        self._drop_departed(app, state, targets)
        if state.phase == Phase.ABORTED:
            self._pin(app, state, dict.fromkeys(targets, state.stable))
        elif state.phase == Phase.COMPLETED:  # newcomers too: every instance at the revision
            self._pin(app, state, dict.fromkeys(targets, state.revision))
        else:
            self._pin_newcomers(app, state, targets)
        if state != before:
            self._save(before, state)
            return True
        return False

    # -- a new revision -----------------------------------------------------------------------

    def _revision(
        self,
        app: AppRecord,
        state: RolloutState | None,
        targets: Mapping[str, Mapping[str, str]],
        now: float,
    ) -> RolloutState | None:
        spec = app.rollout
        assert spec is not None
        if state is not None and now - state.checked < spec.poll_s:
            return state
        try:
            head = self.heads.head(app)
        except FleetError as e:
            log.warning("app=%s rollout: the newest commit is unknown: %s", app.name, e)
            return None if state is None else replace(state, checked=now)
        if state is None:
            base = self._running(app, targets) or head
            baseline = RolloutState(
                app.name,
                base,
                uid=app.uid,
                stable=base,
                phase=Phase.COMPLETED,
                started=now,
                checked=now,
            )
            self.states.set_pins(app.name, dict.fromkeys(targets, base))
            if head == base:
                return baseline
            return self._start(app, baseline, head, targets, now)
        if head == state.revision:
            return replace(state, checked=now)
        return self._start(app, state, head, targets, now)

    def _running(self, app: AppRecord, targets: Mapping[str, Mapping[str, str]]) -> str:
        """The revision every instance runs, when they all run one ("" otherwise): an app that
        gains a rollout keeps it as the stable revision, and a newer commit goes by steps."""
        found = set()
        for cluster in targets:
            status = self.store.get_status(app.name, cluster)
            found.add(status.revision if status is not None else "")
        return found.pop() if len(found) == 1 and "" not in found else ""

    def _start(
        self,
        app: AppRecord,
        old: RolloutState,
        head: str,
        targets: Mapping[str, Mapping[str, str]],
        now: float,
    ) -> RolloutState:
        assert app.rollout is not None
        stable = old.revision if old.phase == Phase.COMPLETED else old.stable
        planned = plan_steps(app.rollout.steps, targets)
        token = context.attach(context.Context())  # a root: the rollout is its own trace
        try:
            attrs = {"app": app.name, "revision": head, "stable": stable, "steps": len(planned)}
            with telemetry.stage("rollout", **attrs) as span:
                carrier: dict[str, str] = {}
                propagate.inject(carrier)
                trace_id = telemetry.trace_id_of(span)
        finally:
            context.detach(token)
        log.info(
            "app=%s rollout of %s started (stable %s, %d steps) trace_id=%s",
            *(app.name, head[:12], stable[:12], len(planned), trace_id),
        )
        state = RolloutState(
            app.name,
            head,
            uid=app.uid,
            stable=stable,
            steps=tuple(StepState(tuple(c)) for c in planned),
            started=now,
            checked=now,
            trace_id=trace_id,
            carrier=carrier,
        )
        later = {c: stable for c in targets if c not in planned[0]} if planned else {}
        self._pin(app, state, later)
        return state

    # -- steps --------------------------------------------------------------------------------

    def _progress(self, app: AppRecord, state: RolloutState, now: float) -> RolloutState:
        if state.step >= len(state.steps):
            return self._complete(app, state, now)
        step = state.steps[state.step]
        if not step.started:
            with self._traced(state, "rollout.step", app=app.name, step=state.step + 1):
                self._pin(app, state, dict.fromkeys(step.clusters, state.revision), force=True)
            return with_step(state, state.step, replace(step, started=now))
        since = _stamp(step.started)
        verdicts = {}
        for cluster in step.clusters:
            history = self.store.history(app.name, cluster)
            verdicts[cluster] = judge(
                cluster, state.revision, since, history, self.store.get_status(app.name, cluster)
            )
        said = {c: "done" if v.done else (v.failed or v.waiting) for c, v in verdicts.items()}
        state = with_step(state, state.step, replace(step, instances=said))
        failed = [v.failed for v in verdicts.values() if v.failed]
        if failed:
            return self._failed(app, state, f"step {state.step + 1}: " + "; ".join(failed), now)
        if not all(v.done for v in verdicts.values()):
            return state
        state = with_step(state, state.step, replace(state.steps[state.step], passed=now))
        self._tell(ROLLOUT_STEP_DONE, state)
        spec_steps = app.rollout.steps if app.rollout is not None else ()
        pause = spec_steps[state.step] if state.step < len(spec_steps) else None
        if pause is not None and pause.pause_manual:
            return replace(state, phase=Phase.PAUSED, until=0.0, updated=now)
        if pause is not None and pause.pause_s > 0:
            return replace(state, phase=Phase.PAUSED, until=now + pause.pause_s, updated=now)
        return self._next(app, state, now)

    def _paused(self, app: AppRecord, state: RolloutState, now: float) -> RolloutState:
        """A pause ends at its time (or a promote); an instance of the step that turns
        Degraded at the new revision meanwhile fails the rollout."""
        step = state.steps[state.step]
        for cluster in step.clusters:
            status = self.store.get_status(app.name, cluster)
            if status is None or status.revision != state.revision:
                continue
            if status.health == Health.DEGRADED:
                reason = f"step {state.step + 1}: {cluster}: Degraded at {state.revision[:12]}"
                return self._failed(app, state, reason, now)
        if state.until and now >= state.until:
            return self._next(app, state, now)
        return state

    def _failed(self, app: AppRecord, state: RolloutState, reason: str, now: float) -> RolloutState:
        with self._traced(state, "rollout.failed", app=app.name, reason=reason) as span:
            telemetry.mark_failed(span, reason)
        log.warning("app=%s rollout of %s failed: %s", app.name, state.revision[:12], reason)
        self._tell(ROLLOUT_STEP_FAILED, state, reason)
        return replace(state, phase=Phase.FAILED, reason=reason, updated=now)

    def _next(self, app: AppRecord, state: RolloutState, now: float) -> RolloutState:
        """Past the current step (and its pause): the next one starts in this tick."""
        state = replace(state, step=state.step + 1, phase=Phase.PROGRESSING, until=0.0)
        return self._progress(app, replace(state, updated=now), now)

    def _complete(self, app: AppRecord, state: RolloutState, now: float) -> RolloutState:
        with self._traced(state, "rollout.completed", app=app.name, revision=state.revision):
            log.info("app=%s rollout of %s completed", app.name, state.revision[:12])
        return replace(state, phase=Phase.COMPLETED, stable=state.revision, reason="", updated=now)

    # -- pins ---------------------------------------------------------------------------------

    def _pin(
        self, app: AppRecord, state: RolloutState, pins: Mapping[str, str], *, force: bool = False
    ) -> None:
        """Pin instances, and ask for a sync of each whose pin changed (of each, with `force`)."""
        old = self.states.pins(app.name)
        moved = [c for c, rev in pins.items() if rev and (force or old.get(c) != rev)]
        # only the pins that changed: a settled rollout writes nothing in a tick
        self.states.set_pins(app.name, {c: r for c, r in pins.items() if r and old.get(c) != r})
        if not moved:
            return
        with self._traced(state, "rollout.request", app=app.name, clusters=",".join(moved)):
            carrier: dict[str, str] = {}
            propagate.inject(carrier)
            for cluster in moved:
                try:
                    self.dispatcher.request_sync(
                        app.name, cluster, trigger=Trigger.ROLLOUT, carrier=carrier
                    )
                except NoWorkers:
                    raise
                except FleetError as e:
                    log.warning(
                        "app=%s cluster=%s rollout sync not requested: %s", app.name, cluster, e
                    )

    def _pin_newcomers(
        self, app: AppRecord, state: RolloutState, targets: Mapping[str, Mapping[str, str]]
    ) -> None:
        """A cluster that joined after the rollout was planned stays at the stable revision
        (a worker asked to sync it first pins it so too: `RolloutStore.pin_for`)."""
        pinned = self.states.pins(app.name)
        newcomers = {c: state.stable for c in targets if c not in pinned}
        if newcomers:
            self._pin(app, state, newcomers)

    def _drop_departed(
        self, app: AppRecord, state: RolloutState, targets: Mapping[str, Mapping[str, str]]
    ) -> None:
        """Forget the pins of clusters the app no longer targets (`RolloutStore.drop_pins`),
        except, while the rollout runs, those of the steps started so far: one that comes back
        resumes at its step's revision, and the step's judge still finds its sync there."""
        kept: set[str] = set()
        if state.phase not in (Phase.COMPLETED, Phase.ABORTED):
            kept = {c for step in state.steps[: state.step + 1] for c in step.clusters}
        gone = [c for c in self.states.pins(app.name) if c not in targets and c not in kept]
        self.states.drop_pins(app.name, gone)

    def _tell(self, event: str, state: RolloutState, reason: str = "") -> None:
        """Queue the step's notification once (`fleet.control.notifications`); never raises."""
        step = state.steps[state.step]
        token = f"{state.started}/{state.revision}/step-{state.step + 1}/{step.started}/{event}"
        details = {"step": str(state.step + 1), "clusters": ",".join(step.clusters)}
        try:
            notify(
                self.store.redis,
                self.store.keys,
                event,
                state.app,
                revision=state.revision,
                reason=reason,
                details=details,
                dedupe=token,
            )
        except Exception:
            log.exception("app=%s rollout notification %s not queued", state.app, event)

    def _forget_gone(self, current: set[str]) -> None:
        """Drop the state and pins of apps deleted, or without a rollout any more (their
        instances follow the app's revision again)."""
        for name in self.states.apps() - current:
            self.states.forget(name)

    def _save(self, before: RolloutState | None, after: RolloutState) -> None:
        """Write `after` unless a person changed the state since `before` was read (their
        promote, abort or retry wins; the next tick starts from it)."""

        def change(stored: RolloutState | None) -> RolloutState | None:
            return after if stored == before else None

        self.states.update(after.app, change)

    @contextmanager
    def _traced(self, state: RolloutState, name: str, **attrs: object) -> Iterator[Span]:
        token = context.attach(propagate.extract(state.carrier))
        try:
            with telemetry.stage(name, **attrs) as span:
                yield span
        finally:
            context.detach(token)


def _stamp(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)
