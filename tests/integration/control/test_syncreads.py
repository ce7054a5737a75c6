"""A worker's registry reads, kept while the registry generation stands (real Redis): what a
write through the registry changes is seen by the next sync; nothing else is read again."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from fleet.control.registry.errors import NotFound
from fleet.control.registry.gitcreds import RepositoryRecord
from fleet.control.registry.records import DEFAULT_PROJECT, ClusterCredentials, ClusterRecord
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


def test_a_clusters_settings_are_read_with_the_generation_once_and_while_fresh(
    registry: FleetEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`refresh(cluster)` reads the cluster's connection settings in its one round trip: the
    sync's next read of them is answered from it (no GET), the one after reads Redis again,
    an early read older than `EARLY_READ_S` is never used, and another thread's is never
    this one's."""
    from fleet.control.registry import store as store_module

    _setup(registry)
    store, key = registry.store, registry.store.keys.cluster_credentials("eu")
    reads = SyncReads(store)
    gets: list[str] = []
    real_get = store.redis.get

    def counted(name: str) -> object:
        if name == key:
            gets.append(name)
        return real_get(name)

    monkeypatch.setattr(store.redis, "get", counted)
    reads.refresh("eu")
    assert store.cluster_config("eu").server == "https://127.0.0.1:1"
    assert gets == [], "answered from the refresh's round trip"
    _moved(registry, "https://127.0.0.1:2")
    assert store.cluster_config("eu").server == "https://127.0.0.1:2"  # not the sync's first
    assert gets == [key]
    monkeypatch.setattr(store_module, "EARLY_READ_S", 0.0)
    reads.refresh("eu")
    _moved(registry, "https://127.0.0.1:3")
    assert store.cluster_config("eu").server == "https://127.0.0.1:3"  # stale: read again
    monkeypatch.setattr(store_module, "EARLY_READ_S", 60.0)
    other = threading.Thread(target=lambda: reads.refresh("eu"))
    other.start()
    other.join()
    _moved(registry, "https://127.0.0.1:4")
    assert store.cluster_config("eu").server == "https://127.0.0.1:4"
    # what a refresh read early and the sync did not use is gone when it is done, and the
    # next refresh that names no cluster (a preview) drops it too
    reads.refresh("eu")
    reads.done()
    _moved(registry, "https://127.0.0.1:5")
    assert store.cluster_config("eu").server == "https://127.0.0.1:5"
    reads.refresh("eu")
    reads.refresh()
    _moved(registry, "https://127.0.0.1:6")
    assert store.cluster_config("eu").server == "https://127.0.0.1:6"


def _moved(env: FleetEnv, server: str) -> None:
    creds = ClusterCredentials(server=server, token="t")
    env.store.put_cluster(ClusterRecord("eu", server), creds)


def test_an_apps_own_credentials_are_never_older_than_its_record(registry: FleetEnv) -> None:
    """Found by an attack review of reading them early, with the generation: an app moved to
    a new URL with new credentials in one write, right after the sync's refresh, must meet
    its new credentials (not be refused for the old ones); an app deleted and created again
    without credentials must not be sent the deleted one's."""
    _setup(registry)
    name = registry.app_name(0)
    app = registry.add_app(name, "eu")
    registry.store.put_app(app, credentials=GitCredentials(username="u", password="p1"))
    reads = SyncReads(registry.store)
    reads.refresh()
    reads.get_app(name)  # the app cache is warm, as in a worker
    registry.add_app("other", "eu")
    reads.refresh("eu")
    moved = replace(
        registry.store.get_app(name), source=replace(app.source, repo=app.source.repo + "-moved")
    )
    registry.store.put_app(moved, credentials=GitCredentials(username="u", password="p2"))
    found = reads.git_credentials_for(reads.get_app(name))
    assert found is not None and found.password == "p2"
    reads.done()

    reads.refresh("eu")
    registry.store.delete_app(name, force=True)
    again = registry.add_app(name, "eu")
    assert not again.has_credentials
    other = threading.Thread(target=registry.store.list_apps_cached)  # another thread's reload
    other.start()
    other.join()
    record = reads.get_app(name)
    assert record.uid == again.uid
    assert reads.git_credentials_for(record) is None, "the deleted app's credentials were sent"
