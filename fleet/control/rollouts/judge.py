"""Whether one instance passed its rollout step, judged on the sync that applied the new revision.

Only a sync record at the step's revision that started after the step started counts: an older
status (the previous revision's Healthy, or a sync that began before the step) never passes a
step. Its own health decides, or, while it says Progressing, the instance's current status, but
only when that status still describes this very sync (same revision, same start).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from fleet.control.registry.syncrecords import InstanceStatus, SkipRecord, SyncRecord
from fleet.model import Health, SyncStatus


@dataclass(frozen=True)
class Verdict:
    """`done`: Synced and Healthy at the revision; `failed`: why it cannot pass ("" when
    not); neither: still waiting (`waiting` says for what)."""

    done: bool = False
    failed: str = ""
    waiting: str = ""


def judge(
    cluster: str,
    revision: str,
    since: datetime,
    history: Sequence[SyncRecord | SkipRecord],
    status: InstanceStatus | None,
) -> Verdict:
    """The verdict on `cluster` from its history (newest first) and current status."""
    record = applied(revision, since, history)
    if record is None:
        return Verdict(waiting=f"{cluster}: no sync at {revision[:12]} finished yet")
    if record.error:
        return Verdict(failed=f"{cluster}: the sync at {revision[:12]} failed: {record.error}")
    health = record.health
    if health == Health.PROGRESSING and _describes(status, record):
        assert status is not None
        health = status.health
    if health == Health.DEGRADED:
        return Verdict(failed=f"{cluster}: Degraded at {revision[:12]}")
    if record.sync_status == SyncStatus.SYNCED and health == Health.HEALTHY:
        return Verdict(done=True)
    return Verdict(waiting=f"{cluster}: {record.sync_status}/{health} at {revision[:12]}")


def applied(
    revision: str, since: datetime, history: Sequence[SyncRecord | SkipRecord]
) -> SyncRecord | None:
    """The newest sync record at `revision` that started at or after `since` (or failed
    then before it knew its revision: a pinned instance syncs nothing else)."""
    for entry in history:
        if not isinstance(entry, SyncRecord):
            continue
        if entry.revision != revision and (entry.revision or not entry.error):
            continue  # another revision; a sync that failed before it resolved one counts
        if entry.started is not None and entry.finished is not None and entry.started >= since:
            return entry
    return None


def _describes(status: InstanceStatus | None, record: SyncRecord) -> bool:
    last = status.last_sync if status is not None else None
    return (
        last is not None
        and last.revision == record.revision
        and last.started == record.started
        and status is not None
        and status.revision == record.revision
    )
