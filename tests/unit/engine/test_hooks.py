"""Hook instances: names per sync run, the identity label, which syncs run hooks, and which
objects may come without a name (`fleet.engine.plan.hooks`, `render.manifests`, `order`)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from fleet.engine.plan import order
from fleet.engine.plan.hooks import (
    HOOK_ID_LABEL,
    MAX_NAME,
    hook_identity,
    identity_of,
    instance_name,
    is_instance,
    name_instance,
    runs_hooks,
)
from fleet.engine.plan.prepare import prepare
from fleet.engine.plan.tracking import APP_LABEL, Owner
from fleet.engine.render.manifests import parse_manifests
from fleet.errors import OrderError, RenderError
from fleet.model import Manifest, ObjectRef, Trigger

ARGO = "argocd.argoproj.io/hook"
DNS_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def job(*, name: str = "", generate: str = "", notes: dict[str, str] | None = None) -> Manifest:
    meta: dict[str, Any] = {"namespace": "shop"}
    if name:
        meta["name"] = name
    if generate:
        meta["generateName"] = generate
    if notes:
        meta["annotations"] = dict(notes)
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {}}


def hook(generate: str = "migrate-", phase: str = "PreSync") -> Manifest:
    return job(generate=generate, notes={ARGO: phase})


# --- identity ---------------------------------------------------------------------------------


def test_the_identity_is_stable_and_fits_a_label_value() -> None:
    identity = hook_identity("shop", hook())
    assert identity == hook_identity("shop", hook())
    assert len(identity) <= 63 and re.fullmatch(r"[0-9a-f]+", identity)


@pytest.mark.parametrize(
    "other",
    [
        pytest.param(("billing", hook()), id="another app"),
        pytest.param(("shop", hook("seed-")), id="another generateName"),
        pytest.param(("shop", job(name="migrate-", notes={ARGO: "PreSync"})), id="a fixed name"),
        pytest.param(
            ("shop", {**hook(), "metadata": {**hook()["metadata"], "namespace": "web"}}),
            id="another namespace",
        ),
        pytest.param(("shop", {**hook(), "kind": "Pod", "apiVersion": "v1"}), id="another kind"),
    ],
)
def test_two_different_hooks_never_share_an_identity(other: tuple[str, Manifest]) -> None:
    assert hook_identity(*other) != hook_identity("shop", hook())


def test_a_presync_and_a_postsync_hook_may_share_a_generatename() -> None:
    assert hook_identity("shop", hook("db-", "PreSync")) != hook_identity(
        "shop", hook("db-", "PostSync")
    )


def test_two_hooks_that_would_be_one_are_an_error_naming_them() -> None:
    with pytest.raises(OrderError) as caught:
        prepare(
            [hook("db-"), hook("db-")],
            owner=Owner("shop", "u1"),
            namespace="shop",
            scope_of=lambda api_version, kind: True,
            revision="abc1234",
            run_id="r",
        )
    assert str(caught.value).startswith("Job/shop/db-* is declared twice")


def test_the_identity_takes_the_default_namespace_when_the_hook_names_none() -> None:
    bare = hook()
    del bare["metadata"]["namespace"]
    assert hook_identity("shop", bare, namespace="shop") == hook_identity("shop", hook())


# --- names --------------------------------------------------------------------------------------


def test_a_run_names_a_generatename_hook_the_same_way_every_time_and_the_next_run_anew() -> None:
    identity = hook_identity("shop", hook())
    one = instance_name("migrate-", identity=identity, run_id="run-1")
    assert one == instance_name("migrate-", identity=identity, run_id="run-1")
    assert one != instance_name("migrate-", identity=identity, run_id="run-2")
    assert one.startswith("migrate-") and DNS_NAME.fullmatch(one)


def test_two_hooks_of_one_run_get_different_names_even_with_one_prefix() -> None:
    a = instance_name("job-", identity=hook_identity("shop", hook("job-")), run_id="r")
    b = instance_name("job-", identity=hook_identity("billing", hook("job-")), run_id="r")
    assert a != b


def test_a_long_prefix_is_cut_so_the_name_fits_a_label_value() -> None:
    name = instance_name("x" * 80, identity="i", run_id="r")
    assert len(name) == MAX_NAME and name.startswith("x" * 50)


def test_name_instance_labels_every_hook_and_names_only_generatename_ones() -> None:
    generated = name_instance(hook(), app="shop", run_id="r")
    assert generated["metadata"]["name"].startswith("migrate-")
    assert "generateName" not in generated["metadata"]
    assert identity_of(generated) == hook_identity("shop", hook())

    fixed = job(name="migrate", notes={ARGO: "PreSync"})
    named = name_instance(fixed, app="shop", run_id="r")
    assert named["metadata"]["name"] == "migrate"
    assert named["metadata"]["labels"] == {HOOK_ID_LABEL: hook_identity("shop", fixed)}
    assert "labels" not in fixed["metadata"]  # the caller's object is left alone


def test_prepare_names_hooks_for_the_run_and_marks_them_like_every_object() -> None:
    objects = [hook(), job(name="plain")]

    def run(run_id: str) -> list[Manifest]:
        return prepare(
            objects,
            owner=Owner("shop", "u1"),
            namespace="shop",
            scope_of=lambda api_version, kind: True,
            revision="abc1234def",
            run_id=run_id,
        )

    first, plain = run("one")
    assert first == run("one")[0]  # the dry-run and the apply of one run agree
    assert first["metadata"]["name"] != run("two")[0]["metadata"]["name"]
    assert first["metadata"]["labels"][APP_LABEL] == "shop"
    assert HOOK_ID_LABEL in first["metadata"]["labels"]
    assert HOOK_ID_LABEL not in plain["metadata"]["labels"]
    assert order.plan([first, plain]).waves[0].steps[0].ref == ObjectRef.of(first)


def test_live_hook_instances_are_recognised_by_label_or_annotation() -> None:
    assert is_instance(name_instance(hook(), app="shop", run_id="r"))
    assert is_instance(job(name="migrate", notes={ARGO: "PostSync"}))  # before labels existed
    assert not is_instance(job(name="worker"))


# --- which syncs run hooks --------------------------------------------------------------------


@pytest.mark.parametrize("trigger", [Trigger.MANUAL, Trigger.CLI, Trigger.ROLLBACK])
def test_a_sync_a_person_asked_for_runs_hooks_even_with_nothing_to_apply(
    trigger: Trigger,
) -> None:
    assert runs_hooks(trigger, applies=False)


@pytest.mark.parametrize(
    "trigger", [Trigger.INTERVAL, Trigger.WEBHOOK, Trigger.SELF_HEAL, Trigger.RETRY]
)
def test_an_automated_sync_runs_hooks_only_when_it_applies_something(trigger: Trigger) -> None:
    assert not runs_hooks(trigger, applies=False)
    assert runs_hooks(trigger, applies=True)


def test_a_retry_of_a_failed_sync_runs_hooks_with_nothing_left_to_apply() -> None:
    assert runs_hooks(Trigger.INTERVAL, applies=False, retry=True)


def test_a_plan_without_hooks_keeps_every_other_step_and_no_wait_on_a_hook() -> None:
    config: Manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "shop", "annotations": {ARGO: "Sync"}},
    }
    deploy: Manifest = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "template": {"spec": {"volumes": [{"name": "c", "configMap": {"name": "settings"}}]}}
        },
    }
    failing = job(name="notify", notes={ARGO: "SyncFail"})
    planned = order.plan([job(name="migrate", notes={ARGO: "PreSync"}), config, deploy, failing])
    assert len(planned.waves) == 2 and planned.sync_fail
    stripped = order.without_hooks(planned)
    assert [s.ref.name for w in stripped.waves for s in w.steps] == ["web"]
    assert stripped.sync_fail == ()
    assert all(not s.after for w in stripped.waves for s in w.steps)
    assert {s.ref.name for s in order.hook_steps(planned)} == {"migrate", "settings", "notify"}


# --- rendering ----------------------------------------------------------------------------------

NAMELESS = """apiVersion: batch/v1
kind: Job
metadata:
  generateName: migrate-
{notes}spec: {{}}
"""


@pytest.mark.parametrize(
    "notes",
    [
        "  annotations: {argocd.argoproj.io/hook: PreSync}\n",
        "  annotations: {gitfleet.io/hook: PostSync}\n",
        "  annotations: {helm.sh/hook: pre-install}\n",
    ],
    ids=["argo", "gitfleet", "helm"],
)
def test_a_hook_may_have_generatename_instead_of_a_name(notes: str) -> None:
    [obj] = parse_manifests("app/migrate.yaml", NAMELESS.format(notes=notes).encode())
    assert obj["metadata"] == {
        "generateName": "migrate-",
        "annotations": obj["metadata"]["annotations"],
    }


@pytest.mark.parametrize(
    "notes",
    ["", "  annotations: {helm.sh/hook: crd-install}\n"],
    ids=["no annotation", "helm crd-install is no hook"],
)
def test_an_object_that_is_no_hook_needs_a_name_even_with_generatename(notes: str) -> None:
    with pytest.raises(RenderError) as caught:
        parse_manifests("app/migrate.yaml", NAMELESS.format(notes=notes).encode())
    text = str(caught.value)
    assert text.startswith("app/migrate.yaml document 1: Job has metadata.generateName")
    assert "only hooks" in text and "give it a metadata.name" in text
