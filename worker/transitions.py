"""What follows a sync's status write: notifications and the commit-to-healthy clock.

`after_sync(store, previous, status, record)` runs once the worker has written an instance's
status (`worker.status.write_sync`). It compares the status before and after for the
notifications' transitions (`fleet.control.notifications.observe`: a few Redis commands that
queue a delivery, never a post) and advances the instance's commit-to-healthy clock
(`fleet.control.commitclock`). Neither may fail the sync: any error is logged and dropped.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from redis.client import Pipeline

from fleet.control.commitclock import CommitClock
from fleet.control.notifications import observe
from fleet.control.notifications.events import Seen
from fleet.control.notifications.outbox import read_notified
from fleet.control.registry.records import AppRecord
from fleet.control.registry.repos import normalize_repo
from fleet.control.registry.store import Store
from fleet.control.registry.syncrecords import InstanceStatus, SyncRecord
from fleet.model import SyncStatus

log = logging.getLogger("gitfleet.worker")


@dataclass(frozen=True)
class Before:
    """What `after_sync` compares with, read before the status write in the round trip that
    reads the previous status (`read_before`, then `Before.of` its replies)."""

    notified: list[Any] | None
    clock: tuple[bytes | None] | None

    @classmethod
    def of(cls, replies: list[Any]) -> Before:
        """From the two replies (a reply that is an error, such as a key of the wrong type,
        leaves that read to `after_sync`, which logs what fails there and goes on)."""
        notified, clock = replies
        return cls(
            None if isinstance(notified, Exception) else notified,
            None if isinstance(clock, Exception) else (clock,),
        )


def read_before(store: Store, pipe: Pipeline, app: str, cluster: str) -> None:
    """Stage `after_sync`'s reads on `pipe` (two replies, for `Before.of`)."""
    read_notified(pipe, store.keys, app, cluster)
    CommitClock(store.redis, store.keys).read_clock(pipe, app, cluster)


def after_sync(
    store: Store,
    previous: InstanceStatus | None,
    status: InstanceStatus,
    record: SyncRecord,
    app: AppRecord | None = None,
    before: Before | None = None,
) -> None:
    """`app`: the record the sync ran with (read here when not given); `before`: the
    notified states and the clock as read before the write (read here when not given)."""
    seen = Seen(
        failed=bool(record.error),
        health=status.health,
        error=record.error or status.message,
        trigger=str(record.trigger),
        was_out_of_sync=previous is not None and previous.sync_status == SyncStatus.OUT_OF_SYNC,
        sync_status=status.sync_status,
    )
    notified = before.notified if before is not None else None
    observe(store.redis, store.keys, record.app, record.cluster, seen, status.revision, notified)
    try:
        app = app if app is not None else store.get_app(record.app)
        CommitClock(store.redis, store.keys).observe(
            record.app,
            record.cluster,
            repo=normalize_repo(app.source.repo),
            revision=status.revision,
            sync_status=status.sync_status,
            health=status.health,
            started=record.started,
            read=before.clock if before is not None else None,
        )
    except Exception:
        log.exception("commit-to-healthy clock of %s@%s not advanced", record.app, record.cluster)
