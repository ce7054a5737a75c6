"""API hygiene (issue 10, item 7), each attack run through the real API over a real Redis.

- A 50 MB body with no token is refused with 401 before it is read (real uvicorn on a socket:
  the answer arrives while most of the body is still unsent), and a body over the limit with a
  token is a 413 before anything parses it (1 MiB for the API, 5 MiB for webhooks).
- A sync window that can never open (`0 0 31 2 *`) is a 422 naming the window; one stored
  before that check existed blocks only its own app, with a status message, and neither the
  scheduler tick nor a webhook fails for the others.
- `dependsOn` names apps of the same project only; viewers enqueue nothing (sync, rollback,
  diff); member tokens die with their project and may expire; the bootstrap admin token goes to
  a 0600 file, never to a log.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import stat
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi.testclient import TestClient
from redis import Redis

from api.app import create_app
from api.deps import get_dispatcher
from deploy.testbed.process import free_port
from fleet.control.keys import Keys
from fleet.control.registry.instances import instance_key
from fleet.control.registry.records import (
    AppDestination,
    AppRecord,
    AppSource,
    ClusterCredentials,
    ClusterRecord,
    SyncPolicy,
)
from fleet.control.registry.store import Store
from fleet.control.routing import membership
from fleet.control.scheduler import Scheduler
from fleet.control.windows import SyncWindow
from tests.api.conftest import (
    ADMIN_TOKEN,
    RecordingDispatcher,
    fake_kubeconfig,
    settings_for,
)
from tests.security.test_webhooks import delivery_headers, push_body
from tests.support.fleet import FleetEnv
from tests.support.redis_server import RedisServer

MiB = 1 << 20
NEVER = "0 0 31 2 *"  # the 31st of February
REPO = "https://github.com/acme/shop.git"


@dataclass
class Api:
    client: TestClient
    dispatcher: RecordingDispatcher
    store: Store
    prefix: str

    def as_(self, token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    def token(self, name: str, role: str, project: str | None = None, **extra: Any) -> str:
        body = {"name": name, "role": role, "project": project, **extra}
        response = self.client.post("/api/v1/tokens", json=body)
        assert response.status_code == 201, response.text
        text: str = response.json()["token"]
        return text


def _app(redis_server: RedisServer, **overrides: Any) -> tuple[Any, RecordingDispatcher, str]:
    prefix = f"t{uuid.uuid4().hex[:8]}"
    app = create_app(settings_for(redis_server.url, prefix=prefix, **overrides))
    dispatcher = RecordingDispatcher()
    app.dependency_overrides[get_dispatcher] = lambda: dispatcher
    return app, dispatcher, prefix


def _forget(redis_server: RedisServer, prefix: str) -> None:
    redis = Redis.from_url(redis_server.url)
    for key in redis.scan_iter(Keys(prefix).pattern):
        redis.delete(key)
    redis.close()


@pytest.fixture
def api(redis_server: RedisServer) -> Iterator[Api]:
    app, dispatcher, prefix = _app(redis_server)
    with TestClient(app, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as client:
        yield Api(client, dispatcher, app.state.store, prefix)
    _forget(redis_server, prefix)


@dataclass
class Served:
    port: int
    dispatcher: RecordingDispatcher


@pytest.fixture
def served(redis_server: RedisServer) -> Iterator[Served]:
    """The coordinator under uvicorn on a loopback port, for requests sent byte by byte."""
    app, dispatcher, prefix = _app(redis_server)
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield Served(port, dispatcher)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        _forget(redis_server, prefix)


def team_a(api: Api) -> dict[str, str]:
    """Cluster east, project team-a (namespaces team-a-*), and a member token of it."""
    body = {"name": "east", "kubeconfig": fake_kubeconfig("tok-east")}
    assert api.client.post("/api/v1/clusters", json=body).status_code == 201
    project = {
        "name": "team-a",
        "sourceRepos": ["https://github.com/acme/*"],
        "destinations": [{"cluster": "*", "namespace": "team-a-*"}],
    }
    assert api.client.post("/api/v1/projects", json=project).status_code == 201
    return api.as_(api.token("team-a-member", "member", "team-a"))


def app_body(name: str, project: str = "team-a", **overrides: Any) -> dict[str, Any]:
    body = {
        "name": name,
        "project": project,
        "source": {"repo": REPO, "path": "deploy"},
        "destination": {"cluster": "east", "namespace": f"{project}-shop"},
    }
    return {**body, **overrides}


# -- body size and authentication before the body ---------------------------------------------


def _send_slowly(
    port: int, head: bytes, total: int, *, chunk: int = 64 * 1024
) -> tuple[bytes, int]:
    """Send `head`, then up to `total` body bytes, stopping as soon as an answer arrives;
    return (the answer's first bytes, how many body bytes were sent)."""
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(head)
        conn.settimeout(0.05)
        while sent < total:
            try:
                answer = conn.recv(4096)
            except TimeoutError:
                answer = b""
            if answer:
                return answer + _rest(conn), sent
            try:
                conn.sendall(b"x" * min(chunk, total - sent))
            except OSError:
                break  # the server closed the connection: it wants no more
            sent += min(chunk, total - sent)
        conn.settimeout(10)
        return conn.recv(4096), sent


def _rest(conn: socket.socket) -> bytes:
    """What else of the answer arrives within a second."""
    found, deadline = b"", time.monotonic() + 1.0
    while time.monotonic() < deadline:
        try:
            chunk = conn.recv(4096)
        except TimeoutError:
            continue
        except OSError:
            break
        if not chunk:
            break
        found += chunk
    return found


def test_a_50_mb_body_without_a_token_is_refused_with_401_before_it_is_read(
    served: Served,
) -> None:
    total = 50 * MiB
    head = (
        b"POST /api/v1/apps HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {total}\r\n\r\n".encode()
    )

    answer, sent = _send_slowly(served.port, head, total)

    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
    assert b"missing bearer token" in answer
    assert sent < 4 * MiB, f"the server waited for {sent} bytes before answering"
    assert served.dispatcher.calls == []


def test_a_chunked_body_without_a_token_is_refused_with_401_before_it_is_read(
    served: Served,
) -> None:
    head = (
        b"PUT /api/v1/projects/team-a HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Transfer-Encoding: chunked\r\nAuthorization: Bearer gf_not-a-token\r\n\r\n"
        b"10000\r\n"
    )

    answer, sent = _send_slowly(served.port, head, 50 * MiB)

    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
    assert b"invalid or revoked token" in answer
    assert sent < 4 * MiB


def test_a_body_over_the_api_limit_is_refused_with_413_before_parsing(api: Api) -> None:
    member = team_a(api)
    big = json.dumps(app_body("shop", destination={"padding": "x" * (2 * MiB)})).encode()

    declared = api.client.post("/api/v1/apps", content=big, headers=member)
    streamed = api.client.post(
        "/api/v1/apps", content=iter([big[: MiB // 2], big[MiB // 2 :]]), headers=member
    )

    for response in (declared, streamed):
        assert response.status_code == 413, response.text
        assert "1 MiB" in response.json()["detail"]
    assert api.client.get("/api/v1/apps").json() == []


def test_webhooks_accept_bodies_up_to_their_own_larger_limit(api: Api) -> None:
    padded = json.loads(push_body(after="1" * 40))
    padded["padding"] = "x" * (2 * MiB)
    body = json.dumps(padded).encode()
    bare = TestClient(api.client.app)

    accepted = bare.post("/api/v1/webhooks/git", content=body, headers=delivery_headers(body))
    padded["padding"] = "x" * (6 * MiB)
    huge = json.dumps(padded).encode()
    refused = bare.post("/api/v1/webhooks/git", content=huge, headers=delivery_headers(huge))

    assert accepted.status_code == 200, accepted.text
    assert refused.status_code == 413
    assert "5 MiB" in refused.json()["detail"]


# -- sync windows -----------------------------------------------------------------------------


def test_a_sync_window_that_never_opens_is_refused_naming_the_window(api: Api) -> None:
    member = team_a(api)
    windows = [
        {"kind": "allow", "schedule": "0 22 * * *", "duration": "1h"},
        {"kind": "deny", "schedule": NEVER, "duration": "1h"},
    ]
    body = app_body("shop", syncPolicy={"automated": True, "syncWindows": windows})

    response = api.client.post("/api/v1/apps", json=body, headers=member)

    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert "syncPolicy.syncWindows.1" in detail
    assert NEVER in detail and "never" in detail
    assert api.client.get("/api/v1/apps").json() == []


def _stored_app(store: Store, name: str, cluster: str, *windows: SyncWindow) -> None:
    """An app written straight to the registry, as one stored before windows were probed."""
    policy = SyncPolicy(automated=True, interval_s=60, sync_windows=windows)
    source = AppSource(repo=REPO, revision="main")
    record = AppRecord(name, source, AppDestination(namespace=name, cluster=cluster))
    store.put_app(replace(record, sync_policy=policy), create=True)


def test_a_stored_window_that_never_opens_blocks_only_its_own_app_in_the_scheduler(
    registry: FleetEnv,
) -> None:
    creds = ClusterCredentials(server="https://127.0.0.1:1", token="t")
    registry.store.put_cluster(ClusterRecord("eu", "https://127.0.0.1:1"), creds)
    membership.register(registry.redis, "w-a", ttl=30, meta={}, prefix=registry.prefix)
    bad, good = registry.app_name(0), registry.app_name(1)
    _stored_app(registry.store, bad, "eu", SyncWindow("deny", NEVER, "1h"))
    _stored_app(registry.store, good, "eu")
    scheduler = Scheduler(registry.store, registry.dispatcher)

    report = scheduler.tick(1767261600.0)

    assert report.dispatched == [instance_key(good, "eu")]
    reason = report.blocked[instance_key(bad, "eu")]
    assert NEVER in reason and "cannot be evaluated" in reason
    status = registry.store.get_status(bad, "eu")
    assert status is not None and NEVER in status.message
    # an interval request waits as a quiet check of its owner, or as a pending sync
    waiting = registry.redis.zrange(Keys(registry.prefix).checks("w-a"), 0, -1)
    asked = registry.dispatcher.pending.instances() + [m.decode() for m in waiting]
    assert asked == [instance_key(good, "eu")]


def test_a_stored_window_that_never_opens_blocks_only_its_own_app_in_a_webhook(api: Api) -> None:
    body = {"name": "east", "kubeconfig": fake_kubeconfig("tok-east")}
    assert api.client.post("/api/v1/clusters", json=body).status_code == 201
    _stored_app(api.store, "bad", "east", SyncWindow("deny", NEVER, "1h"))
    _stored_app(api.store, "good", "east")
    push = push_body(after="2" * 40, repo="https://github.com/acme/shop")

    response = TestClient(api.client.app).post(
        "/api/v1/webhooks/git", content=push, headers=delivery_headers(push)
    )

    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["triggered"] == ["good"]
    assert answer["skipped"][0]["app"] == "bad"
    assert NEVER in answer["skipped"][0]["reason"]
    assert [c["app"] for c in api.dispatcher.calls] == ["good"]
    shown = api.client.get("/api/v1/apps/bad")  # still readable, so it can be fixed with PUT
    assert shown.status_code == 200
    assert shown.json()["spec"]["syncPolicy"]["syncWindows"][0]["schedule"] == NEVER
    manual = api.client.post("/api/v1/apps/bad/sync")
    assert manual.status_code == 409 and NEVER in manual.json()["detail"]


# -- dependsOn, viewers, tokens ---------------------------------------------------------------


def test_depends_on_an_app_of_another_project_is_refused(api: Api) -> None:
    member = team_a(api)
    other = {"name": "team-b", "sourceRepos": ["*"], "destinations": [{"namespace": "team-b-*"}]}
    assert api.client.post("/api/v1/projects", json=other).status_code == 201
    assert api.client.post("/api/v1/apps", json=app_body("b-db", "team-b")).status_code == 201

    response = api.client.post(
        "/api/v1/apps", json=app_body("a-web", dependsOn=["b-db"]), headers=member
    )

    assert response.status_code == 422, response.text
    assert response.json()["detail"].startswith("dependsOn:")
    assert "b-db" in response.json()["detail"] and "team-a" in response.json()["detail"]
    assert [a["name"] for a in api.client.get("/api/v1/apps").json()] == ["b-db"]
    assert api.client.delete("/api/v1/apps/b-db?cascade=false").status_code == 200


def test_a_viewer_cannot_enqueue_a_sync_a_rollback_or_a_diff(api: Api) -> None:
    team_a(api)
    assert api.client.post("/api/v1/apps", json=app_body("shop")).status_code == 201
    viewer = api.as_(api.token("dashboard", "viewer"))

    responses = [
        api.client.post("/api/v1/apps/shop/sync", headers=viewer),
        api.client.post("/api/v1/apps/shop/rollback", json={"revision": "v1"}, headers=viewer),
        api.client.get("/api/v1/apps/shop/diff", headers=viewer),
    ]

    assert [r.status_code for r in responses] == [403, 403, 403]
    assert "viewer" in responses[2].json()["detail"]
    assert api.dispatcher.calls == []
    assert api.client.get("/api/v1/apps/shop", headers=viewer).status_code == 200


def test_member_tokens_die_with_their_project(api: Api) -> None:
    member = team_a(api)
    assert api.client.get("/api/v1/projects/team-a", headers=member).status_code == 200

    assert api.client.delete("/api/v1/projects/team-a").status_code == 204
    project = {"name": "team-a", "sourceRepos": ["*"], "destinations": [{"namespace": "*"}]}
    assert api.client.post("/api/v1/projects", json=project).status_code == 201

    response = api.client.get("/api/v1/projects/team-a", headers=member)
    assert response.status_code == 401
    names = [t["name"] for t in api.client.get("/api/v1/tokens").json()]
    assert "team-a-member" not in names


def test_a_token_with_an_expiry_is_refused_after_it(api: Api) -> None:
    team_a(api)
    soon = (datetime.now(UTC) + timedelta(seconds=2)).isoformat()
    expiring = api.as_(api.token("ci", "member", "team-a", expiresAt=soon))
    listed = {t["name"]: t for t in api.client.get("/api/v1/tokens").json()}
    assert listed["ci"]["expiresAt"].startswith(soon[:19])
    assert api.client.get("/api/v1/apps", headers=expiring).status_code == 200

    deadline = time.monotonic() + 10
    while api.client.get("/api/v1/apps", headers=expiring).status_code == 200:
        assert time.monotonic() < deadline, "the token still works after its expiry"
        time.sleep(0.2)

    response = api.client.get("/api/v1/apps", headers=expiring)
    assert response.status_code == 401
    assert "expired" in response.json()["detail"] or "revoked" in response.json()["detail"]
    past = {"name": "old", "role": "viewer", "expiresAt": "2001-01-01T00:00:00Z"}
    assert api.client.post("/api/v1/tokens", json=past).status_code == 422
    ttl = api.client.post("/api/v1/tokens", json={"name": "ttl", "role": "viewer", "ttl": "1h"})
    assert ttl.status_code == 201, ttl.text
    assert ttl.json()["expiresAt"]
    # far futures are refused with a 422 naming the field, never a 500 from date arithmetic
    for far in ({"ttl": 251605883040}, {"expiresAt": "9999-12-31T23:59:59Z"}):
        refused = api.client.post("/api/v1/tokens", json={"name": "far", "role": "viewer", **far})
        assert refused.status_code == 422, refused.text


def test_the_bootstrap_admin_token_is_written_to_a_0600_file_and_never_logged(
    redis_server: RedisServer,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    path = tmp_path / "state" / "admin-token"
    caplog.set_level(logging.DEBUG)
    app, _, prefix = _app(redis_server, admin_token=None, admin_token_file=path)
    with TestClient(app):
        pass
    printed = capfd.readouterr()

    token = path.read_text().strip()
    assert token.startswith("gf_")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert str(path) in printed.err
    assert token not in printed.out + printed.err + caplog.text
    with TestClient(app, headers={"Authorization": f"Bearer {token}"}) as client:
        assert client.get("/api/v1/clusters").status_code == 200
    _forget(redis_server, prefix)
