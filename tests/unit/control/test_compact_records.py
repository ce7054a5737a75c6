"""`fleet.control.registry.compact`: a compacted app record equals the parsed one and shares its
repeated strings and parts with the other records compacted in the process."""

from __future__ import annotations

import pytest

from fleet.control.registry import compact, records
from fleet.control.registry.records import (
    AppDestination,
    AppRecord,
    AppSource,
    HelmSource,
    IgnoreDifference,
    SyncPolicy,
)
from fleet.control.windows import SyncWindow

POLICY = SyncPolicy(
    automated=True,
    prune=True,
    sync_windows=(SyncWindow("deny", "0 22 * * *", "8h"),),
    ignore_differences=(IgnoreDifference(json_pointers=("/spec/replicas",)),),
)


def _parsed(name: str, **fields: object) -> AppRecord:
    """A record as a cache gets it: decoded from its JSON, so no string is shared by literal."""
    base = AppRecord(
        name,
        AppSource("https://git.example.com/team/" + "fleet" * 3, f"apps/{name}"),
        AppDestination("payments-" + "prod", "cluster-" + "east"),
        project="team-" + "payments",
        sync_policy=POLICY,
        created="2026-12-05T00:00:00.000001+00:00",
        updated="2026-12-05T00:00:00.000002+00:00",
        uid=f"uid-{name}",
    )
    return records.from_json(AppRecord, records.to_json(AppRecord(**{**_fields(base), **fields})))


def _fields(record: AppRecord) -> dict[str, object]:
    return {f: getattr(record, f) for f in record.__dataclass_fields__}


def test_compacted_record_equals_the_parsed_one_and_keeps_its_json() -> None:
    parsed = _parsed("alpha")
    compacted = compact.compact(parsed)
    assert compacted == parsed
    assert records.to_json(compacted) == records.to_json(parsed)


def test_two_records_share_repeated_strings_and_parts() -> None:
    one, two = (compact.compact(_parsed(n)) for n in ("alpha", "bravo"))
    assert one.sync_policy is two.sync_policy
    assert one.destination is two.destination
    assert one.source.repo is two.source.repo
    assert one.project is two.project
    assert one.source.helm is two.source.helm is compact.NO_HELM
    assert one.source.path != two.source.path  # what differs stays apart


def test_different_parts_are_not_merged() -> None:
    one = compact.compact(_parsed("alpha"))
    other = compact.compact(_parsed("bravo", sync_policy=SyncPolicy(automated=True, prune=False)))
    assert other.sync_policy == SyncPolicy(automated=True, prune=False)
    assert one.sync_policy == POLICY


def test_unhashable_parts_are_kept_as_they_are() -> None:
    selector = AppDestination("ns", selector={"env": "prod"})
    helm = HelmSource(values_yaml="replicas: 2\n", parameters={"image.tag": "v1"})
    parsed = _parsed(
        "alpha",
        destination=selector,
        source=AppSource("https://git.example.com/r", "chart", helm=helm),
    )
    compacted = compact.compact(parsed)
    assert compacted == parsed
    assert compacted.destination.selector == {"env": "prod"}
    assert compacted.source.helm.parameters == {"image.tag": "v1"}


def test_the_shared_table_starts_again_when_full(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compact, "MAX_PARTS", 3)
    monkeypatch.setattr(compact, "_parts", {})
    kept = [
        compact.compact(_parsed(f"app-{i}", sync_policy=SyncPolicy(interval_s=i)))
        for i in range(1, 8)
    ]
    assert len(compact._parts) <= 3
    assert [a.sync_policy.interval_s for a in kept] == list(range(1, 8))
