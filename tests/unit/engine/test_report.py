"""How a sync's stage reports fold into its result: `report.fold` is pure."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from fleet.engine.contract import (
    MAX_WAVE_TIMINGS,
    ResourceResult,
    SyncRequest,
    SyncResult,
    WaveTiming,
)
from fleet.engine.report import StageReport, fold
from fleet.errors import ApplyError, FleetError, HealthTimeout, SourceError
from fleet.model import Action, Health, ObjectRef, SyncStatus

REQUEST = SyncRequest(app="shop", repo="https://git.example.com/shop.git", path="app")
WEB = ObjectRef("apps", "v1", "Deployment", "shop", "web")
CONFIG = ObjectRef("", "v1", "ConfigMap", "shop", "config")
OLD = ObjectRef("", "v1", "ConfigMap", "shop", "old")
T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def entry(ref: ObjectRef, action: Action, health: Health, wave: int = 0) -> ResourceResult:
    return ResourceResult(ref, wave, action, health, "")


def folded(*reports: StageReport, error: FleetError | None = None) -> SyncResult:
    seconds = {"source": 0.5, "apply": 1.25}
    return fold(
        REQUEST, reports, error=error, seconds=seconds, trace_id="t1", started=T0, finished=T0
    )


def test_a_full_sync_carries_what_each_stage_reported_and_sums_the_writes() -> None:
    result = folded(
        StageReport(revision="abc123"),
        StageReport(rendered=True, fingerprint="f1", inputs=("app", "base")),
        StageReport(compared=True),
        StageReport(resources=(entry(WEB, Action.CREATED, Health.HEALTHY),), writes=2),
        StageReport(resources=(entry(OLD, Action.PRUNED, Health.MISSING),), writes=1),
        StageReport(writes=1),
    )
    assert (result.revision, result.rendered, result.fingerprint) == ("abc123", True, "f1")
    assert result.inputs == ("app", "base")
    assert (result.writes, result.stages) == (4, {"source": 0.5, "apply": 1.25})
    assert (result.sync_status, result.health) == (SyncStatus.SYNCED, Health.HEALTHY)
    assert (result.error, result.error_stage, result.trace_id) == ("", "", "t1")


def test_a_later_report_replaces_an_objects_entry_and_entries_sort_by_wave_then_ref() -> None:
    result = folded(
        StageReport(compared=True),
        StageReport(
            resources=(
                entry(WEB, Action.CONFIGURED, Health.PROGRESSING, wave=1),
                entry(CONFIG, Action.UNCHANGED, Health.HEALTHY, wave=0),
            )
        ),
        StageReport(resources=(entry(WEB, Action.CONFIGURED, Health.HEALTHY, wave=1),)),
    )
    assert [(r.ref, r.health) for r in result.resources] == [
        (CONFIG, Health.HEALTHY),
        (WEB, Health.HEALTHY),
    ]


def test_a_sync_stopped_before_the_diff_is_unknown_and_names_the_stage() -> None:
    result = folded(error=SourceError("revision nope not found"))
    assert (result.sync_status, result.health) == (SyncStatus.UNKNOWN, Health.UNKNOWN)
    assert (result.error, result.error_stage) == ("revision nope not found", "source")


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (HealthTimeout("Deployment/shop/web: 0 of 1 replicas available"), SyncStatus.SYNCED),
        (ApplyError("1 object(s) failed to apply"), SyncStatus.OUT_OF_SYNC),
    ],
)
def test_after_the_diff_only_a_health_timeout_leaves_the_sync_status_synced(
    error: FleetError, status: SyncStatus
) -> None:
    applied = StageReport(resources=(entry(WEB, Action.CREATED, Health.PROGRESSING),))
    result = folded(StageReport(compared=True), applied, error=error)
    assert (result.sync_status, result.health) == (status, Health.PROGRESSING)


def test_a_failed_object_makes_the_app_out_of_sync_even_without_an_error() -> None:
    failed = StageReport(resources=(entry(WEB, Action.FAILED, Health.UNKNOWN),))
    assert folded(StageReport(compared=True), failed).sync_status == SyncStatus.OUT_OF_SYNC


def test_a_difference_left_in_place_on_purpose_makes_the_app_out_of_sync() -> None:
    waiting = StageReport(resources=(entry(OLD, Action.SKIPPED, Health.HEALTHY),), undone=True)
    result = folded(StageReport(compared=True), waiting)
    assert (result.sync_status, result.health) == (SyncStatus.OUT_OF_SYNC, Health.HEALTHY)


def test_pruned_objects_do_not_count_towards_the_apps_health() -> None:
    result = folded(
        StageReport(compared=True),
        StageReport(resources=(entry(WEB, Action.UNCHANGED, Health.HEALTHY),)),
        StageReport(resources=(entry(OLD, Action.PRUNED, Health.MISSING),)),
    )
    assert result.health == Health.HEALTHY
    assert {r.ref: r.action for r in result.resources} == {
        OLD: Action.PRUNED,
        WEB: Action.UNCHANGED,
    }


def test_a_timed_out_wave_with_objects_left_unapplied_is_out_of_sync_and_missing() -> None:
    reached = entry(WEB, Action.CREATED, Health.PROGRESSING)
    never = ResourceResult(CONFIG, 1, Action.SKIPPED, Health.MISSING, "not applied: ...")
    stopped = StageReport(
        resources=(reached, never), undone=True, note="the sync stopped at Sync wave 0"
    )
    unpruned = StageReport(undone=False, note="prune did not run")
    result = folded(StageReport(compared=True), unpruned, stopped, error=HealthTimeout("late"))
    assert (result.sync_status, result.health) == (SyncStatus.OUT_OF_SYNC, Health.MISSING)
    assert result.message == "prune did not run; the sync stopped at Sync wave 0"
    assert result.to_json()["message"] == result.message


def test_the_apply_stages_wave_timings_fold_into_the_result_and_its_json() -> None:
    timed = (
        WaveTiming("PreSync", 0, offset=0.0, seconds=0.4, objects=1),
        WaveTiming("Sync", 1, offset=0.4, seconds=1.1, objects=2, failed=True),
    )
    result = folded(
        StageReport(compared=True),
        StageReport(resources=(entry(WEB, Action.CREATED, Health.HEALTHY),), waves=timed),
        StageReport(writes=1),  # prune and record time no wave: the apply stage's stay
    )
    assert result.waves == timed
    assert result.to_json()["waves"] == [
        {"phase": "PreSync", "number": 0, "offset": 0.0, "seconds": 0.4, "objects": 1,
         "failed": False},
        {"phase": "Sync", "number": 1, "offset": 0.4, "seconds": 1.1, "objects": 2,
         "failed": True},
    ]  # fmt: skip
    assert folded(StageReport(compared=True)).waves == ()


def test_a_sync_with_more_waves_than_the_cap_keeps_only_the_first_ones() -> None:
    many = tuple(
        WaveTiming("Sync", n, offset=n * 0.1, seconds=0.1, objects=1)
        for n in range(MAX_WAVE_TIMINGS + 25)
    )
    result = folded(StageReport(compared=True, waves=many))
    assert len(result.waves) == MAX_WAVE_TIMINGS
    assert result.waves == many[:MAX_WAVE_TIMINGS]
