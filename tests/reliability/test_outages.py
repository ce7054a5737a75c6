"""Outages handled as users expect (issue 12, item 3).

- A target API server that goes away: the instance's status says `ClusterUnreachable`, the
  retries back off (a handful of attempts, not a crash loop), and once the server is back the
  instance converges by itself, without a burst of syncs.
- A git remote that answers 503 or 401: the last applied state stays (nothing applied, nothing
  pruned) and the status names the remote and the HTTP status.
- SIGTERM: a worker drains its running sync and exits within `DRAIN_BOUND_S`; the sync is
  finished, by it or by another worker.

The API server is stopped for real (the testbed's own kube-apiserver process) and started again
with the same command line and certificates, so the session's testbed is whole afterwards.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet

from deploy.testbed import process, runner
from fleet.control.registry.records import AppSource, RetryPolicy
from fleet.errors import FleetError
from fleet.kube.client import KubeClient
from fleet.model import ObjectRef, SyncStatus, Trigger
from tests.support import manifests as m
from tests.support.fleet import ROOT, FleetEnv, settings_ref, wait_until
from tests.support.redis_server import RedisServer

DRAIN_BOUND_S = 30.0  # worker.process.DRAIN_TIMEOUT_S, the documented bound
FAST_RETRY = RetryPolicy(limit=30, backoff_s=1.0, factor=2.0, max_backoff_s=8.0)


# -- an API server outage -------------------------------------------------------------------


@contextlib.contextmanager
def apiserver_down(cluster: Any) -> Iterator[None]:
    """Stop `cluster`'s kube-apiserver; start it again (same command, same certificates)."""
    folder = Path(cluster.kubeconfig).parent.parent
    state = runner.TestbedState.load(folder)
    proc = next(
        p for p in state.procs if p.cluster == cluster.name and p.component == "kube-apiserver"
    )
    cmd = Path(f"/proc/{proc.pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    process.stop([proc], grace=20)
    try:
        yield
    finally:
        fresh = process.start(
            cluster.name, "kube-apiserver", [c.decode() for c in cmd], Path(proc.log)
        )
        state = runner.TestbedState.load(folder)
        state.procs = [fresh if p.pid == proc.pid else p for p in state.procs]
        state.save()
        process.wait_for(
            lambda: _answers(cluster), what="the apiserver to answer again", timeout=90
        )


def _answers(cluster: Any) -> bool:
    kube = KubeClient.from_kubeconfig(cluster.kubeconfig)
    try:
        kube.list("v1", "Namespace")
        return True
    except FleetError:
        return False
    finally:
        kube.close()


def test_cluster_outage_reports_unreachable_backs_off_and_resumes(
    fleet: FleetEnv, testbed: list[Any]
) -> None:
    cluster = testbed[-1].name
    app = fleet.app_name(1)
    fleet.commit_apps([app])
    # self-heal on: the watches fail during the outage and list again after it, which must not
    # turn into a burst of heal syncs
    fleet.add_app(app, cluster, automated=True, self_heal=True, retry=FAST_RETRY)
    fleet.worker_thread("w1")
    assert fleet.sync_and_wait(app, cluster)["result"] == "succeeded"
    instance = f"{app}@{cluster}"
    before = len(fleet.entries(instance))

    with apiserver_down(testbed[-1]):
        head = fleet.commit_apps([app], data="k: v2")
        fleet.dispatcher.request_sync(app, cluster, trigger=Trigger.MANUAL)
        wait_until(
            lambda: "ClusterUnreachable" in fleet.status(app, cluster).message,
            timeout=30,
            what="the status to say ClusterUnreachable",
        )
        status = fleet.status(app, cluster)
        assert cluster in status.message
        assert status.resources, "the last known resources are kept while unreachable"
        outage_started = time.monotonic()
        time.sleep(20)  # the outage itself: count what the worker does during it
        during = len(fleet.entries(instance)) - before
    returned = time.monotonic()
    # backoff 1, 2, 4, 8, 8 s: about 5 attempts in 20 s; a crash loop would make hundreds
    assert 2 <= during <= 7, f"{during} attempts in {returned - outage_started:.0f}s of outage"

    took = wait_until(
        lambda: (
            fleet.status(app, cluster).revision == head
            and fleet.status(app, cluster).sync_status == SyncStatus.SYNCED
        ),
        timeout=60,
        what="the instance to converge after the outage",
    )
    live = fleet.live(cluster, settings_ref(app))
    assert live is not None and live["data"] == {"k": "v2"}
    assert "ClusterUnreachable" not in fleet.status(app, cluster).message
    time.sleep(3)  # any storm would follow the first good sync at once
    after = len(fleet.entries(instance)) - before - during
    assert after <= 3, f"{after} syncs after the server came back (in {took:.0f}s)"
    print(f"outage: {during} attempts in 20s; back: converged in {took:.1f}s, {after} syncs")


# -- a git remote outage --------------------------------------------------------------------


class FaultyRemote:
    """An HTTP proxy in front of the test git server that can answer every request with an
    error status instead (503 for an outage, 401 for revoked credentials)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.failing: int | None = None
        remote = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._forward(None)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self._forward(self.rfile.read(length))

            def _forward(self, body: bytes | None) -> None:
                if remote.failing is not None:
                    self.send_response(remote.failing)
                    if remote.failing == 401:
                        self.send_header("WWW-Authenticate", 'Basic realm="git"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                headers = {
                    k: v
                    for k, v in self.headers.items()
                    if k.lower() in {"content-type", "accept", "git-protocol"}
                }
                request = urllib.request.Request(
                    remote.upstream + self.path, data=body, headers=headers, method=self.command
                )
                try:
                    with urllib.request.urlopen(request, timeout=30) as answer:
                        status, data, kind = answer.status, answer.read(), answer.headers
                except urllib.error.HTTPError as e:
                    status, data, kind = e.code, e.read(), e.headers
                self.send_response(status)
                self.send_header("Content-Type", kind.get("Content-Type", "text/plain"))
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


def test_git_remote_outage_keeps_last_applied_state(fleet: FleetEnv, testbed: list[Any]) -> None:
    cluster = testbed[0].name
    app = fleet.app_name(2)
    remote = FaultyRemote(fleet.repo_url.rsplit("/", 1)[0])
    try:
        fleet.commit_apps([app])
        record = fleet.add_app(app, cluster, prune=True, retry=FAST_RETRY)
        url = f"{remote.url}/apps"
        fleet.store.put_app(replace(record, source=AppSource(repo=url, path=f"apps/{app}")))
        fleet.worker_thread("w1")
        first = fleet.sync_and_wait(app, cluster)
        assert first["result"] == "succeeded", first
        applied = fleet.status(app, cluster)
        deployment = ObjectRef("apps", "v1", "Deployment", app, "web")
        # the next commit changes the ConfigMap and drops the Deployment (a prune, if applied)
        fleet.repo.commit({f"apps/{app}/cm.yaml": m.configmap("settings", "k: v2")})
        fleet.repo.commit({f"apps/{app}/deploy.yaml": None})

        for failing in (503, 401):
            remote.failing = failing
            fleet.sync_and_wait(app, cluster)
            status = fleet.status(app, cluster)
            print(f"{failing}: {status.message}")
            assert str(failing) in status.message, status.message
            assert url in status.message, status.message
            assert status.revision == applied.revision, "the last applied revision is kept"
            assert status.resources == applied.resources
            assert fleet.live(cluster, deployment) is not None, "nothing pruned"
            live = fleet.live(cluster, settings_ref(app))
            assert live is not None and live["data"] == {"k": "v1"}, "nothing applied"

        remote.failing = None
        wait_until(
            lambda: fleet.live(cluster, deployment) is None,
            timeout=60,
            what="the backed-off retry to apply the new commit once the remote is back",
        )
    finally:
        remote.close()


# -- SIGTERM drains -------------------------------------------------------------------------


WAVE_1 = '  annotations:\n    gitfleet.io/sync-wave: "1"\n'
PENDING_CLAIM = """\
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data
spec:
  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: 1Gi
"""


def _started_on(
    fleet: FleetEnv, cluster: str, files: dict[str, str | bytes | None]
) -> tuple[subprocess.Popen[bytes], str, str]:
    """Start w-term and w-next, commit `files` for an app w-term owns, request its sync and
    wait until w-term runs it; return (w-term's process, the app, the commit)."""
    worker = fleet.worker_process("w-term")
    fleet.worker_process("w-next")
    wait_until(
        lambda: len(fleet.dispatcher.owners.live()) == 2, timeout=30, what="both workers live"
    )
    app = next(
        fleet.app_name(i)
        for i in range(3, 200)
        if _owner(fleet, f"{fleet.app_name(i)}@{cluster}") == "w-term"
    )
    instance = f"{app}@{cluster}"
    head = fleet.repo.commit({name.format(app=app): text for name, text in files.items()})
    fleet.add_app(app, cluster)
    fleet.dispatcher.request_sync(app, cluster, trigger=Trigger.MANUAL)
    wait_until(
        lambda: (p := fleet.dispatcher.pending.get(instance)) is not None and p.worker == "w-term",
        timeout=30,
        what="the sync to start on w-term",
    )
    return worker, app, head


def _exits_within(fleet: FleetEnv, worker: subprocess.Popen[bytes], bound: float) -> float:
    stopped = time.monotonic()
    worker.send_signal(signal.SIGTERM)
    try:
        worker.wait(timeout=bound)
    except subprocess.TimeoutExpired:
        raise AssertionError(
            f"w-term still runs {bound:.0f}s after SIGTERM:\n" + fleet.worker_log("w-term")[-3000:]
        ) from None
    assert worker.returncode == 0, fleet.worker_log("w-term")[-3000:]
    return time.monotonic() - stopped


def test_sigterm_lets_the_running_sync_finish_within_the_bound(
    fleet: FleetEnv, testbed: list[Any]
) -> None:
    cluster = testbed[0].name
    files: dict[str, str | bytes | None] = {
        f"apps/{{app}}/cm-{i}.yaml": m.configmap(f"cm-{i}", f"k: v{i}") for i in range(150)
    }
    files["apps/{app}/deploy.yaml"] = m.deployment("web")
    worker, app, head = _started_on(fleet, cluster, files)
    exited = _exits_within(fleet, worker, DRAIN_BOUND_S + 5.0)
    status = fleet.status(app, cluster)
    assert status.revision == head and status.sync_status == SyncStatus.SYNCED, status
    assert status.last_sync is not None and status.last_sync.worker == "w-term"
    assert fleet.live(cluster, ObjectRef("", "v1", "ConfigMap", app, "cm-149")) is not None
    print(f"w-term finished its sync and exited {exited:.1f}s after SIGTERM")


def test_sigterm_hands_back_a_sync_that_outlasts_the_bound(
    fleet: FleetEnv, testbed: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim no volume binds keeps wave 0 Progressing, so the sync outlasts a 1 s drain: the
    worker hands it back, exits, and w-next runs it at once."""
    monkeypatch.setenv("GITFLEET_WORKER_DRAIN_S", "1")
    cluster = testbed[0].name
    files: dict[str, str | bytes | None] = {
        "apps/{app}/pvc.yaml": PENDING_CLAIM,
        "apps/{app}/cm.yaml": m.configmap("later", extra_meta=WAVE_1),
    }
    worker, app, _ = _started_on(fleet, cluster, files)
    instance = f"{app}@{cluster}"
    exited = _exits_within(fleet, worker, 1.0 + 5.0)
    assert "handed back" in fleet.worker_log("w-term"), fleet.worker_log("w-term")[-3000:]
    wait_until(
        lambda: (p := fleet.dispatcher.pending.get(instance)) is not None and p.worker == "w-next",
        timeout=15,
        what="w-next to run the handed-back sync",
    )
    print(f"w-term handed its sync back and exited {exited:.1f}s after SIGTERM")


def _owner(fleet: FleetEnv, instance: str) -> str:
    try:
        return fleet.dispatcher.worker_of(fleet.dispatcher.queue_for(instance))
    except FleetError:
        return ""


# -- the API drains its requests ------------------------------------------------------------


def test_api_sigterm_finishes_the_request_in_flight(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """A request whose body is still arriving when SIGTERM comes is answered; then the API
    runs its lifespan's end (scheduler stopped, Redis closed) and exits."""
    port, token = process.free_port(), "admin-" + uuid.uuid4().hex
    env = {
        **os.environ,
        "GITFLEET_REDIS_URL": redis_server.url,
        "GITFLEET_SECRET_KEY": Fernet.generate_key().decode(),
        "GITFLEET_PREFIX": f"t{uuid.uuid4().hex[:8]}",
        "GITFLEET_ADMIN_TOKEN": token,
    }
    log = tmp_path / "api.log"
    with log.open("wb") as sink:
        api = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "api", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(lambda: _healthy(port), timeout=30, what="the API to answer /healthz")
        body = json.dumps({"name": f"p-{uuid.uuid4().hex[:8]}"}).encode()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
            head = (
                f"POST /api/v1/projects HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            )
            conn.sendall(head.encode() + body[:5])
            time.sleep(0.5)  # the request is in flight: its body is not all there yet
            api.send_signal(signal.SIGTERM)
            time.sleep(1.0)
            assert api.poll() is None, "the API exited with a request in flight"
            conn.sendall(body[5:])
            answer = conn.recv(4096).decode(errors="replace")
        assert answer.startswith("HTTP/1.1 201"), answer
        api.wait(timeout=15)
        text = log.read_text(errors="replace")
        # uvicorn re-raises the signal once it has shut down, so the exit says SIGTERM
        assert api.returncode in (0, -signal.SIGTERM), text
        assert "Application shutdown complete" in text, text
        assert "Traceback" not in text, text
    finally:
        if api.poll() is None:
            api.kill()
            api.wait()


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False
