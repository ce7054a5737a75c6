"""API requests per sync of a one-object app against a real API server (issue 16).

A worker in its steady state keeps a client per cluster (discovery cached) and a watch of each
kind its apps manage (the labelled index prune reads). A warm-up app plays the apps the worker
synced before; then the cold sync of a fenced one-object app is counted request by request: the
dry-run that stands in for the object's read when the inventory does not list it
(`fleet.engine.apply.Applier.probe`), the inventory's create (the sync's first lease presumes
there is none, and the create, refused with 409 when there is one, confirms it before the first
write of an object), and the apply. The guarantees stay: the dry-run still comes before the
first write, and the inventory is still written with the fencing token and a precondition
before any object is. A sync that is not the first still reads the inventory first.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fleet.engine import sync
from fleet.engine.caches import SyncCaches
from fleet.engine.contract import SyncResult
from fleet.engine.inventory import InventoryStore
from fleet.engine.plan.tracking import APP_LABEL, TRACKING_ANNOTATION
from fleet.kube.client import KubeClient
from fleet.kube.watch import Watch
from fleet.model import Health, Manifest, ObjectRef, SyncStatus, Trigger
from tests.integration.engine.sync_helpers import Scenario, scenario_for
from tests.support import manifests as m

COLD_BUDGET = 3
NOOP_BUDGET = 3


class RecordingKube(KubeClient):
    """A client that keeps every request it sends as `VERB[ dry-run] path`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sent: list[str] = []
        self._sent_lock = threading.Lock()

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, str] | None = None,
        content_type: str = "application/json",
        obj: str = "",
    ) -> Any:
        label = method + (" dry-run" if params and "dryRun" in params else "")
        with self._sent_lock:
            self.sent.append(f"{label} {path}")
        return super().request(
            method, path, body=body, params=params, content_type=content_type, obj=obj
        )

    def take(self) -> list[str]:
        """The requests sent since the last call."""
        with self._sent_lock:
            sent, self.sent = self.sent, []
        return sent


class WatchedConfigMaps:
    """`fleet.engine.prune.LabelledIndex` over a real watch of labelled ConfigMaps, as a
    worker's self-heal keeps one per (cluster, kind)."""

    def __init__(self, kube: KubeClient) -> None:
        resource = kube.resource_for("v1", "ConfigMap")
        self.watch = Watch(kube.config, resource, label_selector=APP_LABEL, index_label=APP_LABEL)
        self.thread = threading.Thread(target=self.watch.run, args=(lambda _: None,), daemon=True)

    def labelled(
        self, cluster: str, api_version: str, kind: str, app: str
    ) -> list[Manifest] | None:
        if (api_version, kind) != ("v1", "ConfigMap"):
            return None
        return self.watch.labelled(app)


@dataclass
class Guard:
    """The worker's lease as the engine sees it: a token, always current here."""

    token: int

    def __call__(self, step: str) -> None:
        return None

    def advance(self, past: int) -> None:
        self.token = max(self.token, past + 1)


@pytest.fixture
def watched(kube: KubeClient) -> Iterator[WatchedConfigMaps]:
    index = WatchedConfigMaps(kube)
    index.thread.start()
    deadline = time.monotonic() + 30
    while not index.watch.in_step and time.monotonic() < deadline:
        threading.Event().wait(0.05)  # the watch's first LIST
    assert index.watch.in_step, "the ConfigMap watch never listed"
    yield index
    index.watch.stop()
    index.thread.join(timeout=10)


@pytest.fixture
def worker(
    tmp_path: Path, kube: KubeClient, namespace: str, watched: WatchedConfigMaps
) -> Iterator[Scenario]:
    """A scenario whose client and caches live like a worker's, warmed by one app's sync."""
    recording = RecordingKube(kube.config)
    s = scenario_for(tmp_path, recording, namespace)
    s.caches.labelled = watched
    s.repo.commit({"warm/a.yaml": m.configmap("warm")})
    warm = _sync(s, "warm", app=f"warm-{namespace}", token=1)
    assert warm.error == "", warm.error
    yield s
    recording.close()


_tokens = itertools.count(2)


def _sync(
    s: Scenario, path: str = "app", *, token: int = 0, caches: SyncCaches | None = None, **kw: Any
) -> SyncResult:
    if "guard" not in kw:
        kw["guard"] = Guard(token or next(_tokens))
    request = s.request(path, prune=True, trigger=Trigger.INTERVAL, **kw)
    return sync.run(request, kube=s.kube, caches=caches or s.caches)


def _cm(namespace: str, name: str) -> ObjectRef:
    return ObjectRef("", "v1", "ConfigMap", namespace, name)


def _recorded(s: Scenario) -> RecordingKube:
    assert isinstance(s.kube, RecordingKube)
    return s.kube


def test_a_cold_sync_of_a_one_object_app_makes_three_requests(
    worker: Scenario, kube: KubeClient, namespace: str
) -> None:
    s, sent = worker, _recorded(worker)
    s.repo.commit({"app/one.yaml": m.configmap("one")})
    sent.take()

    cold = _sync(s, token=10, first_sync=True)
    requests = sent.take()
    print("cold sync requests:", *requests, sep="\n  ")
    assert cold.error == "", cold.error
    assert (cold.sync_status, cold.health) == (SyncStatus.SYNCED, Health.HEALTHY)
    inventory = f"/api/v1/namespaces/gitfleet-system/configmaps/gitfleet-inventory-{s.app}"
    assert requests == [
        f"PATCH dry-run /api/v1/namespaces/{namespace}/configmaps/one",
        "POST /api/v1/namespaces/gitfleet-system/configmaps",
        f"PATCH /api/v1/namespaces/{namespace}/configmaps/one",
    ], requests
    assert len(requests) <= COLD_BUDGET
    live = kube.get(_cm(namespace, "one"))
    assert live is not None and s.app in live["metadata"]["annotations"][TRACKING_ANNOTATION]
    stored = InventoryStore(kube).read(s.app)
    assert stored is not None and stored.fence == 10
    assert [e.ref.name for e in stored.entries] == ["one"]

    again = _sync(s, token=11)
    requests = sent.take()
    print("no-change sync requests:", *requests, sep="\n  ")
    assert again.error == "" and again.writes == 1, again  # the inventory, with the new token
    assert requests == [
        f"GET {inventory}",
        f"GET /api/v1/namespaces/{namespace}/configmaps/one",
        f"PATCH {inventory}",
    ], requests
    assert len(requests) <= NOOP_BUDGET
    newer = InventoryStore(kube).read(s.app)
    assert newer is not None and newer.fence == 11


def test_an_invalid_object_is_still_refused_before_anything_is_written(
    worker: Scenario, kube: KubeClient, namespace: str
) -> None:
    """The dry-run that replaced the read is still the validation of the whole sync."""
    s = worker
    bad = m.configmap("bad", extra_meta="  labels: {bad: 'no spaces allowed'}\n")
    s.repo.commit({"app/good.yaml": m.configmap("good"), "app/bad.yaml": bad})
    result = _sync(s, first_sync=True)  # the inventory claim waits for the validation too
    assert result.error_stage == "apply" and "dry-run refused" in result.error, result.error
    assert "ConfigMap/" in result.error and "bad" in result.error
    assert kube.get(_cm(namespace, "good")) is None, "written before the dry-run of the sync"
    assert InventoryStore(kube).read(s.app) is None


def test_an_object_another_app_owns_is_not_taken_over_by_a_cold_sync(
    worker: Scenario, kube: KubeClient, namespace: str
) -> None:
    """A new app's objects are dry-run rather than read; one that exists is read before
    anything is decided, so another app's object is refused, not taken over."""
    s = worker
    s.repo.commit({"other/shared.yaml": m.configmap("shared", "owner: other")})
    assert _sync(s, "other", app=f"other-{namespace}").error == ""
    s.repo.commit({"app/shared.yaml": m.configmap("shared", "owner: mine")})
    taken = _sync(s, first_sync=True)
    assert "tracked by" in taken.error and f"other-{namespace}" in taken.error, taken.error
    live = kube.get(_cm(namespace, "shared"))
    assert live is not None and live["data"] == {"owner": "other"}
    assert f"other-{namespace}" in live["metadata"]["annotations"][TRACKING_ANNOTATION]
