"""The registry as one versioned JSON document: `export` and `restore` (`gitfleet registry`).

A lost Redis should be a restore, not a rebuild: the objects stay in the clusters, tracked by
each app's uid (`AppRecord.uid`), so an app restored with the same uid finds its inventory and
its next sync changes nothing. The document holds every cluster, project, app, repository
credential and token digest, and every stored secret (cluster and git credentials, project
webhook secrets) as the ciphertext Redis holds, never decrypted: each names the id of the key
that signed it (`SecretBox.key_id_of`, which checks the Fernet HMAC without decrypting), so a
restore into a coordinator lacking that key is refused before anything is written. Tokens are
kept as their SHA-256 digest only, as in Redis. Statuses, history and queues are not in it: a
worker rebuilds them on its next sync.

Format: `{"format": "gitfleet-registry", "version": 1, "exported": ..., "key_ids": [...],
"clusters": [...], "projects": [...], "apps": [...], "repositories": [...], "tokens": [...]}`,
each entry the stored record (snake_case, as `records.to_data` writes it) with its sealed
secrets. A reader refuses a document of a newer version (its meaning may have changed) and
ignores keys it does not know, so a field added with a default stays readable.

Restore merges by name: an entry absent from Redis is created, one equal to what is stored is
unchanged, one that differs is replaced by the document's (records, secrets and uid as in the
document). Nothing the document lacks is deleted. One exception: the bootstrap admin token of the
target (GITFLEET_ADMIN_TOKEN, or the one generated at its first start) is `kept`, so an import
never revokes the token of the admin running it. Everything is written in one transaction
(`transact`), checked first: every app's project and cluster must exist in the document or in
Redis, every secret must be signed by a key this coordinator holds.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from redis import Redis
from redis.client import Pipeline

from fleet.control.keys import Keys
from fleet.control.registry import records
from fleet.control.registry.appcache import note_bulk_change
from fleet.control.registry.errors import InvalidReference
from fleet.control.registry.gitcreds import RepositoryRecord
from fleet.control.registry.records import (
    DEFAULT_PROJECT,
    AppRecord,
    ClusterRecord,
    ProjectRecord,
    TokenRecord,
)
from fleet.control.registry.secrets import SecretBox
from fleet.control.registry.tokens import BOOTSTRAP_TOKEN, KEEP_EXPIRED
from fleet.control.registry.transact import transact
from fleet.errors import Fault, FleetError

FORMAT = "gitfleet-registry"
VERSION = 1
KINDS = ("clusters", "projects", "apps", "repositories", "tokens")


class BackupError(FleetError):
    """A registry document cannot be read or restored here (format, version, key)."""

    stage = "registry"
    fault = Fault.USER


@dataclass(frozen=True)
class Sealed:
    """A secret as Redis holds it: Fernet ciphertext (text), and the id of the key that
    signed it ("" when no key this coordinator holds did)."""

    ciphertext: str
    key_id: str = ""


@dataclass(frozen=True)
class ClusterEntry:
    record: ClusterRecord
    credentials: Sealed | None = None


@dataclass(frozen=True)
class ProjectEntry:
    record: ProjectRecord
    webhook_secret: Sealed | None = None
    age_key: Sealed | None = None  # `fleet.control.registry.agekeys`


@dataclass(frozen=True)
class AppEntry:
    record: AppRecord
    credentials: Sealed | None = None


@dataclass(frozen=True)
class RepositoryEntry:
    record: RepositoryRecord
    credentials: Sealed | None = None


@dataclass(frozen=True)
class TokenEntry:
    digest: str
    record: TokenRecord


@dataclass(frozen=True)
class RegistryDocument:
    format: str = FORMAT
    version: int = VERSION
    exported: str = ""
    key_ids: tuple[str, ...] = ()
    clusters: tuple[ClusterEntry, ...] = ()
    projects: tuple[ProjectEntry, ...] = ()
    apps: tuple[AppEntry, ...] = ()
    repositories: tuple[RepositoryEntry, ...] = ()
    tokens: tuple[TokenEntry, ...] = ()


class Change(StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    KEPT = "kept"  # the target's own bootstrap admin token: the file's never replaces it


@dataclass(frozen=True)
class RestoreReport:
    """What a restore did, per kind: the names created, updated and left unchanged."""

    changes: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    def counts(self) -> dict[str, dict[str, int]]:
        return {k: {c: len(n) for c, n in v.items()} for k, v in self.changes.items()}


def dumps(document: RegistryDocument) -> str:
    return json.dumps(records.to_data(document), sort_keys=True, indent=1)


def loads(text: str | bytes) -> RegistryDocument:
    """A document from its JSON; BackupError for another format or a newer version."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise BackupError(f"the registry file is not JSON: {e}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BackupError(f'not a gitfleet registry file (no "format": "{FORMAT}")')
    version = data.get("version")
    if not isinstance(version, int) or version < 1:
        raise BackupError(f"the registry file has no valid version ({version!r})")
    if version > VERSION:
        raise BackupError(
            f"the registry file is version {version}, written by a newer gitfleet; this one "
            f"reads up to version {VERSION}: restore it with that newer gitfleet"
        )
    try:
        return records.from_json(RegistryDocument, json.dumps(data))
    except ValueError as e:
        raise BackupError(f"the registry file is not valid: {_first_error(e)}") from None


def _first_error(error: ValueError) -> str:
    errors = getattr(error, "errors", None)
    if callable(errors):
        found = errors()
        if found:
            where = ".".join(str(p) for p in found[0].get("loc", ()))
            return f"{where}: {found[0].get('msg', 'invalid')}"
    return "invalid"


class Backup:
    """Export and restore of the registry kept under one prefix."""

    def __init__(self, redis: Redis, box: SecretBox, keys: Keys) -> None:
        self.redis = redis
        self.box = box
        self.keys = keys

    # -- export -------------------------------------------------------------------------------

    def export(self) -> RegistryDocument:
        """Every record and sealed secret, read in one MULTI so the copy is consistent."""
        k = self.keys
        names = {
            kind: sorted(m.decode() for m in self.redis.smembers(index))  # type: ignore[union-attr]
            for kind, index in (
                ("clusters", k.clusters),
                ("projects", k.projects),
                ("apps", k.apps),
                ("repositories", k.repositories),
            )
        }
        tokens: dict[bytes, bytes] = self.redis.hgetall(k.tokens)  # type: ignore[assignment]
        digests = {n.decode(): d.decode() for n, d in tokens.items()}
        pairs: list[tuple[str, str, str]] = []  # kind, name, key
        for name in names["clusters"]:
            pairs += [("cluster", name, k.cluster(name))]
            pairs += [("cluster-creds", name, k.cluster_credentials(name))]
        for name in names["projects"]:
            pairs += [("project", name, k.project(name))]
            pairs += [("project-secret", name, k.project_webhook_secret(name))]
            pairs += [("project-age-key", name, k.project_age_key(name))]
        for name in names["apps"]:
            pairs += [("app", name, k.app(name)), ("app-creds", name, k.app_credentials(name))]
        for name in names["repositories"]:
            pairs += [("repository", name, k.repository(name))]
            pairs += [("repository-creds", name, k.repository_credentials(name))]
        for name, value in sorted(digests.items()):
            pairs += [("token", name, k.token(value))]
        raws = self.redis.mget([key for _, _, key in pairs]) if pairs else []
        got = {(kind, name): raw for (kind, name, _), raw in zip(pairs, raws, strict=True)}

        def record(cls: type[Any], kind: str, name: str) -> Any:
            raw = got.get((kind, name))
            return records.from_json(cls, raw) if isinstance(raw, bytes) else None

        def sealed(kind: str, name: str) -> Sealed | None:
            raw = got.get((kind, name))
            if not isinstance(raw, bytes):
                return None
            return Sealed(raw.decode(), self.box.key_id_of(raw))

        clusters = [
            ClusterEntry(r, sealed("cluster-creds", n))
            for n in names["clusters"]
            if (r := record(ClusterRecord, "cluster", n))
        ]
        projects = [
            ProjectEntry(r, sealed("project-secret", n), sealed("project-age-key", n))
            for n in names["projects"]
            if (r := record(ProjectRecord, "project", n))
        ]
        apps = [
            AppEntry(r, sealed("app-creds", n))
            for n in names["apps"]
            if (r := record(AppRecord, "app", n))
        ]
        repositories = [
            RepositoryEntry(r, sealed("repository-creds", n))
            for n in names["repositories"]
            if (r := record(RepositoryRecord, "repository", n))
        ]
        token_entries = [
            TokenEntry(digests[n], r)
            for n in sorted(digests)
            if (r := record(TokenRecord, "token", n))
        ]
        return RegistryDocument(
            exported=datetime.now(UTC).isoformat(timespec="seconds"),
            key_ids=self.box.key_ids(),
            clusters=tuple(clusters),
            projects=tuple(projects),
            apps=tuple(apps),
            repositories=tuple(repositories),
            tokens=tuple(token_entries),
        )

    # -- restore ------------------------------------------------------------------------------

    def restore(self, document: RegistryDocument) -> RestoreReport:
        """Merge `document` into the registry by name, in one transaction (see the module)."""
        self._check_keys(document)
        report: dict[str, dict[str, list[str]]] = {}
        writes: list[Callable[[Pipeline], None]] = []

        def check() -> None:
            report.clear()
            writes.clear()
            self._check_references(document)
            for kind, planned in self._plan(document):
                report[kind] = {str(c): [] for c in Change}
                for name, change, write in planned:
                    report[kind][str(change)].append(name)
                    if change in (Change.CREATED, Change.UPDATED):
                        writes.append(write)

        def write(pipe: Pipeline) -> None:
            for one in writes:
                one(pipe)
            note_bulk_change(self.redis, self.keys, pipe)  # every app cache reloads

        transact(self.redis, self.keys, check, write)
        return RestoreReport(report)

    def _check_keys(self, document: RegistryDocument) -> None:
        held = set(self.box.key_ids())
        for where, secret in _secrets(document):
            if not self.box.key_id_of(secret.ciphertext.encode()):
                named = f"key {secret.key_id}" if secret.key_id else "a key"
                raise BackupError(
                    f"{where}: its secret was encrypted with {named} this coordinator does not "
                    f"hold (it holds {', '.join(sorted(held))}): put that key in "
                    "GITFLEET_SECRET_KEY (a comma-separated list may hold old keys) and retry"
                )

    def _check_references(self, document: RegistryDocument) -> None:
        projects = {e.record.name for e in document.projects} | {DEFAULT_PROJECT.name}
        clusters = {e.record.name for e in document.clusters}
        for entry in document.apps:
            app = entry.record
            if app.project not in projects and not self.redis.exists(
                self.keys.project(app.project)
            ):
                raise InvalidReference("apps", f"app {app.name}: no project named {app.project}")
            cluster = app.destination.cluster
            if (
                cluster
                and cluster not in clusters
                and not self.redis.exists(self.keys.cluster(cluster))
            ):
                raise InvalidReference("apps", f"app {app.name}: no cluster named {cluster}")

    def _plan(
        self, document: RegistryDocument
    ) -> list[tuple[str, list[tuple[str, Change, Callable[[Pipeline], None]]]]]:
        k = self.keys
        return [
            ("clusters", [self._pair(e.record.name, k.clusters, k.cluster(e.record.name),
                                     e.record, k.cluster_credentials(e.record.name),
                                     e.credentials) for e in document.clusters]),
            ("projects", [self._with_age_key(e, self._pair(
                e.record.name, k.projects, k.project(e.record.name), e.record,
                k.project_webhook_secret(e.record.name), e.webhook_secret))
                for e in document.projects]),
            ("apps", [self._pair(e.record.name, k.apps, k.app(e.record.name), e.record,
                                 k.app_credentials(e.record.name), e.credentials)
                      for e in document.apps]),
            ("repositories", [self._pair(e.record.name, k.repositories,
                                         k.repository(e.record.name), e.record,
                                         k.repository_credentials(e.record.name),
                                         e.credentials) for e in document.repositories]),
            ("tokens", [self._token(e) for e in document.tokens]),
        ]  # fmt: skip

    def _with_age_key(
        self, entry: ProjectEntry, planned: tuple[str, Change, Callable[[Pipeline], None]]
    ) -> tuple[str, Change, Callable[[Pipeline], None]]:
        """A project's plan that also restores (or removes) its age key."""
        name, change, write_pair = planned
        key = self.keys.project_age_key(name)
        wanted = entry.age_key.ciphertext.encode() if entry.age_key else None
        if change == Change.UNCHANGED and self.redis.get(key) != wanted:
            change = Change.UPDATED

        def write(pipe: Pipeline) -> None:
            write_pair(pipe)
            if wanted is not None:
                pipe.set(key, wanted)
            else:
                pipe.delete(key)

        return name, change, write

    def _pair(
        self,
        name: str,
        index: str,
        key: str,
        record: Any,
        secret_key: str,
        secret: Sealed | None,
    ) -> tuple[str, Change, Callable[[Pipeline], None]]:
        """Plan one record with its secret: compare the stored record (parsed, so key order and
        added defaults do not count) and ciphertext with the document's."""
        stored, stored_secret = self.redis.mget([key, secret_key])
        wanted_secret = secret.ciphertext.encode() if secret else None
        if stored is None:
            change = Change.CREATED
        elif records.from_json(type(record), stored) == record and stored_secret == wanted_secret:
            change = Change.UNCHANGED
        else:
            change = Change.UPDATED

        def write(pipe: Pipeline) -> None:
            pipe.set(key, records.to_json(record))
            pipe.sadd(index, name)
            if wanted_secret is not None:
                pipe.set(secret_key, wanted_secret)
            else:
                pipe.delete(secret_key)

        return name, change, write

    def _token(self, entry: TokenEntry) -> tuple[str, Change, Callable[[Pipeline], None]]:
        name, k = entry.record.name, self.keys
        held = self.redis.hget(k.tokens, name)
        stored = self.redis.get(k.token(entry.digest))
        if not isinstance(held, bytes):
            change = Change.CREATED
        elif name == BOOTSTRAP_TOKEN and held.decode() != entry.digest:
            change = Change.KEPT  # else the import would revoke the admin token running it
        elif (
            held.decode() == entry.digest
            and stored is not None
            and (records.from_json(TokenRecord, stored) == entry.record)
        ):
            change = Change.UNCHANGED
        else:
            change = Change.UPDATED

        def write(pipe: Pipeline) -> None:
            if isinstance(held, bytes) and held.decode() != entry.digest:
                pipe.delete(k.token(held.decode()))
            key = k.token(entry.digest)
            pipe.set(key, records.to_json(entry.record))
            if entry.record.expires:
                pipe.expireat(key, datetime.fromisoformat(entry.record.expires) + KEEP_EXPIRED)
            pipe.hset(k.tokens, name, entry.digest)

        return name, change, write


def _secrets(document: RegistryDocument) -> list[tuple[str, Sealed]]:
    found: list[tuple[str, Sealed | None]] = []
    found += [(f"cluster {e.record.name}", e.credentials) for e in document.clusters]
    found += [(f"project {e.record.name}", e.webhook_secret) for e in document.projects]
    found += [(f"project {e.record.name} age key", e.age_key) for e in document.projects]
    found += [(f"app {e.record.name}", e.credentials) for e in document.apps]
    found += [(f"repository {e.record.name}", e.credentials) for e in document.repositories]
    return [(where, s) for where, s in found if s is not None]


EMPTY_WARNING = (
    "the registry is empty: if this fleet ran before, its Redis lost its data; restore it "
    "with `gitfleet registry import FILE` (a file `gitfleet registry export` wrote)"
)


def is_empty(redis: Redis, keys: Keys) -> bool:
    """No cluster, app, project or repository is registered (tokens do not count: the bootstrap
    admin token exists in a registry nobody has used yet)."""
    indexes = (keys.clusters, keys.apps, keys.projects, keys.repositories)
    return not any(redis.exists(index) for index in indexes)
