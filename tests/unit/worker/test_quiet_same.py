"""The quiet check's last comparison: the desired state against what the last sync ran."""

from __future__ import annotations

from datetime import UTC, datetime

from fleet.control.registry.syncrecords import SyncRecord
from fleet.engine.sync import Desired
from fleet.model import Health, SyncStatus, Trigger
from worker.quiet import same

OLD, NEW = "1" * 40, "2" * 40


def _last(revision: str, fingerprint: str = "fp") -> SyncRecord:
    now = datetime.now(UTC)
    return SyncRecord(
        app="shop",
        revision=revision,
        sync_status=SyncStatus.SYNCED,
        health=Health.HEALTHY,
        started=now,
        finished=now,
        fingerprint=fingerprint,
        cluster="eu",
        trigger=Trigger.INTERVAL,
    )


def test_a_commit_that_left_the_apps_files_alone_is_quiet() -> None:
    """A push to a monorepo that did not touch this app: one full sync for the app it touched,
    none for the others, whether the request names the branch or the pushed commit."""
    desired = Desired("fp", NEW, ())
    assert same(desired, _last(OLD)) == (desired, "")


def test_a_pinned_commit_the_last_sync_did_not_run_is_never_quiet() -> None:
    """A rollout pins the instance to a commit: the step judges syncs at that commit, so one
    must run even when the app's files are the same at both commits."""
    desired = Desired("fp", NEW, ())
    found, why = same(desired, _last(OLD), pinned=NEW)
    assert found is None and NEW[:12] in why and OLD[:12] in why
    assert same(desired, _last(NEW), pinned=NEW) == (desired, "")  # already ran it: quiet
    # a rollout that has pinned nothing yet leaves the app's branch: not a commit, no rule
    assert same(desired, _last(OLD), pinned="main") == (desired, "")


def test_a_changed_fingerprint_is_never_quiet() -> None:
    found, why = same(Desired("other", OLD, ()), _last(OLD))
    assert found is None and why == "the desired state changed"
