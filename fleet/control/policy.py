"""From a registered application to the engine's `SyncRequest`, within its project's bounds.

Projects are checked twice, on purpose. `check_app_allowed` runs when an app is created or
changed, so a person hears at once that the repository or destination is not allowed. But a
project can be narrowed later, and what a repository renders is only known at sync time, so
`request_for` also copies the project's bounds for that cluster into every request
(`allowed_namespaces`, `allowed_cluster_kinds`), and the engine refuses any rendered object
outside them before it writes anything (`fleet.engine.plan.prepare.check_boundaries`).

Repository URLs are compared in their normal form (`fleet.control.registry.repos`), so the
HTTPS and SSH clone URLs of one repository match the same source globs.

`blocked_reason` applies the app's sync windows (`fleet.control.windows`) to one trigger: the
API asks it before enqueueing a manual sync or a webhook's, the worker again before it syncs.

Pure: no Redis, no clock, no logging.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from fnmatch import fnmatchcase

from fleet.control.registry.records import AppRecord, ProjectRecord
from fleet.control.registry.repos import normalize_repo
from fleet.control.windows import evaluate
from fleet.engine.contract import SyncRequest
from fleet.engine.diff.compare import IgnoreRules
from fleet.engine.render.job import RenderParams
from fleet.engine.source.cache import GitCredentials
from fleet.model import Trigger


def repo_allowed(project: ProjectRecord, repo: str) -> bool:
    normal = normalize_repo(repo)
    return any(
        fnmatchcase(repo, glob) or fnmatchcase(normal, normalize_repo(glob))
        for glob in project.source_repos
    )


def allowed_namespaces(project: ProjectRecord, cluster: str) -> tuple[str, ...]:
    """Namespace globs the project allows on `cluster` (empty: the cluster is not allowed)."""
    return tuple(d.namespace for d in project.destinations if fnmatchcase(cluster, d.cluster))


def allowed_cluster_kinds(project: ProjectRecord) -> frozenset[str] | None:
    """Cluster-scoped kinds (`group/Kind`, or `Kind` for the core group); None: all."""
    kinds = frozenset(project.cluster_kinds)
    return None if "*" in kinds else kinds


def check_app_allowed(app: AppRecord, project: ProjectRecord, clusters: Sequence[str]) -> list[str]:
    """What the project refuses about `app` deployed to `clusters`, one message per violation."""
    violations = []
    if not repo_allowed(project, app.source.repo):
        allowed = ", ".join(project.source_repos) or "none"
        violations.append(
            f"source.repo: {normalize_repo(app.source.repo)} is not an allowed source of "
            f"project {project.name} (allowed: {allowed})"
        )
    namespace = app.destination.namespace
    for cluster in clusters:
        globs = allowed_namespaces(project, cluster)
        if not any(fnmatchcase(namespace, glob) for glob in globs):
            violations.append(
                f"destination.namespace: namespace {namespace} on cluster {cluster} is not an "
                f"allowed destination of project {project.name} "
                f"(allowed there: {', '.join(globs) or 'none'})"
            )
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
) -> SyncRequest:
    """The engine request for one instance of `app`, bounded by `project` on `cluster`."""
    policy = app.sync_policy
    return SyncRequest(
        app=app.name,
        repo=app.source.repo,
        path=app.source.path.strip("/") or ".",
        revision=revision or app.source.revision,
        namespace=app.destination.namespace,
        credentials=credentials,
        render=_render_params(app),
        prune=policy.prune,
        allow_empty=policy.allow_empty,
        create_namespace=policy.create_namespace,
        dry_run=dry_run,
        ignore=_ignore_rules(app),
        allowed_cluster_kinds=allowed_cluster_kinds(project),
        allowed_namespaces=allowed_namespaces(project, cluster),
        trigger=trigger,
    )


def blocked_reason(app: AppRecord, trigger: Trigger, now: datetime) -> str:
    """Why the app's sync windows block a `trigger` sync at `now`; "" when they do not. An
    automated trigger needs the windows to allow automated syncs, any other manual ones."""
    verdict = evaluate(app.sync_policy.sync_windows, app.name, now)
    allowed = verdict.automated_allowed if trigger.automated else verdict.manual_allowed
    return "" if allowed else verdict.reason


def _render_params(app: AppRecord) -> RenderParams:
    helm = app.source.helm
    return RenderParams(
        release_name=app.name,
        namespace=app.destination.namespace,
        values_files=helm.value_files,
        values=tuple(helm.parameters.items()),
        values_yaml=(helm.values_yaml,) if helm.values_yaml.strip() else (),
    )


def _ignore_rules(app: AppRecord) -> IgnoreRules:
    rules = app.sync_policy.ignore_differences
    pointers = tuple(dict.fromkeys(p for rule in rules for p in rule.json_pointers))
    managers = tuple(dict.fromkeys(m for rule in rules for m in rule.managers))
    return IgnoreRules(json_pointers=pointers, managers=managers)
