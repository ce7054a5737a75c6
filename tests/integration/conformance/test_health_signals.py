"""Health signals on the testbed: what has none, what waits for a controller, "not yet" versus
"never", and the per-app Ingress choice.

- A custom resource with no status whose CRD declares no status subresource (many operators'
  configuration kinds) has no health signal: it holds no wave, the app is Healthy, and the
  object says "no health signal". With a status subresource it waits for its controller, and
  with none installed the wave times out naming it.
- A Deployment whose pods cannot be scheduled says why (the scheduler's Unschedulable reason,
  read from its pods), and so does one whose containers cannot start (ImagePullBackOff,
  CrashLoopBackOff: kwok never reports those, so the test plays the kubelet of a node kwok does
  not run); one whose progress deadline passes fails its wave at once, as does a Job that
  failed, with the Job's reason, instead of waiting for the timeout.
- An Ingress without an address is Healthy by default, its message saying so; an app with
  `ingressNeedsAddress` waits for the address (Argo CD's rule) before its next wave.

Each runs through `gitfleet sync`'s engine (`fleet.engine.sync.run`); the no-signal app, the
Ingress option and the rollout that cannot finish also through the fleet (the app record, a real
worker, the instance status).
On the testbed kube-scheduler places pods on kwok nodes and kube-controller-manager runs the
Deployment and Job controllers, so the conditions read here are the real controllers'.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from fleet.control.registry.records import RetryPolicy
from fleet.engine.contract import ResourceResult, SyncResult
from fleet.engine.health.assess import HealthOptions
from fleet.kube.client import KubeClient
from fleet.model import Health, ObjectRef, SyncStatus
from tests.integration.engine.sync_helpers import new_group, scenario_for
from tests.support import manifests as m
from tests.support.fleet import FleetEnv

NO_NODE = "gitfleet.test/no-such-node"


def crd(group: str, *, status_subresource: bool) -> str:
    """Widget's CRD, with or without a status subresource."""
    text = m.widget_crd(group)
    return text if status_subresource else text.replace("      subresources: {status: {}}\n", "")


def later(name: str = "later") -> str:
    """A ConfigMap in wave 1: it is applied only once wave 0 has settled."""
    return m.configmap(name, extra_meta='  annotations:\n    gitfleet.io/sync-wave: "1"\n')


def stuck_deployment(name: str, *, deadline: int | None = None) -> str:
    """A Deployment whose pods no node matches; with `deadline`, its progressDeadlineSeconds."""
    text = m.deployment(name).replace(
        "      containers:\n", f"      nodeSelector: {{{NO_NODE}: 'true'}}\n      containers:\n"
    )
    if deadline is not None:
        text = text.replace(
            "  replicas: 1\n", f"  replicas: 1\n  progressDeadlineSeconds: {deadline}\n"
        )
    return text


def failing_job(name: str) -> str:
    """A Job whose pod is never scheduled, so it fails at its activeDeadlineSeconds."""
    return f"""apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
spec:
  activeDeadlineSeconds: 2
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      nodeSelector: {{{NO_NODE}: 'true'}}
      containers:
        - name: run
          image: example.com/{name}:1
"""


def ingress(name: str) -> str:
    return f"""apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: {name}
spec:
  rules:
    - host: {name}.example.com
      http:
        paths:
          - path: /
            pathType: Prefix
            backend: {{service: {{name: {name}, port: {{number: 80}}}}}}
"""


def entry(result: SyncResult, kind: str, name: str) -> ResourceResult:
    return next(r for r in result.resources if r.ref.kind == kind and r.ref.name == name)


# -- no health signal, and waiting for a controller -------------------------------------------


def test_a_custom_resource_without_status_or_status_subresource_has_no_health_signal(
    tmp_path: Path, kube: KubeClient, namespace: str
) -> None:
    s = scenario_for(tmp_path, kube, namespace)
    group = new_group()
    s.repo.commit(
        {
            "app/crd.yaml": crd(group, status_subresource=False),
            "app/w.yaml": m.widget(group, "w1", wave=0),
            "app/later.yaml": later(),
        }
    )

    started = time.monotonic()
    result = s.sync(timeout=30.0)

    assert result.error == "", result.error
    assert time.monotonic() - started < 20, "the wave waited on an object with no signal"
    assert result.sync_status == SyncStatus.SYNCED
    assert result.health == Health.HEALTHY
    widget = entry(result, "Widget", "w1")
    assert widget.health == Health.HEALTHY
    assert widget.message.startswith("no health signal: ")
    assert "declares no status subresource" in widget.message
    assert s.get(f"{group}/v1", "Widget", "w1") is not None
    assert s.get("v1", "ConfigMap", "later") is not None  # wave 1 ran


def test_a_custom_resource_whose_crd_declares_status_waits_and_times_out_naming_it(
    tmp_path: Path, kube: KubeClient, namespace: str
) -> None:
    s = scenario_for(tmp_path, kube, namespace)
    group = new_group()
    s.repo.commit(
        {
            "app/crd.yaml": crd(group, status_subresource=True),
            "app/w.yaml": m.widget(group, "w1", wave=0),
            "app/later.yaml": later(),
        }
    )

    result = s.sync(timeout=4.0)

    assert result.error_stage == "health"
    assert f"Widget/{namespace}/w1 is Unknown" in result.error
    assert "declares a status subresource" in result.error
    assert entry(result, "Widget", "w1").health == Health.UNKNOWN
    assert result.health != Health.HEALTHY
    assert s.get("v1", "ConfigMap", "later") is None  # wave 1 never applied


def test_an_app_without_custom_resource_health_gives_its_custom_resources_no_signal(
    tmp_path: Path, kube: KubeClient, namespace: str
) -> None:
    """Argo CD's behaviour, chosen per app: even a kind whose CRD declares a status subresource
    holds no wave when no controller reports one."""
    s = scenario_for(tmp_path, kube, namespace)
    group = new_group()
    s.repo.commit(
        {
            "app/crd.yaml": crd(group, status_subresource=True),
            "app/w.yaml": m.widget(group, "w1", wave=0),
            "app/later.yaml": later(),
        }
    )

    result = s.sync(timeout=20.0, health=HealthOptions(custom_resource_health=False))

    assert result.error == "", result.error
    widget = entry(result, "Widget", "w1")
    assert widget.health == Health.HEALTHY
    assert widget.message.startswith("no health signal: ")
    assert "customResourceHealth: false" in widget.message
    assert s.get("v1", "ConfigMap", "later") is not None


# -- "not yet" versus "never" -------------------------------------------------------------------


def test_an_unschedulable_deployment_says_why_with_the_schedulers_reason(
    tmp_path: Path, kube: KubeClient, namespace: str
) -> None:
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit({"app/web.yaml": stuck_deployment("web")})

    result = s.sync(timeout=6.0)

    assert result.error_stage == "health"
    line = next(x for x in result.error.splitlines() if f"Deployment/{namespace}/web" in x)
    assert "Unschedulable" in line, line
    assert "didn't match Pod's node affinity/selector" in line, line
    web = entry(result, "Deployment", "web")
    assert web.health == Health.PROGRESSING
    assert "Unschedulable" in web.message


def ghost_deployment(name: str) -> str:
    """A Deployment whose pods are bound to a node no kubelet runs: nothing but the test
    writes their status (the scheduler skips pods with a nodeName, kwok manages its own nodes)."""
    return m.deployment(name).replace(
        "      containers:\n", "      nodeName: ghost\n      containers:\n"
    )


class Kubelet:
    """Plays the kubelet of the ghost node: reports `reason` for each container of the pods of
    `app`, as a kubelet does when an image cannot be pulled or a container keeps crashing."""

    def __init__(self, kube: KubeClient, namespace: str, app: str, reason: str) -> None:
        self.kube = KubeClient(kube.config)
        self.namespace, self.app, self.reason = namespace, app, reason
        self.reported: set[str] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Kubelet:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        self.kube.close()

    def _run(self) -> None:
        while not self.stop.wait(0.1):
            pods = self.kube.list(
                "v1", "Pod", namespace=self.namespace, label_selector=f"app={self.app}"
            )
            for pod in pods:
                if pod["metadata"]["name"] in self.reported:
                    continue
                waiting = {"reason": self.reason, "message": f"{self.reason} reported by the test"}
                container = {
                    "name": "app",
                    "ready": False,
                    "restartCount": 3 if self.reason == "CrashLoopBackOff" else 0,
                    "image": f"example.com/{self.app}:1",
                    "imageID": "",
                    "state": {"waiting": waiting},
                }
                self.kube.patch_status(pod, {"phase": "Pending", "containerStatuses": [container]})
                self.reported.add(pod["metadata"]["name"])


@pytest.mark.parametrize("reason", ["ImagePullBackOff", "CrashLoopBackOff"])
def test_a_deployment_whose_containers_cannot_start_names_the_kubelets_reason(
    tmp_path: Path, kube: KubeClient, namespace: str, reason: str
) -> None:
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit({"app/web.yaml": ghost_deployment("web")})

    with Kubelet(kube, namespace, "web", reason) as kubelet:
        result = s.sync(timeout=6.0)

    assert kubelet.reported, "no pod was created"
    assert result.error_stage == "health"
    line = next(x for x in result.error.splitlines() if f"Deployment/{namespace}/web" in x)
    assert f"container app waiting: {reason}: {reason} reported by the test" in line, line
    assert reason in entry(result, "Deployment", "web").message


def test_a_deployment_past_its_progress_deadline_fails_the_wave_at_once(
    tmp_path: Path, kube: KubeClient, namespace: str
) -> None:
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit({"app/web.yaml": stuck_deployment("web", deadline=2), "app/later.yaml": later()})

    started = time.monotonic()
    result = s.sync(timeout=90.0)
    took = time.monotonic() - started

    assert "progress deadline exceeded" in result.error, result.error
    assert "Unschedulable" in result.error  # and the cause, read from its pod
    assert took < 30, f"waited {took:.0f}s of a 90s timeout for a rollout that cannot finish"
    assert entry(result, "Deployment", "web").health == Health.DEGRADED
    assert s.get("v1", "ConfigMap", "later") is None


def test_a_failed_job_fails_the_wave_at_once_with_its_reason(
    tmp_path: Path, kube: KubeClient, namespace: str
) -> None:
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit({"app/job.yaml": failing_job("migrate"), "app/later.yaml": later()})

    started = time.monotonic()
    result = s.sync(timeout=90.0)
    took = time.monotonic() - started

    assert f"Job/{namespace}/migrate" in result.error, result.error
    assert "DeadlineExceeded" in result.error  # the Job's own reason
    assert took < 30, f"waited {took:.0f}s for a Job that had failed"
    assert entry(result, "Job", "migrate").health == Health.DEGRADED
    assert s.get("v1", "ConfigMap", "later") is None


# -- Ingress: Healthy without an address by default, or wait for one per app ---------------------


def test_an_ingress_without_an_address_is_healthy_by_default_and_says_so(
    tmp_path: Path, kube: KubeClient, namespace: str
) -> None:
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit({"app/ing.yaml": ingress("shop"), "app/later.yaml": later()})

    result = s.sync(timeout=20.0)

    assert result.error == "", result.error
    shop = entry(result, "Ingress", "shop")
    assert shop.health == Health.HEALTHY
    assert "no load balancer address yet" in shop.message
    assert "ingressNeedsAddress" in shop.message
    assert s.get("v1", "ConfigMap", "later") is not None


def test_an_app_that_needs_ingress_addresses_waits_for_one_before_its_next_wave(
    tmp_path: Path, kube: KubeClient, namespace: str
) -> None:
    s = scenario_for(tmp_path, kube, namespace)
    s.repo.commit({"app/ing.yaml": ingress("shop"), "app/later.yaml": later()})
    controller = IngressController(kube, namespace, "shop", after=1.5)

    with controller:
        result = s.sync(timeout=30.0, health=HealthOptions(ingress_needs_address=True))

    assert result.error == "", result.error
    assert controller.later_existed_before_address is False  # wave 1 waited for the address
    shop = entry(result, "Ingress", "shop")
    assert shop.health == Health.HEALTHY
    assert "10.1.2.3" in shop.message


class IngressController:
    """Plays an ingress controller: `after` seconds after the Ingress appears it publishes an
    address, noting whether the next wave's ConfigMap existed before it did."""

    def __init__(self, kube: KubeClient, namespace: str, name: str, *, after: float) -> None:
        self.kube = KubeClient(kube.config)
        self.ref = ObjectRef("networking.k8s.io", "v1", "Ingress", namespace, name)
        self.later = ObjectRef("", "v1", "ConfigMap", namespace, "later")
        self.after = after
        self.later_existed_before_address: bool | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> IngressController:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        self.kube.close()

    def _run(self) -> None:
        while not self.stop.wait(0.1):
            live = self.kube.get(self.ref)
            if live is None:
                continue
            if self.stop.wait(self.after):
                return
            self.later_existed_before_address = self.kube.get(self.later) is not None
            self.kube.patch_status(live, {"loadBalancer": {"ingress": [{"ip": "10.1.2.3"}]}})
            return


# -- through the fleet ---------------------------------------------------------------------------


def test_through_the_fleet_no_signal_holds_nothing_and_the_ingress_option_is_the_apps(
    fleet: FleetEnv,
) -> None:
    cluster = next(iter(fleet.clusters))
    plain, strict = fleet.app_name(0), fleet.app_name(1)
    files: dict[str, str | bytes | None] = {}
    for name in (plain, strict):
        group = new_group()  # each app declares its own CRD
        files[f"apps/{name}/crd.yaml"] = crd(group, status_subresource=False)
        files[f"apps/{name}/w.yaml"] = m.widget(group, "w1", wave=0)
        files[f"apps/{name}/ing.yaml"] = ingress("shop")
        files[f"apps/{name}/later.yaml"] = later()
    fleet.repo.commit(files)
    fleet.add_app(plain, cluster)
    fleet.add_app(strict, cluster, ingress_needs_address=True)
    fleet.worker_thread("w1")

    answer = fleet.sync_and_wait(plain, cluster)
    assert (answer["result"], answer["sync_status"]) == ("succeeded", "Synced"), answer
    status = fleet.status(plain, cluster)
    assert status.sync_status == SyncStatus.SYNCED
    assert status.health == Health.HEALTHY
    messages = {(r.kind, r.name): r.message for r in status.resources}
    assert messages[("Widget", "w1")].startswith("no health signal: ")
    assert "no load balancer address yet" in messages[("Ingress", "shop")]

    kube = fleet.clusters[cluster].client()
    try:
        with IngressController(kube, strict, "shop", after=1.5) as controller:
            answer = fleet.sync_and_wait(strict, cluster)
    finally:
        kube.close()
    assert (answer["result"], answer["sync_status"]) == ("succeeded", "Synced"), answer
    assert controller.later_existed_before_address is False  # the next wave waited for it
    status = fleet.status(strict, cluster)
    assert status.health == Health.HEALTHY
    shop = next(r for r in status.resources if r.kind == "Ingress")
    assert "10.1.2.3" in shop.message


def test_through_the_fleet_a_rollout_that_cannot_finish_fails_at_once_and_says_why(
    fleet: FleetEnv,
) -> None:
    cluster = next(iter(fleet.clusters))
    app = fleet.app_name(0)
    fleet.repo.commit(
        {
            f"apps/{app}/stuck.yaml": stuck_deployment("stuck", deadline=2),
            f"apps/{app}/pending.yaml": stuck_deployment("pending"),
            f"apps/{app}/later.yaml": later(),
        }
    )
    fleet.add_app(app, cluster, timeout_s=90.0, retry=RetryPolicy(limit=0))
    fleet.worker_thread("w1")

    started = time.monotonic()
    answer = fleet.sync_and_wait(app, cluster)
    took = time.monotonic() - started

    assert answer["result"] != "succeeded", answer
    assert "progress deadline exceeded" in answer["error"], answer["error"]
    assert took < 45, f"the fleet waited {took:.0f}s of a 90s timeout"
    status = fleet.status(app, cluster)
    assert status.health != Health.HEALTHY
    found = {r.name: r for r in status.resources if r.kind == "Deployment"}
    assert found["stuck"].health == Health.DEGRADED
    assert "Unschedulable" in found["stuck"].message
    assert found["pending"].health == Health.PROGRESSING
    assert "Unschedulable" in found["pending"].message  # "not yet", with the scheduler's reason
    assert fleet.live(cluster, ObjectRef("", "v1", "ConfigMap", app, "later")) is None
