"""The registry in Redis: clusters, projects and applications, with their credentials encrypted.

Records are JSON under one key each, with a set per kind as the index (key layout in
`fleet.control.keys`); credentials are Fernet-encrypted (`fleet.control.registry.secrets`) under
keys of their own, so a record can be read, listed and logged without ever decrypting anything.

Every write that checks something first (the name is free, the cluster exists, no app still
targets the cluster, the dependencies make no cycle) goes through
`fleet.control.registry.transact`: WATCH the registry generation, check, then write every key in
one MULTI/EXEC. A failed request never leaves half a record, and no check can be overtaken by a
concurrent write, so an app cannot start targeting a cluster while that cluster is being
deleted. Deletes that would strand what depends on them are refused with `InUse` (a forced
cluster delete is the one explicit escape; the errors are in `fleet.control.registry.errors`).

Status and history (`fleet.control.registry.status`) and tokens (`fleet.control.registry.tokens`)
live in their own modules; `Store` offers their operations too so callers need one object.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, TypeVar

from redis import Redis
from redis.client import Pipeline

from fleet.control.keys import Keys
from fleet.control.registry import appcache, records
from fleet.control.registry.agekeys import AgeKeys
from fleet.control.registry.appcache import note_change, note_changes
from fleet.control.registry.depgraph import find_cycle
from fleet.control.registry.errors import (
    AlreadyExists,
    Conflict,
    InUse,
    InvalidReference,
    NotFound,
    StoreError,
)
from fleet.control.registry.gitcreds import BoundCredentials, Repositories, own_credentials
from fleet.control.registry.instances import clusters_for, instance_key
from fleet.control.registry.records import (
    DEFAULT_PROJECT,
    AppRecord,
    ClusterCredentials,
    ClusterRecord,
    ProjectRecord,
    Role,
    TokenRecord,
)
from fleet.control.registry.repos import normalize_repo
from fleet.control.registry.secrets import SecretBox
from fleet.control.registry.status import SyncLog
from fleet.control.registry.syncrecords import InstanceStatus, SkipRecord, SyncRecord
from fleet.control.registry.tokens import Tokens
from fleet.control.registry.transact import now, transact
from fleet.engine.source.cache import GitCredentials
from fleet.engine.source.remotes import RemoteUrl, RepoUrlError, identity, parse_remote
from fleet.kube.kubeconfig import ClusterConfig

__all__ = ["AlreadyExists", "Conflict", "InUse", "InvalidReference", "NotFound", "Store"]
__all__ += ["StoreError"]

R = TypeVar("R")
EARLY_READ_S = 1.0  # how long a value `Store.generation_with` read stays usable
CoveringCredentials = Callable[[str, RemoteUrl], GitCredentials | None]
"""(project, parsed URL) -> the repository credentials that cover it for the project."""


class Store:
    """Registry operations over one Redis connection pool."""

    def __init__(self, redis: Redis, box: SecretBox, *, prefix: str = "gitfleet") -> None:
        self.redis = redis
        self.box = box
        self.keys = Keys(prefix)
        self.log = SyncLog(redis, self.keys)
        self.tokens = Tokens(redis, self.keys)
        self.repositories = Repositories(redis, self.keys, box)
        self.age_keys = AgeKeys(redis, self.keys, box)
        self._app_cache = appcache.shared(redis, self.keys)  # one per process and registry
        self._configs: dict[str, tuple[bytes, ClusterConfig]] = {}  # by cluster: ciphertext
        self._early = threading.local()  # `generation_with`'s reads, per thread

    def _transact(self, check: Callable[[], None], write: Callable[[Pipeline], None]) -> None:
        transact(self.redis, self.keys, check, write)

    def _read(self, key: str) -> bytes | None:
        found, early = self._early_value(key)
        if found:
            return early
        raw = self.redis.get(key)
        return raw if isinstance(raw, bytes) else None

    def generation_with(self, keys: Sequence[str]) -> bytes | None:
        """`generation()`, with `keys` read in the same round trip for this thread's next read
        of each (`_read`), if it comes within `EARLY_READ_S`, replacing whatever this thread's
        previous call read early: a sync reads the generation, then its cluster's connection
        settings, which change without a generation bump and so are read every sync, a few
        milliseconds later. Only for keys whose value a sync may take from its start."""
        if not keys:
            self.forget_early()
            return self.generation()
        pipe = self.redis.pipeline(transaction=False)
        pipe.get(self.keys.generation)
        for key in keys:
            pipe.get(key)
        generation, *values = pipe.execute()
        self._early.values = {
            key: value if isinstance(value, bytes) else None
            for key, value in zip(keys, values, strict=True)
        }
        self._early.until = time.monotonic() + EARLY_READ_S
        return generation if isinstance(generation, bytes) else None

    def forget_early(self) -> None:
        """Drop this thread's early reads (`generation_with`) not used yet."""
        self._early.values = None

    def _early_value(self, key: str) -> tuple[bool, bytes | None]:
        """(True, the value `generation_with` read for `key`), once, while fresh; else
        (False, None): read it now."""
        values: dict[str, bytes | None] | None = getattr(self._early, "values", None)
        if not values or key not in values:
            return False, None
        value = values.pop(key)
        return (True, value) if time.monotonic() < self._early.until else (False, None)

    def _existence(self, key: str, kind: str, name: str, create: bool | None) -> None:
        """create True: the name must be free; False: it must exist; None: either."""
        exists = bool(self.redis.exists(key))
        if create is True and exists:
            raise AlreadyExists(f"{kind} {name} already exists")
        if create is False and not exists:
            raise NotFound(f"no {kind} named {name}")

    def _load_all(self, cls: type[R], index: str, key: Callable[[str], str]) -> list[R]:
        names = sorted(m.decode() for m in self.redis.smembers(index))  # type: ignore[union-attr]
        raws = self.redis.mget([key(n) for n in names]) if names else []
        return [records.from_json(cls, raw) for raw in raws if isinstance(raw, bytes)]

    def _encrypted(self, record: Any) -> bytes:
        return self.box.encrypt(records.to_json(record))

    # -- clusters -----------------------------------------------------------------------------

    def put_cluster(
        self,
        record: ClusterRecord,
        credentials: ClusterCredentials | None = None,
        *,
        create: bool | None = None,
    ) -> ClusterRecord:
        """Register or update a cluster; `credentials` None keeps the stored ones."""
        record = replace(record, created=record.created or now())
        key = self.keys.cluster(record.name)

        def check() -> None:
            self._existence(key, "cluster", record.name, create)
            if credentials is None and not self.redis.exists(key):
                raise InvalidReference("credentials", f"cluster {record.name} needs credentials")

        def write(pipe: Pipeline) -> None:
            pipe.set(key, records.to_json(record))
            pipe.sadd(self.keys.clusters, record.name)
            if credentials is not None:
                pipe.set(self.keys.cluster_credentials(record.name), self._encrypted(credentials))

        self._transact(check, write)
        return record

    def get_cluster(self, name: str) -> ClusterRecord:
        raw = self._read(self.keys.cluster(name))
        if raw is None:
            raise NotFound(f"no cluster named {name}")
        return records.from_json(ClusterRecord, raw)

    def list_clusters(self) -> list[ClusterRecord]:
        return self._load_all(ClusterRecord, self.keys.clusters, self.keys.cluster)

    def cluster_config(self, name: str) -> ClusterConfig:
        """Decrypted connection settings of a cluster: for workers, never for a response."""
        raw = self._read(self.keys.cluster_credentials(name))
        if raw is None:
            raise NotFound(f"no credentials for cluster {name}")
        known = self._configs.get(name)
        if known is not None and known[0] == raw:
            return known[1]  # same ciphertext: skip the decrypt and the kubeconfig parse
        credentials = records.from_json(ClusterCredentials, self.box.decrypt(raw))
        config = credentials.config(name)
        if not credentials.in_cluster:  # the pod's token file rotates: read it every time
            self._configs[name] = (raw, config)
        return config

    def delete_cluster(self, name: str, *, force: bool = False) -> None:
        """Unregister a cluster; refused (InUse) while apps target it, unless `force`."""

        def check() -> None:
            self._existence(self.keys.cluster(name), "cluster", name, False)
            users = [a.name for a in self.list_apps_cached() if name in self.instances(a)]
            if users and not force:
                raise InUse(
                    f"cluster {name} is the destination of app(s) {', '.join(users)}; delete or "
                    "move them first, or pass force=true to unregister it anyway"
                )

        def write(pipe: Pipeline) -> None:
            pipe.delete(self.keys.cluster(name), self.keys.cluster_credentials(name))
            pipe.srem(self.keys.clusters, name)

        self._transact(check, write)

    # -- projects -----------------------------------------------------------------------------

    def put_project(
        self,
        record: ProjectRecord,
        *,
        webhook_secret: str | None = None,
        create: bool | None = None,
    ) -> ProjectRecord:
        """Create or replace a project. `default` is built in: it can be replaced, not created.
        A given `webhook_secret` is stored encrypted; with none given, the stored one is kept if
        `record.has_webhook_secret`, and removed otherwise."""
        has_secret = webhook_secret is not None or record.has_webhook_secret
        record = replace(record, created=record.created or now(), has_webhook_secret=has_secret)
        key, secret_key = (
            self.keys.project(record.name),
            self.keys.project_webhook_secret(record.name),
        )

        def check() -> None:
            if record.name != DEFAULT_PROJECT.name:
                self._existence(key, "project", record.name, create)
            elif create is True:
                raise AlreadyExists("project default is built in; change it with PUT")
            if webhook_secret is None and has_secret and not self.redis.exists(secret_key):
                raise InvalidReference("webhookSecret", "there is no stored webhook secret")

        def write(pipe: Pipeline) -> None:
            pipe.set(key, records.to_json(record))
            pipe.sadd(self.keys.projects, record.name)
            if webhook_secret is not None:
                pipe.set(secret_key, self.box.encrypt(webhook_secret))
            elif not has_secret:
                pipe.delete(secret_key)

        self._transact(check, write)
        return record

    def get_project(self, name: str) -> ProjectRecord:
        raw = self._read(self.keys.project(name))
        if raw is not None:
            return records.from_json(ProjectRecord, raw)
        if name == DEFAULT_PROJECT.name:
            return DEFAULT_PROJECT
        raise NotFound(f"no project named {name}")

    def list_projects(self) -> list[ProjectRecord]:
        stored = {
            p.name: p for p in self._load_all(ProjectRecord, self.keys.projects, self.keys.project)
        }
        stored.setdefault(DEFAULT_PROJECT.name, DEFAULT_PROJECT)
        return [stored[name] for name in sorted(stored)]

    def webhook_secrets(self) -> dict[str, str]:
        """Decrypted webhook secrets by project: for the webhook handler, never for a response."""
        names = [p.name for p in self.list_projects() if p.has_webhook_secret]
        raws = (
            self.redis.mget([self.keys.project_webhook_secret(n) for n in names]) if names else []
        )
        pairs = zip(names, raws, strict=True)
        return {n: self.box.decrypt(r) for n, r in pairs if isinstance(r, bytes)}

    def delete_project(self, name: str) -> None:
        """Delete a project with its webhook secret and its member tokens; refused while apps
        belong to it, and for the built-in default."""
        tokens: dict[str, str] = {}

        def check() -> None:
            if name == DEFAULT_PROJECT.name:
                raise InUse("project default is built in and cannot be deleted")
            self._existence(self.keys.project(name), "project", name, False)
            users = [a.name for a in self.list_apps_cached() if a.project == name]
            if users:
                raise InUse(f"project {name} still has app(s) {', '.join(users)}")
            tokens.update(self.tokens.of_project(name))

        def write(pipe: Pipeline) -> None:
            pipe.delete(self.keys.project(name), self.keys.project_webhook_secret(name))
            pipe.delete(self.keys.project_age_key(name))
            pipe.srem(self.keys.projects, name)
            self.tokens.forget(pipe, tokens)

        self._transact(check, write)

    # -- applications -------------------------------------------------------------------------

    def put_app(
        self,
        record: AppRecord,
        *,
        credentials: GitCredentials | None = None,
        create: bool | None = None,
    ) -> AppRecord:
        """Create or replace an app. Given git credentials are stored, bound to the app's
        repository URL (`fleet.control.registry.gitcreds`); with none given, the stored ones
        are kept if `record.has_credentials` and they are bound to the app's URL, and removed
        otherwise: the returned record's `has_credentials` says which."""
        stamp = now()
        record = replace(record, created=record.created or stamp, updated=stamp)
        key, creds_key = self.keys.app(record.name), self.keys.app_credentials(record.name)
        keep = credentials is None and record.has_credentials

        def check() -> None:
            nonlocal record
            self._existence(key, "app", record.name, create)
            self._check_references(record)
            if keep and not self.redis.exists(creds_key):
                raise InvalidReference("credentials", "there are no stored git credentials")
            bound = keep and self._bound_to(creds_key, record.source.repo)
            record = replace(record, has_credentials=credentials is not None or bound)
            record = replace(record, uid=self._uid_for(key))

        def write(pipe: Pipeline) -> None:
            pipe.set(key, records.to_json(record))
            pipe.sadd(self.keys.apps, record.name)
            note_change(self.redis, self.keys, pipe, record.name)
            if credentials is not None:
                bound = BoundCredentials.bind(credentials, record.source.repo)
                pipe.set(creds_key, self._encrypted(bound))
            elif not record.has_credentials:
                pipe.delete(creds_key)

        self._transact(check, write)
        return record

    def create_apps(
        self, items: Sequence[tuple[AppRecord, GitCredentials | None]]
    ) -> list[AppRecord]:
        """Create several new apps in one transaction: every one of them, or none (the error
        names the first app that cannot be created, by its index in `items`). An app may depend
        on registered apps and on the apps before it in `items`. Each gets a fresh uid; given
        git credentials are stored bound to its repository URL, as `put_app` does."""
        stamp = now()
        made = [
            replace(
                r,
                created=stamp,
                updated=stamp,
                uid=str(uuid.uuid4()),
                has_credentials=c is not None,
            )
            for r, c in items
        ]

        def check() -> None:
            names = [r.name for r in made]
            if len(set(names)) != len(names):
                twice = next(n for n in names if names.count(n) > 1)
                raise InvalidReference("name", f"app {twice} appears twice in the batch")
            reads = self.redis.pipeline(transaction=False)
            for name in names:
                reads.exists(self.keys.app(name))
            for i, (name, exists) in enumerate(zip(names, reads.execute(), strict=True)):
                if exists:
                    raise AlreadyExists(f"apps.{i} ({name}): app {name} already exists")
            places: set[tuple[str, str]] = set()
            for i, record in enumerate(made):
                place = (record.project, record.destination.cluster)
                if place not in places:
                    try:
                        self._check_places(*place)
                    except InvalidReference as e:
                        raise InvalidReference(f"apps.{i} ({record.name})", str(e)) from None
                    places.add(place)
            self._check_dependencies(made, batch=True)

        def write(pipe: Pipeline) -> None:
            for record, (_, credentials) in zip(made, items, strict=True):
                pipe.set(self.keys.app(record.name), records.to_json(record))
                creds_key = self.keys.app_credentials(record.name)
                if credentials is None:
                    pipe.delete(creds_key)
                else:
                    bound = BoundCredentials.bind(credentials, record.source.repo)
                    pipe.set(creds_key, self._encrypted(bound))
            pipe.sadd(self.keys.apps, *(r.name for r in made))
            note_changes(self.redis, self.keys, pipe, [r.name for r in made])

        self._transact(check, write)
        return made

    def _uid_for(self, key: str) -> str:
        """An app keeps its uid for life (a record stored before uids keeps none: its objects
        are tracked by `AppRecord.owner_uid`); a new app gets a fresh one, whatever the caller
        passed, so a later app of a deleted app's name is another app."""
        raw = self._read(key)
        return records.from_json(AppRecord, raw).uid if raw is not None else str(uuid.uuid4())

    def _bound_to(self, creds_key: str, repo: str) -> bool:
        raw = self._read(creds_key)
        stored = records.from_json(BoundCredentials, self.box.decrypt(raw)) if raw else None
        return stored is not None and stored.url == identity(repo)

    def _check_references(self, record: AppRecord) -> None:
        self._check_places(record.project, record.destination.cluster)
        self._check_dependencies([record])

    def _check_places(self, project: str, cluster: str) -> None:
        try:
            self.get_project(project)
        except NotFound:
            raise InvalidReference("project", f"no project named {project}") from None
        if cluster and not self.redis.exists(self.keys.cluster(cluster)):
            raise InvalidReference("destination.cluster", f"no cluster named {cluster}")

    def _check_dependencies(self, made: Sequence[AppRecord], *, batch: bool = False) -> None:
        """Each of `made` (apps written in one transaction, in order) depends only on other apps
        of its project, registered or before it in `made`, and no dependency makes a cycle.
        Each registered app is read at most once, however many of `made` name it. In a
        `batch` the error names the app by its index."""
        pending = {r.name: r for r in made}
        registered: dict[str, AppRecord | None] = {}

        def lookup(name: str) -> AppRecord | None:
            if name in pending:
                return pending[name]
            if name not in registered:
                raw = self._read(self.keys.app(name))
                registered[name] = records.from_json(AppRecord, raw) if raw is not None else None
            return registered[name]

        def refuse(index: int, message: str) -> InvalidReference:
            if batch:
                return InvalidReference(
                    f"apps.{index} ({made[index].name})", f"dependsOn: {message}"
                )
            return InvalidReference("dependsOn", message)

        earlier: set[str] = set()
        for index, record in enumerate(made):
            for dep in record.depends_on:
                found = lookup(dep) if dep in earlier or dep not in pending else None
                if dep == record.name or found is None or found.project != record.project:
                    where = ", and in a batch on apps before it" if batch else ""
                    raise refuse(
                        index,
                        f"no other app named {dep} in project {record.project} (an app depends "
                        f"only on apps of its own project{where})",
                    )
            earlier.add(record.name)

        def depends_on(name: str) -> tuple[str, ...]:
            app = lookup(name)
            return tuple(app.depends_on) if app is not None else ()

        cycle = find_cycle(pending, depends_on)
        if cycle:
            index = next(i for i, r in enumerate(made) if r.name in cycle)
            raise refuse(index, "makes a cycle: " + " -> ".join(cycle))

    def get_app(self, name: str) -> AppRecord:
        raw = self._read(self.keys.app(name))
        if raw is None:
            raise NotFound(f"no app named {name}")
        return records.from_json(AppRecord, raw)

    def list_apps(self) -> list[AppRecord]:
        return self._load_all(AppRecord, self.keys.apps, self.keys.app)

    def list_apps_cached(self) -> list[AppRecord]:
        """`list_apps` from memory, re-reading only the apps written since the last call
        (`fleet.control.registry.appcache`): a loop over 10,000 apps (scheduler tick, worker
        refresh, a page of the app list) costs one GET while nothing changes, and a few reads
        after a write. Unchanged apps keep their record objects."""
        return self._app_cache.apps()

    def cached_app(self, name: str, generation: int) -> AppRecord:
        """`get_app` from this process's app cache, brought to `generation` (a GET of
        `generation()` the caller made) or newer: no read while the registry has not changed."""
        found = self._app_cache.get(name, generation)
        if found is None:
            raise NotFound(f"no app named {name}")
        return found

    def git_credentials(self, app: str) -> GitCredentials | None:
        """Decrypted git credentials of an app as stored, bound or not: never for a response."""
        stored = self._own_credentials(app)
        return stored.credentials() if stored else None

    def git_credentials_for(
        self, app: AppRecord, covering: CoveringCredentials | None = None
    ) -> GitCredentials | None:
        """What a worker sends to fetch `app`: its own credentials, only while bound to its URL
        (else CredentialsRefused), or else the repository credentials that cover its URL for
        its project (`covering`, default `Repositories.for_app`), or none."""
        stored = self._own_credentials(app.name)
        if stored is not None:
            return own_credentials(app, stored)
        try:
            url = parse_remote(app.source.repo)
        except RepoUrlError:
            return None
        return (covering or self.repositories.for_app)(app.project, url)

    def _own_credentials(self, app: str) -> BoundCredentials | None:
        raw = self._read(self.keys.app_credentials(app))
        return records.from_json(BoundCredentials, self.box.decrypt(raw)) if raw else None

    def instances(self, app: AppRecord, clusters: list[ClusterRecord] | None = None) -> list[str]:
        """Names of the registered clusters `app` deploys to: its cluster, or every cluster
        whose labels match its selector (an empty selector matches all), sorted."""
        return clusters_for(app, self.list_clusters() if clusters is None else clusters)

    def dependents(self, name: str) -> list[str]:
        """The apps whose depends_on names `name`."""
        return [a.name for a in self.list_apps_cached() if name in a.depends_on]

    def mark_deleting(self, name: str) -> AppRecord:
        """Flag an app whose objects a cascading delete is pruning."""
        return self.put_app(replace(self.get_app(name), deleting=True), create=False)

    def delete_app(self, name: str, *, force: bool = False) -> None:
        """Remove an app with its credentials, status, history and synced records (its objects
        stay put)."""

        def check() -> None:
            self._existence(self.keys.app(name), "app", name, False)
            users = self.dependents(name)
            if users and not force:
                raise InUse(f"app(s) {', '.join(users)} depend on app {name}")

        clusters = set(self.log.statuses(name)) | {c.name for c in self.list_clusters()}
        synced = self.keys.synced(normalize_repo(self.get_app(name).source.repo))

        def write(pipe: Pipeline) -> None:
            pipe.delete(self.keys.app(name), self.keys.app_credentials(name))
            pipe.delete(self.keys.status(name), self.keys.operation(name))
            for cluster in sorted(clusters):
                pipe.delete(self.keys.history(name, cluster))
                pipe.hdel(synced, instance_key(name, cluster))
            pipe.srem(self.keys.apps, name)
            note_change(self.redis, self.keys, pipe, name)

        self._transact(check, write)

    # -- status, history and tokens (see fleet.control.registry.status and
    # fleet.control.registry.tokens) ----------------------

    def set_status(self, app: str, cluster: str, status: InstanceStatus) -> None:
        self.log.set_status(app, cluster, status)

    def get_status(self, app: str, cluster: str) -> InstanceStatus | None:
        return self.log.get_status(app, cluster)

    def many_statuses(self, instances: list[tuple[str, str]]) -> list[InstanceStatus | None]:
        """The status of each (app, cluster), in order, in one round trip."""
        return self.log.many_statuses(instances)

    def generation(self) -> bytes | None:
        """Changes with every registry write (apps, clusters, projects), never otherwise."""
        return self._read(self.keys.generation)

    def add_history(
        self, app: str, cluster: str, record: SyncRecord | SkipRecord, keep: int = 50
    ) -> None:
        self.log.add_history(app, cluster, record, keep)

    def history(self, app: str, cluster: str) -> list[SyncRecord | SkipRecord]:
        return self.log.history(app, cluster)

    def create_token(
        self, name: str, role: Role, project: str | None = None, *, expires: datetime | None = None
    ) -> str:
        return self.tokens.create(name, role, project, expires=expires)

    def lookup_token(self, plaintext: str) -> TokenRecord | None:
        return self.tokens.lookup(plaintext)
