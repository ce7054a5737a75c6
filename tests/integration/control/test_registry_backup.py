"""`fleet.control.registry.backup` against a real Redis: what an export carries and how a
restore merges, refuses and leaves everything as it was when it refuses."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import replace

import pytest
import redis
from cryptography.fernet import Fernet

from fleet.control.keys import Keys
from fleet.control.registry.backup import Backup, BackupError, dumps, is_empty, loads
from fleet.control.registry.errors import InvalidReference
from fleet.control.registry.gitcreds import RepositoryRecord
from fleet.control.registry.records import (
    AppDestination,
    AppRecord,
    AppSource,
    ClusterCredentials,
    ClusterRecord,
    ProjectRecord,
    Role,
)
from fleet.control.registry.secrets import SecretBox
from fleet.control.registry.store import Store
from fleet.engine.source.cache import GitCredentials

KEY = Fernet.generate_key().decode()


@pytest.fixture
def stores(client: redis.Redis) -> Iterator[tuple[Store, Store]]:
    """Two registries (prefixes) in one Redis, sharing the key: a source and an empty target."""
    prefixes = [f"t{uuid.uuid4().hex[:8]}" for _ in range(2)]
    box = SecretBox.from_setting(KEY)
    yield Store(client, box, prefix=prefixes[0]), Store(client, box, prefix=prefixes[1])
    for prefix in prefixes:
        for key in client.scan_iter(Keys(prefix).pattern):
            client.delete(key)


def _backup(store: Store) -> Backup:
    return Backup(store.redis, store.box, store.keys)


def _fill(store: Store) -> str:
    store.put_cluster(ClusterRecord("c1", "https://k:6443"), ClusterCredentials(token="kube-1"))
    store.put_project(ProjectRecord("team", source_repos=("*",)), webhook_secret="hook-secret-1")
    app = AppRecord(
        "shop", AppSource("https://git.example.com/team/shop"), AppDestination("shop", "c1"), "team"
    )
    store.put_app(app, credentials=GitCredentials("bot", "git-password-1"), create=True)
    store.repositories.create(
        RepositoryRecord("team", "https://git.example.com/team", ("team",)),
        GitCredentials("", "repo-token-1"),
    )
    return store.create_token("ci", Role.MEMBER, "team")


def test_an_export_carries_ciphertext_and_digests_only_and_restores_everything(
    stores: tuple[Store, Store],
) -> None:
    source, target = stores
    token = _fill(source)
    text = dumps(_backup(source).export())
    for secret in ("kube-1", "hook-secret-1", "git-password-1", "repo-token-1", token, KEY):
        assert secret not in text
    data = json.loads(text)
    assert data["key_ids"] == list(source.box.key_ids())
    assert data["apps"][0]["credentials"]["key_id"] == source.box.key_ids()[0]

    assert is_empty(target.redis, target.keys)
    report = _backup(target).restore(loads(text))
    assert report.counts()["apps"] == {"created": 1, "updated": 0, "unchanged": 0, "kept": 0}
    assert not is_empty(target.redis, target.keys)
    assert target.get_app("shop") == source.get_app("shop")  # uid included
    assert target.git_credentials("shop") == GitCredentials("bot", "git-password-1")
    assert target.cluster_config("c1").token == "kube-1"
    assert target.webhook_secrets() == {"team": "hook-secret-1"}
    assert target.lookup_token(token) == source.lookup_token(token)
    assert [r.name for r in target.repositories.list()] == ["team"]

    again = _backup(target).restore(loads(text)).counts()
    assert all(c["created"] == c["updated"] == 0 for c in again.values()), again


def test_a_restore_merges_by_name_and_replaces_what_differs(stores: tuple[Store, Store]) -> None:
    source, target = stores
    _fill(source)
    document = _backup(source).export()
    target.put_cluster(ClusterRecord("c1", "https://other:6443"), ClusterCredentials(token="x"))
    target.put_cluster(ClusterRecord("c2", "https://c2:6443"), ClusterCredentials(token="y"))
    report = _backup(target).restore(document)
    assert report.changes["clusters"]["updated"] == ["c1"]
    assert target.get_cluster("c1").server == "https://k:6443"
    assert target.get_cluster("c2").server == "https://c2:6443"  # nothing is deleted


def test_a_restore_refuses_a_secret_of_a_key_it_lacks_and_writes_nothing(
    stores: tuple[Store, Store],
) -> None:
    source, target = stores
    _fill(source)
    document = _backup(source).export()
    stranger = Backup(
        target.redis, SecretBox.from_setting(Fernet.generate_key().decode()), target.keys
    )
    with pytest.raises(BackupError, match="GITFLEET_SECRET_KEY"):
        stranger.restore(document)
    assert is_empty(target.redis, target.keys)


def test_a_restore_refuses_an_app_whose_project_is_nowhere(stores: tuple[Store, Store]) -> None:
    source, target = stores
    _fill(source)
    document = _backup(source).export()
    with pytest.raises(InvalidReference, match="no project named team"):
        _backup(target).restore(replace(document, projects=()))
    assert is_empty(target.redis, target.keys)


def test_a_newer_or_foreign_file_is_refused_with_a_clear_error() -> None:
    with pytest.raises(BackupError, match="version 2, written by a newer gitfleet"):
        loads(json.dumps({"format": "gitfleet-registry", "version": 2}))
    with pytest.raises(BackupError, match="not a gitfleet registry file"):
        loads(json.dumps({"apps": []}))
    with pytest.raises(BackupError, match="not JSON"):
        loads("{")


def test_a_restore_keeps_the_targets_own_bootstrap_admin_token(stores: tuple[Store, Store]) -> None:
    source, target = stores
    source.tokens.ensure_admin("gf_old-admin-token-0123456789")
    target.tokens.ensure_admin("gf_new-admin-token-0123456789")
    report = _backup(target).restore(_backup(source).export())
    assert report.changes["tokens"]["kept"] == ["bootstrap-admin"]
    assert target.lookup_token("gf_new-admin-token-0123456789") is not None
    assert target.lookup_token("gf_old-admin-token-0123456789") is None


def test_a_projects_age_key_travels_sealed_and_is_restored(stores: tuple[Store, Store]) -> None:
    source, target = stores
    _fill(source)
    age_key = "AGE-SECRET-KEY-1" + "Q" * 58
    source.age_keys.put("team", age_key)
    text = dumps(_backup(source).export())
    assert age_key not in text
    _backup(target).restore(loads(text))
    assert target.age_keys.key_for("team") == age_key
    source.age_keys.delete("team")
    report = _backup(target).restore(loads(dumps(_backup(source).export())))
    assert report.counts()["projects"]["updated"] == 1
    assert target.age_keys.key_for("team") == ""
