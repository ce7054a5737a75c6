"""Why a workload is not progressing, from its pods and events (`fleet.engine.health.causes`),
and whether a CRD promises a status (`assess.status_subresource`): pure functions, fed the
objects the API server returns."""

from __future__ import annotations

from typing import Any

import pytest

from fleet.engine.health.assess import status_subresource
from fleet.engine.health.causes import event_cause, is_workload, label_selector, pod_cause
from fleet.model import ObjectRef


def pod(name: str, **status: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "status": status}


def waiting(reason: str, message: str = "") -> dict[str, Any]:
    return {"name": "app", "state": {"waiting": {"reason": reason, "message": message}}}


UNSCHEDULABLE = pod(
    "web-1",
    phase="Pending",
    conditions=[
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/2 nodes are available: 2 node(s) didn't match Pod's node "
            "affinity/selector.",
        }
    ],
)


@pytest.mark.parametrize(
    ("pods", "expected"),
    [
        (
            [UNSCHEDULABLE],
            "pod web-1 Unschedulable: 0/2 nodes are available: 2 node(s) didn't match Pod's "
            "node affinity/selector.",
        ),
        (
            [
                pod(
                    "web-2",
                    phase="Pending",
                    containerStatuses=[waiting("ImagePullBackOff", "nope")],
                )
            ],
            "pod web-2 container app waiting: ImagePullBackOff: nope",
        ),
        (
            [pod("web-3", phase="Running", containerStatuses=[waiting("CrashLoopBackOff")])],
            "pod web-3 container app waiting: CrashLoopBackOff",
        ),
        (
            [pod("job-x", phase="Failed", reason="DeadlineExceeded")],
            "pod job-x failed: DeadlineExceeded",
        ),
        ([pod("web-4", phase="Pending", containerStatuses=[waiting("ContainerCreating")])], ""),
        ([], ""),
    ],
    ids=["unschedulable", "image-pull", "crash-loop", "failed", "starting", "no-pods"],
)
def test_the_pods_cause_names_what_blocks_them(pods: list[dict[str, Any]], expected: str) -> None:
    assert pod_cause(pods) == expected


def test_an_unschedulable_pod_is_named_before_another_pods_waiting_error() -> None:
    crashing = pod("web-0", phase="Running", containerStatuses=[waiting("CrashLoopBackOff")])

    assert pod_cause([crashing, UNSCHEDULABLE]).startswith("pod web-1 Unschedulable")


def test_the_latest_warning_event_is_the_cause_and_normal_events_are_not() -> None:
    events = [
        {"type": "Warning", "reason": "FailedCreate", "message": "old", "lastTimestamp": "1"},
        {"type": "Warning", "reason": "FailedCreate", "message": "quota", "lastTimestamp": "3"},
        {"type": "Normal", "reason": "ScalingReplicaSet", "message": "up", "lastTimestamp": "4"},
    ]

    assert event_cause(events) == "event FailedCreate: quota"
    assert event_cause(events[2:]) == ""


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ({"matchLabels": {"app": "web", "tier": "front"}}, "app=web,tier=front"),
        (
            {
                "matchLabels": {"app": "web"},
                "matchExpressions": [
                    {"key": "track", "operator": "In", "values": ["stable", "canary"]},
                    {"key": "legacy", "operator": "DoesNotExist"},
                ],
            },
            "app=web,track in (stable,canary),!legacy",
        ),
        ({}, ""),
        (None, ""),
    ],
    ids=["labels", "expressions", "empty", "none"],
)
def test_the_label_selector_is_the_workloads_own(selector: Any, expected: str) -> None:
    assert label_selector({"spec": {"selector": selector}}) == expected


def test_only_workloads_have_their_pods_read() -> None:
    assert is_workload(ObjectRef("apps", "v1", "Deployment", "ns", "web"))
    assert is_workload(ObjectRef("batch", "v1", "Job", "ns", "migrate"))
    assert not is_workload(ObjectRef("", "v1", "ConfigMap", "ns", "web"))


@pytest.mark.parametrize(
    ("subresources", "version", "expected"),
    [
        ({"status": {}}, "v1", True),
        ({}, "v1", False),
        (None, "v1", False),
        ({"status": {}}, "v9", True),
    ],
    ids=["declared", "none", "absent", "unlisted-version-uses-any"],
)
def test_a_crd_declares_a_status_subresource_per_version(
    subresources: Any, version: str, expected: bool
) -> None:
    crd = {"spec": {"versions": [{"name": "v1", "subresources": subresources}]}}

    assert status_subresource(crd, version) is expected
