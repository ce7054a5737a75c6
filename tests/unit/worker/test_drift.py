"""Self-heal's pure parts: which watch events are drift, and when healing stops."""

from __future__ import annotations

from typing import Any

import pytest

from worker.drift import (
    FieldChange,
    Fights,
    field_name,
    is_drift,
    is_own_change,
    judge,
    last_managers,
    owned_paths,
)


def _entry(manager: str, time: str, fields: dict[str, Any], **extra: str) -> dict[str, Any]:
    operation = "Apply" if manager == "gitfleet" else "Update"
    entry = {"manager": manager, "operation": operation, "fieldsV1": fields, **extra}
    return {**entry, "time": time} if time else entry


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


T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"
DEPLOY_OURS = {
    "f:spec": {
        "f:replicas": {},
        "f:template": {"f:spec": {"f:containers": {'k:{"name":"app"}': {".": {}, "f:image": {}}}}},
    }
}


def _deploy(*entries: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {"metadata": {"managedFields": list(entries), **meta}}


DEPLOYED = _deploy(_entry("gitfleet", T0, DEPLOY_OURS))
WITHOUT_REPLICAS = {"f:spec": {k: v for k, v in DEPLOY_OURS["f:spec"].items() if k != "f:replicas"}}


def test_a_scale_write_without_a_timestamp_is_drift_named_by_its_manager() -> None:
    scaled = _deploy(
        _entry("gitfleet", T0, WITHOUT_REPLICAS),
        _entry("kubectl", "", {"f:spec": {"f:replicas": {}}}, subresource="scale"),
    )
    assert is_own_change(scaled)  # by time gitfleet looks newest: why time cannot decide
    found = judge("MODIFIED", scaled, DEPLOYED, declared=True)
    assert found.drift == (FieldChange("spec.replicas", "kubectl", "Update", "scale"),)
    assert found.activity


def test_a_scale_write_tied_with_our_apply_is_still_drift() -> None:
    scaled = _deploy(
        _entry("gitfleet", T0, WITHOUT_REPLICAS),
        _entry("kubectl", T0, {"f:spec": {"f:replicas": {}}}, subresource="scale"),
    )
    assert last_managers(scaled) == {"gitfleet", "kubectl"}
    assert judge("MODIFIED", scaled, DEPLOYED, declared=True).is_drift


def test_a_field_an_ignored_manager_takes_is_not_drift_but_is_activity() -> None:
    hpa = _deploy(
        _entry("gitfleet", T0, WITHOUT_REPLICAS),
        _entry("kube-controller-manager", "", {"f:spec": {"f:replicas": {}}}, subresource="scale"),
    )
    found = judge(
        "MODIFIED", hpa, DEPLOYED, declared=True, ignore_managers={"kube-controller-manager"}
    )
    assert found.drift == ()
    assert [c.manager for c in found.ignored] == ["kube-controller-manager"]
    assert found.activity


def test_kubectl_edit_of_an_image_names_the_container_and_the_manager() -> None:
    edited = _deploy(
        _entry("gitfleet", T0, {"f:spec": {"f:replicas": {}}}),
        _entry(
            "kubectl-edit",
            T1,
            {
                "f:spec": {
                    "f:template": {
                        "f:spec": {"f:containers": {'k:{"name":"app"}': {"f:image": {}}}}
                    }
                }
            },
        ),
    )
    found = judge("MODIFIED", edited, DEPLOYED, declared=True)
    assert [(c.field, c.manager) for c in found.drift] == [
        ("spec.template.spec.containers[name=app].image", "kubectl-edit"),
    ]


def test_our_own_apply_that_stops_declaring_a_field_is_neither_drift_nor_activity() -> None:
    applied = _deploy(_entry("gitfleet", T1, WITHOUT_REPLICAS))
    assert judge("MODIFIED", applied, DEPLOYED, declared=True).activity is False


def test_a_field_removed_by_another_manager_is_drift_even_though_nobody_owns_it() -> None:
    removed = _deploy(
        _entry("gitfleet", T0, WITHOUT_REPLICAS), _entry("kubectl-edit", T1, {"f:metadata": {}})
    )
    found = judge("MODIFIED", removed, DEPLOYED, declared=True)
    assert [(c.field, c.manager) for c in found.drift] == [("spec.replicas", "kubectl-edit")]


def test_a_controller_writing_status_is_activity_not_drift() -> None:
    status = _deploy(
        _entry("gitfleet", T0, DEPLOY_OURS),
        _entry("kcm", T1, {"f:status": {"f:replicas": {}}}, subresource="status"),
        _entry(
            "kcm",
            T1,
            {"f:metadata": {"f:annotations": {"f:deployment.kubernetes.io/revision": {}}}},
        ),
    )
    found = judge("MODIFIED", status, DEPLOYED, declared=True)
    assert (found.is_drift, found.activity) == (False, True)


def test_an_object_being_deleted_and_a_prune_are_our_own_doing() -> None:
    deleting = _deploy(_entry("gitfleet", T0, DEPLOY_OURS), deletionTimestamp=T1)
    assert judge("MODIFIED", deleting, DEPLOYED, declared=True).activity is False
    assert judge("DELETED", DEPLOYED, DEPLOYED, declared=False).activity is False
    deleted = judge("DELETED", DEPLOYED, DEPLOYED, declared=True)
    assert deleted.drift == (FieldChange("", "", "Delete"),)


def test_field_names_read_like_kubectl_paths() -> None:
    assert field_name(("f:metadata", "f:labels", "f:gitfleet.io/app")) == (
        "metadata.labels.gitfleet.io/app"
    )
    assert field_name(("f:spec", "f:ports", 'k:{"port":80,"protocol":"TCP"}', "f:name")) == (
        "spec.ports[port=80,protocol=TCP].name"
    )
    assert field_name(("f:metadata", "f:finalizers", 'v:"x"')) == 'metadata.finalizers["x"]'
