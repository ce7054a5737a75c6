"""Ordering of one sync: hook phases, waves, the dependency DAG inside a wave, prune order."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from fleet.engine.plan.order import (
    Phase,
    Step,
    SyncPlan,
    Wave,
    delete_policies,
    hook_phases,
    is_hook,
    kind_rank,
    plan,
    prune_order,
    references,
    sync_wave,
)
from fleet.engine.plan.references import Key
from fleet.errors import OrderError
from fleet.model import Manifest, ObjectRef
from tests.support.paths import DATA

DATA = DATA / "order"
API = {
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "CronJob": "batch/v1",
    "Job": "batch/v1",
    "Ingress": "networking.k8s.io/v1",
    "NetworkPolicy": "networking.k8s.io/v1",
    "Role": "rbac.authorization.k8s.io/v1",
    "RoleBinding": "rbac.authorization.k8s.io/v1",
    "ClusterRole": "rbac.authorization.k8s.io/v1",
    "ClusterRoleBinding": "rbac.authorization.k8s.io/v1",
    "CustomResourceDefinition": "apiextensions.k8s.io/v1",
    "MutatingWebhookConfiguration": "admissionregistration.k8s.io/v1",
    "APIService": "apiregistration.k8s.io/v1",
    "Widget": "example.com/v1",
}


def obj(kind: str, name: str, namespace: str = "", *, notes: Any = None, **body: Any) -> Manifest:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    if notes:
        meta["annotations"] = notes
    return {"apiVersion": API.get(kind, "v1"), "kind": kind, "metadata": meta, **body}


def deployment(name: str, namespace: str, pod_spec: dict[str, Any], **labels: str) -> Manifest:
    template = {"metadata": {"labels": labels or {"app": name}}, "spec": pod_spec}
    return obj("Deployment", name, namespace, spec={"template": template})


def ref(kind: str, name: str, namespace: str = "") -> ObjectRef:
    return ObjectRef.of(obj(kind, name, namespace))


def load(name: str) -> list[Manifest]:
    return [doc for doc in yaml.safe_load_all((DATA / name).read_text()) if doc]


def find(result: SyncPlan, kind: str, name: str) -> Step:
    steps = [s for w in result.waves for s in w.steps] + list(result.sync_fail)
    return next(s for s in steps if (s.ref.kind, s.ref.name) == (kind, name))


def wave_of(result: SyncPlan, phase: Phase, number: int = 0) -> Wave:
    return next(w for w in result.waves if (w.phase, w.number) == (phase, number))


def names(tier: tuple[Step, ...]) -> list[str]:
    return [str(step.ref) for step in tier]


# --- hooks -----------------------------------------------------------------------------------

ARGO, OURS, HELM = "argocd.argoproj.io/hook", "gitfleet.io/hook", "helm.sh/hook"


@pytest.mark.parametrize(
    ("notes", "phases", "hook"),
    [
        ({}, (Phase.SYNC,), False),
        ({ARGO: "PreSync"}, (Phase.PRE_SYNC,), True),
        ({ARGO: "Sync"}, (Phase.SYNC,), True),
        ({ARGO: "SyncFail"}, (Phase.SYNC_FAIL,), True),
        ({ARGO: "PostSync, PreSync"}, (Phase.PRE_SYNC, Phase.POST_SYNC), True),
        ({ARGO: "PreSync", OURS: "PostSync"}, (Phase.POST_SYNC,), True),
        ({ARGO: "Skip"}, (), True),
        ({ARGO: "PreSync,Skip"}, (), True),
        ({ARGO: "PostDelete"}, (), True),
        ({ARGO: "PreSync,PreDelete"}, (Phase.PRE_SYNC,), True),
        ({HELM: "pre-install,pre-upgrade"}, (Phase.PRE_SYNC,), True),
        ({HELM: "post-install"}, (Phase.POST_SYNC,), True),
        ({HELM: "post-upgrade"}, (Phase.POST_SYNC,), True),
        ({HELM: "test"}, (), True),
        ({HELM: "pre-delete"}, (), True),
        ({HELM: "crd-install"}, (Phase.SYNC,), False),
        ({HELM: "pre-install", ARGO: "PostSync"}, (Phase.POST_SYNC,), True),
    ],
)
def test_hook_annotations_choose_the_phases(notes: dict[str, str], phases: Any, hook: bool) -> None:
    job = obj("Job", "migrate", "shop", notes=notes)
    assert hook_phases(job) == phases
    assert is_hook(job) is hook


@pytest.mark.parametrize(
    ("notes", "bad"),
    [
        ({ARGO: "PreSnyc"}, "PreSnyc"),
        ({OURS: "Sync,Later"}, "Later"),
        ({HELM: "pre-instal"}, "pre-instal"),
    ],
)
def test_an_unknown_hook_type_is_an_error_naming_object_and_value(
    notes: dict[str, str], bad: str
) -> None:
    with pytest.raises(OrderError, match=rf"Job/shop/migrate: unknown hook type '{bad}'"):
        hook_phases(obj("Job", "migrate", "shop", notes=notes))


POLICY, OUR_POLICY = "argocd.argoproj.io/hook-delete-policy", "gitfleet.io/hook-delete-policy"


@pytest.mark.parametrize(
    ("notes", "policies"),
    [
        ({}, set()),
        ({ARGO: "PreSync"}, {"BeforeHookCreation"}),
        ({ARGO: "PreSync", POLICY: "HookSucceeded"}, {"HookSucceeded"}),
        ({ARGO: "PreSync", POLICY: "HookSucceeded", OUR_POLICY: "HookFailed"}, {"HookFailed"}),
        (
            {ARGO: "PreSync", POLICY: "HookFailed,BeforeHookCreation"},
            {"HookFailed", "BeforeHookCreation"},
        ),
        (
            {
                HELM: "pre-upgrade",
                "helm.sh/hook-delete-policy": "hook-succeeded,before-hook-creation",
            },
            {"HookSucceeded", "BeforeHookCreation"},
        ),
        ({POLICY: "HookSucceeded"}, set()),  # a policy on a normal resource means nothing
    ],
)
def test_hook_delete_policies_default_to_before_hook_creation(
    notes: dict[str, str], policies: set[str]
) -> None:
    assert delete_policies(obj("Job", "migrate", "shop", notes=notes)) == policies


def test_an_unknown_delete_policy_is_an_error() -> None:
    job = obj("Job", "migrate", "shop", notes={ARGO: "PreSync", POLICY: "WhenDone"})
    with pytest.raises(OrderError, match="Job/shop/migrate: unknown hook delete policy WhenDone"):
        delete_policies(job)


# --- waves -----------------------------------------------------------------------------------

WAVE, OUR_WAVE = "argocd.argoproj.io/sync-wave", "gitfleet.io/sync-wave"


@pytest.mark.parametrize(
    ("notes", "wave"),
    [
        ({}, 0),
        ({WAVE: "3"}, 3),
        ({WAVE: "-2"}, -2),
        ({WAVE: " 7 "}, 7),
        ({WAVE: "1", OUR_WAVE: "5"}, 5),
        ({"helm.sh/hook-weight": "-4"}, -4),
        ({"helm.sh/hook-weight": "-4", WAVE: "2"}, 2),
    ],
)
def test_sync_wave_prefers_gitfleet_then_argocd_then_helm_weight(
    notes: dict[str, str], wave: int
) -> None:
    assert sync_wave(obj("ConfigMap", "settings", "shop", notes=notes)) == wave


@pytest.mark.parametrize("value", ["one", "1.5", "", "2x"])
def test_a_wave_that_is_not_an_integer_is_an_error_naming_object_and_value(value: str) -> None:
    config = obj("ConfigMap", "settings", "shop", notes={WAVE: value})
    with pytest.raises(OrderError) as caught:
        plan([config])
    assert str(caught.value) == (
        f"ConfigMap/shop/settings: argocd.argoproj.io/sync-wave must be an integer, not {value!r}"
    )
    assert caught.value.obj == "ConfigMap/shop/settings"


def test_waves_run_presync_then_sync_then_postsync_each_ascending() -> None:
    objects = [
        obj("ConfigMap", "late", "shop", notes={WAVE: "5"}),
        obj("ConfigMap", "early", "shop", notes={WAVE: "-1"}),
        obj("ConfigMap", "plain", "shop"),
        obj("Job", "after", "shop", notes={ARGO: "PostSync"}),
        obj("Job", "first", "shop", notes={ARGO: "PreSync", WAVE: "1"}),
        obj("Job", "zeroth", "shop", notes={ARGO: "PreSync"}),
    ]
    result = plan(objects)
    assert [(w.phase, w.number, names(w.steps)) for w in result.waves] == [
        (Phase.PRE_SYNC, 0, ["Job/shop/zeroth"]),
        (Phase.PRE_SYNC, 1, ["Job/shop/first"]),
        (Phase.SYNC, -1, ["ConfigMap/shop/early"]),
        (Phase.SYNC, 0, ["ConfigMap/shop/plain"]),
        (Phase.SYNC, 5, ["ConfigMap/shop/late"]),
        (Phase.POST_SYNC, 0, ["Job/shop/after"]),
    ]


# --- the shop application --------------------------------------------------------------------


@pytest.fixture(scope="module")
def shop() -> SyncPlan:
    return plan(load("shop.yaml"))


def test_every_dependency_lies_in_an_earlier_tier(shop: SyncPlan) -> None:
    for wave in shop.waves:
        seen: set[ObjectRef] = set()
        for tier in wave.tiers:
            for step in tier:
                assert step.after <= seen, f"{step.ref} needs {step.after - seen}"
                assert step.wait_healthy <= step.after
            seen |= {step.ref for step in tier}


def test_hooks_land_in_their_phases_and_skip_hooks_are_not_applied(shop: SyncPlan) -> None:
    assert [(w.phase, w.number) for w in shop.waves] == [
        (Phase.PRE_SYNC, 0),
        (Phase.SYNC, 0),
        (Phase.POST_SYNC, 0),
    ]
    migrate = find(shop, "Job", "migrate")
    assert (migrate.phase, migrate.is_hook, migrate.delete_policies) == (
        Phase.PRE_SYNC,
        True,
        frozenset({"HookSucceeded"}),
    )
    assert [str(s.ref) for s in shop.sync_fail] == ["Job/shop/page-oncall"]
    assert shop.sync_fail[0].delete_policies == {"HookFailed"}
    assert shop.skipped == (ref("ConfigMap", "local-only", "shop"),)
    assert find(shop, "Deployment", "cart").delete_policies == frozenset()


def test_a_namespace_needed_by_a_presync_hook_moves_into_presync(shop: SyncPlan) -> None:
    presync = wave_of(shop, Phase.PRE_SYNC)
    assert [names(t) for t in presync.tiers] == [["Namespace/shop"], ["Job/shop/migrate"]]
    assert find(shop, "Namespace", "shop").is_hook is False
    assert all(s.ref.kind != "Namespace" for s in wave_of(shop, Phase.SYNC).steps)


def test_crds_and_objects_without_dependencies_start_in_the_first_tier(shop: SyncPlan) -> None:
    first = names(wave_of(shop, Phase.SYNC).tiers[0])
    assert first == [
        "ServiceAccount/shop/cart",
        "Secret/shop/db",
        "ConfigMap/shop/settings",
        "PersistentVolumeClaim/shop/cache",
        "CustomResourceDefinition/widgets.example.com",
        "Role/shop/reader",
        "Service/shop/cart",
        "Service/shop/guard",
        "Deployment/shop/guard",
    ]


def test_custom_resource_waits_for_its_crd_to_be_established(shop: SyncPlan) -> None:
    widget = find(shop, "Widget", "gadget")
    crd = ref("CustomResourceDefinition", "widgets.example.com")
    assert crd in widget.after
    assert widget.wait_healthy == {crd}


def test_deployment_comes_after_everything_its_pods_mount_and_use(shop: SyncPlan) -> None:
    cart = find(shop, "Deployment", "cart")
    assert cart.after == {
        ref("ConfigMap", "settings", "shop"),
        ref("Secret", "db", "shop"),
        ref("ServiceAccount", "cart", "shop"),
        ref("PersistentVolumeClaim", "cache", "shop"),
    }
    assert cart.wait_healthy == frozenset()


def test_ingress_comes_after_its_service_and_binding_after_role_and_account(shop: SyncPlan) -> None:
    assert find(shop, "Ingress", "shop").after == {ref("Service", "cart", "shop")}
    assert find(shop, "RoleBinding", "cart-reader").after == {
        ref("Role", "reader", "shop"),
        ref("ServiceAccount", "cart", "shop"),
    }


def test_webhook_waits_for_its_healthy_service_and_backing_deployment_and_goes_last(
    shop: SyncPlan,
) -> None:
    sync = wave_of(shop, Phase.SYNC)
    webhook = find(shop, "ValidatingWebhookConfiguration", "guard")
    backends = {ref("Service", "guard", "shop"), ref("Deployment", "guard", "shop")}
    assert webhook.wait_healthy == backends
    assert webhook.after == {s.ref for s in sync.steps} - {webhook.ref}
    assert sync.tiers[-1] == (webhook,)


def test_a_tier_runs_independent_objects_together_sorted_by_kind_order() -> None:
    objects = [obj("ConfigMap", f"c{i}", "shop", data={}) for i in (3, 1, 2)]
    objects += [obj("Service", "web", "shop"), obj("Secret", "tls", "shop")]
    objects.append(
        deployment("web", "shop", {"volumes": [{"name": "c", "configMap": {"name": "c1"}}]})
    )
    (wave,) = plan(objects).waves
    assert [names(t) for t in wave.tiers] == [
        [
            "Secret/shop/tls",
            "ConfigMap/shop/c1",
            "ConfigMap/shop/c2",
            "ConfigMap/shop/c3",
            "Service/shop/web",
        ],
        ["Deployment/shop/web"],
    ]


def test_references_to_objects_in_other_waves_or_outside_the_sync_add_no_edges() -> None:
    pod = {
        "serviceAccountName": "builder",
        "volumes": [{"name": "c", "configMap": {"name": "old"}}],
    }
    web = deployment("web", "shop", pod)
    web["metadata"]["annotations"] = {WAVE: "1"}
    result = plan([obj("ConfigMap", "old", "shop"), web])
    assert find(result, "Deployment", "web").after == frozenset()
    assert [w.number for w in result.waves] == [0, 1]


def test_a_crd_needed_in_an_earlier_wave_moves_to_that_wave() -> None:
    crd = obj(
        "CustomResourceDefinition",
        "widgets.example.com",
        spec={"group": "example.com", "names": {"kind": "Widget"}},
    )
    widget = obj("Widget", "gadget", "shop", notes={WAVE: "-1"})
    result = plan([crd, widget])
    (wave,) = result.waves
    assert wave.number == -1
    assert [names(t) for t in wave.tiers] == [
        ["CustomResourceDefinition/widgets.example.com"],
        ["Widget/shop/gadget"],
    ]


def test_pod_policies_of_a_namespace_come_before_its_workloads_only() -> None:
    objects = [
        obj("NetworkPolicy", "deny-all", "shop"),
        obj("LimitRange", "defaults", "shop"),
        deployment("web", "shop", {}),
        deployment("web", "other", {}),
        obj("ConfigMap", "settings", "shop"),
    ]
    result = plan(objects)
    web = [s for s in result.waves[0].steps if s.ref.name == "web"]
    assert {str(s.ref): s.after for s in web} == {
        "Deployment/shop/web": {
            ref("NetworkPolicy", "deny-all", "shop"),
            ref("LimitRange", "defaults", "shop"),
        },
        "Deployment/other/web": frozenset(),
    }
    assert find(result, "ConfigMap", "settings").after == frozenset()


def test_apiservice_waits_for_its_service_and_the_workloads_it_selects() -> None:
    server = deployment("metrics", "kube-system", {}, app="metrics")
    stranger = deployment("other", "kube-system", {}, app="other")
    service = obj("Service", "metrics", "kube-system", spec={"selector": {"app": "metrics"}})
    api = obj(
        "APIService",
        "v1beta1.metrics.k8s.io",
        spec={"service": {"name": "metrics", "namespace": "kube-system"}},
    )
    step = find(plan([api, service, server, stranger]), "APIService", "v1beta1.metrics.k8s.io")
    backends = {
        ref("Service", "metrics", "kube-system"),
        ref("Deployment", "metrics", "kube-system"),
    }
    assert step.wait_healthy == step.after == backends


def test_a_dependency_cycle_is_an_error_that_lists_the_cycle() -> None:
    # Valid manifests cannot form a cycle under the inferred rules, contradicting ones can: a
    # CRD (wrongly) inside namespace x that defines the Namespace kind needs x, and x needs it.
    crd = obj(
        "CustomResourceDefinition",
        "namespaces.example",
        "x",
        spec={"group": "", "names": {"kind": "Namespace"}},
    )
    with pytest.raises(OrderError) as caught:
        plan([obj("ConfigMap", "fine", "y"), crd, obj("Namespace", "x")])
    assert str(caught.value) == (
        "dependency cycle in Sync wave 0: Namespace/x waits for "
        "CustomResourceDefinition/x/namespaces.example waits for Namespace/x"
    )


@pytest.mark.parametrize(
    "twin",
    [
        obj("ConfigMap", "settings", "shop", data={"other": "value"}),
        {**obj("ConfigMap", "settings", "shop"), "apiVersion": "v2"},
    ],
)
def test_an_object_declared_twice_is_an_error_naming_it(twin: Manifest) -> None:
    with pytest.raises(OrderError, match=r"^ConfigMap/shop/settings is declared twice"):
        plan([obj("ConfigMap", "settings", "shop"), obj("Secret", "settings", "shop"), twin])


def test_an_object_without_a_name_is_an_error_mentioning_generate_name() -> None:
    job = obj("Job", "", "shop", notes={ARGO: "PreSync"})
    job["metadata"]["generateName"] = "migrate-"
    with pytest.raises(OrderError, match=r"^Job/shop/migrate-\* uses generateName"):
        plan([job])


# --- reference inference ---------------------------------------------------------------------

POD_SPEC = {
    "serviceAccountName": "runner",
    "imagePullSecrets": [{"name": "registry"}],
    "initContainers": [{"name": "init", "envFrom": [{"configMapRef": {"name": "init-env"}}]}],
    "containers": [
        {
            "name": "app",
            "envFrom": [{"secretRef": {"name": "app-env"}}],
            "env": [
                {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "flags", "key": "a"}}},
                {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            ],
        }
    ],
    "volumes": [
        {
            "name": "p",
            "projected": {
                "sources": [{"secret": {"name": "certs"}}, {"configMap": {"name": "ca"}}]
            },
        },
        {"name": "s", "secret": {"secretName": "tokens"}},
        {"name": "d", "persistentVolumeClaim": {"claimName": "data"}},
        {"name": "e", "emptyDir": {}},
    ],
}
POD_REFS = {
    Key("", "ServiceAccount", "ns", "runner"),
    Key("", "Secret", "ns", "registry"),
    Key("", "ConfigMap", "ns", "init-env"),
    Key("", "Secret", "ns", "app-env"),
    Key("", "ConfigMap", "ns", "flags"),
    Key("", "Secret", "ns", "certs"),
    Key("", "ConfigMap", "ns", "ca"),
    Key("", "Secret", "ns", "tokens"),
    Key("", "PersistentVolumeClaim", "ns", "data"),
}
RBAC = "rbac.authorization.k8s.io"


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        (obj("Pod", "p", "ns", spec=POD_SPEC), POD_REFS),
        (deployment("d", "ns", POD_SPEC), POD_REFS),
        (
            obj(
                "CronJob",
                "c",
                "ns",
                spec={"jobTemplate": {"spec": {"template": {"spec": POD_SPEC}}}},
            ),
            POD_REFS,
        ),
        (obj("Pod", "p", "ns", spec={}), {Key("", "ServiceAccount", "ns", "default")}),
        (
            obj(
                "Ingress",
                "i",
                "ns",
                spec={
                    "defaultBackend": {"service": {"name": "fallback"}},
                    "tls": [{"secretName": "cert"}],
                    "rules": [{"http": {"paths": [{"backend": {"service": {"name": "web"}}}]}}],
                },
            ),
            {
                Key("", "Service", "ns", "fallback"),
                Key("", "Service", "ns", "web"),
                Key("", "Secret", "ns", "cert"),
            },
        ),
        (
            obj(
                "RoleBinding",
                "rb",
                "ns",
                roleRef={"kind": "ClusterRole", "name": "view"},
                subjects=[
                    {"kind": "ServiceAccount", "name": "a"},
                    {"kind": "ServiceAccount", "name": "b", "namespace": "other"},
                    {"kind": "User", "name": "jane"},
                ],
            ),
            {
                Key(RBAC, "ClusterRole", "", "view"),
                Key("", "ServiceAccount", "ns", "a"),
                Key("", "ServiceAccount", "other", "b"),
            },
        ),
        (
            obj("ClusterRoleBinding", "crb", roleRef={"kind": "ClusterRole", "name": "admin"}),
            {Key(RBAC, "ClusterRole", "", "admin")},
        ),
        (
            obj(
                "MutatingWebhookConfiguration",
                "m",
                webhooks=[
                    {
                        "name": "a",
                        "clientConfig": {"service": {"name": "hook", "namespace": "sys"}},
                    },
                    {"name": "b", "clientConfig": {"url": "https://example.com"}},
                ],
            ),
            {Key("", "Service", "sys", "hook")},
        ),
        (obj("ConfigMap", "c", "ns", data={"serviceAccountName": "x"}), set()),
    ],
    ids=[
        "pod",
        "deployment",
        "cronjob",
        "default-sa",
        "ingress",
        "rolebinding",
        "crb",
        "webhook",
        "configmap",
    ],
)
def test_references_find_what_an_object_names(manifest: Manifest, expected: set[Key]) -> None:
    assert references(manifest) == expected


# --- kind order and prune order --------------------------------------------------------------


def test_kind_rank_puts_namespaces_first_custom_resources_late_and_webhooks_last() -> None:
    kinds = ["ValidatingWebhookConfiguration", "Widget", "Deployment", "ConfigMap", "Namespace"]
    assert sorted(kinds, key=kind_rank) == list(reversed(kinds))
    assert kind_rank("MutatingWebhookConfiguration") > kind_rank("APIService")


def test_prune_order_deletes_highest_wave_first_then_reverse_kind_order() -> None:
    wave0 = [
        ref("Namespace", "shop"),
        ref("CustomResourceDefinition", "widgets.example.com"),
        ref("ConfigMap", "b", "shop"),
        ref("ConfigMap", "a", "shop"),
        ref("Deployment", "web", "shop"),
        ref("Widget", "gadget", "shop"),
        ref("MutatingWebhookConfiguration", "guard"),
        ref("ServiceAccount", "web", "shop"),
    ]
    batches = prune_order([(r, 0) for r in wave0] + [(ref("Service", "web", "shop"), 2)])
    assert [[str(r) for r in batch] for batch in batches] == [
        ["Service/shop/web"],
        ["MutatingWebhookConfiguration/guard"],
        ["Widget/shop/gadget"],
        ["Deployment/shop/web"],
        ["ConfigMap/shop/a", "ConfigMap/shop/b"],
        ["ServiceAccount/shop/web"],
        ["Namespace/shop"],
        ["CustomResourceDefinition/widgets.example.com"],
    ]


def test_prune_order_of_nothing_is_empty() -> None:
    assert prune_order([]) == []
