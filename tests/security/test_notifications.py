"""Outgoing notifications: a subscriber cannot make the coordinator post inside the fleet's
network, nor receive another project's events.

- a target on a shared, reserved or otherwise non-global address (100.64.0.0/10: Alibaba's
  metadata at 100.100.100.200, CGNAT and EKS pod addresses), also written as an IPv4-mapped,
  6to4 or NAT64 IPv6 address, is refused when subscribing and as resolved at delivery;
- a name that resolves outside when checked and inside a moment later (DNS rebinding) never
  reaches the inside address: the post goes to the address that was checked;
- an app subscription is bound to the app it was made for (its uid and project), so it does not
  follow the app's name into another project once the app is deleted and the name reused.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from api.app import create_app
from api.deps import get_dispatcher
from fleet.control.notifications.delivery import DeliveryPump
from fleet.control.notifications.outbox import Message, Outbox, notify
from fleet.control.notifications.subscriptions import Subscription, Subscriptions, Target
from fleet.control.notifications.targets import TargetPolicy, TargetUrlError
from fleet.control.registry import records
from fleet.control.registry.secrets import SecretBox
from fleet.control.registry.store import Store
from tests.api.conftest import (
    ADMIN_TOKEN,
    SECRET_KEY,
    Api,
    RecordingDispatcher,
    add_app,
    settings_for,
    token_for,
    two_projects,
)
from tests.support.redis_server import RedisServer

SECRET = "notification-hmac-secret"
INSIDE = [
    "100.100.100.200",  # Alibaba Cloud metadata
    "100.64.0.1",  # CGNAT, EKS pod addresses
    "100.127.255.254",
    "198.18.0.1",  # benchmarking
    "192.0.0.1",  # IETF protocol assignments
    "240.0.0.1",
    "[::ffff:100.100.100.200]",  # IPv4-mapped
    "[::ffff:127.0.0.1]",
    "[::ffff:a9fe:a9fe]",  # 169.254.169.254, mapped
    "[2002:6464:64c8::1]",  # 6to4 of 100.100.100.200
    "[2002:7f00:1::1]",  # 6to4 of 127.0.0.1
    "[2002:a9fe:a9fe::]",  # 6to4 of 169.254.169.254
    "[64:ff9b::a9fe:a9fe]",  # NAT64 of 169.254.169.254
    "[64:ff9b::6464:64c8]",  # NAT64 of 100.100.100.200
    "[64:ff9b::a00:1]",  # NAT64 of 10.0.0.1
    "[ff02::1]",
    "224.0.0.1",
]


def test_shared_and_non_global_addresses_are_refused_as_written() -> None:
    policy = TargetPolicy()
    for host in INSIDE:
        with pytest.raises(TargetUrlError, match="loopback, private or link-local"):
            policy.check(f"https://{host}/latest/meta-data")
    for host in ("93.184.216.34", "[2606:2800:220:1:248:1893:25c8:1946]", "hooks.example.com"):
        policy.check(f"https://{host}/hook")  # outside: accepted
    allowed = TargetPolicy.from_setting("127.0.0.1,100.100.100.200:8443")
    allowed.check("http://127.0.0.1:8080/hook")  # the operator's allowance still works
    allowed.check("https://100.100.100.200:8443/hook")
    with pytest.raises(TargetUrlError):
        allowed.check("https://100.100.100.200/hook")  # another port: not listed


def fake_dns(monkeypatch: pytest.MonkeyPatch, answers: Callable[[int], str]) -> list[str]:
    """socket.getaddrinfo answering `answers(n)` for the n-th lookup (from 0) of any name
    but an IP literal; the names looked up, in order."""
    real = socket.getaddrinfo
    asked: list[str] = []

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            socket.inet_pton(socket.AF_INET6 if ":" in str(host) else socket.AF_INET, str(host))
            return real(host, port, *args, **kwargs)
        except OSError:
            pass
        address = answers(len(asked))
        asked.append(str(host))
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        sockaddr = (
            (address, int(port or 0))
            if family == socket.AF_INET
            else (address, int(port or 0), 0, 0)
        )
        return [(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", sockaddr)]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return asked


def test_a_name_resolving_to_a_shared_address_is_refused_at_delivery(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    policy = TargetPolicy()
    for address in ("100.100.100.200", "::ffff:100.100.100.200", "64:ff9b::a9fe:a9fe"):
        fake_dns(monkeypatch, lambda _n, a=address: a)  # type: ignore[misc]
        parts = policy.check("https://metadata.example.com/latest/meta-data")
        assert policy.resolves_inside(parts), address


# -- DNS rebinding --------------------------------------------------------------------------


class Listener:
    """A TCP listener on 127.0.0.1 that counts every connection made to it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = int(self.sock.getsockname()[1])
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


@pytest.fixture
def store(redis_server: RedisServer) -> Iterator[Store]:
    url = redis_server.url.rsplit("/", 1)[0] + "/14"
    connection = redis.Redis.from_url(url)
    connection.flushdb()
    yield Store(connection, SecretBox.from_setting(SECRET_KEY))
    connection.flushdb()


def test_a_name_that_rebinds_after_the_check_never_reaches_the_inside_address(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    listener = Listener()
    try:
        url = f"https://rebind.example.com:{listener.port}/hook"
        subscriptions = Subscriptions(store.redis, store.keys, store.box)
        subscription = subscriptions.put(
            Subscription(name="rebind", kind="webhook", project="default"), Target(url, SECRET)
        )
        message = Message(id="m1", event="sync-failed", app="shop", project="default")
        outbox = Outbox(store.redis, store.keys)
        (delivery,) = outbox.queue(message, [subscription])
        # the first lookup (the check) answers a public address; every later one the loopback
        asked = fake_dns(monkeypatch, lambda n: "93.184.216.34" if n == 0 else "127.0.0.1")
        tried: list[str] = []
        real_connect = socket.create_connection

        def create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
            tried.append(str(address[0]))
            if address[0] == "93.184.216.34":  # the public host: no answer in a test
                raise ConnectionRefusedError("refused in the test")
            return real_connect(address, *args, **kwargs)

        monkeypatch.setattr(socket, "create_connection", create_connection)
        pump = DeliveryPump(store.redis, store.keys, store.box, TargetPolicy(), timeout=2.0)
        assert pump.run_once() == 1
        assert listener.connections == 0, f"the rebound name reached 127.0.0.1 ({tried})"
        assert "127.0.0.1" not in tried and asked == ["rebind.example.com"]
        (first,) = outbox.results("rebind")
        assert (first.status, first.status_code) == ("retrying", 0)

        store.redis.zadd(store.keys.notify("queue"), {delivery: 0})  # due again: now inside
        assert pump.run_once() == 1
        (second,) = outbox.results("rebind")
        assert listener.connections == 0
        assert second.attempts == 2 and "resolves to an inside address" in second.error
    finally:
        listener.close()


# -- an app subscription and the app's name ---------------------------------------------------


@pytest.fixture
def api(redis_server: RedisServer) -> Iterator[Api]:
    url = redis_server.url.rsplit("/", 1)[0] + "/13"
    redis.Redis.from_url(url).flushdb()
    app = create_app(settings_for(url))
    dispatcher = RecordingDispatcher()
    app.dependency_overrides[get_dispatcher] = lambda: dispatcher
    with TestClient(app, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as client:
        yield Api(client, dispatcher, app.state.store)


def test_an_app_subscription_does_not_follow_the_name_into_another_project(api: Api) -> None:
    two_projects(api)
    b_member = api.as_(token_for(api, "b-ci", "member", "team-b"))
    a_member = api.as_(token_for(api, "a-ci", "member", "team-a"))
    store = api.store
    add_app(
        api,
        "payments",
        project="team-b",
        destination={"cluster": "east", "namespace": "team-b-pay"},
    )
    sent = {
        "name": "b-pay",
        "app": "payments",
        "url": "https://hooks.b.example/x",
        "secret": SECRET,
    }
    answer = api.client.post("/api/v1/subscriptions", json=sent, headers=b_member)
    assert answer.status_code == 201, answer.text
    assert notify(store.redis, store.keys, "sync-failed", "payments")  # team-b's app: told

    gone = api.client.delete("/api/v1/apps/payments?cascade=false", headers=b_member)
    assert gone.status_code == 200, gone.text
    add_app(
        api,
        "payments",
        project="team-a",
        destination={"cluster": "east", "namespace": "team-a-pay"},
    )
    queued = notify(store.redis, store.keys, "sync-failed", "payments")
    assert queued == [], "team-a's event was queued for team-b's webhook"
    # team-a's members neither see nor manage team-b's subscription; team-b's still do
    assert api.client.get("/api/v1/subscriptions/b-pay", headers=a_member).status_code == 404
    assert api.client.get("/api/v1/subscriptions/b-pay", headers=b_member).status_code == 200

    # a subscription to the new app is told
    again = {**sent, "name": "a-pay", "url": "https://hooks.a.example/x"}
    assert api.client.post("/api/v1/subscriptions", json=again, headers=a_member).status_code == 201
    assert len(notify(store.redis, store.keys, "recovered", "payments")) == 1
    outbox = Outbox(store.redis, store.keys)
    assert [r.event for r in outbox.results("a-pay")] == ["recovered"]
    assert [r.event for r in outbox.results("b-pay")] == ["sync-failed"]  # its own app's only


def test_a_subscription_stored_before_uids_does_not_match_a_newer_app_of_its_name(
    api: Api,
) -> None:
    two_projects(api)
    store = api.store
    legacy = Subscription(name="old", kind="webhook", app="team-a-shop")  # no uid, no project
    Subscriptions(store.redis, store.keys, store.box).put(
        legacy, Target("https://hooks.example.com/old", SECRET)
    )
    assert notify(store.redis, store.keys, "sync-failed", "team-a-shop")  # its own app: told
    gone = api.client.delete("/api/v1/apps/team-a-shop?cascade=false")
    assert gone.status_code == 200, gone.text
    made = Subscriptions(store.redis, store.keys, store.box).get("old")
    older = replace(made, created="2000-01-01T00:00:00+00:00")  # made long before the new app
    store.redis.set(store.keys.notify("subscription:old"), records.to_json(older))
    add_app(
        api,
        "team-a-shop",
        project="team-b",
        destination={"cluster": "east", "namespace": "team-b-shop2"},
    )
    assert notify(store.redis, store.keys, "sync-failed", "team-a-shop") == []
