"""`gitfleet app create|set|get|list|sync|diff|history|rollback|delete|wait`, against the
coordinator (and `app rollout`, `cli.rollouts`; `app import`, `cli.appimport`).

Exit codes: 0 done; 2 a usage or request error (printed on one line). `app diff` exits 1 when
something would change, like `gitfleet diff`; `app wait` exits 1 on timeout after printing
what it still waits for.

`app wait` follows `argocd app wait`: with neither `--sync` nor `--health` it waits for both.
It polls GET /apps/{name} and rides out a coordinator that is briefly unreachable until the
timeout; a 4xx (unknown app, refused token) ends it at once.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

from pydantic import TypeAdapter

from api.appschemas import STORED, AppIn
from api.client import ClientError
from api.views import (
    Accepted,
    AppSummary,
    AppView,
    Deleted,
    DiffView,
    HistoryView,
    RollbackAccepted,
)
from cli import appimport, plans, rollouts
from cli.options import client_of, connection_options, labels_of, timeout_seconds
from cli.output import print_json, table
from fleet.control.registry.syncrecords import DriftRecord, ResourceRecord, SyncRecord
from fleet.model import Health, SyncStatus

SUMMARIES: TypeAdapter[list[AppSummary]] = TypeAdapter(list[AppSummary])


def run_create(args: argparse.Namespace) -> int:
    if bool(args.cluster) == bool(args.cluster_selector):
        raise ClientError("give exactly one of --cluster NAME or --cluster-selector K=V")
    destination: dict[str, Any] = {"namespace": args.namespace}
    if args.cluster:
        destination["cluster"] = args.cluster
    else:
        destination["clusterSelector"] = labels_of(args.cluster_selector, "--cluster-selector")
    body = {
        "name": args.name,
        "project": args.project,
        "source": {"repo": args.repo, "path": args.path, "revision": args.revision},
        "destination": destination,
        "syncPolicy": {
            "automated": args.auto_sync,
            "prune": args.prune,
            "selfHeal": args.self_heal,
            "createNamespace": args.create_namespace,
            "ingressNeedsAddress": args.ingress_needs_address,
            "timeout": timeout_seconds(args.sync_timeout),
            "customResourceHealth": not args.no_custom_resource_health,
            "ignoreDifferences": (
                [{"managers": args.ignore_manager}] if args.ignore_manager else []
            ),
        },
    }
    body["syncPolicy"] |= plans.policy_changes(args)
    if args.param or args.post_build:
        body["postBuild"] = {"substitute": labels_of(args.param, "--param")}
    created = client_of(args).call("POST", "/api/v1/apps", body=body)
    return _show(args, created, f"app {args.name} created")


def run_set(args: argparse.Namespace) -> int:
    """Change an app's sync policy in place: read its spec, change what was asked, PUT it."""
    client = client_of(args)
    view = AppView.model_validate(client.call("GET", f"/api/v1/apps/{args.name}"))
    policy = dict(view.spec.get("syncPolicy") or {})
    if args.auto_sync is not None:
        policy["automated"] = args.auto_sync == "on"
    if args.self_heal is not None:
        policy["selfHeal"] = args.self_heal == "on"
    policy |= plans.policy_changes(args)
    if args.ignore_manager or args.no_ignore_manager:
        kept = [  # rules by JSON pointer stay; the managers are replaced
            {**rule, "managers": []}
            for rule in policy.get("ignoreDifferences") or []
            if rule.get("jsonPointers")
        ]
        managers = [{"managers": args.ignore_manager}] if args.ignore_manager else []
        policy["ignoreDifferences"] = kept + managers
    spec = {**view.spec, "name": args.name, "syncPolicy": policy}
    if args.param:
        params = dict((spec.get("postBuild") or {}).get("substitute") or {})
        spec["postBuild"] = {"substitute": {**params, **labels_of(args.param, "--param")}}
    if args.no_post_build:
        spec["postBuild"] = None
    updated = client.call("PUT", f"/api/v1/apps/{args.name}", body=spec)
    return _show(args, updated, f"app {args.name} updated")


def run_get(args: argparse.Namespace) -> int:
    answer = client_of(args).call("GET", f"/api/v1/apps/{args.name}")
    if args.output == "json":
        print_json(answer)
        return 0
    print(describe(AppView.model_validate(answer)))
    return 0


def describe(view: AppView) -> str:
    spec = {**view.spec, "name": view.name}
    source = AppIn.model_validate(spec, context={STORED: True}).source  # as stored, even if stale
    lines = [
        f"app {view.name} (project {view.project})",
        f"source   {source.repo} {source.path} @ {source.revision}",
        f"status   {view.sync_status} / {view.health}  revision {view.revision or '-'}",
        *(["suspended: no automated sync until `gitfleet app resume`"] if view.suspended else []),
        "",
    ]
    rows = [
        [
            i.cluster,
            i.sync_status,
            i.health,
            (i.revision or "-")[:12],
            (i.last_sync.trace_id if i.last_sync else "") or "-",
            i.message.replace("\n", " ")[:80],
        ]
        for i in view.instances
    ]
    lines.append(table(rows, ["CLUSTER", "SYNC", "HEALTH", "REVISION", "TRACE", "MESSAGE"]))
    for instance in view.instances:
        lines += ["", f"objects on {instance.cluster}:", _objects(instance.resources)]
        if instance.drift:
            lines += ["", f"last drift on {instance.cluster}:", _drift(instance.drift)]
    return "\n".join(lines)


def _drift(drift: Sequence[DriftRecord]) -> str:
    rows = [
        [
            d.kind,
            d.namespace,
            d.name,
            d.field or ("(deleted)" if d.operation == "Delete" else "-"),
            d.manager or "-",
            f"/{d.subresource}" if d.subresource else d.operation or "-",
            "self-heal" if d.self_heal else "reported",
        ]
        for d in drift
    ]
    return table(rows, ["KIND", "NAMESPACE", "NAME", "FIELD", "MANAGER", "VIA", "ACTION"])


def _objects(resources: Sequence[ResourceRecord]) -> str:
    rows = [
        [r.kind, r.namespace, r.name, r.action, r.health, r.message.replace("\n", " ")[:80]]
        for r in resources
    ]
    return table(rows, ["KIND", "NAMESPACE", "NAME", "ACTION", "HEALTH", "MESSAGE"])


def run_list(args: argparse.Namespace) -> int:
    answer = client_of(args).call("GET", "/api/v1/apps")
    if args.output == "json":
        print_json(answer)
        return 0
    rows = [
        [a.name, a.project, ",".join(a.clusters) or "-", a.sync_status, a.health]
        for a in SUMMARIES.validate_python(answer)
    ]
    print(table(rows, ["NAME", "PROJECT", "CLUSTERS", "SYNC", "HEALTH"]))
    return 0


def run_sync(args: argparse.Namespace) -> int:
    body = {"revision": args.revision, "dryRun": args.dry_run, "cluster": args.cluster}
    body |= {"plan": args.plan, "allowPruneOverBudget": args.allow_prune_over_budget}
    body = {k: v for k, v in body.items() if v not in (None, False)}
    if args.prune is not None:  # --prune / --no-prune: this sync only; else the app's policy
        body["prune"] = args.prune
    answer = client_of(args).call("POST", f"/api/v1/apps/{args.name}/sync", body=body)
    accepted = Accepted.model_validate(answer)
    return _show(args, answer, _jobs_line(f"sync of {args.name} requested", accepted))


def run_diff(args: argparse.Namespace) -> int:
    params = {"cluster": args.cluster} if args.cluster else None
    answer = client_of(args).call("GET", f"/api/v1/apps/{args.name}/diff", params=params)
    diff = DiffView.model_validate(answer)
    if args.output == "json":
        print_json(answer)
    else:
        for found in diff.clusters:
            print(f"cluster {found.cluster} at {found.revision[:12] or '-'}:")
            print(_objects(found.changes) if found.changes else "  in sync")
            if found.error:
                print(f"  error: {found.error}")
    return 0 if diff.in_sync else 1


def run_history(args: argparse.Namespace) -> int:
    params = {"cluster": args.cluster} if args.cluster else None
    answer = client_of(args).call("GET", f"/api/v1/apps/{args.name}/history", params=params)
    if args.output == "json":
        print_json(answer)
        return 0
    history = HistoryView.model_validate(answer)
    rows = [
        [
            cluster,
            r.finished.isoformat() if r.finished else "",
            r.trigger,
            r.revision[:12],
            r.sync_status if isinstance(r, SyncRecord) else "",
            r.health if isinstance(r, SyncRecord) else "",
            r.trace_id,
        ]
        for cluster, found in history.clusters.items()
        for r in found
    ]
    print(table(rows, ["CLUSTER", "FINISHED", "TRIGGER", "REVISION", "SYNC", "HEALTH", "TRACE"]))
    return 0


def run_rollback(args: argparse.Namespace) -> int:
    body = {"revision": args.revision}
    answer = client_of(args).call("POST", f"/api/v1/apps/{args.name}/rollback", body=body)
    accepted = RollbackAccepted.model_validate(answer)
    line = _jobs_line(f"rollback of {args.name} to {args.revision} requested", accepted)
    if accepted.automated_paused:
        line += "; automated sync is now off (turn it back on to track the branch again)"
    return _show(args, answer, line)


def run_delete(args: argparse.Namespace) -> int:
    params = {"cascade": str(not args.no_cascade).lower(), "force": str(args.force).lower()}
    answer = client_of(args).call("DELETE", f"/api/v1/apps/{args.name}", params=params)
    deleted = Deleted.model_validate(answer).deleted
    done = "deleted" if deleted else "is being deleted (pruning its objects)"
    return _show(args, answer, f"app {args.name} {done}")


def run_wait(args: argparse.Namespace) -> int:
    timeout = timeout_seconds(args.timeout)
    want_sync, want_health = args.sync or not args.health, args.health or not args.sync
    deadline = time.monotonic() + timeout
    client = client_of(args)
    waiting = ["an answer from the server"]
    while time.monotonic() < deadline:
        try:
            view = AppView.model_validate(client.call("GET", f"/api/v1/apps/{args.name}"))
            waiting = waiting_for(view, sync=want_sync, health=want_health)
        except ClientError as e:
            if "cannot reach" not in str(e):
                raise
        if not waiting:
            return _show(args, {"app": args.name, "done": True}, f"app {args.name} is ready")
        time.sleep(max(min(args.interval, deadline - time.monotonic()), 0))
    result = {"app": args.name, "done": False, "waiting_for": waiting}
    _show(args, result, f"timed out after {args.timeout}; still waiting for: " + "; ".join(waiting))
    return 1


def waiting_for(view: AppView, *, sync: bool, health: bool) -> list[str]:
    """What keeps the app from being done, one phrase per instance and condition."""
    if not view.instances:
        return ["a target cluster (the app targets none)"]
    missing = []
    for i in view.instances:
        if sync and i.sync_status != SyncStatus.SYNCED:
            missing.append(f"{i.cluster} to be {SyncStatus.SYNCED} (is {i.sync_status})")
        if health and i.health != Health.HEALTHY:
            missing.append(f"{i.cluster} to be {Health.HEALTHY} (is {i.health})")
    return missing


def _jobs_line(prefix: str, answer: Accepted) -> str:
    jobs = ", ".join(f"{j.cluster}: {j.job_id}" for j in answer.jobs)
    return f"{prefix} ({jobs}); trace {answer.trace_id or '-'}"


def _show(args: argparse.Namespace, data: Any, line: str) -> int:
    if args.output == "json":
        print_json(data)
    else:
        print(line)
    return 0


def register(subparsers: Any) -> None:
    common = connection_options()
    app = subparsers.add_parser("app", help="create, sync and inspect applications")
    verbs = app.add_subparsers(dest="verb", required=True)

    def verb(name: str, run: Any, help: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = verbs.add_parser(name, parents=[common], help=help)
        parser.add_argument("name")
        parser.set_defaults(run=run)
        return parser

    create = verb("create", run_create, "register an application")
    create.add_argument("--repo", required=True)
    create.add_argument("--path", required=True)
    create.add_argument("--revision", default="HEAD")
    create.add_argument("--cluster")
    create.add_argument("--cluster-selector", action="append", default=[], help="K=V")
    create.add_argument("--namespace", required=True)
    create.add_argument("--project", default="default")
    for flag in ("--auto-sync", "--prune", "--self-heal", "--create-namespace"):
        create.add_argument(flag, action="store_true")
    create.add_argument(
        "--ignore-manager",
        action="append",
        default=[],
        metavar="MANAGER",
        help="leave fields this field manager owns alone: not diffed, not applied, never drift "
        "(e.g. kube-controller-manager for replicas an HPA scales); repeatable",
    )
    create.add_argument(
        "--ingress-needs-address",
        action="store_true",
        help="an Ingress is Progressing until its controller publishes an address (Argo CD's "
        "rule); by default it is Healthy at once and its message says it has no address",
    )
    create.add_argument(
        "--sync-timeout",
        default="5m",
        help="how long one sync may take, its waves' health waits included (e.g. 90s, 5m; "
        "default 5m); a wave still waiting then fails the sync, which lists what it left undone",
    )
    create.add_argument(
        "--no-custom-resource-health",
        action="store_true",
        help="custom resources without a rule get no health signal (Argo CD's behaviour) "
        "instead of being judged by their conditions",
    )
    create.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="K=V",
        help="a ${K} value for post-build substitution (repeatable; turns substitution on)",
    )
    create.add_argument(
        "--post-build",
        action="store_true",
        help="substitute ${var} in rendered manifests (cluster_name, cluster_label_<key>, "
        "--param values) even without --param",
    )
    plans.policy_options(create)
    change = verb("set", run_set, "change an app's sync policy")
    change.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="K=V",
        help="add or replace a ${K} substitution value (repeatable; turns substitution on)",
    )
    change.add_argument("--no-post-build", action="store_true", help="turn ${var} substitution off")
    change.add_argument("--auto-sync", choices=("on", "off"))
    change.add_argument("--self-heal", choices=("on", "off"))
    plans.policy_options(change)
    change.add_argument(
        "--ignore-manager",
        action="append",
        default=[],
        metavar="MANAGER",
        help="replace the field managers the app ignores (repeatable)",
    )
    change.add_argument(
        "--no-ignore-manager", action="store_true", help="ignore no field manager any more"
    )
    verb("get", run_get, "show an app and the status of each instance")
    verbs.add_parser("list", parents=[common], help="list apps").set_defaults(run=run_list)
    sync = verb("sync", run_sync, "sync now")
    sync.add_argument("--revision")
    sync.add_argument("--dry-run", action="store_true")
    sync.add_argument(
        "--prune",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="delete (or, with --no-prune, keep) objects removed from git, for this sync only; "
        "default: the app's syncPolicy.prune",
    )
    sync.add_argument("--cluster")
    sync.add_argument("--plan", metavar="ID", help="run exactly this stored plan (app plan)")
    sync.add_argument(
        "--allow-prune-over-budget",
        action="store_true",
        help="this sync may delete more than the app's prune budget, once",
    )
    plans.register_verbs(verbs, common)
    verb("diff", run_diff, "what a sync would change").add_argument("--cluster")
    verb("history", run_history, "recent syncs").add_argument("--cluster")
    verb("rollback", run_rollback, "sync an earlier revision").add_argument("revision")
    delete = verb("delete", run_delete, "delete an app (and, by default, its objects)")
    delete.add_argument("--no-cascade", action="store_true", help="leave its objects in place")
    delete.add_argument("--force", action="store_true", help="even if other apps depend on it")
    wait = verb("wait", run_wait, "wait until Synced and/or Healthy")
    wait.add_argument("--sync", action="store_true")
    wait.add_argument("--health", action="store_true")
    wait.add_argument("--timeout", required=True, help="e.g. 90s, 5m")
    wait.add_argument("--interval", type=float, default=2.0, help=argparse.SUPPRESS)
    rollouts.add_verb(verbs, common)
    appimport.add_verb(verbs, common)
