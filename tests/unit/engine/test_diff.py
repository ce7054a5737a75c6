"""Comparing what gitfleet declares with live objects, as a real API server returns them.

The `*-live.yaml` fixtures were read back from kube-apiserver v1.35.4 after server-side applies
with field manager `gitfleet` (each file says how), so defaults, quantity spelling and
managedFields are exactly what a cluster writes.
"""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest
import yaml

from fleet.engine.diff.compare import (
    Drift,
    IgnoreRules,
    compare,
    normalize,
    owned_fields,
    strip_ignored,
    unified,
)
from fleet.model import Manifest, ObjectRef
from tests.support.paths import DATA

DATA = DATA / "diff"
HPA = "kube-controller-manager"  # the HPA controller scales through the scale subresource
CONTAINERS = "/spec/template/spec/containers"


def load(name: str) -> Manifest:
    loaded: Manifest = yaml.safe_load((DATA / name).read_text())
    return loaded


def tokens(pointer: str) -> list[str]:
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]


def _index(node: Any, token: str) -> Any:
    return int(token) if isinstance(node, list) else token


def edit(obj: Manifest, pointer: str, value: Any) -> Manifest:
    """A copy of `obj` with the value at `pointer` set (parents created as maps)."""
    out = copy.deepcopy(obj)
    *parents, last = tokens(pointer)
    node: Any = out
    for token in parents:
        node = node.setdefault(token, {}) if isinstance(node, dict) else node[int(token)]
    node[_index(node, last)] = value
    return out


def drop(obj: Manifest, *pointers: str) -> Manifest:
    out = copy.deepcopy(obj)
    for pointer in pointers:
        *parents, last = tokens(pointer)
        node: Any = out
        for token in parents:
            node = node[_index(node, token)]
        del node[_index(node, last)]
    return out


def has(obj: Any, pointer: str) -> bool:
    for token in tokens(pointer):
        if isinstance(obj, dict) and token in obj:
            obj = obj[token]
        elif isinstance(obj, list) and token.isdigit() and int(token) < len(obj):
            obj = obj[int(token)]
        else:
            return False
    return True


def applied_deployment() -> Manifest:
    """What was applied, minus the replicas the HPA has taken over since."""
    return drop(load("deployment-desired.yaml"), "/spec/replicas")


def applied_configmap() -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "settings",
            "namespace": "default",
            "labels": {"app.kubernetes.io/name": "shop"},
            "annotations": {"team": "payments"},
        },
        "data": {"LOG_LEVEL": "info", "FEATURE_FLAGS": "cart,checkout"},
    }


def secret(**string_data: str) -> Manifest:
    meta = {"name": "db", "namespace": "default"}
    body = {"type": "Opaque", "stringData": string_data}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, **body}


# --- normalize -------------------------------------------------------------------------------

SERVER_SET = [
    "/status",
    "/metadata/managedFields",
    "/metadata/resourceVersion",
    "/metadata/uid",
    "/metadata/generation",
    "/metadata/creationTimestamp",
    "/metadata/selfLink",
    "/metadata/deletionTimestamp",
    "/metadata/deletionGracePeriodSeconds",
    "/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration",
    "/metadata/annotations/deployment.kubernetes.io~1revision",
]


def busy_live_deployment() -> Manifest:
    live = load("deployment-live.yaml")
    live["status"] = {"replicas": 5, "readyReplicas": 5}
    live["metadata"].update(
        selfLink="/apis/apps/v1/namespaces/default/deployments/cart",
        deletionTimestamp="2026-11-29T16:10:00Z",
        deletionGracePeriodSeconds=0,
        ownerReferences=[{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "1"}],
        annotations={
            "kubectl.kubernetes.io/last-applied-configuration": '{"kind":"Deployment"}',
            "deployment.kubernetes.io/revision": "3",
            "team": "payments",
        },
    )
    return live


@pytest.mark.parametrize("pointer", SERVER_SET)
def test_normalize_drops_each_server_set_field(pointer: str) -> None:
    live = busy_live_deployment()
    assert has(live, pointer)
    assert not has(normalize(live), pointer)
    assert has(live, pointer), "normalize must not modify its input"


def test_normalize_keeps_the_object_itself_with_owner_references() -> None:
    normalized = normalize(busy_live_deployment())
    assert normalized["metadata"] == {
        "name": "cart",
        "namespace": "default",
        "labels": {"app": "cart"},
        "annotations": {"team": "payments"},
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "1"}],
    }
    assert normalized["spec"] == load("deployment-live.yaml")["spec"]


def test_normalize_folds_string_data_into_data_and_drops_empty_label_maps() -> None:
    obj = secret(password="hunter2")
    obj["data"] = {"user": "Y2FydA==", "password": "b2xk"}
    obj["metadata"].update(labels={}, annotations={})
    assert normalize(obj) == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "db", "namespace": "default"},
        "type": "Opaque",
        "data": {"user": "Y2FydA==", "password": base64.b64encode(b"hunter2").decode()},
    }


# --- compare: in sync and changed ------------------------------------------------------------


@pytest.mark.parametrize(
    ("desired", "live"),
    [
        (applied_deployment(), "deployment-live.yaml"),
        (load("service-desired.yaml"), "service-live.yaml"),
        (applied_configmap(), "configmap-live.yaml"),
        (secret(username="cart", password="s3cr3t-old"), "secret-live.yaml"),
    ],
    ids=["deployment", "service", "configmap", "secret-stringdata"],
)
def test_what_was_applied_is_in_sync_despite_server_defaults(desired: Manifest, live: str) -> None:
    assert compare(desired, load(live)) == Drift()
    assert compare(desired, load(live)).in_sync


@pytest.mark.parametrize(
    ("pointer", "value", "changed"),
    [
        (f"{CONTAINERS}/0/image", "registry.example/cart:1.5.0", [f"{CONTAINERS}/0/image"]),
        (f"{CONTAINERS}/1/image", "registry.example/exporter:1.0", [f"{CONTAINERS}/1/image"]),
        (f"{CONTAINERS}/0/env/0/value", "debug", [f"{CONTAINERS}/0/env/0/value"]),
        (
            f"{CONTAINERS}/0/resources/requests/cpu",
            "600m",
            [f"{CONTAINERS}/0/resources/requests/cpu"],
        ),
        (f"{CONTAINERS}/0/resources/requests/cpu", "500m", []),
        (f"{CONTAINERS}/0/resources/limits/memory", "0.5Gi", []),
        ("/metadata/labels/app", "basket", ["/metadata/labels/app"]),
        ("/metadata/labels/tier", "web", ["/metadata/labels/tier"]),
        ("/spec/revisionHistoryLimit", 10, []),
        ("/spec/revisionHistoryLimit", 3, ["/spec/revisionHistoryLimit"]),
        ("/spec/progressDeadlineSeconds", "600", ["/spec/progressDeadlineSeconds"]),
        ("/spec/template/spec/hostNetwork", False, []),
        ("/spec/template/spec/hostNetwork", True, ["/spec/template/spec/hostNetwork"]),
        (f"{CONTAINERS}/0/args", ["--verbose"], [f"{CONTAINERS}/0/args"]),
    ],
)
def test_each_changed_field_is_reported_as_a_pointer_into_desired(
    pointer: str, value: Any, changed: list[str]
) -> None:
    drift = compare(edit(applied_deployment(), pointer, value), load("deployment-live.yaml"))
    assert drift == Drift(changed=tuple(changed))


def test_renumbering_a_port_declares_a_new_one_and_removes_the_old_one() -> None:
    desired = edit(applied_deployment(), f"{CONTAINERS}/0/ports/0/containerPort", 9090)
    drift = compare(desired, load("deployment-live.yaml"))
    assert drift == Drift(
        changed=(f"{CONTAINERS}/0/ports/0",), removed=(f"{CONTAINERS}/0/ports/0",)
    )


def test_containers_are_matched_by_name_not_by_position() -> None:
    desired = applied_deployment()
    containers = desired["spec"]["template"]["spec"]["containers"]
    containers.reverse()  # metrics first now
    live = load("deployment-live.yaml")
    assert compare(desired, live).in_sync
    containers[0]["image"] = "registry.example/exporter:1.0"
    containers.append({"name": "debug", "image": "busybox"})
    assert compare(desired, live).changed == (f"{CONTAINERS}/0/image", f"{CONTAINERS}/2")


@pytest.mark.parametrize(
    ("desired", "live", "in_sync", "changed"),
    [
        ({"data": {"n": "1"}}, {"data": {"n": 1}}, False, ["/data/n"]),
        ({"data": {"n": True}}, {"data": {"n": 1}}, False, ["/data/n"]),
        ({"spec": {"hard": {"cpu": "1"}}}, {"spec": {"hard": {"cpu": "1000m"}}}, True, []),
        ({"spec": {"hard": {"cpu": 2}}}, {"spec": {"hard": {"cpu": "2"}}}, True, []),
        ({"spec": {"hard": {"memory": "1Gi"}}}, {"spec": {"hard": {"memory": "1024Mi"}}}, True, []),
        ({"spec": {"hard": {"storage": "1e3"}}}, {"spec": {"hard": {"storage": "1k"}}}, True, []),
        (
            {"spec": {"hard": {"cpu": "2"}}},
            {"spec": {"hard": {"cpu": "1"}}},
            False,
            ["/spec/hard/cpu"],
        ),
        (
            {"spec": {"args": ["a", "b"]}},
            {"spec": {"args": ["a", "b", "c"]}},
            False,
            ["/spec/args"],
        ),
        ({"spec": {"args": ["a", "x"]}}, {"spec": {"args": ["a", "b"]}}, False, ["/spec/args/1"]),
        ({"spec": {"tags": {"x": None}}}, {"spec": {"tags": {"x": "set"}}}, True, []),
        ({"spec": 3}, {"spec": {"a": 1}}, False, ["/spec"]),
        ({"spec": {"a": {"b": 1}}}, {"spec": {"a": "flat"}}, False, ["/spec/a"]),
    ],
)
def test_scalars_keep_their_types_except_resource_quantities(
    desired: Manifest, live: Manifest, in_sync: bool, changed: list[str]
) -> None:
    drift = compare(desired, live)
    assert (drift.in_sync, list(drift.changed)) == (in_sync, changed)


@pytest.mark.parametrize(
    ("finalizers", "changed"),
    [
        (["example.com/keep"], []),
        (["example.com/keep", "example.com/audit"], ["/metadata/finalizers/1"]),
    ],
)
def test_finalizers_compare_as_a_set_others_may_add_to(
    finalizers: list[str], changed: list[str]
) -> None:
    live = edit(
        load("service-live.yaml"), "/metadata/finalizers", ["kubernetes.io/x", "example.com/keep"]
    )
    desired = edit(load("service-desired.yaml"), "/metadata/finalizers", finalizers)
    assert list(compare(desired, live).changed) == changed


def test_a_missing_live_object_differs_everywhere() -> None:
    assert compare(applied_configmap(), None) == Drift(changed=("",))
    assert not compare(applied_configmap(), None).in_sync


# --- owned and removed fields ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("live", "owned"),
    [
        (
            "configmap-live.yaml",
            {
                ("data", "FEATURE_FLAGS"),
                ("data", "LOG_LEVEL"),
                ("metadata", "annotations", "team"),
                ("metadata", "labels", "app.kubernetes.io/name"),
            },
        ),
        (
            "service-live.yaml",
            {
                ("metadata", "finalizers", 0),
                ("spec", "ports", 0),
                ("spec", "ports", 0, "name"),
                ("spec", "ports", 0, "port"),
                ("spec", "ports", 0, "targetPort"),
                ("spec", "selector"),
            },
        ),
        ("secret-live.yaml", {("type",)}),  # f:stringData names nothing the server stores
    ],
)
def test_owned_fields_resolves_the_apply_entry_against_live(live: str, owned: set[Any]) -> None:
    assert owned_fields(load(live)) == owned


def test_owned_fields_finds_keyed_list_elements_at_their_live_index() -> None:
    owned = owned_fields(load("deployment-live.yaml"))
    spec = ("spec", "template", "spec")
    assert {(*spec, "containers", 0), (*spec, "containers", 1, "image")} <= owned
    assert (*spec, "containers", 0, "ports", 0, "containerPort") in owned  # key had protocol too
    assert (*spec, "containers", 0, "volumeMounts", 0, "mountPath") in owned
    assert ("spec", "replicas") not in owned  # the scale subresource took it over
    assert owned_fields(load("deployment-live.yaml"), HPA) == set()  # an Update, not an Apply


def test_owned_fields_counts_apply_only_not_updates_by_the_same_manager() -> None:
    live = load("configmap-live.yaml")  # kubectl-edit added EXTRA with an Update
    assert owned_fields(live, "kubectl-edit") == set()
    assert ("data", "EXTRA") not in owned_fields(live)


@pytest.mark.parametrize(
    ("desired", "live", "removed"),
    [
        (
            drop(applied_configmap(), "/data/FEATURE_FLAGS"),
            "configmap-live.yaml",
            ["/data/FEATURE_FLAGS"],
        ),
        (
            drop(applied_configmap(), "/metadata/labels"),
            "configmap-live.yaml",
            ["/metadata/labels/app.kubernetes.io~1name"],
        ),
        (
            drop(applied_deployment(), f"{CONTAINERS}/1", "/metadata/labels"),
            "deployment-live.yaml",
            ["/metadata/labels/app", f"{CONTAINERS}/1"],
        ),
        (
            drop(load("service-desired.yaml"), "/metadata/finalizers"),
            "service-live.yaml",
            ["/metadata/finalizers/0"],
        ),
        (  # SHARED is co-owned by another applier, so our apply would not remove it
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}},
            "configmap-shared-live.yaml",
            ["/data/OWN"],
        ),
        (secret(username="cart"), "secret-live.yaml", []),  # the server keeps data.password
    ],
    ids=["configmap-key", "label", "container", "finalizer", "co-owned", "secret"],
)
def test_fields_we_applied_before_and_no_longer_declare_are_removed_drift(
    desired: Manifest, live: str, removed: list[str]
) -> None:
    drift = compare(desired, load(live))
    assert drift == Drift(removed=tuple(removed))
    assert drift.in_sync is not bool(removed)


def test_fields_other_managers_own_are_never_reported_removed() -> None:
    live = load("configmap-live.yaml")  # EXTRA was added by kubectl-edit
    assert "EXTRA" in live["data"]
    assert compare(applied_configmap(), live).in_sync


# --- ignore rules ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("desired", "live", "pointers"),
    [
        (load("deployment-desired.yaml"), "deployment-live.yaml", ["/spec/replicas"]),
        (
            edit(applied_deployment(), f"{CONTAINERS}/0/image", "registry.example/cart:9"),
            "deployment-live.yaml",
            [f"{CONTAINERS}/0/image"],
        ),
        (
            edit(applied_configmap(), "/metadata/labels/app.kubernetes.io~1name", "other"),
            "configmap-live.yaml",
            ["/metadata/labels/app.kubernetes.io~1name"],
        ),
        (
            drop(applied_configmap(), "/data/FEATURE_FLAGS"),
            "configmap-live.yaml",
            ["/data/FEATURE_FLAGS"],
        ),
        (drop(applied_configmap(), "/data"), "configmap-live.yaml", ["/data"]),
    ],
    ids=["replicas", "image", "escaped-label", "removed-key", "removed-map"],
)
def test_ignored_pointers_hide_differences(
    desired: Manifest, live: str, pointers: list[str]
) -> None:
    assert not compare(desired, load(live)).in_sync
    assert compare(desired, load(live), ignore=IgnoreRules(json_pointers=tuple(pointers))).in_sync


def test_fields_owned_by_an_ignored_manager_such_as_an_hpa_are_not_drift() -> None:
    desired, live = load("deployment-desired.yaml"), load("deployment-live.yaml")
    assert compare(desired, live).changed == ("/spec/replicas",)
    assert compare(desired, live, ignore=IgnoreRules(managers=(HPA,))) == Drift()
    assert compare(desired, live, ignore=IgnoreRules(managers=("someone-else",))).changed == (
        "/spec/replicas",
    )


def test_strip_ignored_removes_ignored_fields_and_leaves_the_input_alone() -> None:
    desired, live = load("deployment-desired.yaml"), load("deployment-live.yaml")
    pristine = copy.deepcopy(desired)
    rules = IgnoreRules(json_pointers=(f"{CONTAINERS}/1",), managers=(HPA,))
    stripped = strip_ignored(desired, rules, live)
    assert desired == pristine
    assert "replicas" not in stripped["spec"]
    assert [c["name"] for c in stripped["spec"]["template"]["spec"]["containers"]] == ["app"]
    assert drop(pristine, "/spec/replicas", f"{CONTAINERS}/1") == stripped
    assert strip_ignored(desired, IgnoreRules(), live) == pristine


# --- unified diff ----------------------------------------------------------------------------

REF = ObjectRef("apps", "v1", "Deployment", "default", "cart")


def test_unified_shows_changed_lines_under_live_and_desired_headers() -> None:
    text = unified(load("deployment-desired.yaml"), load("deployment-live.yaml"), ref=REF)
    lines = text.splitlines()
    assert lines[:2] == ["--- live/Deployment/default/cart", "+++ desired/Deployment/default/cart"]
    changes = [line for line in lines[2:] if line[:1] in "+-"]
    assert changes == ["-  replicas: 5", "+  replicas: 2"]  # cpu 0.5 vs 500m is no change
    assert "managedFields" not in text


def test_unified_of_a_missing_object_adds_every_line() -> None:
    text = unified(applied_configmap(), None, ref=ObjectRef.of(applied_configmap()))
    body = text.splitlines()[3:]
    assert body and all(line.startswith("+") for line in body)
    assert "+  LOG_LEVEL: info" in body
    assert unified(applied_configmap(), load("configmap-live.yaml"), ref=REF) == ""


def test_secret_diff_masks_values_equal_alike_and_different_apart() -> None:
    desired = secret(username="cart", password="s3cr3t-new")
    live = load("secret-live.yaml")
    text = unified(desired, live, ref=ObjectRef.of(desired))
    for value in ("cart", "s3cr3t-old", "s3cr3t-new"):
        encoded = base64.b64encode(value.encode()).decode()
        assert value not in text.replace("desired/Secret", "").replace("live/Secret", "")
        assert encoded not in text
    lines = text.splitlines()
    assert "-  password: '--------'" in lines
    assert "+  password: ++++++++" in lines
    assert "   username: '********'" in lines  # equal values: the same mask, no diff line
    assert compare(desired, live).changed == ("/data/password",)
