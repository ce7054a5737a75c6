"""Ownership marks and per-object policies read from one object's labels and annotations."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest

from fleet.engine.plan.tracking import (
    APP_LABEL,
    TRACKING_ANNOTATION,
    TrackingId,
    is_prune_disabled,
    is_self_heal_disabled,
    mark,
    owner_of,
    parse_tracking_id,
    prune_disabled_by,
    sync_options,
    tracking_id,
    tracks,
    validate_app_name,
    wants_replace,
)
from fleet.errors import UsageError
from fleet.model import Manifest, ObjectRef

CM = ObjectRef("", "v1", "ConfigMap", "shop", "settings")
DEPLOY = ObjectRef("apps", "v1", "Deployment", "shop", "cart")
ROLE = ObjectRef("rbac.authorization.k8s.io", "v1", "ClusterRole", "", "system:cart-reader")


def obj(
    ref: ObjectRef = CM,
    *,
    notes: dict[str, Any] | None = None,
    labels: dict[str, Any] | None = None,
) -> Manifest:
    meta: dict[str, Any] = {"name": ref.name}
    if ref.namespace:
        meta["namespace"] = ref.namespace
    if notes is not None:
        meta["annotations"] = notes
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": ref.api_version, "kind": ref.kind, "metadata": meta, "data": {"k": "v"}}


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        (CM, "shop:/ConfigMap:shop/settings"),
        (DEPLOY, "shop:apps/Deployment:shop/cart"),
        (ROLE, "shop:rbac.authorization.k8s.io/ClusterRole:/system:cart-reader"),
    ],
    ids=["core-group", "named-group", "cluster-scoped-name-with-colon"],
)
def test_tracking_id_has_argo_cd_format_and_parses_back(ref: ObjectRef, expected: str):
    assert tracking_id("shop", ref) == expected
    parsed = parse_tracking_id(expected)
    assert parsed == TrackingId("shop", ref.group, ref.kind, ref.namespace, ref.name)
    assert parsed is not None and parsed.names(ref)


@pytest.mark.parametrize(
    "value",
    [
        "",
        "shop",
        "shop:ConfigMap:shop/settings",
        "shop:/ConfigMap:settings",
        ":/ConfigMap:shop/settings",
        "shop:/:shop/settings",
        "shop:/ConfigMap:shop/",
        "shop:/ConfigMap:shop/a/b",
        "shop:a/b/ConfigMap:shop/settings",
    ],
)
def test_malformed_tracking_ids_parse_to_none(value: str):
    assert parse_tracking_id(value) is None


def test_mark_sets_label_and_annotation_on_a_copy_sharing_the_body():
    original = obj(DEPLOY, notes={"keep": "me"}, labels={"tier": "web"})
    before = copy.deepcopy(original)
    marked = mark(original, "shop")
    assert original == before
    assert marked["metadata"]["labels"] == {"tier": "web", APP_LABEL: "shop"}
    assert marked["metadata"]["annotations"] == {
        "keep": "me",
        TRACKING_ANNOTATION: "shop:apps/Deployment:shop/cart",
    }
    assert marked["data"] is original["data"]


def test_mark_works_without_labels_or_annotations():
    marked = mark(obj(CM), "shop")
    assert owner_of(marked) == "shop"
    assert tracks(marked, "shop", CM)


@pytest.mark.parametrize(
    ("notes", "owner"),
    [
        (None, None),
        ({TRACKING_ANNOTATION: "shop:/ConfigMap:shop/settings"}, "shop"),
        ({TRACKING_ANNOTATION: " other:/ConfigMap:shop/settings "}, "other"),
        ({TRACKING_ANNOTATION: "garbage"}, None),
        ({TRACKING_ANNOTATION: ""}, None),
        ({"argocd.argoproj.io/tracking-id": "shop:/ConfigMap:shop/settings"}, None),
    ],
    ids=["absent", "ours", "other-app-with-spaces", "malformed", "empty", "argo-annotation"],
)
def test_owner_is_the_app_named_by_a_well_formed_tracking_annotation(
    notes: dict[str, str] | None, owner: str | None
):
    assert owner_of(obj(CM, notes=notes)) == owner


@pytest.mark.parametrize(
    ("annotation", "app", "ref", "expected"),
    [
        ("shop:/ConfigMap:shop/settings", "shop", CM, True),
        ("shop:/ConfigMap:shop/settings", "shop", replace(CM, version="v2"), True),
        ("other:/ConfigMap:shop/settings", "shop", CM, False),
        ("shop:/ConfigMap:shop/original", "shop", CM, False),
        ("shop:/ConfigMap:prod/settings", "shop", CM, False),
        ("shop:/Secret:shop/settings", "shop", CM, False),
        ("shop:example.com/ConfigMap:shop/settings", "shop", CM, False),
        ("shop", "shop", CM, False),
    ],
    ids=[
        "ours",
        "ours-at-another-version",
        "other-app",
        "copied-from-another-name",
        "copied-from-another-namespace",
        "other-kind",
        "other-group",
        "malformed",
    ],
)
def test_tracks_only_when_the_annotation_names_this_app_and_this_object(
    annotation: str, app: str, ref: ObjectRef, expected: bool
):
    assert tracks(obj(CM, notes={TRACKING_ANNOTATION: annotation}), app, ref) is expected


def test_tracks_is_false_without_annotation_even_with_the_app_label():
    assert not tracks(obj(CM, labels={APP_LABEL: "shop"}), "shop", CM)


SYNC = "gitfleet.io/sync-options"
ARGO_SYNC = "argocd.argoproj.io/sync-options"


@pytest.mark.parametrize(
    ("notes", "expected"),
    [
        ({}, {}),
        ({ARGO_SYNC: "Prune=false"}, {"Prune": "false"}),
        ({SYNC: " Prune = false ,Replace=true, "}, {"Prune": "false", "Replace": "true"}),
        ({ARGO_SYNC: "Prune=false,Validate=false", SYNC: "Prune=true"},
         {"Prune": "true", "Validate": "false"}),
        ({SYNC: "Validate,=x,,ServerSideApply=true"}, {"ServerSideApply": "true"}),
        ({SYNC: "Key=a=b"}, {"Key": "a=b"}),
    ],
    ids=["none", "argo", "whitespace", "gitfleet-wins", "junk-ignored", "value-with-equals"],
)  # fmt: skip
def test_sync_options_parse_both_annotations(notes: dict[str, str], expected: dict[str, str]):
    assert sync_options(obj(CM, notes=notes)) == expected


FLUX = "kustomize.toolkit.fluxcd.io/prune"


@pytest.mark.parametrize(
    ("notes", "labels", "by"),
    [
        ({"gitfleet.io/prune": "false"}, {}, "annotation gitfleet.io/prune"),
        ({"gitfleet.io/prune": " False "}, {}, "annotation gitfleet.io/prune"),
        ({ARGO_SYNC: "Prune=false"}, {}, f"annotation {ARGO_SYNC} (Prune=false)"),
        ({SYNC: "Replace=true, Prune=false"}, {}, f"annotation {SYNC} (Prune=false)"),
        ({ARGO_SYNC: "Prune=confirm"}, {}, f"annotation {ARGO_SYNC} (Prune=confirm)"),
        ({FLUX: "disabled"}, {}, f"annotation {FLUX}"),
        ({}, {FLUX: "disabled"}, f"label {FLUX}"),
        ({}, {}, None),
        ({"gitfleet.io/prune": "true"}, {}, None),
        ({ARGO_SYNC: "Prune=true"}, {}, None),
        ({ARGO_SYNC: "Prune=false", SYNC: "Prune=true"}, {}, None),
        ({FLUX: "enabled"}, {FLUX: "enabled"}, None),
    ],
    ids=[
        "gitfleet-annotation",
        "gitfleet-annotation-spaced-case",
        "argo-sync-option",
        "gitfleet-sync-option",
        "argo-confirm-keeps",
        "flux-annotation",
        "flux-label",
        "nothing",
        "gitfleet-true",
        "argo-true",
        "gitfleet-sync-option-overrides-argo",
        "flux-enabled",
    ],
)
def test_prune_opt_outs(notes: dict[str, str], labels: dict[str, str], by: str | None):
    live = obj(CM, notes=notes, labels=labels)
    assert prune_disabled_by(live) == by
    assert is_prune_disabled(live) is (by is not None)


@pytest.mark.parametrize(
    ("notes", "expected"),
    [
        ({ARGO_SYNC: "Replace=true"}, True),
        ({SYNC: "Prune=false, Replace=True"}, True),
        ({ARGO_SYNC: "Replace=true", SYNC: "Replace=false"}, False),
        ({SYNC: "Replace"}, False),
        ({}, False),
    ],
)
def test_wants_replace_follows_the_replace_sync_option(notes: dict[str, str], expected: bool):
    assert wants_replace(obj(CM, notes=notes)) is expected


@pytest.mark.parametrize(
    ("notes", "expected"),
    [
        ({"gitfleet.io/self-heal": "false"}, True),
        ({"gitfleet.io/self-heal": "FALSE "}, True),
        ({"gitfleet.io/self-heal": "true"}, False),
        ({}, False),
    ],
)
def test_self_heal_is_paused_by_annotation(notes: dict[str, str], expected: bool):
    assert is_self_heal_disabled(obj(CM, notes=notes)) is expected


@pytest.mark.parametrize("app", ["shop", "a", "shop-2", "x" * 63])
def test_dns_label_app_names_are_valid(app: str):
    assert validate_app_name(app) == app


@pytest.mark.parametrize("app", ["", "Shop", "-shop", "shop-", "shop_2", "a.b", "x" * 64, "a:b"])
def test_other_app_names_are_refused_with_the_rule(app: str):
    with pytest.raises(UsageError, match="is not a DNS-1123 label"):
        validate_app_name(app)
