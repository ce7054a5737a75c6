"""Merging never lets a retry win over a fresh trigger, and the loser's trace can be named."""

from __future__ import annotations

from fleet.control.routing.pending import Intent, merged, trace_of
from fleet.model import Trigger

TRACE_A = {"traceparent": "00-" + "a" * 32 + "-" + "1" * 16 + "-01"}
TRACE_B = {"traceparent": "00-" + "b" * 32 + "-" + "2" * 16 + "-01"}


def test_a_retry_merged_into_a_newer_trigger_keeps_its_revision_and_trace() -> None:
    webhook = Intent(Trigger.WEBHOOK, "new-sha", TRACE_B)
    retry = Intent(Trigger.WEBHOOK, "old-sha", TRACE_A, attempt=1, since=100.0)
    assert merged(webhook, retry) is webhook
    assert merged(retry, webhook) is webhook


def test_a_retry_of_a_manual_sync_does_not_beat_a_fresh_automated_trigger() -> None:
    interval = Intent(Trigger.INTERVAL, "", TRACE_B)
    manual_retry = Intent(Trigger.MANUAL, "old-sha", TRACE_A, attempt=2)
    assert merged(manual_retry, interval) is interval
    assert merged(interval, manual_retry) is interval


def test_between_retries_and_between_fresh_triggers_the_old_rules_hold() -> None:
    first, second = Intent(Trigger.RETRY, "a", attempt=1), Intent(Trigger.RETRY, "b", attempt=2)
    assert merged(first, second) is second
    manual = Intent(Trigger.MANUAL, "x")
    assert merged(manual, Intent(Trigger.WEBHOOK, "y")) is manual


def test_the_trace_id_is_read_from_a_w3c_carrier() -> None:
    assert trace_of(TRACE_A) == "a" * 32
    assert trace_of({}) == ""
    assert Intent.from_json(Intent(since=12.5, attempt=1).to_json()).since == 12.5
    assert Intent.from_json('{"trigger": "manual"}').since == 0.0


def test_a_persons_prune_choice_survives_merges_but_no_automated_sync_inherits_it() -> None:
    pruning = Intent(Trigger.MANUAL, "", TRACE_A, prune=True)
    webhook = Intent(Trigger.WEBHOOK, "new-sha", TRACE_B)
    assert merged(pruning, webhook).prune is True  # the person's sync wins, with its choice
    assert merged(webhook, pruning).prune is True
    newer = Intent(Trigger.MANUAL, "", TRACE_B, prune=False)
    assert merged(pruning, newer).prune is False  # the newer person's choice wins
    assert merged(pruning, Intent(Trigger.MANUAL)).prune is None  # back to the policy
    retried = Intent(Trigger.MANUAL, "", TRACE_A, attempt=1, prune=True)
    assert merged(retried, webhook).prune is None  # the fresh automated sync, as the policy says
    assert Intent.from_json(pruning.to_json()).prune is True
    assert Intent.from_json('{"trigger": "manual"}').prune is None


def test_an_interval_or_webhook_request_never_replaces_a_rollout_steps_sync() -> None:
    """The step's sync keeps its trigger and the rollout's trace; either would sync the pin."""
    rollout = Intent(Trigger.ROLLOUT, "", TRACE_A)
    for quiet in (Intent(Trigger.INTERVAL, "", TRACE_B), Intent(Trigger.WEBHOOK, "x", TRACE_B)):
        assert merged(rollout, quiet) is rollout
        assert merged(quiet, rollout) is rollout
    heal = Intent(Trigger.SELF_HEAL, "", TRACE_A)
    webhook = Intent(Trigger.WEBHOOK, "new", TRACE_B)
    assert merged(heal, webhook) is webhook  # a push still replaces a queued self-heal
    assert merged(Intent(Trigger.INTERVAL), webhook) is webhook  # the newest
