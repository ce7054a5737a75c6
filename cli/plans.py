"""`gitfleet app plan NAME [--revision R] [--cluster C]`, `app plan show|approve ID`,
`app suspend|resume NAME`, `project require-plan PROJECT [CLUSTER_GLOB ...]`, against the
coordinator (`api.routes.plans`).

`app plan NAME` prints what a sync would do per cluster (create, update with the changed
fields, delete, hook, with the wave) and the plan's id; `gitfleet app sync NAME --plan ID` runs
exactly it. An app named `show` or `approve` is planned with `app plan -- NAME`.
"""

from __future__ import annotations

import argparse
from typing import Any

from api.client import ClientError
from cli.options import client_of
from cli.output import print_json, table

SUBACTIONS = ("show", "approve")


def run_plan(args: argparse.Namespace) -> int:
    target: list[str] = args.target
    client = client_of(args)
    if len(target) == 2 and target[0] in SUBACTIONS:
        action, plan_id = target
        if action == "approve":
            answer = client.call("POST", f"/api/v1/plans/{plan_id}/approve")
        else:
            answer = client.call("GET", f"/api/v1/plans/{plan_id}")
    elif len(target) == 1:
        body = {"revision": args.revision, "cluster": args.cluster}
        body = {k: v for k, v in body.items() if v}
        answer = client.call("POST", f"/api/v1/apps/{target[0]}/plans", body=body)
    else:
        raise ClientError("usage: gitfleet app plan NAME | app plan show ID | app plan approve ID")
    if args.output == "json":
        print_json(answer)
    else:
        print(describe(answer))
    return 0


def describe(plan: dict[str, Any]) -> str:
    approved = f"approved by {plan['approvedBy']}" if plan.get("approved") else "not approved"
    lines = [f"plan {plan['id']} of app {plan['app']} ({approved}; made by {plan['by']})"]
    for found in plan.get("clusters") or []:
        lines += ["", f"cluster {found['cluster']} at {(found['revision'] or '-')[:12]}:"]
        if found.get("error"):
            lines.append(f"  error: {found['error']}")
            continue
        rows = [
            [
                str(c["wave"]),
                c["action"],
                f"{c['kind']}/{c['name']}",
                c["namespace"] or "-",
                ", ".join(c.get("fields") or []) or c.get("message") or "",
            ]
            for c in found.get("changes") or []
            if c["action"] != "unchanged"
        ]
        lines.append(
            table(rows, ["WAVE", "ACTION", "OBJECT", "NAMESPACE", "FIELDS"])
            if rows
            else "  nothing to do"
        )
        if found.get("message"):
            lines.append(f"  note: {found['message']}")
    lines += ["", f"run it with: gitfleet app sync {plan['app']} --plan {plan['id']}"]
    return "\n".join(lines)


def run_suspend(args: argparse.Namespace) -> int:
    answer = client_of(args).call("POST", f"/api/v1/apps/{args.name}/suspend")
    return _show(args, answer)


def run_resume(args: argparse.Namespace) -> int:
    answer = client_of(args).call("POST", f"/api/v1/apps/{args.name}/resume")
    return _show(args, answer)


def _show(args: argparse.Namespace, answer: dict[str, Any]) -> int:
    if args.output == "json":
        print_json(answer)
    else:
        print(answer["message"])
    return 0


def policy_options(parser: argparse.ArgumentParser) -> None:
    """`app set` options for the prune policies."""
    parser.add_argument(
        "--prune-budget",
        metavar="N|P%",
        help="a sync deleting more than N objects (or P%% of the app's) stops and asks; 0 off",
    )
    parser.add_argument("--prune-propagation", choices=("background", "foreground", "orphan"))
    parser.add_argument(
        "--deletion-timeout", metavar="DURATION", help="a cascading delete's deadline (e.g. 5m)"
    )


def policy_changes(args: argparse.Namespace) -> dict[str, Any]:
    """The sync policy fields `policy_options` set."""
    changes: dict[str, Any] = {}
    budget = args.prune_budget
    if budget is not None:
        percent = budget.endswith("%")
        try:
            value = float(budget.rstrip("%"))
        except ValueError:
            raise ClientError(
                f"--prune-budget: {budget!r} is not a count or a percentage"
            ) from None
        changes["pruneBudgetPercent"] = value if percent else 0.0
        changes["pruneBudgetCount"] = 0 if percent else int(value)
    if args.prune_propagation:
        changes["prunePropagation"] = args.prune_propagation
    if args.deletion_timeout:
        changes["deletionTimeout"] = args.deletion_timeout
    return changes


def run_require_plan(args: argparse.Namespace) -> int:
    """Set the cluster globs whose syncs need an approved plan (none: no rule)."""
    client = client_of(args)
    project = client.call("GET", f"/api/v1/projects/{args.project}")
    project["requirePlanFor"] = list(args.clusters)
    project.pop("hasWebhookSecret", None)
    updated = client.call("PUT", f"/api/v1/projects/{args.project}", body=project)
    if args.output == "json":
        print_json(updated)
    elif args.clusters:
        print(f"project {args.project}: syncs to {', '.join(args.clusters)} need an approved plan")
    else:
        print(f"project {args.project}: no sync needs an approved plan")
    return 0


def register_project_noun(nouns: Any, common: argparse.ArgumentParser) -> None:
    """Add `gitfleet project require-plan PROJECT [CLUSTER_GLOB ...]`."""
    parser = nouns.add_parser(
        "require-plan",
        parents=[common],
        help="clusters (globs) whose syncs need an approved plan; none to drop the rule",
    )
    parser.add_argument("project")
    parser.add_argument("clusters", nargs="*", metavar="CLUSTER_GLOB")
    parser.set_defaults(run=run_require_plan)


def register_verbs(verbs: Any, common: argparse.ArgumentParser) -> None:
    """Add `plan`, `suspend` and `resume` to `gitfleet app`."""
    plan = verbs.add_parser(
        "plan",
        parents=[common],
        help="compute and store what a sync would do; show or approve a stored plan",
    )
    plan.add_argument("target", nargs="+", metavar="NAME | show ID | approve ID")
    plan.add_argument("--revision", help="plan a sync at this revision")
    plan.add_argument("--cluster", help="plan one cluster only")
    plan.set_defaults(run=run_plan)
    for name, run, help in (
        ("suspend", run_suspend, "stop every automated sync (interval, webhook, self-heal)"),
        ("resume", run_resume, "let automated syncs run again"),
    ):
        parser = verbs.add_parser(name, parents=[common], help=help)
        parser.add_argument("name")
        parser.set_defaults(run=run)
