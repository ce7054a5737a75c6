"""Make the registry's apps match what each app set generates, and store the sets.

`AppSets.reconcile(set)` renders the template once per parameter set and then, per app name:
creates the apps that are missing, replaces the ones whose spec drifted from the template, and
removes the apps the set owns that are no longer generated, following the set's deletion policy
(cascade: marked `deleting` and pruned by the workers, as `DELETE /apps/X?cascade=true`; keep:
the record goes, the objects stay, bound to the gone app's uid). Every generated app carries
`owner_set`; an app of the same name that the set does not own is never touched (reported).

Idempotent and crash-safe: the whole state is the registry; a reconcile that stops half way is
finished by the next one. When the generator or the template fails, nothing is deleted (a git
host that is down, or a typo in a template, must never empty a fleet). Each generated app is
checked against its project as the API checks a new app (the repository URL rule of
`RemotePolicy`, `fleet.control.policy.check_app_allowed`, and `policy.default_refusal` for the
role of the set's author); a refused app is not created and the reason is in the set's status. The
coordinator runs `reconcile_all` in its own thread (`fleet.control.appsets.runner`), never in
the scheduler's tick; the API calls `reconcile` when a set is created or replaced.

Ownership: each set has a `uid` from its creation; every app it makes is recorded in the hash
`<p>:appset:owners` (app name -> set name, uid, project), and a set owns only the apps marked
`owner_set = name` whose record names its uid (an app made before sets had uids: whose project
is the set's). A set whose name apps of an earlier set still carry is refused (`carriers`).
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from dataclasses import dataclass, replace

from fleet.control.appsets.generators import GeneratorError, Generators, Params
from fleet.control.appsets.records import AppSetRecord, AppSetStatus, DeletionPolicy
from fleet.control.appsets.template import TemplateError, render
from fleet.control.policy import check_app_allowed, default_refusal
from fleet.control.registry import records
from fleet.control.registry.errors import AlreadyExists, NotFound, StoreError
from fleet.control.registry.instances import instance_key
from fleet.control.registry.records import (
    AppRecord,
    ClusterRecord,
    ProjectRecord,
)
from fleet.control.registry.store import Store
from fleet.control.registry.transact import now
from fleet.control.routing.dispatch import Dispatcher
from fleet.engine.source.cache import SourceCache
from fleet.engine.source.remotes import RemotePolicy, RepoUrlError
from fleet.errors import FleetError
from fleet.model import Trigger

log = logging.getLogger("gitfleet.appsets")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


@dataclass(frozen=True)
class Generated:
    """The apps a set generates now, and what it could not render or may not create."""

    apps: dict[str, AppRecord]
    refused: dict[str, str]  # app name -> why


class AppSets:
    def __init__(
        self,
        store: Store,
        dispatcher: Dispatcher,
        source: SourceCache,
        remotes: RemotePolicy,
        *,
        require_impersonation: bool = False,
    ) -> None:
        self.store = store
        self.dispatcher = dispatcher
        self.remotes = remotes
        self.generators = Generators(store, source)
        self.require_impersonation = require_impersonation

    # -- storage ------------------------------------------------------------------------------

    def put(self, appset: AppSetRecord, *, create: bool) -> AppSetRecord:
        key, redis = self.store.keys.appset(f"set:{appset.name}"), self.store.redis
        exists = bool(redis.exists(key))
        if create and exists:
            raise AlreadyExists(f"appset {appset.name} already exists")
        if not create and not exists:
            raise NotFound(f"no appset named {appset.name}")
        old = self.get(appset.name) if exists else None
        stamp = now()
        uid = (old.uid if old else "") or str(uuid.uuid4())
        appset = replace(appset, created=old.created if old else stamp, updated=stamp, uid=uid)
        pipe = redis.pipeline(transaction=True)
        pipe.set(key, records.to_json(appset))
        pipe.sadd(self.store.keys.appset("names"), appset.name)
        pipe.execute()
        return appset

    def get(self, name: str) -> AppSetRecord:
        raw = self.store.redis.get(self.store.keys.appset(f"set:{name}"))
        if raw is None:
            raise NotFound(f"no appset named {name}")
        return records.from_json(AppSetRecord, raw)

    def exists(self, name: str) -> bool:
        return bool(self.store.redis.exists(self.store.keys.appset(f"set:{name}")))

    def list_sets(self) -> list[AppSetRecord]:
        names = self.store.redis.smembers(self.store.keys.appset("names"))
        found = []
        for name in sorted(n.decode() for n in names):  # type: ignore[union-attr]
            try:
                found.append(self.get(name))
            except NotFound:
                continue
        return found

    def status(self, name: str) -> AppSetStatus:
        raw = self.store.redis.get(self.store.keys.appset(f"status:{name}"))
        return records.from_json(AppSetStatus, raw) if raw else AppSetStatus()

    def owned(self, appset: AppSetRecord) -> list[AppRecord]:
        """The apps `appset` made: marked with its name, and recorded under its uid (or, for an
        app made before sets had uids, in its project)."""
        marks = self._marks()
        return [a for a in self.store.list_apps_cached() if self._owns(appset, a, marks)]

    def carriers(self, name: str) -> list[AppRecord]:
        """The apps marked with the set name `name`, whatever set made them."""
        return [a for a in self.store.list_apps_cached() if a.owner_set == name]

    def _owns(
        self, appset: AppSetRecord, app: AppRecord, marks: dict[str, dict[str, str]] | None = None
    ) -> bool:
        if app.owner_set != appset.name or app.project != appset.project:
            return False
        mark = (self._marks() if marks is None else marks).get(app.name)
        if mark is None or mark.get("set") != app.owner_set:
            return True  # made before sets had uids: the name and the project
        return mark.get("uid", "") == appset.uid

    def _marks(self) -> dict[str, dict[str, str]]:
        raw: dict[bytes, bytes] = self.store.redis.hgetall(self._marks_key)  # type: ignore[assignment]
        marks = {}
        for name, value in raw.items():
            try:
                marks[name.decode()] = dict(json.loads(value))
            except ValueError:
                continue
        return marks

    @property
    def _marks_key(self) -> str:
        return self.store.keys.appset("owners")

    def _mark(self, appset: AppSetRecord, app: str) -> None:
        mark = {"set": appset.name, "uid": appset.uid, "project": appset.project}
        self.store.redis.hset(self._marks_key, app, json.dumps(mark))

    def delete(self, name: str) -> list[str]:
        """Remove the set and, following its deletion policy, every app it owns; the names."""
        appset = self.get(name)
        gone = [self._remove(appset, app) for app in self.owned(appset)]
        self.store.redis.delete(
            self.store.keys.appset(f"set:{name}"), self.store.keys.appset(f"status:{name}")
        )
        self.store.redis.srem(self.store.keys.appset("names"), name)
        log.info("appset %s deleted with its apps %s (%s)", name, gone, appset.deletion)
        return gone

    # -- generating ---------------------------------------------------------------------------

    def generate(self, appset: AppSetRecord, *, max_age: float = 0.0) -> Generated:
        """The apps the set generates now (GeneratorError or TemplateError when it cannot)."""
        apps: dict[str, AppRecord] = {}
        for params in self.generators.params(appset, max_age=max_age):
            app = self.render(appset, params)
            if app.name in apps:
                raise TemplateError(
                    f"appset {appset.name}: template.name renders {app.name} for two parameter "
                    "sets; make it unique per element (for example with {{path.basename}})"
                )
            apps[app.name] = app
        if not apps:
            return Generated({}, {})
        try:  # read once for every app: all of them are in the set's project
            project: ProjectRecord | NotFound = self.store.get_project(appset.project)
        except NotFound as e:
            project = e
        clusters = self.store.list_clusters()
        author = default_refusal(
            appset.project,
            appset.author_role,
            require_impersonation=self.require_impersonation,
        )
        refused = {
            name: f"app {name}: {author} (the set's author is not an admin)"
            if author
            else self.refusal(app, project, clusters)
            for name, app in apps.items()
        }
        return Generated(apps, refused)

    def render(self, appset: AppSetRecord, params: Params) -> AppRecord:
        where = f"appset {appset.name}: template"
        data = render(appset.template, params, where=where)
        data.update(project=appset.project, owner_set=appset.name, deleting=False)
        data.update(created="", updated="", uid="", has_credentials=False)
        try:
            app = records.from_json(AppRecord, json.dumps(data))
        except ValueError as e:
            raise TemplateError(f"{where}: does not render an app for {params}: {e}") from None
        for field, value in (
            ("name", app.name),
            ("destination.namespace", app.destination.namespace),
        ):
            if not _DNS_LABEL.fullmatch(value):
                raise TemplateError(
                    f"{where}.{field}: renders {value!r}, not a DNS label (lower-case letters, "
                    "digits and '-', at most 63); try {{path.basenameNormalized}}"
                )
        path = app.source.path.replace("\\", "/").split("/")
        if app.source.path.startswith(("/", "\\")) or ".." in path:
            raise TemplateError(
                f"{where}.source.path: renders {app.source.path!r}, outside the repo"
            )
        return app

    def refusal(
        self, app: AppRecord, project: ProjectRecord | NotFound, clusters: list[ClusterRecord]
    ) -> str:
        """Why `project` (the app's, or why it is missing) refuses the app ("" when it is
        allowed): the checks of the API."""
        try:
            self.remotes.check(app.source.repo)
        except RepoUrlError as e:
            return f"app {app.name}: {e}"
        if isinstance(project, NotFound):
            return f"app {app.name}: {project}"
        cluster = app.destination.cluster
        if cluster and cluster not in {c.name for c in clusters}:
            return f"app {app.name}: destination.cluster: no cluster named {cluster}"
        instances = self.store.instances(app, clusters)
        violations = check_app_allowed(
            app, project, instances, require_impersonation=self.require_impersonation
        )
        return f"app {app.name}: {'; '.join(violations)}" if violations else ""

    # -- reconciling --------------------------------------------------------------------------

    def reconcile_all(self) -> dict[str, AppSetStatus]:
        """Reconcile every set, one after the other, in this thread (tests; the coordinator
        uses `fleet.control.appsets.runner`, which bounds each set's time); one set's failure
        never stops another."""
        done = {}
        for appset in self.list_sets():
            try:
                done[appset.name] = self.reconcile(appset, max_age=appset.refresh_s)
            except Exception:  # one set's bad record must never stop the others
                log.exception("appset %s cannot be reconciled", appset.name)
        return done

    def reconcile(self, appset: AppSetRecord, *, max_age: float = 0.0) -> AppSetStatus:
        owned = {a.name: a for a in self.owned(appset)}
        try:
            generated = self.generate(appset, max_age=max_age)
        except (GeneratorError, TemplateError, StoreError) as e:
            return self._remember(appset, AppSetStatus(apps=tuple(sorted(owned)), errors=(str(e),)))
        created: list[str] = []
        updated: list[str] = []
        errors = [r for r in generated.refused.values() if r]
        for name, app in generated.apps.items():
            if generated.refused[name]:
                continue
            try:
                change = self._apply(appset, app, owned.get(name))
            except FleetError as e:
                errors.append(f"app {name}: {e}")
                continue
            (created if change == "created" else updated if change == "updated" else []).append(
                name
            )
        deleted = [
            self._remove(appset, app) for name, app in owned.items() if name not in generated.apps
        ]
        apps = sorted(set(owned) - set(deleted) | set(created))
        status = AppSetStatus(
            tuple(apps), tuple(created), tuple(updated), tuple(deleted), tuple(errors)
        )
        return self._remember(appset, status)

    def _apply(self, appset: AppSetRecord, app: AppRecord, current: AppRecord | None) -> str:
        if current is None:
            if not self.exists(appset.name):
                return ""  # deleted while this reconcile ran: make no orphan
            try:
                self.store.put_app(app, create=True)
            except AlreadyExists:
                existing = self.store.get_app(app.name)
                if self._owns(appset, existing):
                    return ""  # another reconcile (the API's, the scheduler's) made it first
                owner = f"app set {existing.owner_set}" if existing.owner_set else "no app set"
                raise AlreadyExists(
                    f"an app named {app.name} exists, owned by {owner}; left as is"
                ) from None
            self._mark(appset, app.name)
            log.info("appset %s created app %s", appset.name, app.name)
            return "created"
        if current.deleting or _spec(current) == _spec(app):
            return ""
        self.store.put_app(replace(app, created=current.created), create=False)
        log.info("appset %s updated app %s", appset.name, app.name)
        return "updated"

    def _remove(self, appset: AppSetRecord, app: AppRecord) -> str:
        clusters = self.store.instances(app)
        if appset.deletion == DeletionPolicy.KEEP or not clusters:
            self.store.delete_app(app.name, force=True)
            self.store.redis.hdel(self._marks_key, app.name)
            log.info("appset %s removed app %s (objects kept)", appset.name, app.name)
            return app.name
        if not app.deleting:
            self.store.mark_deleting(app.name)
        pending = set(self.dispatcher.pending.instances())
        for cluster in clusters:
            if instance_key(app.name, cluster) not in pending:
                self.dispatcher.request_sync(app.name, cluster, trigger=Trigger.DELETE)
        log.info("appset %s deleting app %s with cascade", appset.name, app.name)
        return app.name

    def _remember(self, appset: AppSetRecord, status: AppSetStatus) -> AppSetStatus:
        status = replace(status, reconciled=now())
        key = self.store.keys.appset(f"status:{appset.name}")
        self.store.redis.set(key, records.to_json(status))
        for error in status.errors:
            log.warning("appset %s: %s", appset.name, error)
        return status


def _spec(app: AppRecord) -> AppRecord:
    return replace(app, created="", updated="", uid="", has_credentials=False, deleting=False)
