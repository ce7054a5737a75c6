"""From a registered application to the engine's `SyncRequest`, within its project's bounds.

Projects are checked twice, on purpose. `check_app_allowed` runs when an app is created or
changed, so a person hears at once that the repository or destination is not allowed. But a
project can be narrowed later, and what a repository renders is only known at sync time, so
`request_for` also copies the project's bounds for that cluster into every request
(`boundaries_for`), and the engine refuses any rendered object outside them before it writes
anything (`fleet.engine.plan.prepare.check_boundaries`), then checks each object again at the
moment it applies or deletes it, prune candidates and hooks included (`fleet.engine.scope`).

A project may name, per destination, a ServiceAccount its syncs act as (`acting_as`); the
request carries it, and the worker talks to the cluster through a client that impersonates it, so
the cluster's RBAC bounds every write even where a check above has a hole. An admin can make that
mandatory (`require_impersonation`) for every project but the built-in `default`.

Repository URLs are parsed (`fleet.engine.source.remotes`) and matched against the project's
`sourceRepos` component by component (`fleet.control.sourcerepos`): scheme, host and path apart,
no `*` across a `/`. The worker asks `check_source` again before every fetch, with the fleet's
`RemotePolicy`, so a record written before a rule existed is refused too.

Repository content is untrusted: the request also carries the project's `limits` (sizes,
counts, nesting, time and memory of fetch and render, `fleet.engine.limits`) and whether its
renders may fetch remote kustomize resources and helm dependencies (`allowRemoteRenders`).

`blocked_reason` applies the app's sync windows (`fleet.control.windows`) to one trigger: the
API asks it before enqueueing a manual sync or a webhook's, the worker again before it syncs.

Pure: no Redis, no clock, no logging.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from fnmatch import fnmatchcase

from fleet.control.registry.records import DEFAULT_PROJECT, AppRecord, ProjectRecord, Role
from fleet.control.sourcerepos import allows
from fleet.control.windows import evaluate
from fleet.engine.contract import SyncRequest
from fleet.engine.diff.compare import IgnoreRules
from fleet.engine.health.assess import HealthOptions
from fleet.engine.plan.boundaries import Boundaries
from fleet.engine.prune import PROPAGATIONS, PruneBudget
from fleet.engine.render.job import RenderParams
from fleet.engine.render.substitute import cluster_variables
from fleet.engine.source.cache import GitCredentials
from fleet.engine.source.remotes import (
    RemotePolicy,
    RemoteUrl,
    RepoUrlError,
    identity,
    parse_remote,
)
from fleet.errors import ImpersonationRequired
from fleet.kube.kubeconfig import ServiceAccount
from fleet.model import Trigger

REQUIRE_IMPERSONATION_ENV = "GITFLEET_REQUIRE_IMPERSONATION"


def repo_allowed(project: ProjectRecord, repo: str) -> bool:
    """Whether `repo` parses as a fetchable URL and a `sourceRepos` glob matches it."""
    try:
        return allows(project.source_repos, parse_remote(repo))
    except RepoUrlError:
        return False


def check_source(app: AppRecord, project: ProjectRecord, remotes: RemotePolicy) -> RemoteUrl:
    """The app's repository URL as `remotes` accepts it and its project allows it; else
    RepoUrlError naming the rule (what a worker asks before it fetches)."""
    url = remotes.check(app.source.repo)
    if not allows(project.source_repos, url):
        raise RepoUrlError(_not_allowed(app, project))
    return url


def allowed_namespaces(project: ProjectRecord, cluster: str) -> tuple[str, ...]:
    """Namespace globs the project allows on `cluster` (empty: the cluster is not allowed)."""
    return tuple(d.namespace for d in project.destinations if fnmatchcase(cluster, d.cluster))


def allowed_cluster_kinds(project: ProjectRecord) -> frozenset[str] | None:
    """Cluster-scoped kinds (`group/Kind`, or `Kind` for the core group); None: all."""
    kinds = frozenset(project.cluster_kinds)
    return None if "*" in kinds else kinds


def acting_as(
    app: AppRecord, project: ProjectRecord, cluster: str, *, required: bool = False
) -> ServiceAccount | None:
    """The ServiceAccount `app` acts as on `cluster`: the first of the project's
    destination_service_accounts whose globs match the cluster and the app's namespace. None:
    the cluster's own credentials, which `required` (the fleet's setting) refuses for every
    project but `default`."""
    namespace = app.destination.namespace
    for entry in project.destination_service_accounts:
        if fnmatchcase(cluster, entry.cluster) and fnmatchcase(namespace, entry.namespace):
            return entry.account()
    if required and project.name != DEFAULT_PROJECT.name:
        raise ImpersonationRequired(
            f"project {project.name} names no ServiceAccount for cluster {cluster} (namespace "
            f"{namespace}), and this fleet requires one ({REQUIRE_IMPERSONATION_ENV}): add an "
            "entry to the project's destinationServiceAccounts",
            cluster=cluster,
        )
    return None


def boundaries_for(project: ProjectRecord, cluster: str) -> Boundaries:
    """What the engine checks every object against when it applies or deletes it on
    `cluster` (`fleet.engine.scope`), naming `project` in each refusal."""
    return Boundaries(
        namespaces=allowed_namespaces(project, cluster),
        cluster_kinds=allowed_cluster_kinds(project),
        project=project.name,
        cluster=cluster,
    )


def check_app_allowed(
    app: AppRecord,
    project: ProjectRecord,
    clusters: Sequence[str],
    *,
    require_impersonation: bool = False,
) -> list[str]:
    """What the project refuses about `app` deployed to `clusters`, one message per violation."""
    violations = []
    if not repo_allowed(project, app.source.repo):
        violations.append(_not_allowed(app, project))
    namespace = app.destination.namespace
    for cluster in clusters:
        globs = allowed_namespaces(project, cluster)
        if not any(fnmatchcase(namespace, glob) for glob in globs):
            violations.append(
                f"destination.namespace: namespace {namespace} on cluster {cluster} is not an "
                f"allowed destination of project {project.name} "
                f"(allowed there: {', '.join(globs) or 'none'})"
            )
        try:
            acting_as(app, project, cluster, required=require_impersonation)
        except ImpersonationRequired as e:
            violations.append(f"destinationServiceAccounts: {e}")
    return violations


def request_for(
    app: AppRecord,
    project: ProjectRecord,
    cluster: str,
    *,
    trigger: Trigger,
    revision: str | None = None,
    dry_run: bool = False,
    credentials: GitCredentials | None = None,
    require_impersonation: bool = False,
    cluster_labels: Mapping[str, str] | None = None,
    age_key: str = "",
    prune: bool | None = None,
) -> SyncRequest:
    """The engine request for one instance of `app`, bounded by `project` on `cluster`.
    `cluster_labels` feed `${var}` substitution (`variables_for`); `age_key` is the project's
    key for SOPS-encrypted Secrets; `prune` overrides `syncPolicy.prune` for this sync (None:
    the policy). Raises ImpersonationRequired (see `acting_as`)."""
    policy = app.sync_policy
    return SyncRequest(
        app=app.name,
        repo=app.source.repo,
        path=app.source.path.strip("/") or ".",
        revision=revision or app.source.revision,
        namespace=app.destination.namespace,
        credentials=credentials,
        render=_render_params(app, project, cluster, cluster_labels or {}, age_key),
        limits=project.limits,
        prune=policy.prune if prune is None else prune,
        allow_empty=policy.allow_empty,
        create_namespace=policy.create_namespace,
        health=HealthOptions(
            ingress_needs_address=policy.ingress_needs_address,
            custom_resource_health=policy.custom_resource_health,
        ),
        dry_run=dry_run,
        timeout=policy.timeout_s,
        ignore=_ignore_rules(app),
        boundaries=boundaries_for(project, cluster),
        app_uid=app.owner_uid,
        project=app.project,
        adopt_legacy=not app.uid,
        service_account=acting_as(app, project, cluster, required=require_impersonation),
        trigger=trigger,
        prune_budget=PruneBudget(policy.prune_budget_count, policy.prune_budget_percent),
        prune_propagation=PROPAGATIONS.get(policy.prune_propagation, "Background"),
    )


@dataclass(frozen=True)
class WindowBlock:
    """What an app's sync windows say of one sync.

    reason: why they block it; "" when they do not.
    broken: they block it because a window cannot be evaluated as stored (the reason says
        which), so the app's status should carry the reason until someone fixes the record.
    """

    reason: str
    broken: bool


def window_block(app: AppRecord, trigger: Trigger, now: datetime) -> WindowBlock:
    """Whether the app's sync windows block a `trigger` sync at `now`. An automated trigger
    needs the windows to allow automated syncs, any other manual ones. A suspended app blocks
    every automated trigger (`broken`, so its status says so); a person's sync still runs."""
    if trigger.automated and app.sync_policy.suspended:
        return WindowBlock(suspended_reason(app.name), broken=True)
    verdict = evaluate(app.sync_policy.sync_windows, app.name, now)
    allowed = verdict.automated_allowed if trigger.automated else verdict.manual_allowed
    if allowed:
        return WindowBlock("", broken=False)
    return WindowBlock(verdict.reason, broken=verdict.broken)


def suspended_reason(app: str) -> str:
    return (
        f"app {app} is suspended: no automated sync (interval, webhook, self-heal, rollout); "
        f"a manual sync still runs; resume with `gitfleet app resume {app}`"
    )


def blocked_reason(app: AppRecord, trigger: Trigger, now: datetime) -> str:
    """Why the app's sync windows block a `trigger` sync at `now`; "" when they do not."""
    return window_block(app, trigger, now).reason


def _not_allowed(app: AppRecord, project: ProjectRecord) -> str:
    allowed = ", ".join(project.source_repos) or "none"
    return (
        f"source.repo: {identity(app.source.repo)} is not an allowed source of project "
        f"{project.name} (allowed: {allowed}; globs match scheme, host and each path segment "
        "apart, and * never crosses a /)"
    )


def variables_for(
    app: AppRecord, cluster: str, labels: Mapping[str, str]
) -> tuple[tuple[str, str], ...] | None:
    """The `${var}` values of `app` on `cluster`, or None when the app has no `postBuild`:
    its `substitute` parameters, then `cluster_name` and `cluster_label_<key>`, which an app
    parameter cannot override (`fleet.engine.render.substitute.cluster_variables`)."""
    if app.post_build is None:
        return None
    found = {**app.post_build.substitute, **cluster_variables(cluster, labels)}
    return tuple(sorted(found.items()))


def _render_params(
    app: AppRecord,
    project: ProjectRecord,
    cluster: str,
    labels: Mapping[str, str],
    age_key: str,
) -> RenderParams:
    helm = app.source.helm
    return RenderParams(
        substitute=variables_for(app, cluster, labels),
        age_key=age_key,
        release_name=app.name,
        namespace=app.destination.namespace,
        values_files=helm.value_files,
        values=tuple(helm.parameters.items()),
        values_yaml=(helm.values_yaml,) if helm.values_yaml.strip() else (),
        allow_remote=project.allow_remote_renders,
    )


def _ignore_rules(app: AppRecord) -> IgnoreRules:
    rules = app.sync_policy.ignore_differences
    pointers = tuple(dict.fromkeys(p for rule in rules for p in rule.json_pointers))
    managers = tuple(dict.fromkeys(m for rule in rules for m in rule.managers))
    return IgnoreRules(json_pointers=pointers, managers=managers)


def default_refusal(project: str, role: str, *, require_impersonation: bool) -> str:
    """Why a token of `role` may not deploy through `project` ("" when it may): under
    GITFLEET_REQUIRE_IMPERSONATION `default` is exempt (its apps may act with the clusters'
    own credentials), so only admins deploy through it. `POST /apps` applies it to the caller,
    app sets to their writer and, at every reconcile, to the role the set recorded."""
    if require_impersonation and project == DEFAULT_PROJECT.name and role != Role.ADMIN:
        return (
            f"project {project} is exempt from {REQUIRE_IMPERSONATION_ENV} (it may act with the "
            "clusters' own credentials), so only admins deploy through it while that is on: "
            "use a project that names a ServiceAccount"
        )
    return ""
