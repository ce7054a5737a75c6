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
`RemotePolicy`, `fleet.control.policy.check_app_allowed`); a refused app is not created and the
reason is in the set's status. The coordinator's scheduler calls `reconcile_all` every tick
(`fleet.control.scheduler`); the API calls `reconcile` when a set is created or replaced.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, replace

from fleet.control.appsets.generators import GeneratorError, Generators, Params
from fleet.control.appsets.records import AppSetRecord, AppSetStatus, DeletionPolicy
from fleet.control.appsets.template import TemplateError, render
from fleet.control.policy import check_app_allowed
from fleet.control.registry import records
from fleet.control.registry.errors import AlreadyExists, NotFound, StoreError
from fleet.control.registry.instances import instance_key
from fleet.control.registry.records import AppRecord, ClusterRecord, ProjectRecord
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
        appset = replace(appset, created=old.created if old else stamp, updated=stamp)
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

    def owned(self, name: str) -> list[AppRecord]:
        return [a for a in self.store.list_apps_cached() if a.owner_set == name]

    def delete(self, name: str) -> list[str]:
        """Remove the set and, following its deletion policy, every app it owns; the names."""
        appset = self.get(name)
        gone = [self._remove(appset, app) for app in self.owned(name)]
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
        refused = {name: self.refusal(app, project, clusters) for name, app in apps.items()}
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
        """Reconcile every set (the scheduler's tick); one set's failure never stops another."""
        done = {}
        for appset in self.list_sets():
            try:
                done[appset.name] = self.reconcile(appset, max_age=appset.refresh_s)
            except Exception:  # one set's bad record must never stop the tick for the others
                log.exception("appset %s cannot be reconciled", appset.name)
        return done

    def reconcile(self, appset: AppSetRecord, *, max_age: float = 0.0) -> AppSetStatus:
        owned = {a.name: a for a in self.owned(appset.name)}
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
                if existing.owner_set == appset.name:
                    return ""  # another reconcile (the API's, the scheduler's) made it first
                owner = f"app set {existing.owner_set}" if existing.owner_set else "no app set"
                raise AlreadyExists(
                    f"an app named {app.name} exists, owned by {owner}; left as is"
                ) from None
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
