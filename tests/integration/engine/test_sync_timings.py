"""A sync records when each wave of its apply stage ran, and the record keeps it (the web UI's
waterfall draws it), against the testbed."""

from __future__ import annotations

from pathlib import Path

from fleet.control.registry.syncrecords import HISTORY, SyncRecord, WaveRecord
from fleet.kube.client import KubeClient
from fleet.model import Health, SyncStatus, Trigger
from tests.integration.engine.sync_helpers import new_group, scenario_for
from tests.integration.engine.test_sync_hooks import hook_job
from tests.support import manifests as m


def test_a_sync_of_two_waves_records_each_waves_start_and_duration(
    tmp_path: Path, kube: KubeClient, namespace: str
) -> None:
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit(
        {
            "app/cm.yaml": m.configmap("settings"),
            "app/deploy.yaml": m.deployment("web", configmap="settings", wave=1),
        }
    )

    result = s.sync()

    assert (result.sync_status, result.health) == (SyncStatus.SYNCED, Health.HEALTHY), result
    first, second = result.waves
    assert [(w.phase, w.number, w.objects, w.failed) for w in result.waves] == [
        ("Sync", 0, 1, False),
        ("Sync", 1, 1, False),
    ]
    assert first.seconds > 0 and second.seconds > 0
    assert 0 <= first.offset < second.offset
    assert second.offset >= first.offset + first.seconds  # wave 1 waited for wave 0
    assert second.offset + second.seconds <= result.stages["apply"]  # both inside apply

    record = SyncRecord.of(result, cluster="east", trigger=Trigger.MANUAL)
    stored = HISTORY.validate_json(HISTORY.dump_json(record))

    assert isinstance(stored, SyncRecord)
    assert stored.waves == tuple(
        WaveRecord(phase=w.phase, number=w.number, offset=w.offset, seconds=w.seconds, objects=1)
        for w in result.waves
    )


def test_a_dry_run_times_no_wave(tmp_path: Path, kube: KubeClient, namespace: str) -> None:
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit({"app/cm.yaml": m.configmap("settings")})

    result = s.sync(dry_run=True)

    assert result.error == "" and result.waves == ()
    assert s.get("v1", "ConfigMap", "settings") is None


def test_a_wave_that_times_out_is_recorded_as_failed_and_the_next_is_never_timed(
    tmp_path: Path, kube: KubeClient, namespace: str
) -> None:
    s = scenario_for(tmp_path, kube, namespace)
    group = new_group()  # no controller: the Widget never reports health
    s.repo.commit(
        {
            "app/crd.yaml": m.widget_crd(group),
            "app/w.yaml": m.widget(group, "w1", wave=1),
            "app/later.yaml": m.deployment("later", wave=2),
            "app/fail.yaml": hook_job("notify", "SyncFail"),
        }
    )

    result = s.sync(timeout=4.0)

    assert result.error_stage == "health"
    timed = [(w.phase, w.number, w.objects, w.failed) for w in result.waves]
    assert timed[:2] == [("Sync", 0, 1, False), ("Sync", 1, 1, True)]
    assert timed[2][:3] == ("SyncFail", 0, 1)  # the SyncFail hooks, after the failed wave
    assert result.waves[1].seconds >= 1.0  # it waited for health until the deadline
    # offsets and durations are each rounded to 4 places: allow the rounding, nothing more
    assert result.waves[2].offset >= result.waves[1].offset + result.waves[1].seconds - 2e-4


def test_hook_phases_are_timed_each_in_the_order_they_ran(
    tmp_path: Path, kube: KubeClient, namespace: str
) -> None:
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit(
        {
            "app/pre.yaml": hook_job("migrate", "PreSync"),
            "app/post.yaml": hook_job("smoke", "PostSync"),
            "app/cm.yaml": m.configmap("settings"),
        }
    )

    result = s.sync()

    assert result.error == ""
    assert [(w.phase, w.number, w.objects) for w in result.waves] == [
        ("PreSync", 0, 1),
        ("Sync", 0, 1),
        ("PostSync", 0, 1),
    ]
    offsets = [w.offset for w in result.waves]
    assert offsets == sorted(offsets) and all(w.seconds > 0 for w in result.waves)
