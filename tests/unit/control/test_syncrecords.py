"""Status and history records: what older versions stored still reads, and a record's JSON is
the one the API has always returned."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from fleet.control.registry.syncrecords import (
    HISTORY,
    STATUS,
    ResourceRecord,
    SkipRecord,
    SyncRecord,
    WaveRecord,
)
from fleet.engine.contract import MAX_WAVE_TIMINGS, SyncResult, WaveTiming
from fleet.model import Action, Health, ObjectRef, Outcome, SyncStatus, Trigger

# written before records carried result, duration_s, stages, fingerprint, attempt or worker
OLD_SYNC = {
    "app": "shop",
    "cluster": "east",
    "trigger": "webhook",
    "revision": "abc123",
    "sync_status": "OutOfSync",
    "health": "Degraded",
    "started": "2026-01-02T03:04:05+00:00",
    "finished": "2026-01-02T03:04:09.500000+00:00",
    "trace_id": "f" * 32,
    "error": "",
    "resources": [
        {
            "group": "apps",
            "version": "v1",
            "kind": "Deployment",
            "namespace": "shop",
            "name": "web",
            "wave": 1,
            "action": "configured",
            "health": "Degraded",
            "message": "0 of 1 replicas available",
        }
    ],
    "no_longer_written": True,
}


def test_a_sync_record_older_than_result_and_duration_is_judged_by_status_and_timestamps() -> None:
    record = HISTORY.validate_json(json.dumps(OLD_SYNC))

    assert isinstance(record, SyncRecord)
    assert (record.trigger, record.result, record.duration_s) == (Trigger.WEBHOOK, None, None)
    assert record.outcome == Outcome.FAILED  # no error, but not Synced
    assert record.seconds == 4.5
    assert (record.attempt, record.requests, record.stages, record.worker) == (0, 1, {}, "")
    assert record.resources[0].ref == ObjectRef("apps", "v1", "Deployment", "shop", "web")


def test_a_skipped_entry_reads_as_a_skip_with_only_the_fields_a_skip_has() -> None:
    stored = {
        "app": "shop",
        "cluster": "east",
        "trigger": "interval",
        "result": "skipped",
        "message": "sync blocked: shop is inside deny window",
        "error": "",
        "revision": "",
        "started": "2026-01-02T03:04:05.123456+00:00",
        "finished": "2026-01-02T03:04:05.123456+00:00",
        "trace_id": "d" * 32,
        "worker": "w1",
        "resources": [],
    }

    record = HISTORY.validate_json(json.dumps(stored))

    assert isinstance(record, SkipRecord)
    assert record.outcome == Outcome.SKIPPED and record.seconds == 0.0
    assert json.loads(HISTORY.dump_json(record)) == stored


def test_an_intent_without_a_trigger_is_recorded_as_a_retry() -> None:
    record = HISTORY.validate_json(json.dumps({**OLD_SYNC, "trigger": ""}))

    assert record.trigger == Trigger.RETRY


def test_a_sync_record_writes_every_field_with_timestamps_as_isoformat() -> None:
    started = datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
    record = SyncRecord(
        app="shop",
        cluster="east",
        trigger=Trigger.MANUAL,
        revision="abc123",
        sync_status=SyncStatus.SYNCED,
        health=Health.HEALTHY,
        started=started,
        finished=started,
        result=Outcome.SUCCEEDED,
        duration_s=0.0,
        resources=(
            ResourceRecord(version="v1", kind="ConfigMap", name="cm", action=Action.PRUNED),
        ),
    )

    assert json.loads(HISTORY.dump_json(record)) == {
        "app": "shop",
        "revision": "abc123",
        "sync_status": "Synced",
        "health": "Healthy",
        "started": "2026-01-02T03:04:05.123456+00:00",
        "finished": "2026-01-02T03:04:05.123456+00:00",
        "trace_id": "",
        "error": "",
        "error_stage": "",
        "rendered": False,
        "writes": 0,
        "stages": {},
        "fingerprint": "",
        "inputs": [],
        "resources": [
            {
                "group": "",
                "version": "v1",
                "kind": "ConfigMap",
                "namespace": "",
                "name": "cm",
                "wave": 0,
                "action": "pruned",
                "health": "Unknown",
                "message": "",
            }
        ],
        "cluster": "east",
        "trigger": "manual",
        "attempt": 0,
        "requests": 1,
        "worker": "",
        "result": "succeeded",
        "duration_s": 0.0,
        "message": "",
        "waves": [],
    }
    assert HISTORY.validate_json(HISTORY.dump_json(record)) == record
    assert not record.resources[0].declared


def test_a_status_written_before_deleted_and_checked_existed_reads_with_their_defaults() -> None:
    stored = {"sync_status": "Synced", "health": "Healthy", "revision": "abc123", "message": ""}

    status = STATUS.validate_json(json.dumps({**stored, "last_sync": OLD_SYNC}))

    assert (status.sync_status, status.health) == (SyncStatus.SYNCED, Health.HEALTHY)
    assert (status.deleted, status.checked, status.updated, status.resources) == (
        False,
        None,
        None,
        (),
    )
    assert status.last_sync is not None and status.last_sync.revision == "abc123"


def test_a_sync_record_older_than_wave_timings_reads_with_no_waves() -> None:
    record = HISTORY.validate_json(json.dumps(OLD_SYNC))

    assert isinstance(record, SyncRecord) and record.waves == ()


def test_a_syncs_wave_timings_are_recorded_capped_and_read_back_unchanged() -> None:
    started = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    timings = tuple(
        WaveTiming("PreSync" if n == 0 else "Sync", n, offset=0.25 * n, seconds=0.2, objects=n + 1)
        for n in range(MAX_WAVE_TIMINGS + 5)
    )
    result = SyncResult(
        app="shop",
        revision="abc123",
        sync_status=SyncStatus.SYNCED,
        health=Health.HEALTHY,
        started=started,
        finished=started,
        trace_id="e" * 32,
        waves=timings,
    )

    record = SyncRecord.of(result, cluster="east", trigger=Trigger.MANUAL)
    stored = json.loads(HISTORY.dump_json(record))

    assert len(record.waves) == MAX_WAVE_TIMINGS
    assert record.waves[:2] == (
        WaveRecord(phase="PreSync", number=0, offset=0.0, seconds=0.2, objects=1),
        WaveRecord(phase="Sync", number=1, offset=0.25, seconds=0.2, objects=2),
    )
    assert stored["waves"][1] == {
        "phase": "Sync",
        "number": 1,
        "offset": 0.25,
        "seconds": 0.2,
        "objects": 2,
        "failed": False,
    }
    assert HISTORY.validate_json(json.dumps(stored)) == record
