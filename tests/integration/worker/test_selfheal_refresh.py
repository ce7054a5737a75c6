"""A worker's self-heal refresh (every 2 s) passes over no app and reads no status while
neither the registry nor the live workers changed, and reads the new instance's status once
they do.

At 10,000 apps that pass over every owned instance was an eighth of a worker's CPU during a
cold sync (`gitfleet bench --profile`). Statuses are counted with the real redis-server's
command stats; passes over the apps by counting calls to the real store's app list."""

from __future__ import annotations

import logging

import pytest
from redis import Redis

from fleet.control.registry.records import AppRecord, ClusterCredentials, ClusterRecord
from fleet.control.registry.syncrecords import InstanceStatus, ResourceRecord
from fleet.control.routing import membership
from fleet.model import Action
from tests.support.fleet import FleetEnv
from worker import selfheal as selfheal_module
from worker.runtime import Runtime
from worker.selfheal import SelfHeal


def _hgets(redis: Redis) -> int:
    stats = redis.info("commandstats")
    return int(stats.get("cmdstat_hget", {}).get("calls", 0))


def _owned_by_w_a(env: FleetEnv, apps: int) -> list[str]:
    """`apps` apps on cluster "eu" (nobody answers on its address), worker w-a live."""
    creds = ClusterCredentials(server="https://127.0.0.1:1", token="t")
    env.store.put_cluster(ClusterRecord("eu", "https://127.0.0.1:1"), creds)
    names = [env.app_name(i) for i in range(apps)]
    for name in names:
        env.add_app(name, "eu")
    membership.register(env.redis, "w-a", ttl=30, meta={}, prefix=env.prefix)
    return names


def test_a_refresh_with_nothing_changed_reads_no_status(registry: FleetEnv) -> None:
    _owned_by_w_a(registry, 6)
    runtime = Runtime(registry.settings("w-a"), registry.redis)
    passes = []
    listed = runtime.store.list_apps_cached

    def counted() -> list[AppRecord]:
        passes.append(1)
        return listed()

    runtime.store.list_apps_cached = counted  # type: ignore[method-assign]
    selfheal = SelfHeal(runtime)
    try:
        selfheal.refresh()  # the first one reads every owned instance's status
        before = _hgets(registry.redis)
        assert len(passes) == 1
        selfheal.refresh()
        selfheal.refresh()
        assert _hgets(registry.redis) == before
        assert len(passes) == 1

        registry.add_app(registry.app_name(6), "eu")  # a registry write moves the stamp
        selfheal.refresh()
        assert _hgets(registry.redis) == before + 1  # the new instance's status, only
        assert len(passes) == 2
        selfheal.refresh()
        assert _hgets(registry.redis) == before + 1
        assert len(passes) == 2
    finally:
        selfheal.stop()
        runtime.close()


def test_a_watch_that_could_not_start_is_tried_again_while_nothing_changed(
    registry: FleetEnv, caplog: pytest.LogCaptureFixture
) -> None:
    """The skip covers the pass over the apps, not the watches: one that failed to start
    (here, a cluster nobody answers on) is retried at every refresh, as before."""
    (name,) = _owned_by_w_a(registry, 1)
    declared = ResourceRecord(version="v1", kind="ConfigMap", name="c", action=Action.CREATED)
    registry.store.set_status(name, "eu", InstanceStatus(resources=(declared,)))
    runtime = Runtime(registry.settings("w-a"), registry.redis)
    selfheal = SelfHeal(runtime)
    try:
        with caplog.at_level(logging.WARNING, logger="gitfleet.selfheal"):
            for _ in range(3):
                selfheal.refresh()
        attempts = [r for r in caplog.records if "cannot watch ConfigMap" in r.getMessage()]
        assert len(attempts) == 3
        assert selfheal.watch_cache("eu", "v1", "ConfigMap") is None
    finally:
        selfheal.stop()
        runtime.close()


def test_a_full_reload_reads_the_statuses_a_chunk_at_a_time(
    registry: FleetEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker's full reload reads every status it owns; at most `STATUS_CHUNK` replies are
    held at once, so its memory does not peak with the size of its shard, and every
    instance's declared objects are still read, across the chunks' edges."""
    names = _owned_by_w_a(registry, 10)
    for index, name in enumerate(names):
        if index != 5:  # one never synced: it declares nothing
            made = ResourceRecord(
                version="v1", kind="ConfigMap", name=f"c{index}", action=Action.CREATED
            )
            registry.store.set_status(name, "eu", InstanceStatus(resources=(made,)))
    monkeypatch.setattr(selfheal_module, "STATUS_CHUNK", 4)
    runtime = Runtime(registry.settings("w-a"), registry.redis)
    asked: list[int] = []
    raw_statuses = runtime.store.log.raw_statuses

    def counted(instances: list[tuple[str, str]]) -> list[bytes | None]:
        asked.append(len(instances))
        return raw_statuses(instances)

    runtime.store.log.raw_statuses = counted  # type: ignore[method-assign]
    selfheal = SelfHeal(runtime)
    try:
        declared = selfheal._owned_declarations()
        assert asked == [4, 4, 2]
        assert declared is not None
        for index, name in enumerate(names):
            names_declared = {ref.name for ref in declared[f"{name}@eu"]}
            assert names_declared == (set() if index == 5 else {f"c{index}"})
    finally:
        selfheal.stop()
        runtime.close()
