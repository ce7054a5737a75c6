"""Self-heal's pure parts: which watch events are drift, and when healing stops."""

from __future__ import annotations

from typing import Any

import pytest

from worker.drift import Fights, is_drift, is_own_change, last_managers, owned_paths


def _entry(manager: str, time: str, fields: dict[str, Any], **extra: str) -> dict[str, Any]:
    return {"manager": manager, "time": time, "fieldsV1": fields, **extra}


OURS = {"f:data": {"f:k": {}}, "f:metadata": {"f:labels": {"f:gitfleet.io/app": {}}}}


def _cm(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"managedFields": list(entries)}, "data": {"k": "v"}}


APPLIED = _cm(_entry("gitfleet", "2026-01-01T00:00:00Z", OURS, operation="Apply"))


def test_the_newest_non_status_entry_names_who_changed_an_object_last() -> None:
    obj = _cm(
        _entry("gitfleet", "2026-01-01T00:00:00Z", OURS),
        _entry("kubectl-edit", "2026-01-01T00:01:00Z", {"f:data": {"f:k": {}}}),
        _entry("kcm", "2026-01-01T00:02:00Z", {"f:status": {}}, subresource="status"),
    )
    assert last_managers(obj) == {"kubectl-edit"}
    assert not is_own_change(obj)
    assert is_own_change(APPLIED)


@pytest.mark.parametrize(
    ("kind", "after", "declared", "expected"),
    [
        # someone edited a field gitfleet owned: ownership moved to them
        (
            "MODIFIED",
            _cm(
                _entry("gitfleet", "2026-01-01T00:00:00Z", {"f:metadata": OURS["f:metadata"]}),
                _entry("kubectl-edit", "2026-01-01T00:01:00Z", {"f:data": {"f:k": {}}}),
            ),
            True,
            True,
        ),
        # a controller added an annotation gitfleet never declared: not drift
        (
            "MODIFIED",
            _cm(
                _entry("gitfleet", "2026-01-01T00:00:00Z", OURS),
                _entry("kcm", "2026-01-01T00:01:00Z", {"f:metadata": {"f:annotations": {}}}),
            ),
            True,
            False,
        ),
        # our own apply coming back
        ("MODIFIED", APPLIED, True, False),
        # deleted: drift only for what the last sync declared
        ("DELETED", APPLIED, True, True),
        ("DELETED", APPLIED, False, False),
    ],
)
def test_drift_is_a_field_gitfleet_owned_being_taken_or_a_declared_object_deleted(
    kind: str, after: dict[str, Any], declared: bool, expected: bool
) -> None:
    assert is_drift(kind, after, APPLIED, declared=declared) is expected


def test_a_foreign_change_without_an_earlier_state_counts_as_drift() -> None:
    edited = _cm(_entry("kubectl-edit", "2026-01-01T00:01:00Z", {"f:data": {"f:k": {}}}))
    assert is_drift("ADDED", edited, None, declared=True)


def test_owned_paths_are_the_leaves_of_the_managers_fields() -> None:
    assert owned_paths(APPLIED) == {"f:data.f:k", "f:metadata.f:labels.f:gitfleet.io/app"}


def test_healing_one_object_backs_off_and_stops_after_the_limit() -> None:
    fights = Fights(base=1.0, limit=3, window=60.0)
    assert [fights.note("cm", t) for t in (0.0, 1.0, 3.0)] == [1.0, 2.0, 4.0]
    assert fights.note("cm", 7.0) is None
    assert fights.note("other", 7.0) == 1.0


def test_drift_outside_the_window_starts_the_count_again() -> None:
    fights = Fights(base=1.0, limit=2, window=10.0)
    fights.note("cm", 0.0)
    fights.note("cm", 1.0)
    assert fights.note("cm", 30.0) == 1.0
    fights.forget(now=100.0)
    assert fights.count("cm") == 0
