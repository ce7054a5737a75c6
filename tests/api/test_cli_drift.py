"""The CLI's side of drift: `app create --ignore-manager`, and `app get` naming who drifted."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from fleet.control.registry.syncrecords import DriftRecord, InstanceStatus
from fleet.model import SyncStatus
from tests.api.test_cli_client import (  # noqa: F401
    Served,
    add_east,
    create_shop_on_east,
    kubeconfig,
    served,
)


def test_app_create_stores_the_managers_to_ignore_and_app_get_lists_the_last_drift(
    served: Served,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    kubeconfig: Path,  # noqa: F811
) -> None:
    add_east(served, capsys, kubeconfig)
    create_shop_on_east(
        served, capsys, "--auto-sync", "--self-heal",
        "--ignore-manager", "kube-controller-manager", "--ignore-manager", "vpa-recommender",
    )  # fmt: skip
    [rule] = served.store.get_app("shop").sync_policy.ignore_differences
    assert rule.managers == ("kube-controller-manager", "vpa-recommender")

    drift = DriftRecord(
        group="apps",
        kind="Deployment",
        namespace="shop",
        name="web",
        field="spec.replicas",
        manager="kubectl",
        operation="Update",
        subresource="scale",
        at=datetime(2026, 1, 1, tzinfo=UTC),
        self_heal=True,
    )
    message = f"drift: {drift.describe()} (self-heal will revert it)"
    status = InstanceStatus(sync_status=SyncStatus.OUT_OF_SYNC, drift=(drift,), message=message)
    served.store.set_status("shop", "east", status)

    json_code, raw, _ = served.run(capsys, "app", "get", "shop", "-o", "json")
    text_code, text, _ = served.run(capsys, "app", "get", "shop")
    assert json_code == text_code == 0
    [shown] = json.loads(raw)["instances"][0]["drift"]
    assert (shown["field"], shown["manager"], shown["subresource"]) == (
        "spec.replicas",
        "kubectl",
        "scale",
    )
    assert "last drift on east:" in text
    drift_table = text.split("last drift on east:")[1]
    row = next(line for line in drift_table.splitlines() if "spec.replicas" in line)
    assert row.split() == [
        "Deployment",
        "shop",
        "web",
        "spec.replicas",
        "kubectl",
        "/scale",
        "self-heal",
    ]
    assert "Deployment/shop/web spec.replicas changed by kubectl via /scale" in text


def test_app_set_replaces_the_ignored_managers_and_turns_automated_sync_back_on(
    served: Served,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    kubeconfig: Path,  # noqa: F811
) -> None:
    add_east(served, capsys, kubeconfig)
    create_shop_on_east(served, capsys, "--ignore-manager", "old-manager")
    code, out, err = served.run(
        capsys, "app", "set", "shop", "--auto-sync", "on", "--self-heal", "on",
        "--ignore-manager", "kube-controller-manager",
    )  # fmt: skip
    assert code == 0, err
    assert "app shop updated" in out
    policy = served.store.get_app("shop").sync_policy
    assert (policy.automated, policy.self_heal) == (True, True)
    assert [r.managers for r in policy.ignore_differences] == [("kube-controller-manager",)]
    assert served.store.get_app("shop").source.path == "deploy"  # the rest of the spec is kept

    code, _, err = served.run(capsys, "app", "set", "shop", "--no-ignore-manager")
    assert code == 0, err
    assert served.store.get_app("shop").sync_policy.ignore_differences == ()
