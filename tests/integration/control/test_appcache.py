"""`Store.list_apps_cached` against a real Redis: two coordinators (two Store objects, as two
API replicas or an API and a worker) see each other's app writes, deletions and imports, and a
refresh re-reads only what changed."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace

import pytest
import redis
from cryptography.fernet import Fernet

from fleet.control.keys import Keys
from fleet.control.registry import appcache, records
from fleet.control.registry.backup import Backup
from fleet.control.registry.records import (
    AppDestination,
    AppRecord,
    AppSource,
    ClusterCredentials,
    ClusterRecord,
)
from fleet.control.registry.secrets import SecretBox
from fleet.control.registry.store import Store

KEY = Fernet.generate_key().decode()


@pytest.fixture
def replicas(client: redis.Redis) -> Iterator[tuple[Store, Store]]:
    prefix = f"t{uuid.uuid4().hex[:8]}"
    box = SecretBox.from_setting(KEY)
    writer, reader = Store(client, box, prefix=prefix), Store(client, box, prefix=prefix)
    writer.put_cluster(ClusterRecord("c1", "https://k:6443"), ClusterCredentials(token="t"))
    yield writer, reader
    for key in client.scan_iter(Keys(prefix).pattern):
        client.delete(key)


def _app(name: str, path: str = "deploy") -> AppRecord:
    return AppRecord(
        name, AppSource("https://git.example.com/t/r", path), AppDestination("ns", "c1")
    )


def _names(store: Store) -> list[str]:
    return [a.name for a in store.list_apps_cached()]


def test_another_replicas_creates_replaces_and_deletes_show_in_name_order(
    replicas: tuple[Store, Store],
) -> None:
    writer, reader = replicas
    for name in ("bravo", "alpha"):
        writer.put_app(_app(name), create=True)
    assert _names(reader) == ["alpha", "bravo"]

    writer.put_app(_app("charlie"), create=True)
    writer.put_app(
        replace(writer.get_app("alpha"), source=AppSource("https://git.example.com/t/r", "v2"))
    )
    writer.delete_app("bravo")

    assert _names(reader) == ["alpha", "charlie"]
    assert reader.list_apps_cached()[0].source.path == "v2"
    assert reader.list_apps_cached() == reader.list_apps()


def test_a_refresh_rereads_only_the_apps_written_since_and_keeps_the_others(
    replicas: tuple[Store, Store], client: redis.Redis
) -> None:
    writer, reader = replicas
    for i in range(20):
        writer.put_app(_app(f"app-{i:02d}"), create=True)
    before = {a.name: a for a in reader.list_apps_cached()}
    client.set(writer.keys.app("app-05"), b"not json: only a full reload would read this")
    writer.put_app(
        replace(writer.get_app("app-07"), source=AppSource("https://git.example.com/t/r", "x"))
    )

    after = {a.name: a for a in reader.list_apps_cached()}

    assert after["app-07"].source.path == "x"
    assert after["app-05"] is before["app-05"]  # not re-read: its change was never noted
    assert all(after[n] is before[n] for n in before if n != "app-07")


def test_a_registry_import_and_a_trimmed_change_log_make_every_cache_reload(
    replicas: tuple[Store, Store], client: redis.Redis
) -> None:
    writer, reader = replicas
    writer.put_app(_app("alpha"), create=True)
    assert _names(reader) == ["alpha"]
    document = Backup(writer.redis, writer.box, writer.keys).export()
    writer.delete_app("alpha")
    assert _names(reader) == []

    Backup(writer.redis, writer.box, writer.keys).restore(document)
    assert _names(reader) == ["alpha"]

    client.set(writer.keys.app("ghost"), records.to_json(_app("ghost")))
    client.sadd(writer.keys.apps, "ghost")  # written with no change noted, as before this cache
    generation = int(client.get(writer.keys.generation) or 0)
    client.set(writer.keys.app_changes_floor, generation + appcache.WINDOW)
    client.incr(writer.keys.generation)
    assert _names(reader) == ["alpha", "ghost"]


def test_changes_name_what_was_written_since_the_last_call_deletions_included(
    replicas: tuple[Store, Store], client: redis.Redis
) -> None:
    writer, _ = replicas
    cache = appcache.AppCache(client, writer.keys)
    reader = cache.consumer()
    for name in ("alpha", "bravo"):
        writer.put_app(_app(name), create=True)
    first, everything = cache.changes(reader)
    assert everything and set(first) == {"alpha", "bravo"}

    writer.put_app(_app("charlie"), create=True)
    writer.put_app(replace(writer.get_app("alpha"), source=AppSource(_app("a").source.repo, "v2")))
    writer.delete_app("bravo")
    changed, everything = cache.changes(reader)

    assert not everything
    assert set(changed) == {"alpha", "bravo", "charlie"}
    assert changed["bravo"] is None
    assert changed["alpha"] is not None and changed["alpha"].source.path == "v2"
    assert cache.changes(reader) == ({}, False)  # nothing written since


def test_each_consumer_of_changes_gets_every_change_once(
    replicas: tuple[Store, Store], client: redis.Redis
) -> None:
    """Owner maps of one process share its cache (`appcache.shared`): one reading the changes
    must never hide them from another."""
    writer, _ = replicas
    cache = appcache.AppCache(client, writer.keys)
    early, late = cache.consumer(), None
    writer.put_app(_app("alpha"), create=True)
    assert cache.changes(early) == ({"alpha": cache.apps()[0]}, True)
    late = cache.consumer()
    writer.put_app(_app("bravo"), create=True)
    assert set(cache.changes(early)[0]) == {"bravo"}
    late_changes, everything = cache.changes(late)
    assert everything and set(late_changes) == {"alpha", "bravo"}  # its first call: all
    writer.delete_app("alpha")
    assert cache.changes(late) == ({"alpha": None}, False)
    assert cache.changes(early) == ({"alpha": None}, False)
    cache.drop(early)
    writer.put_app(_app("charlie"), create=True)
    assert set(cache.changes(late)[0]) == {"charlie"}


def test_a_process_keeps_one_cache_per_registry_and_client(
    replicas: tuple[Store, Store], client: redis.Redis
) -> None:
    writer, _ = replicas
    one = appcache.shared(client, writer.keys)
    assert appcache.shared(client, writer.keys) is one
    assert appcache.shared(client, Keys("another-prefix")) is not one
    other_client = redis.Redis(connection_pool=client.connection_pool)
    assert appcache.shared(other_client, writer.keys) is not one


def test_a_registry_whose_generation_went_back_is_reloaded(
    replicas: tuple[Store, Store], client: redis.Redis
) -> None:
    """Redis lost its data (a new server, a failover that lost writes) and the registry was
    written again from generation 0: the changes noted since the cache's last look say nothing
    about this registry, so the cache reads it whole."""
    writer, reader = replicas
    for name in ("alpha", "bravo", "charlie"):
        writer.put_app(_app(name), create=True)
    assert _names(reader) == ["alpha", "bravo", "charlie"]
    for key in client.scan_iter(writer.keys.pattern):
        client.delete(key)
    writer.put_cluster(ClusterRecord("c1", "https://k:6443"), ClusterCredentials(token="t"))
    writer.put_app(_app("delta"), create=True)
    assert _names(reader) == ["delta"]
    generation = int(client.get(writer.keys.generation) or 0)
    assert reader.cached_app("delta", generation).name == "delta"


def test_trimming_the_change_log_never_lowers_a_floor_a_restore_raised(
    replicas: tuple[Store, Store], client: redis.Redis
) -> None:
    writer, _ = replicas
    trim_at = 1000 * (appcache.WINDOW // 1000 + 1)  # the next write trims the log
    client.set(writer.keys.generation, trim_at - 1)
    client.set(writer.keys.app_changes_floor, trim_at - 10)  # as a restore sets it
    writer.put_app(_app("alpha"), create=True)
    assert int(client.get(writer.keys.generation) or 0) == trim_at
    assert int(client.get(writer.keys.app_changes_floor) or 0) == trim_at - 10


def test_a_reader_that_looked_before_a_newer_one_is_served_without_a_reload(
    replicas: tuple[Store, Store], client: redis.Redis
) -> None:
    """Two sync threads read the generation on either side of a write; the one with the older
    number asks last. A reload of every app would cost the fleet's size in reads and parses;
    what the cache holds is newer than asked, which is as good."""
    writer, reader = replicas
    writer.put_app(_app("alpha"), create=True)
    older = int(client.get(writer.keys.generation) or 0)
    writer.put_app(_app("bravo"), create=True)
    newer = int(client.get(writer.keys.generation) or 0)
    assert reader.cached_app("bravo", newer).name == "bravo"
    client.set(writer.keys.app("alpha"), b"not json: only a full reload would read this")
    assert reader.cached_app("alpha", older).name == "alpha"
    assert reader.cached_app("bravo", older).name == "bravo"
