"""Instance keys, rq-safe job ids, who a trigger speaks for, and how merged intents resolve."""

from __future__ import annotations

import re

import pytest

from fleet.control.registry.instances import instance_key, split_instance
from fleet.control.routing.owners import safe_id
from fleet.control.routing.pending import Intent, merged
from fleet.model import Trigger


def test_an_instance_key_splits_at_the_first_at_sign() -> None:
    assert instance_key("shop", "eu@prod") == "shop@eu@prod"
    assert split_instance("shop@eu@prod") == ("shop", "eu@prod")
    with pytest.raises(ValueError, match="instance: 'shop' is not of the form app@cluster"):
        split_instance("shop")


@pytest.mark.parametrize("text", ["shop@eu", "a_b@c:d/e", "shop@kind-é", "x@y.z"])
def test_safe_ids_use_only_rq_job_id_characters_and_stay_distinct(text: str) -> None:
    encoded = safe_id(text)
    assert re.fullmatch(r"[A-Za-z0-9_-]+", encoded)
    assert safe_id(text + "_") != encoded


def test_safe_ids_do_not_collide_for_an_underscore_and_its_escape() -> None:
    assert safe_id("a_40b") != safe_id("a@b")


def test_a_person_asks_by_hand_rollback_or_cli_and_automation_by_webhook_interval_or_heal() -> None:
    assert {t for t in Trigger if t.by_person} == {"manual", "rollback", "cli"}
    assert {t for t in Trigger if t.automated} == {"webhook", "interval", "self-heal", "rollout"}


def test_a_manual_intent_is_not_replaced_by_an_automated_one() -> None:
    manual = Intent(Trigger.MANUAL, "v2")
    assert merged(manual, Intent(Trigger.INTERVAL)) == manual
    assert merged(Intent(Trigger.INTERVAL), manual) == manual
    assert merged(manual, Intent(Trigger.ROLLBACK, "v1")) == Intent(Trigger.ROLLBACK, "v1")
    assert merged(Intent(Trigger.WEBHOOK), Intent(Trigger.SELF_HEAL)) == Intent(Trigger.SELF_HEAL)


def test_an_intent_survives_its_json_form() -> None:
    intent = Intent(Trigger.MANUAL, "v3", {"traceparent": "00-abc-def-01"}, attempt=2)
    assert Intent.from_json(intent.to_json()) == intent
