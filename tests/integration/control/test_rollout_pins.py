"""Rollout pins in a real Redis: a cluster that joins mid-rollout is pinned to the stable
revision by whichever of a worker and the rollout controller asks first, never overwritten by
the other; a cluster that leaves loses its pin, so joining again makes it a newcomer."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from fleet.control.registry.records import AppRecord, RolloutSpec, RolloutStep
from fleet.control.rollouts.state import Phase, RolloutState, RolloutStore, StepState
from fleet.control.scheduler import Scheduler
from fleet.model import Trigger
from tests.integration.control.test_scheduler import _setup
from tests.support.fleet import FleetEnv

STABLE, ROLLING = "a" * 40, "b" * 40


def _paused(registry: FleetEnv) -> tuple[AppRecord, RolloutStore]:
    """An app over the clusters labelled for it, paused after a step that put eu at ROLLING;
    us carries no label yet."""
    _setup(registry)
    app = registry.add_app(registry.app_name(0), "eu", automated=True, interval_s=3600)
    spec = RolloutSpec(steps=(RolloutStep(max_parallel="1", pause_manual=True),), poll_s=3600)
    selector = {"rollout": registry.prefix}
    destination = replace(app.destination, cluster="", selector=selector)
    registry.store.put_app(replace(app, destination=destination, rollout=spec), create=False)
    eu = registry.store.get_cluster("eu")
    registry.store.put_cluster(replace(eu, labels=selector))
    app = registry.store.get_app(app.name)
    states = RolloutStore(registry.redis, prefix=registry.prefix)
    paused = RolloutState(
        app.name,
        ROLLING,
        uid=app.uid,
        stable=STABLE,
        phase=Phase.PAUSED,
        steps=(StepState(clusters=("eu",), started=900.0),),
        checked=1000.0,
    )
    states.update(app.name, lambda _: paused)
    states.set_pins(app.name, {"eu": ROLLING})
    return app, states


def _join(registry: FleetEnv, cluster: str) -> None:
    found = registry.store.get_cluster(cluster)
    registry.store.put_cluster(replace(found, labels={"rollout": registry.prefix}))


def test_a_worker_pins_a_newcomer_to_the_stable_revision_before_the_controller_does(
    registry: FleetEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    app, states = _paused(registry)
    _join(registry, "us")
    # a worker asked to sync us (a webhook, the scheduler's first request) before any tick
    assert states.pin_for(app.name, app.uid, "us") == STABLE
    assert states.pins(app.name) == {"eu": ROLLING, "us": STABLE}
    assert states.pin_for(app.name, app.uid, "eu") == ROLLING  # a pin is never replaced
    asked: list[tuple[str, Trigger]] = []
    request = registry.dispatcher.request_sync

    def noting(app_name: str, cluster: str, **kwargs: Any) -> Any:
        asked.append((cluster, kwargs["trigger"]))
        return request(app_name, cluster, **kwargs)

    monkeypatch.setattr(registry.dispatcher, "request_sync", noting)
    Scheduler(registry.store, registry.dispatcher).rollouts.tick(1001.0)
    assert states.pins(app.name) == {"eu": ROLLING, "us": STABLE}
    assert ("us", Trigger.ROLLOUT) not in asked  # the controller found the worker's pin


def test_the_controller_pins_first_and_the_worker_finds_its_pin(registry: FleetEnv) -> None:
    app, states = _paused(registry)
    _join(registry, "us")
    Scheduler(registry.store, registry.dispatcher).rollouts.tick(1001.0)
    assert states.pins(app.name) == {"eu": ROLLING, "us": STABLE}
    states.set_pins(app.name, {"us": ROLLING})  # as if a later step moved it meanwhile
    assert states.pin_for(app.name, app.uid, "us") == ROLLING


def test_state_left_by_a_deleted_app_of_the_same_name_pins_nothing(registry: FleetEnv) -> None:
    app, states = _paused(registry)
    assert states.pin_for(app.name, "another-uid", "eu") == ""
    assert states.pin_for(app.name, "another-uid", "us") == ""
    assert "us" not in states.pins(app.name)
    states.forget(app.name)  # no rollout state at all: no pin, nothing written
    assert states.pin_for(app.name, app.uid, "us") == ""
    assert states.pins(app.name) == {}


def test_a_cluster_that_leaves_loses_its_pin_and_rejoins_as_a_newcomer(
    registry: FleetEnv,
) -> None:
    app, states = _paused(registry)
    _join(registry, "us")
    states.set_pins(app.name, {"us": "c" * 40})  # what it ran in an earlier rollout
    us = registry.store.get_cluster("us")
    registry.store.put_cluster(replace(us, labels={}))  # leaves
    scheduler = Scheduler(registry.store, registry.dispatcher)
    scheduler.rollouts.tick(1001.0)
    assert states.pins(app.name) == {"eu": ROLLING}
    _join(registry, "us")
    assert states.pin_for(app.name, app.uid, "us") == STABLE


def test_a_step_cluster_that_leaves_keeps_its_pin_and_resumes_its_step(
    registry: FleetEnv,
) -> None:
    """eu's step started at ROLLING: its pin outlives an absence, so coming back it syncs
    ROLLING again and the step's judge finds that sync (a stable pin would stall the step)."""
    app, states = _paused(registry)
    eu = registry.store.get_cluster("eu")
    registry.store.put_cluster(replace(eu, labels={}))
    Scheduler(registry.store, registry.dispatcher).rollouts.tick(1001.0)
    assert states.pins(app.name) == {"eu": ROLLING}
    _join(registry, "eu")
    assert states.pin_for(app.name, app.uid, "eu") == ROLLING


def test_a_preview_answers_the_stable_revision_without_pinning(registry: FleetEnv) -> None:
    app, states = _paused(registry)
    _join(registry, "us")
    assert states.pin_for(app.name, app.uid, "us", claim=False) == STABLE
    assert "us" not in states.pins(app.name)


def test_a_state_from_a_newer_coordinator_still_pins(registry: FleetEnv) -> None:
    """A worker reads only the uid and the stable revision: a phase it does not know (a
    coordinator upgraded first) does not stop its syncs."""
    app, states = _paused(registry)
    key = registry.store.keys.rollout(app.name)
    stored = json.loads(registry.redis.get(key) or b"{}")
    registry.redis.set(key, json.dumps({**stored, "phase": "Verifying", "extra": [1]}))
    assert states.pin_for(app.name, app.uid, "us") == STABLE
