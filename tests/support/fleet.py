"""A whole fleet for one test: a Redis key prefix, the store, a git server, clusters, workers.

Each `FleetEnv` uses its own key prefix (and so its own shard queues), its own encryption key,
and app names unique to the test, so tests share the session's redis-server and testbed
without seeing each other. Workers run in-process as threads (`worker_thread`) or as real
processes (`worker_process`, so a test can SIGKILL one); both are stopped on `close()`, before
the apps' namespaces are deleted, so no self-heal chases the cleanup.

`PodReadiness` stands in for a kubelet on the testbed's fake nodes. kwok runs there without
`--node-lease-duration-seconds`, so its nodes miss heartbeats and flap NotReady for a few
seconds about once a minute; the node lifecycle controller then sets every pod's Ready
condition to False and nothing sets it back, so a Deployment older than the last flap can never
be Available again. Fleet tests sync the same Deployment several times over a minute, so while
the testbed has that gap the stand-in restores Ready on pods whose containers are ready.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet
from redis import Redis

from deploy.testbed.process import wait_for
from fleet.control.keys import Keys, Queues
from fleet.control.registry.records import (
    AppDestination,
    AppRecord,
    AppSource,
    ClusterCredentials,
    ClusterRecord,
    SyncPolicy,
)
from fleet.control.registry.secrets import SecretBox
from fleet.control.registry.store import Store
from fleet.control.registry.syncrecords import InstanceStatus
from fleet.control.routing.dispatch import Dispatcher
from fleet.engine.inventory import InventoryStore
from fleet.errors import FleetError
from fleet.model import ObjectRef, Trigger
from tests.support import manifests as m
from tests.support.gitrepo import GitRepo
from tests.support.gitserver import GitHttpServer
from worker.journal import Entry, Journal
from worker.process import WorkerProcess
from worker.settings import WorkerSettings

ROOT = Path(__file__).resolve().parents[2]
FAST = {"ttl": 2.0, "lease_ttl": 4.0, "debounce": 0.5}
INSECURE_GIT_HOSTS = "127.0.0.1"  # the test git servers: plain http on the loopback


def settings_ref(namespace: str) -> ObjectRef:
    """The ConfigMap `settings` that `FleetEnv.commit_apps` writes for every app."""
    return ObjectRef("", "v1", "ConfigMap", namespace, "settings")


class PodReadiness:
    """Set Ready back to True on pods whose containers are ready (see the module docstring)."""

    def __init__(self, env: FleetEnv) -> None:
        self.env = env
        self.fixed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="pod-readiness", daemon=True)

    def start(self) -> PodReadiness:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        clients = {name: c.client() for name, c in self.env.clusters.items()}
        try:
            while not self._stop.wait(0.5):
                for _, cluster, namespace in list(self.env.created):
                    self._restore(clients[cluster], namespace)
        finally:
            for client in clients.values():
                client.close()

    def _restore(self, kube: Any, namespace: str) -> None:
        try:
            pods = kube.list("v1", "Pod", namespace=namespace)
        except FleetError:
            return
        for pod in pods:
            conditions = (pod.get("status") or {}).get("conditions") or []
            state = {c.get("type"): c.get("status") for c in conditions}
            if state.get("ContainersReady") == "True" and state.get("Ready") == "False":
                ready = [
                    {**c, "status": "True"} if c.get("type") == "Ready" else c for c in conditions
                ]
                with contextlib.suppress(FleetError):
                    kube.patch_status(pod, {"conditions": ready})
                    self.fixed += 1


class WorkerThread:
    """A worker run in this process (tests read its runtime and self-heal state directly)."""

    def __init__(self, settings: WorkerSettings) -> None:
        self.process = WorkerProcess(settings)
        self.thread = threading.Thread(
            target=self.process.run, kwargs={"logging_level": "WARNING"}, daemon=True
        )

    def start(self) -> WorkerThread:
        self.thread.start()
        if not self.process.started.wait(15):
            raise RuntimeError("worker thread did not start")
        return self

    def stop(self) -> None:
        self.process.stop()
        self.thread.join(timeout=60)


@dataclass
class FleetEnv:
    redis_url: str
    folder: Path
    prefix: str = field(default_factory=lambda: f"t{uuid.uuid4().hex[:8]}")
    secret_key: str = field(default_factory=lambda: Fernet.generate_key().decode())
    threads: list[WorkerThread] = field(default_factory=list)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    created: list[tuple[str, str, str]] = field(default_factory=list)  # app, cluster, namespace

    def __post_init__(self) -> None:
        self.redis = Redis.from_url(self.redis_url)
        box = SecretBox.from_setting(self.secret_key)
        self.store = Store(self.redis, box, prefix=self.prefix)
        self.dispatcher = Dispatcher(self.redis, prefix=self.prefix)
        self.journal = Journal(self.redis, prefix=self.prefix)
        self.repo = GitRepo.create(self.folder / "repo")
        self.git = GitHttpServer().start()
        self.repo_url = self.git.add("apps", self.repo.path)
        self.clusters: dict[str, Any] = {}
        self.readiness: PodReadiness | None = None

    # -- registry -----------------------------------------------------------------------------

    def add_clusters(self, clusters: list[Any]) -> None:
        for cluster in clusters:
            credentials = ClusterCredentials(kubeconfig=cluster.kubeconfig.read_text())
            self.store.put_cluster(ClusterRecord(cluster.name, cluster.server), credentials)
            self.clusters[cluster.name] = cluster
        self.readiness = PodReadiness(self).start()

    def app_name(self, index: int) -> str:
        return f"{self.prefix}-app-{index}"

    def commit_apps(self, names: list[str], *, data: str = "k: v1") -> str:
        files: dict[str, str | bytes | None] = {}
        for name in names:
            files[f"apps/{name}/cm.yaml"] = m.configmap("settings", data)
            files[f"apps/{name}/deploy.yaml"] = m.deployment("web", configmap="settings")
        return self.repo.commit(files)

    def add_app(self, name: str, cluster: str, **policy: Any) -> AppRecord:
        record = AppRecord(
            name=name,
            source=AppSource(repo=self.repo_url, path=f"apps/{name}"),
            destination=AppDestination(namespace=name, cluster=cluster),
            sync_policy=replace(SyncPolicy(create_namespace=True, interval_s=3600), **policy),
        )
        self.created.append((name, cluster, name))
        return self.store.put_app(record, create=True)

    def sync_and_wait(
        self, app: str, cluster: str, trigger: Trigger = Trigger.MANUAL
    ) -> dict[str, Any]:
        """Request a sync of one instance and wait (up to 120 s) for its job's answer."""
        ref = self.dispatcher.request_sync(app, cluster, trigger=trigger)
        answer = self.dispatcher.wait(ref, timeout=120)
        assert answer is not None, f"no answer for the {trigger} sync of {app}@{cluster}"
        return answer

    # -- workers ------------------------------------------------------------------------------

    def settings(self, name: str, **overrides: Any) -> WorkerSettings:
        values = {**FAST, **overrides}
        return WorkerSettings(
            name=name,
            redis_url=self.redis_url,
            secret_key=self.secret_key,
            prefix=self.prefix,
            cache_root=self.folder / "cache",
            insecure_git_hosts=(INSECURE_GIT_HOSTS,),
            **values,
        )

    def worker_thread(self, name: str, **overrides: Any) -> WorkerThread:
        worker = WorkerThread(self.settings(name, **overrides)).start()
        self.threads.append(worker)
        return worker

    def worker_process(self, name: str) -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            "GITFLEET_REDIS_URL": self.redis_url,
            "GITFLEET_SECRET_KEY": self.secret_key,
            "GITFLEET_PREFIX": self.prefix,
            "GITFLEET_CACHE_DIR": str(self.folder / "cache"),
            "GITFLEET_INSECURE_GIT_HOSTS": INSECURE_GIT_HOSTS,
        }
        args = ["--name", name, "--ttl", str(FAST["ttl"]), "--lease-ttl", str(FAST["lease_ttl"])]
        log = (self.folder / f"{name}.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "worker", *args, "--log-level", "WARNING"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.processes.append(proc)
        return proc

    def worker_log(self, name: str) -> str:
        path = self.folder / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    # -- reading ------------------------------------------------------------------------------

    def status(self, app: str, cluster: str) -> InstanceStatus:
        """The instance's status; an empty one (Unknown) before its first write."""
        return self.store.get_status(app, cluster) or InstanceStatus()

    def entries(self, instance: str | None = None) -> list[Entry]:
        found = self.journal.entries()
        return [e for e in found if instance is None or e.instance == instance]

    def live(self, cluster: str, ref: ObjectRef) -> dict[str, Any] | None:
        kube = self.clusters[cluster].client()
        try:
            return kube.get(ref)
        finally:
            kube.close()

    def edit_by_hand(self, cluster: str, ref: ObjectRef, data: dict[str, str]) -> None:
        """Change the live object's data as `kubectl edit` would (its own field manager)."""
        kube = self.clusters[cluster].client()
        try:
            kube.request(
                "PATCH",
                kube.object_path(ref),
                body={"data": data},
                params={"fieldManager": "kubectl-edit"},
                content_type="application/merge-patch+json",
            )
        finally:
            kube.close()

    def idle(self) -> bool:
        """No pending or deferred sync is left."""
        return not self.dispatcher.pending.instances() and not self.redis.zcard(
            self.dispatcher.pending.deferred
        )

    # -- cleanup ------------------------------------------------------------------------------

    def close(self) -> None:
        if self.readiness is not None:
            self.readiness.stop()
        for worker in self.threads:
            worker.stop()
        for proc in self.processes:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
        self.git.stop()
        self._delete_namespaces()
        for pattern in (Keys(self.prefix).pattern, Queues(self.prefix).rq_pattern):
            for key in self.redis.scan_iter(pattern):
                self.redis.delete(key)
        self.redis.close()

    def _delete_namespaces(self) -> None:
        for app, cluster_name, namespace in self.created:
            if cluster_name not in self.clusters:
                continue  # a registry-only test: nothing was deployed
            kube = self.clusters[cluster_name].client()
            try:
                kube.delete(ObjectRef("", "v1", "Namespace", "", namespace))
                InventoryStore(kube).delete(app)
            finally:
                kube.close()


def wait_until(check: Any, *, timeout: float, what: str) -> float:
    """Poll `check` until truthy (`wait_for`, failing the test on timeout); return the seconds
    it took (for the figures tests print)."""
    start = time.monotonic()
    wait_for(check, what=what, timeout=timeout, error=AssertionError)
    return time.monotonic() - start
