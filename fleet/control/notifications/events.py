"""The events a subscription can ask for, and which of them one status write is.

Event names (what `events` in a subscription lists, and what a message's `event` says):

- `sync-failed`: a sync of an instance failed after the one before it succeeded (or it is the
  instance's first sync);
- `health-degraded`: the instance's health became Degraded;
- `recovered`: a sync succeeded after a failed one, or the health came back to Healthy from
  Degraded (the message's `recoveredFrom` says which);
- `drift-healed`: a self-heal sync put a drifted instance back to its desired state;
- `rollout-step-done`, `rollout-step-failed`: a progressive rollout finished a step or stopped
  on one (sent by the rollout controller through `fleet.control.notifications.notify`).

One message per transition: the last state notified per instance and kind (`sync`: ok or
failed; `health`: healthy or degraded) is kept, and an event is sent only when the state
changes, so the retries of a failing sync send `sync-failed` once. Health other than Healthy or
Degraded (Progressing, Missing, Unknown, Suspended) changes no state. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleet.model import Health, SyncStatus, Trigger

SYNC_FAILED = "sync-failed"
HEALTH_DEGRADED = "health-degraded"
RECOVERED = "recovered"
DRIFT_HEALED = "drift-healed"
ROLLOUT_STEP_DONE = "rollout-step-done"
ROLLOUT_STEP_FAILED = "rollout-step-failed"
EVENTS = (
    SYNC_FAILED,
    HEALTH_DEGRADED,
    RECOVERED,
    DRIFT_HEALED,
    ROLLOUT_STEP_DONE,
    ROLLOUT_STEP_FAILED,
)

SYNC_KIND = "sync"  # states: ok, failed
HEALTH_KIND = "health"  # states: healthy, degraded


@dataclass(frozen=True)
class Seen:
    """What one status write showed: the sync's outcome and the instance's health."""

    failed: bool
    health: Health
    error: str = ""
    trigger: str = ""
    was_out_of_sync: bool = False
    sync_status: SyncStatus = SyncStatus.UNKNOWN


@dataclass(frozen=True)
class Change:
    """An event to send: `kind` and `state` are what the dedup state becomes."""

    event: str
    kind: str
    state: str
    reason: str = ""
    recovered_from: str = ""


def health_state(health: Health) -> str:
    """`healthy`, `degraded`, or "" for a health that changes no state."""
    if health == Health.HEALTHY:
        return "healthy"
    if health == Health.DEGRADED:
        return "degraded"
    return ""


def changes(seen: Seen, last: dict[str, str]) -> list[Change]:
    """The events `seen` is, given the `last` state notified per kind (missing: none yet)."""
    found: list[Change] = []
    sync_state = "failed" if seen.failed else "ok"
    before = last.get(SYNC_KIND, "")
    if sync_state != before:
        if sync_state == "failed":
            found.append(Change(SYNC_FAILED, SYNC_KIND, "failed", seen.error))
        elif before == "failed":
            found.append(Change(RECOVERED, SYNC_KIND, "ok", "the sync succeeded", SYNC_FAILED))
        else:
            found.append(Change("", SYNC_KIND, "ok"))  # the first success: nothing to tell
    state = health_state(seen.health)
    before = last.get(HEALTH_KIND, "")
    if state and state != before:
        if state == "degraded":
            found.append(Change(HEALTH_DEGRADED, HEALTH_KIND, state, seen.error))
        elif before == "degraded":
            found.append(Change(RECOVERED, HEALTH_KIND, state, "Healthy", HEALTH_DEGRADED))
        else:
            found.append(Change("", HEALTH_KIND, state))
    healed = seen.trigger == Trigger.SELF_HEAL and not seen.failed and seen.was_out_of_sync
    if healed and seen.sync_status == SyncStatus.SYNCED:
        found.append(Change(DRIFT_HEALED, "", "", "a self-heal sync undid the drift"))
    return found
