"""What the engine asks while a sync waits on a wave: was a newer sync of this instance asked for?

A trigger that arrives while an instance's sync runs becomes that pending sync's follow-up
(`fleet.control.routing.pending`). `newer_requests` gives the engine a callable that reads it
from Redis (the engine never imports Redis): the follow-up's revision (its own, or the app's
when the trigger names none, e.g. a webhook push to the tracked branch) and a key that changes
with every request merged into it. A follow-up that asks for no revision, or that would not
run (an automated trigger while automated sync is off, a sync window), is not one. The engine
resolves it and, when it names another commit, cancels the wave's health wait and re-plans
with it (`fleet.engine.supersede`). The follow-up still runs when the sync ends, as every
follow-up does; it then finds the newer revision synced.
"""

from __future__ import annotations

from datetime import UTC, datetime

from fleet.control.policy import blocked_reason
from fleet.control.registry.instances import instance_key
from fleet.control.registry.records import AppRecord
from fleet.control.rollouts.state import RolloutStore
from fleet.control.routing.pending import Intent
from fleet.engine.contract import NewerRequest, NewerRequests
from fleet.model import Trigger
from worker.runtime import Runtime

# follow-ups that ask for no newer revision: a delete, a preview, a retry of an older sync, and
# self-heal (the revision this sync already runs)
NOT_A_REVISION = frozenset({Trigger.DELETE, Trigger.DIFF, Trigger.RETRY, Trigger.SELF_HEAL})


def newer_requests(runtime: Runtime, app: AppRecord, cluster: str) -> NewerRequests:
    """A callable answering the follow-up requested for `app`@`cluster` meanwhile, or None."""
    instance = instance_key(app.name, cluster)

    def newer() -> NewerRequest | None:
        pending = runtime.dispatcher.pending.get(instance)
        followup = pending.followup if pending is not None else None
        if not followup:
            return None
        intent = Intent.from_json(followup["intent"])
        if intent.trigger in NOT_A_REVISION or _will_not_run(app, intent.trigger):
            return None
        key = f"{followup['job']}#{followup.get('requests', 1)}"
        return NewerRequest(intent.revision or _followed(runtime, app, cluster), key)

    return newer


def _followed(runtime: Runtime, app: AppRecord, cluster: str) -> str:
    """What a follow-up that names no revision runs: the instance's rollout pin when the app
    has a rollout (a push reaches the cluster only with its step), else the app's revision."""
    if app.rollout is None:
        return app.source.revision
    pins = RolloutStore(runtime.store.redis, runtime.dispatcher.prefix)
    return pins.pin(app.name, cluster) or app.source.revision


def _will_not_run(app: AppRecord, trigger: Trigger) -> bool:
    """The follow-up will be dropped or skipped when it runs (`worker.jobs`): an automated
    trigger while the app's automated sync is off, or a sync window that blocks it."""
    if trigger.automated and not app.sync_policy.automated:
        return True
    return bool(blocked_reason(app, trigger, datetime.now(UTC)))
