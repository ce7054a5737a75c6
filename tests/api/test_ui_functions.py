"""The web UI's pure functions: paging and filtering, commit links, the waterfall, masking."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from api.ui.history import waterfall, wave_bars, waves
from api.ui.listing import AppRow, Filters, commit_url, select
from api.ui.live import LAST_APPLIED, MASK, readable
from fleet.control.registry.syncrecords import ResourceRecord, SkipRecord, SyncRecord, WaveRecord
from fleet.model import Action, Health, SyncStatus, Trigger

SHA = "0123456789abcdef0123456789abcdef01234567"


def row(index: int, *, health: Health = Health.HEALTHY, project: str = "a") -> AppRow:
    return AppRow(
        name=f"app-{index:03d}",
        project=project,
        clusters=("east",) if index % 2 else ("west",),
        sync_status=SyncStatus.SYNCED,
        health=health,
        revision=SHA,
        revision_url="",
        last_sync="",
        message="",
        deleting=False,
    )


def test_select_counts_every_health_before_filtering_and_pages_what_is_left() -> None:
    found = [row(i, health=Health.DEGRADED if i < 5 else Health.HEALTHY) for i in range(120)]

    page = select(found, Filters(cluster="east", page=2), size=20)

    assert page.counts == {"Degraded": 5, "Healthy": 115}
    assert (page.total, page.pages, page.page) == (60, 3, 2)
    assert [r.name for r in page.rows][:2] == ["app-041", "app-043"]


@pytest.mark.parametrize(
    ("filters", "names"),
    [
        (Filters(q="APP-00"), [f"app-00{i}" for i in range(10)]),
        (Filters(health="Degraded"), ["app-000"]),
        (Filters(project="b"), ["app-001"]),
        (Filters(sync="OutOfSync"), []),
    ],
)
def test_filters_keep_only_matching_rows(filters: Filters, names: list[str]) -> None:
    found = [row(0, health=Health.DEGRADED), row(1, project="b"), *(row(i) for i in range(2, 30))]

    assert [r.name for r in select(found, filters).rows] == names


def test_a_page_past_the_end_shows_the_last_page() -> None:
    assert select([row(i) for i in range(3)], Filters(page=9), size=2).page == 2


def test_commits_link_only_for_https_repositories_and_commit_ids() -> None:
    assert commit_url("https://git.example.com/t/shop.git", SHA) == (
        f"https://git.example.com/t/shop/commit/{SHA}"
    )
    assert commit_url("https://user:pw@git.example.com/t/shop", SHA).startswith("https://***@")
    assert commit_url("http://127.0.0.1/apps", SHA) == ""
    assert commit_url("ssh://git@git.example.com/t/shop.git", SHA) == ""
    assert commit_url("https://git.example.com/t/shop.git", "main") == ""


def test_the_waterfall_lays_the_stages_end_to_end_on_the_syncs_time_line() -> None:
    record = SyncRecord(
        app="shop",
        cluster="east",
        trigger=Trigger.MANUAL,
        stages={"source": 1.0, "render": 0.5, "apply": 2.5},
        duration_s=5.0,
        resources=(
            ResourceRecord(version="v1", kind="ConfigMap", name="a", action=Action.CREATED),
            ResourceRecord(version="v1", kind="Service", name="b", wave=2, action=Action.CREATED),
        ),
    )

    bars = waterfall(record)

    assert [(b.name, b.left, b.width) for b in bars] == [
        ("source", 0.0, 20.0),
        ("render", 20.0, 10.0),
        ("apply", 30.0, 50.0),
    ]
    assert [(w.number, [o.name for o in w.objects]) for w in waves(record)] == [
        (0, ["a"]),
        (2, ["b"]),
    ]
    skipped = SkipRecord(app="shop", cluster="east", trigger=Trigger.INTERVAL)
    assert waterfall(skipped) == []


def test_a_waterfall_longer_than_the_recorded_duration_still_fits() -> None:
    record = SyncRecord(
        app="shop",
        cluster="east",
        trigger=Trigger.MANUAL,
        stages={"source": 3.0, "apply": 1.0},
        started=datetime(2026, 1, 1, tzinfo=UTC),
        finished=datetime(2026, 1, 1, 0, 0, 2, tzinfo=UTC),
    )

    assert max(b.left + b.width for b in waterfall(record)) == 100.0


def test_timed_waves_sit_on_the_syncs_time_line_from_the_start_of_the_apply_stage() -> None:
    record = SyncRecord(
        app="shop",
        cluster="east",
        trigger=Trigger.MANUAL,
        stages={"source": 1.0, "render": 0.5, "apply": 2.5, "prune": 1.0},
        duration_s=5.0,
        resources=(
            ResourceRecord(version="v1", kind="Job", name="migrate", action=Action.CREATED),
            ResourceRecord(version="v1", kind="Service", name="b", wave=2, action=Action.CREATED),
        ),
        waves=(
            WaveRecord(phase="PreSync", number=0, offset=0.0, seconds=0.5, objects=1),
            WaveRecord(phase="Sync", number=0, offset=0.5, seconds=0.5, objects=0),
            WaveRecord(phase="Sync", number=2, offset=1.0, seconds=0.001, objects=1),
            WaveRecord(phase="PostSync", number=5, offset=9.0, seconds=3.0, objects=0),
        ),
    )

    bars = wave_bars(record)

    assert [(b.label, b.left, b.width) for b in bars] == [
        ("PreSync wave 0", 30.0, 10.0),
        ("wave 0", 40.0, 10.0),
        ("wave 2", 50.0, 0.3),  # too short to see: the thinnest visible bar
        ("PostSync wave 5", 99.7, pytest.approx(0.3)),  # past the end: kept inside
    ]
    # wave 0 ran in two phases: which objects were in which is not known, only their count
    assert [[o.name for o in b.objects] for b in bars] == [[], [], ["b"], []]
    assert wave_bars(SyncRecord(app="shop", cluster="east", trigger=Trigger.MANUAL)) == []
    assert wave_bars(SkipRecord(app="shop", cluster="east", trigger=Trigger.INTERVAL)) == []


def test_a_live_secret_is_shown_with_every_value_masked_and_without_managed_fields() -> None:
    live = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "db",
            "managedFields": [{"manager": "gitfleet"}],
            "annotations": {LAST_APPLIED: '{"data":{"password":"c2VjcmV0"}}', "team": "a"},
        },
        "data": {"password": "c2VjcmV0"},
        "stringData": {"token": "plain"},
    }

    shown = readable(live)

    assert shown["data"] == {"password": MASK} and shown["stringData"] == {"token": MASK}
    assert "managedFields" not in shown["metadata"]
    assert shown["metadata"]["annotations"] == {LAST_APPLIED: MASK, "team": "a"}
    assert "c2VjcmV0" not in str(shown)
    assert live["data"] == {"password": "c2VjcmV0"}  # the object read is left as it was
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}, "data": {"k": "v"}}
    assert readable(configmap)["data"] == {"k": "v"}
