"""Ownership marks and per-object policies read from one object's labels and annotations."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest

from fleet.engine.plan.tracking import (
    APP_LABEL,
    TRACKING_ANNOTATION,
    Owner,
    Ownership,
    TrackingId,
    is_prune_disabled,
    is_self_heal_disabled,
    mark,
    owner_of,
    parse_tracking_id,
    prune_disabled_by,
    sync_options,
    tracking_id,
    validate_app_name,
    wants_replace,
)
from fleet.errors import UsageError
from fleet.model import Manifest, ObjectRef

CM = ObjectRef("", "v1", "ConfigMap", "shop", "settings")
DEPLOY = ObjectRef("apps", "v1", "Deployment", "shop", "cart")
ROLE = ObjectRef("rbac.authorization.k8s.io", "v1", "ClusterRole", "", "system:cart-reader")
UID = "0b7c1e0e-2f5a-4d0e-9a4f-6d2d1e2c6c11"
SHOP = Owner("shop", UID, "team-a")
OWNER = f"team-a/shop@{UID}"


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
        (CM, f"{OWNER}:/ConfigMap:shop/settings"),
        (DEPLOY, f"{OWNER}:apps/Deployment:shop/cart"),
        (ROLE, f"{OWNER}:rbac.authorization.k8s.io/ClusterRole:/system:cart-reader"),
    ],
    ids=["core-group", "named-group", "cluster-scoped-name-with-colon"],
)
def test_tracking_id_is_argo_cd_format_naming_project_app_and_uid(ref: ObjectRef, expected: str):
    assert tracking_id(SHOP, ref) == expected
    parsed = parse_tracking_id(expected)
    assert parsed == TrackingId("shop", ref.group, ref.kind, ref.namespace, ref.name, UID, "team-a")
    assert parsed is not None and parsed.names(ref) and parsed.owner == SHOP


@pytest.mark.parametrize(
    ("value", "owner"),
    [
        ("shop:/ConfigMap:shop/settings", Owner("shop")),
        (f"shop@{UID}:/ConfigMap:shop/settings", Owner("shop", UID)),
    ],
    ids=["legacy-without-uid", "uid-without-project"],
)
def test_shorter_tracking_ids_parse_with_what_they_name(value: str, owner: Owner):
    parsed = parse_tracking_id(value)
    assert parsed is not None and parsed.owner == owner and parsed.names(CM)
    assert tracking_id(owner, CM) == value


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
        "team-a/shop@:/ConfigMap:shop/settings",
        "a/b/shop@x:/ConfigMap:shop/settings",
        "team-a/@x:/ConfigMap:shop/settings",
        "shop@x@y:/ConfigMap:shop/settings",
    ],
)
def test_malformed_tracking_ids_parse_to_none(value: str):
    assert parse_tracking_id(value) is None


def test_mark_sets_label_and_annotation_on_a_copy_sharing_the_body():
    original = obj(DEPLOY, notes={"keep": "me"}, labels={"tier": "web"})
    before = copy.deepcopy(original)
    marked = mark(original, SHOP)
    assert original == before
    assert marked["metadata"]["labels"] == {"tier": "web", APP_LABEL: "shop"}
    assert marked["metadata"]["annotations"] == {
        "keep": "me",
        TRACKING_ANNOTATION: f"{OWNER}:apps/Deployment:shop/cart",
    }
    assert marked["data"] is original["data"]


def test_mark_works_without_labels_or_annotations():
    marked = mark(obj(CM), SHOP)
    assert owner_of(marked) == SHOP
    assert Ownership.of(SHOP).owns(marked, CM)


@pytest.mark.parametrize(
    ("notes", "owner"),
    [
        (None, None),
        ({TRACKING_ANNOTATION: f"{OWNER}:/ConfigMap:shop/settings"}, SHOP),
        ({TRACKING_ANNOTATION: " other:/ConfigMap:shop/settings "}, Owner("other")),
        ({TRACKING_ANNOTATION: "garbage"}, None),
        ({TRACKING_ANNOTATION: ""}, None),
        ({"argocd.argoproj.io/tracking-id": "shop:/ConfigMap:shop/settings"}, None),
    ],
    ids=["absent", "ours", "other-app-with-spaces", "malformed", "empty", "argo-annotation"],
)
def test_owner_is_the_app_named_by_a_well_formed_tracking_annotation(
    notes: dict[str, str] | None, owner: Owner | None
):
    assert owner_of(obj(CM, notes=notes)) == owner


LEGACY = "shop:/ConfigMap:shop/settings"
OLDER = "team-b/shop@11111111-2222-3333-4444-555555555555:/ConfigMap:shop/settings"


@pytest.mark.parametrize(
    ("annotation", "ref", "legacy", "expected"),
    [
        (f"{OWNER}:/ConfigMap:shop/settings", CM, (), True),
        (f"{OWNER}:/ConfigMap:shop/settings", replace(CM, version="v2"), (), True),
        (f"other@{UID}:/ConfigMap:shop/settings", CM, (), False),
        (OLDER, CM, (CM,), False),
        (f"{OWNER}:/ConfigMap:shop/original", CM, (), False),
        (f"{OWNER}:/ConfigMap:prod/settings", CM, (), False),
        (f"{OWNER}:/Secret:shop/settings", CM, (), False),
        (f"{OWNER}:example.com/ConfigMap:shop/settings", CM, (), False),
        (LEGACY, CM, (), False),
        (LEGACY, CM, (replace(CM, version="v9"),), True),
        (LEGACY, CM, (DEPLOY,), False),
        ("other:/ConfigMap:shop/settings", CM, (CM,), False),
        ("shop", CM, (CM,), False),
    ],
    ids=[
        "ours",
        "ours-at-another-version",
        "other-app-same-uid-text",
        "older-app-of-the-same-name",
        "copied-from-another-name",
        "copied-from-another-namespace",
        "other-kind",
        "other-group",
        "legacy-id-not-in-our-inventory",
        "legacy-id-in-our-inventory",
        "legacy-id-inventory-lists-another-object",
        "legacy-id-of-another-app",
        "malformed",
    ],
)
def test_owns_only_what_names_this_app_by_uid_and_this_object(
    annotation: str, ref: ObjectRef, legacy: tuple[ObjectRef, ...], expected: bool
):
    ownership = Ownership.of(SHOP, legacy)
    assert ownership.owns(obj(CM, notes={TRACKING_ANNOTATION: annotation}), ref) is expected


@pytest.mark.parametrize(
    ("annotation", "legacy", "expected"),
    [
        (None, (), None),
        (f"{OWNER}:/ConfigMap:shop/original", (), None),
        ("billing:/ConfigMap:shop/settings", (),
         "app billing (a tracking id from before apps had uids)"),
        (OLDER, (), "another app shop of project team-b "
         f"(uid 11111111-2222-3333-4444-555555555555), not this one (uid {UID})"),
        (LEGACY, (), "app shop (a tracking id from before apps had uids), and this app's "
         "inventory does not list it"),
        (LEGACY, (CM,), None),
    ],
    ids=["untracked", "ours-copied", "other-app", "older-app-same-name", "legacy", "legacy-listed"],
)  # fmt: skip
def test_other_owner_names_whoever_else_tracks_the_object(
    annotation: str | None, legacy: tuple[ObjectRef, ...], expected: str | None
):
    notes = {TRACKING_ANNOTATION: annotation} if annotation else None
    assert Ownership.of(SHOP, legacy).other_owner(obj(CM, notes=notes), CM) == expected


def test_owns_is_false_without_annotation_even_with_the_app_label():
    assert not Ownership.of(SHOP).owns(obj(CM, labels={APP_LABEL: "shop"}), CM)


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
