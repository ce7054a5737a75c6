"""Shared setup for sync scenario tests: a git repo, caches and a request builder."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fleet.engine import sync
from fleet.engine.caches import SyncCaches
from fleet.engine.contract import SyncRequest, SyncResult
from fleet.errors import KubeApiError
from fleet.kube.client import KubeClient
from fleet.model import Manifest, ObjectRef
from tests.support.gitrepo import GitRepo


@dataclass
class Scenario:
    repo: GitRepo
    kube: KubeClient
    namespace: str
    caches: SyncCaches

    @property
    def app(self) -> str:
        """Unique per test: inventories live in the shared cluster."""
        return f"shop-{self.namespace}"

    def request(self, path: str = "app", **kw: Any) -> SyncRequest:
        base = SyncRequest(
            app=kw.pop("app", self.app),
            repo=self.repo.url,
            path=path,
            namespace=self.namespace,
            timeout=kw.pop("timeout", 60.0),
        )
        return replace(base, **kw)

    def sync(self, path: str = "app", **kw: Any) -> SyncResult:
        return sync.run(self.request(path, **kw), kube=self.kube, caches=self.caches)

    @staticmethod
    def kube_ref_of(obj: Manifest) -> ObjectRef:
        return ObjectRef.of(obj)

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Manifest | None:
        group, _, version = api_version.rpartition("/")
        ns = self.namespace if namespace is None else namespace
        return self.kube.get(ObjectRef(group, version, kind, ns, name))


def new_group() -> str:
    return f"w{uuid.uuid4().hex[:8]}.example.com"


class WidgetController:
    """Plays a controller in tests: marks Widgets Ready, optionally after a check."""

    def __init__(self, kube: KubeClient, group: str, namespace: str) -> None:
        self.kube = KubeClient(kube.config)
        self.group = group
        self.namespace = namespace
        self.stop = threading.Event()
        self.observations: list[Any] = []
        self.before_ready = lambda widget: None
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> WidgetController:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=10)

    def _loop(self) -> None:
        while not self.stop.wait(0.2):
            try:
                self._mark_ready()
            except KubeApiError:  # e.g. 429 while the API server sets up a new CRD's storage
                continue

    def _mark_ready(self) -> None:
        for widget in self._widgets():
            if (widget.get("status") or {}).get("conditions"):
                continue
            self.observations.append(self.before_ready(widget))
            ready = {"type": "Ready", "status": "True", "reason": "Done", "message": "ok"}
            self.kube.patch_status(widget, {"conditions": [ready]})

    def _widgets(self) -> Iterator[Manifest]:
        if not self.kube.has_kind(f"{self.group}/v1", "Widget"):
            self.kube.forget_discovery()
            return iter(())
        return iter(self.kube.list(f"{self.group}/v1", "Widget", namespace=self.namespace))


def scenario_for(tmp_path: Path, kube: KubeClient, namespace: str) -> Scenario:
    repo = GitRepo.create(tmp_path / "repo")
    return Scenario(repo, kube, namespace, SyncCaches.at(tmp_path / "cache"))
