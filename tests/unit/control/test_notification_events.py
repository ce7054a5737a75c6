"""Which events a status write is, and which target URLs are refused (pure parts)."""

from __future__ import annotations

import json

import pytest

from fleet.control.notifications.delivery import signature_of, slack_text, webhook_body
from fleet.control.notifications.events import Seen, changes
from fleet.control.notifications.outbox import Message
from fleet.control.notifications.targets import TargetPolicy, TargetUrlError
from fleet.model import Health, SyncStatus, Trigger


def events(seen: Seen, last: dict[str, str]) -> list[str]:
    return [c.event for c in changes(seen, last) if c.event]


def test_a_failing_sync_is_one_event_until_it_recovers() -> None:
    ok = {"sync": "ok", "health": "healthy"}
    failing = Seen(failed=True, health=Health.UNKNOWN, error="render failed")
    assert events(failing, ok) == ["sync-failed"]
    assert events(failing, {**ok, "sync": "failed"}) == []  # a retry: nothing new
    recovered = changes(Seen(failed=False, health=Health.HEALTHY), {**ok, "sync": "failed"})
    assert [(c.event, c.recovered_from) for c in recovered if c.event] == [
        ("recovered", "sync-failed")
    ]


def test_health_transitions_and_the_first_sync() -> None:
    assert events(Seen(failed=False, health=Health.HEALTHY), {}) == []  # first, fine: quiet
    assert events(Seen(failed=True, health=Health.UNKNOWN), {}) == ["sync-failed"]
    healthy = {"sync": "ok", "health": "healthy"}
    assert events(Seen(failed=False, health=Health.DEGRADED), healthy) == ["health-degraded"]
    degraded = {"sync": "ok", "health": "degraded"}
    assert events(Seen(failed=False, health=Health.PROGRESSING), degraded) == []
    assert events(Seen(failed=False, health=Health.HEALTHY), degraded) == ["recovered"]


def test_a_self_heal_of_a_drifted_instance_is_drift_healed() -> None:
    seen = Seen(
        failed=False,
        health=Health.HEALTHY,
        trigger=str(Trigger.SELF_HEAL),
        was_out_of_sync=True,
        sync_status=SyncStatus.SYNCED,
    )
    assert events(seen, {"sync": "ok", "health": "healthy"}) == ["drift-healed"]


@pytest.mark.parametrize(
    ("url", "rule"),
    [
        ("http://hooks.example.com/x", "plain http"),
        ("https://127.0.0.1/x", "loopback"),
        ("https://10.0.0.7/x", "private"),
        ("https://[::1]:8443/x", "loopback"),
        ("https://localhost/x", "loopback"),
        ("https://u:p@hooks.example.com/x", "user-info"),
        ("gopher://hooks.example.com/x", "https://"),
        ("https://hooks.example.com/x#frag", "fragment"),
    ],
)
def test_targets_are_refused_by_rule(url: str, rule: str) -> None:
    with pytest.raises(TargetUrlError, match=rule):
        TargetPolicy().check(url)


def test_the_operator_may_allow_a_loopback_host() -> None:
    policy = TargetPolicy.from_setting("127.0.0.1, hooks.internal:8080")
    assert policy.check("http://127.0.0.1:5000/hook").hostname == "127.0.0.1"
    assert policy.check("http://hooks.internal:8080/x").port == 8080
    with pytest.raises(TargetUrlError):
        policy.check("http://hooks.internal:9090/x")


def test_bodies_and_signature() -> None:
    message = Message("id1", "sync-failed", "shop", "default", "east", "a" * 40, reason="boom")
    body = webhook_body(message)
    assert json.loads(body)["event"] == "sync-failed" and webhook_body(message) == body
    assert signature_of("s", body).startswith("sha256=") and len(signature_of("s", body)) == 71
    assert slack_text(message) == "[gitfleet] sync-failed: shop@east at aaaaaaaaaaaa: boom"
