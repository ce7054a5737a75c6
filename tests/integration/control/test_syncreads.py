"""A worker's registry reads, kept while the registry generation stands (real Redis): what a
write through the registry changes is seen by the next sync; nothing else is read again."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from fleet.control.registry.errors import NotFound
from fleet.control.registry.gitcreds import RepositoryRecord
from fleet.control.registry.records import DEFAULT_PROJECT
from fleet.control.registry.syncreads import SyncReads
from fleet.engine.source.cache import GitCredentials
from tests.integration.control.test_scheduler import _setup
from tests.support.fleet import FleetEnv

AGE_KEY = "AGE-SECRET-KEY-1" + "Q" * 58


def test_records_are_kept_until_a_registry_write_and_then_read_again(
    registry: FleetEnv,
) -> None:
    _setup(registry)
    registry.store.put_project(replace(DEFAULT_PROJECT, name="team"))
    app = registry.add_app(registry.app_name(0), "eu")
    reads = SyncReads(registry.store)
    reads.refresh()
    assert reads.get_app(app.name).name == app.name
    assert reads.instances(app) == ["eu"]
    assert reads.get_project("team").name == "team"
    assert reads.age_key_for("team") == ""
    # a key changed behind the registry's back (no generation bump) is not read again
    registry.redis.delete(registry.store.keys.project("team"))
    reads.refresh()
    assert reads.get_project("team").name == "team"
    # a write through the registry is seen by the next sync
    registry.store.put_project(replace(DEFAULT_PROJECT, name="team", source_repos=("x/*",)))
    registry.store.age_keys.put("team", AGE_KEY)
    eu = registry.store.get_cluster("eu")
    registry.store.put_cluster(replace(eu, labels={"ring": "canary"}))
    registry.add_app("other", "eu")
    moved = replace(registry.store.get_app(app.name), depends_on=("other",))
    registry.store.put_app(moved)
    assert reads.age_key_for("team") == ""  # the sync that began before the writes
    reads.refresh()
    assert reads.get_project("team").source_repos == ("x/*",)
    assert reads.age_key_for("team") == AGE_KEY
    assert reads.get_cluster("eu").labels == {"ring": "canary"}
    assert reads.get_app(app.name).depends_on == ("other",)
    registry.store.age_keys.delete("team")
    reads.refresh()
    assert reads.age_key_for("team") == ""
    registry.store.delete_app(app.name, force=True)
    reads.refresh()
    with pytest.raises(NotFound):
        reads.get_app(app.name)
    with pytest.raises(NotFound):
        reads.get_cluster("nowhere")


def test_a_record_read_while_the_registry_changed_is_used_but_not_kept(
    registry: FleetEnv,
) -> None:
    """Another sync thread found a newer generation while this read ran: what this read got
    may predate that write, so it must not outlive it in memory."""
    _setup(registry)
    registry.store.put_project(replace(DEFAULT_PROJECT, name="team"))
    reads = SyncReads(registry.store)
    reads.refresh()
    old = registry.store.get_project("team")

    def racing() -> object:
        registry.store.put_project(replace(DEFAULT_PROJECT, name="team", source_repos=("y/*",)))
        reads.refresh()  # the other thread
        return old  # what this thread read before the write

    assert reads._kept_or(("project", "team"), racing) is old
    assert reads.get_project("team").source_repos == ("y/*",)


def test_a_sync_reads_its_app_as_of_its_own_refresh_whatever_another_thread_found(
    registry: FleetEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another sync thread's refresh that read the generation before a write, and stored it
    after this thread stored the newer one, must not make this sync read the app from before
    the write (a rollback's automated-sync-off undone by the sync it meant to stop)."""
    _setup(registry)
    app = registry.add_app(registry.app_name(0), "eu", automated=True)
    reads = SyncReads(registry.store)
    reads.refresh()
    older = registry.store.generation()
    assert reads.get_app(app.name).sync_policy.automated  # the app cache is at `older`
    off = replace(app.sync_policy, automated=False)
    registry.store.put_app(replace(registry.store.get_app(app.name), sync_policy=off))
    reads.refresh()  # this sync begins after the write

    def late() -> None:  # the other thread: its GET answered before the write
        monkeypatch.setattr(registry.store, "generation", lambda: older)
        reads.refresh()
        assert reads.get_app(app.name).name == app.name  # it reads as of then, or newer

    other = threading.Thread(target=late)
    other.start()
    other.join()
    assert reads._generation == int(older or 0)  # the shared one went back
    assert not reads.get_app(app.name).sync_policy.automated


def test_repository_credentials_revoked_are_not_sent_by_the_next_sync(
    registry: FleetEnv,
) -> None:
    _setup(registry)
    app = registry.add_app(registry.app_name(0), "eu")
    prefix = app.source.repo.rsplit("/", 1)[0]
    registry.store.repositories.create(
        RepositoryRecord("team", prefix, ("default",)), GitCredentials("", "repo-token-1")
    )
    reads = SyncReads(registry.store)
    reads.refresh()
    found = reads.git_credentials_for(app)
    assert found is not None and found.password == "repo-token-1"
    registry.store.repositories.delete("team")
    reads.refresh()
    assert reads.git_credentials_for(app) is None


def test_an_instances_credentials_are_read_with_the_generation_once_and_while_fresh(
    registry: FleetEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`refresh(app, cluster)` reads the app's own git credentials and the cluster's
    connection settings in its one round trip: the sync's next read of each is answered from
    it (no GET), the one after reads Redis again, and an early read older than
    `EARLY_READ_S` is never used."""
    from fleet.control.registry import store as store_module

    _setup(registry)
    app = registry.add_app(registry.app_name(0), "eu")
    secret = GitCredentials(username="u", password="p1")
    registry.store.put_app(app, credentials=secret)
    reads = SyncReads(registry.store)
    gets: list[str] = []
    real_get = registry.store.redis.get

    watched = {
        registry.store.keys.app_credentials(app.name),
        registry.store.keys.cluster_credentials("eu"),
    }

    def counted(key: str) -> object:
        if key in watched:  # the two keys a sync reads every time (the registry's writes read more)
            gets.append(key)
        return real_get(key)

    monkeypatch.setattr(registry.store.redis, "get", counted)
    reads.refresh(app.name, "eu")
    config = registry.store.cluster_config("eu")
    found = reads.git_credentials_for(app)
    assert found is not None and found.password == "p1"
    assert config.server == "https://127.0.0.1:1"
    assert gets == [], "answered from the refresh's round trip"
    # the credentials change: a read that is not the sync's first goes to Redis
    registry.store.put_app(app, credentials=GitCredentials(username="u", password="p2"))
    again = reads.git_credentials_for(app)
    assert again is not None and again.password == "p2"
    assert gets == [registry.store.keys.app_credentials(app.name)]
    # an early read gone stale is not used: the value in Redis now is
    monkeypatch.setattr(store_module, "EARLY_READ_S", 0.0)
    reads.refresh(app.name, "eu")
    registry.store.put_app(app, credentials=GitCredentials(username="u", password="p3"))
    late = reads.git_credentials_for(app)
    assert late is not None and late.password == "p3"
    # another thread's refresh never answers this one's reads
    reads.refresh(app.name, "eu")
    gets.clear()
    monkeypatch.setattr(store_module, "EARLY_READ_S", 60.0)
    other = threading.Thread(target=lambda: reads.refresh(app.name, "eu"))
    other.start()
    other.join()
    registry.store.put_app(app, credentials=GitCredentials(username="u", password="p4"))
    mine = reads.git_credentials_for(app)
    assert mine is not None and mine.password == "p4"
