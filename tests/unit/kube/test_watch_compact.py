"""The watch cache keeps only what drift detection and quiet checks read."""

from __future__ import annotations

import copy
import json

from fleet.kube.watch import Packer, compact
from worker.drift import owned_paths

LIVE = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {
        "name": "settings",
        "namespace": "shop",
        "uid": "u-1",
        "resourceVersion": "42",
        "labels": {"gitfleet.io/app": "shop"},
        "annotations": {
            "gitfleet.io/tracking": "shop:/ConfigMap:shop/settings",
            "kubectl.kubernetes.io/last-applied-configuration": "x" * 2000,
        },
        "managedFields": [
            {"manager": "gitfleet", "operation": "Apply", "fieldsV1": {"f:data": {"f:k": {}}}},
            {"manager": "kubectl-edit", "operation": "Update", "fieldsV1": {"f:data": {"f:o": {}}}},
        ],
    },
    "data": {"k": "v" * 4000},
}


def test_compact_keeps_identity_marks_and_gitfleet_ownership_only():
    small = compact(LIVE)
    meta = small["metadata"]
    assert (meta["name"], meta["namespace"], meta["resourceVersion"]) == ("settings", "shop", "42")
    assert meta["labels"] == {"gitfleet.io/app": "shop"}
    assert meta["annotations"] == {"gitfleet.io/tracking": "shop:/ConfigMap:shop/settings"}
    assert [e["manager"] for e in meta["managedFields"]] == ["gitfleet"]
    assert "data" not in small
    assert owned_paths(small) == owned_paths(LIVE) == {"f:data.f:k"}
    assert len(json.dumps(small)) < len(json.dumps(LIVE)) / 10


def _sibling(i: int) -> dict:
    obj = copy.deepcopy(LIVE)
    meta = obj["metadata"]
    meta["name"], meta["uid"], meta["resourceVersion"] = f"settings-{i}", f"uid-{i:08x}", str(i)
    meta["annotations"]["gitfleet.io/tracking"] = f"shop:/ConfigMap:shop/settings-{i}"
    return obj


def test_packed_objects_unpack_to_their_compact_form_whichever_came_first():
    packer = Packer()
    odd = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "é", "labels": {}}}
    objects = [_sibling(i) for i in range(5)] + [odd, {}]
    packed = [packer.pack(obj) for obj in objects]
    assert [packer.unpack(p) for p in packed] == [compact(obj) for obj in objects]


def test_packing_keeps_about_what_each_object_has_of_its_own():
    packer = Packer()
    packer.pack(_sibling(0))
    size = len(packer.pack(_sibling(12345)))
    assert size < len(json.dumps(compact(_sibling(12345)))) / 3


def test_a_first_object_longer_than_deflates_window_still_packs_the_rest():
    packer = Packer()
    big = _sibling(0)
    big["metadata"]["managedFields"][0]["fieldsV1"] = {f"f:k{i}": {} for i in range(8000)}
    objects = [big, _sibling(1), _sibling(2)]
    packed = [packer.pack(obj) for obj in objects]
    assert [packer.unpack(p) for p in packed] == [compact(obj) for obj in objects]
