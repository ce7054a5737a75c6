"""Notifications and the commit-to-healthy histogram, against the real fleet.

A receiver (`http.server` on 127.0.0.1, allowed with GITFLEET_NOTIFY_ALLOW_HOSTS as an operator
would) records what the coordinator's delivery pump posts. Syncs run on a real worker thread
against the testbed; the API is the real app with its lifespan, which runs the pump.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from fastapi.testclient import TestClient

from fleet.control.registry.repos import normalize_repo
from fleet.model import Health, ObjectRef, SyncStatus
from tests.support.fleet import FleetEnv, wait_until

TOKEN = "notify-admin-token"
SECRET = "receiver-hmac-secret"
BROKEN = "kind: ConfigMap\nmetadata: [unclosed\n"


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """Answers each path with the codes queued in `answers` (then 200) and keeps every post."""

    server: ThreadingHTTPServer
    posts: list[Received] = field(default_factory=list)
    answers: dict[str, list[int]] = field(default_factory=dict)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def at(self, path: str) -> list[Received]:
        return [p for p in self.posts if p.path == path]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found: list[Receiver] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            got = found[0]
            got.posts.append(Received(self.path, dict(self.headers.items()), body))
            queued = got.answers.get(self.path, [])
            code = queued.pop(0) if queued else 200
            self.send_response(code)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    found.append(Receiver(server))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield found[0]
    server.shutdown()
    server.server_close()


@pytest.fixture
def api(fleet_api: Callable[..., TestClient]) -> TestClient:
    """The real API, its delivery pump on, posting to the loopback receiver."""
    return fleet_api(
        TOKEN, notifications=True, notify_allow_hosts="127.0.0.1", webhook_secret=SECRET
    )


def subscribe(api: TestClient, **body: Any) -> dict[str, Any]:
    answer = api.post("/api/v1/subscriptions", json=body)
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    return created


def deliveries(api: TestClient, name: str) -> list[dict[str, Any]]:
    answer = api.get(f"/api/v1/subscriptions/{name}/deliveries")
    assert answer.status_code == 200, answer.text
    found: list[dict[str, Any]] = answer.json()
    return found


def broken_commit(fleet: FleetEnv, name: str) -> str:
    return fleet.repo.commit({f"apps/{name}/cm.yaml": BROKEN})


def test_one_signed_message_per_transition_however_often_the_sync_fails(
    fleet: FleetEnv, api: TestClient, receiver: Receiver
) -> None:
    cluster = next(iter(fleet.clusters))
    name = fleet.app_name(1)
    fleet.commit_apps([name])
    fleet.add_app(name, cluster)
    fleet.worker_thread("w1")
    hook = subscribe(
        api, name="hook", app=name, url=receiver.url("/hook"), secret=SECRET, kind="webhook"
    )
    assert SECRET not in json.dumps(hook) and "/hook" not in hook["url"]
    subscribe(
        api,
        name="chat",
        project="default",
        kind="slack",
        url=receiver.url("/slack/T000/B000/XXXX"),
        events=["sync-failed"],
    )

    assert fleet.sync_and_wait(name, cluster)["result"] == "succeeded"  # the first: no message
    broken_commit(fleet, name)
    for _ in range(3):  # the same failing sync, retried: still one message
        assert fleet.sync_and_wait(name, cluster)["result"] == "failed"
    wait_until(lambda: len(receiver.at("/hook")) == 1, timeout=30, what="sync-failed posted")
    fleet.commit_apps([name], data="k: v2")
    assert fleet.sync_and_wait(name, cluster)["result"] == "succeeded"
    wait_until(lambda: len(receiver.at("/hook")) == 2, timeout=30, what="recovered posted")
    wait_until(
        lambda: [d["status"] for d in deliveries(api, "hook")] == ["delivered"] * 2,
        timeout=30,
        what="both deliveries recorded",
    )

    failed, recovered = receiver.at("/hook")
    for post in (failed, recovered):
        expected = "sha256=" + hmac.new(SECRET.encode(), post.body, hashlib.sha256).hexdigest()
        assert hmac.compare_digest(post.headers["X-Gitfleet-Signature-256"], expected)
    first, second = json.loads(failed.body), json.loads(recovered.body)
    assert (first["event"], first["app"], first["cluster"]) == ("sync-failed", name, cluster)
    assert first["reason"] and first["syncStatus"] and first["project"] == "default"
    assert (second["event"], second["recoveredFrom"]) == ("recovered", "sync-failed")
    assert second["revision"] == fleet.status(name, cluster).revision
    assert not fleet.redis.zcard(fleet.store.keys.notify("queue"))  # nothing more to send

    (slack,) = receiver.at("/slack/T000/B000/XXXX")
    text = json.loads(slack.body)
    assert list(text) == ["text"] and "sync-failed" in text["text"] and name in text["text"]
    assert "X-Gitfleet-Signature-256" not in slack.headers
    listed = api.get("/api/v1/subscriptions").json()
    assert {s["name"] for s in listed} == {"hook", "chat"}
    assert "XXXX" not in json.dumps(listed)
    assert not stored_in_clear(fleet, [SECRET.encode(), b"/slack/T000/B000/XXXX"])


def stored_in_clear(fleet: FleetEnv, secrets: list[bytes]) -> list[str]:
    """The keys of the fleet's prefix whose values hold one of `secrets` as is."""
    found = []
    for key in fleet.redis.scan_iter(fleet.store.keys.pattern):
        kind = fleet.redis.type(key)
        if kind == b"string":
            values = [fleet.redis.get(key) or b""]
        elif kind == b"hash":
            values = list(fleet.redis.hgetall(key).values())
        elif kind == b"list":
            values = list(fleet.redis.lrange(key, 0, -1))
        else:
            values = []
        if any(secret in value for value in values for secret in secrets):
            found.append(key.decode())
    return found


FAILING_JOB = """apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
spec:
  activeDeadlineSeconds: 2
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      nodeSelector: {gitfleet.test/no-such-node: 'true'}
      containers:
        - name: run
          image: example.com/migrate:1
"""


def test_a_degraded_instance_is_told_once_and_again_when_it_recovers(
    fleet: FleetEnv, api: TestClient, receiver: Receiver
) -> None:
    cluster = next(iter(fleet.clusters))
    name = fleet.app_name(5)
    fleet.commit_apps([name])
    fleet.add_app(name, cluster, prune=True)
    fleet.worker_thread("w1")
    subscribe(api, name="health", project="default", url=receiver.url("/health"), secret=SECRET)
    assert fleet.sync_and_wait(name, cluster)["result"] == "succeeded"

    fleet.repo.commit({f"apps/{name}/job.yaml": FAILING_JOB})  # a Job that fails at once
    for _ in range(2):
        assert fleet.sync_and_wait(name, cluster)["result"] == "failed"
    assert fleet.status(name, cluster).health == Health.DEGRADED
    fleet.repo.commit({f"apps/{name}/job.yaml": None})
    assert fleet.sync_and_wait(name, cluster)["result"] == "succeeded"
    assert fleet.status(name, cluster).health == Health.HEALTHY
    wait_until(
        lambda: [d["status"] for d in deliveries(api, "health")] == ["delivered"] * 4,
        timeout=30,
        what="four transitions delivered",
    )
    told = sorted(
        (json.loads(p.body)["event"], json.loads(p.body)["recoveredFrom"])
        for p in receiver.at("/health")
    )
    assert told == [
        ("health-degraded", ""),
        ("recovered", "health-degraded"),
        ("recovered", "sync-failed"),
        ("sync-failed", ""),
    ]


def test_a_receiver_that_fails_first_is_retried_and_the_attempts_are_shown(
    fleet: FleetEnv, api: TestClient, receiver: Receiver
) -> None:
    cluster = next(iter(fleet.clusters))
    name = fleet.app_name(2)
    fleet.commit_apps([name])
    broken_commit(fleet, name)
    fleet.add_app(name, cluster)
    fleet.worker_thread("w1")
    receiver.answers["/flaky"] = [500]
    subscribe(api, name="flaky", app=name, url=receiver.url("/flaky"), secret=SECRET)

    assert fleet.sync_and_wait(name, cluster)["result"] == "failed"  # a first sync failing
    wait_until(
        lambda: [d["status"] for d in deliveries(api, "flaky")] == ["delivered"],
        timeout=30,
        what="the delivery retried until delivered",
    )
    (delivery,) = deliveries(api, "flaky")
    assert (delivery["event"], delivery["attempts"], delivery["statusCode"]) == (
        "sync-failed",
        2,
        200,
    )
    first, second = receiver.at("/flaky")
    assert first.body == second.body  # the same message and signature, sent again
    assert first.headers["X-Gitfleet-Delivery"] == second.headers["X-Gitfleet-Delivery"]


def test_a_self_heal_that_undoes_drift_is_told_once(
    fleet: FleetEnv, api: TestClient, receiver: Receiver
) -> None:
    cluster = sorted(fleet.clusters)[0]
    name = fleet.app_name(4)
    fleet.commit_apps([name])
    fleet.add_app(name, cluster, automated=True, self_heal=True)
    worker = fleet.worker_thread("w1")
    subscribe(api, name="heal", app=name, url=receiver.url("/heal"), secret=SECRET)
    assert fleet.sync_and_wait(name, cluster)["result"] == "succeeded"
    web = ObjectRef("apps", "v1", "Deployment", name, "web")

    def watching() -> bool:
        selfheal = worker.process.selfheal
        watch = selfheal.watch_cache(cluster, "apps/v1", "Deployment") if selfheal else None
        return watch is not None and watch.get(name, "web") is not None

    wait_until(watching, timeout=30, what="the watch on the Deployment")
    kube = fleet.clusters[cluster].client()
    try:
        live = kube.get(web)
        assert live is not None
        live["spec"]["template"]["spec"]["containers"][0]["image"] = "example.com/web:edited"
        kube.request("PUT", kube.object_path(web), body=live, params={"fieldManager": "kubectl"})
    finally:
        kube.close()
    wait_until(lambda: len(receiver.at("/heal")) == 1, timeout=60, what="drift-healed posted")
    healed = json.loads(receiver.at("/heal")[0].body)
    assert (healed["event"], healed["app"], healed["cluster"]) == ("drift-healed", name, cluster)
    assert fleet.store.history(name, cluster)[0].trigger == "self-heal"
    wait_until(
        lambda: [d["status"] for d in deliveries(api, "heal")] == ["delivered"],
        timeout=30,
        what="one delivery recorded",
    )


def test_targets_inside_the_network_need_the_operators_allowance(
    fleet: FleetEnv, fleet_api: Callable[..., TestClient]
) -> None:
    strict = fleet_api(TOKEN)  # no GITFLEET_NOTIFY_ALLOW_HOSTS
    base = {"name": "x", "project": "default", "secret": SECRET}
    refused = {
        "http://127.0.0.1:9/hook": "GITFLEET_NOTIFY_ALLOW_HOSTS",
        "https://169.254.169.254/latest": "link-local",
        "http://hooks.example.com/x": "plain http",
        "https://user:pw@hooks.example.com/x": "user-info",
        "file:///etc/passwd": "https://",
    }
    for url, rule in refused.items():
        answer = strict.post("/api/v1/subscriptions", json={**base, "url": url})
        assert answer.status_code == 422 and rule in answer.text, (url, answer.text)
    answer = strict.post(
        "/api/v1/subscriptions", json={**base, "url": "https://hooks.example.com/x"}
    )
    assert answer.status_code == 201, answer.text
    no_secret = {"name": "y", "project": "default", "url": "https://hooks.example.com/y"}
    assert strict.post("/api/v1/subscriptions", json=no_secret).status_code == 422
    assert strict.delete("/api/v1/subscriptions/x").status_code == 204
    assert strict.get("/api/v1/subscriptions/x").status_code == 404


def test_commit_to_healthy_histogram_counts_a_webhook_triggered_sync(
    fleet: FleetEnv, api: TestClient
) -> None:
    cluster = next(iter(fleet.clusters))
    name = fleet.app_name(3)
    fleet.commit_apps([name])
    fleet.add_app(name, cluster, automated=True)
    fleet.worker_thread("w1")
    after = fleet.commit_apps([name], data="k: pushed")
    payload = {
        "ref": "refs/heads/main",
        "after": after,
        "repository": {"clone_url": fleet.repo_url, "default_branch": "main"},
    }
    body = json.dumps(payload).encode()
    digest = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    headers = {
        "X-Hub-Signature-256": f"sha256={digest}",
        "X-GitHub-Event": "push",
        "X-GitHub-Delivery": str(uuid.uuid4()),
    }
    answer = api.post("/api/v1/webhooks/git", content=body, headers=headers)
    assert answer.status_code == 200 and answer.json()["triggered"] == [name], answer.text
    pushed = fleet.store.keys.commit_clock(f"pushed:{normalize_repo(fleet.repo_url)}")
    assert fleet.redis.hget(pushed, after) is not None  # the clock starts at the receipt

    def converged() -> bool:
        status = fleet.status(name, cluster)
        return (status.revision, status.sync_status, status.health) == (
            after,
            SyncStatus.SYNCED,
            Health.HEALTHY,
        )

    wait_until(converged, timeout=120, what=f"{name} Synced and Healthy at the pushed commit")
    labels = f'app="{name}",cluster="{cluster}"'
    metrics = api.get("/metrics").text
    assert f"gitfleet_commit_to_healthy_seconds_count{{{labels}}} 1.0" in metrics, metrics[-2000:]
    assert f'gitfleet_commit_to_healthy_seconds_bucket{{{labels},le="+Inf"}} 1.0' in metrics
    total = next(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith(f"gitfleet_commit_to_healthy_seconds_sum{{{labels}}}")
    )
    print(f"commit to healthy: {total:.2f} s")
    assert 0 < total < 120
    api.post("/api/v1/apps/" + name + "/sync")  # at the same commit: not counted again
    wait_until(fleet.idle, timeout=60, what="the sync at the same commit done")
    again = api.get("/metrics").text
    assert f"gitfleet_commit_to_healthy_seconds_count{{{labels}}} 1.0" in again
