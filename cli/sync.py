"""`gitfleet sync` and `gitfleet diff`: one-shot commands, no Redis and no coordinator.

Exit codes follow `kubectl diff` and CI conventions: sync 0 Synced and Healthy, 1 failed or
timed out, 2 a usage, source or render error; diff 0 in sync, 1 different, 2 error.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from cli import output
from cli.options import timeout_seconds
from fleet.engine import sync
from fleet.engine.caches import SyncCaches
from fleet.engine.contract import SyncRequest, SyncResult
from fleet.engine.diff import compare as diff
from fleet.engine.diff.compare import IgnoreRules
from fleet.engine.health.assess import HealthOptions
from fleet.engine.render.job import RenderParams
from fleet.engine.source.cache import GitCredentials
from fleet.errors import FleetError, UsageError
from fleet.kube.client import KubeClient
from fleet.model import Trigger
from fleet.telemetry.sdk import flush, setup_tracing

USAGE_STAGES = {"usage", "source", "render", "order"}


def register(subparsers: Any) -> None:
    s = subparsers.add_parser("sync", help="sync an app from git to a cluster, once")
    _common(s)
    s.add_argument("--prune", action="store_true", help="delete what git no longer declares")
    s.add_argument("--allow-empty", action="store_true", help="allow an empty render to prune")
    s.add_argument("--timeout", default="5m", help="e.g. 90s, 5m (default 5m)")
    s.set_defaults(run=run_sync)
    d = subparsers.add_parser("diff", help="show what a sync would change")
    _common(d)
    d.set_defaults(run=run_diff, prune=False, allow_empty=True, timeout="5m")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--repo", required=True, help="git URL (https, file://) or a local path")
    p.add_argument("--path", default=".", help="the app's folder inside the repository")
    p.add_argument("--revision", default="HEAD", help="branch, tag or commit")
    p.add_argument("--kubeconfig", required=True, type=Path)
    p.add_argument("--context")
    p.add_argument("--app", help="app name (default: the path's last folder)")
    p.add_argument("--namespace", help="default namespace (default: the context's)")
    p.add_argument("--create-namespace", action="store_true")
    p.add_argument(
        "--ingress-needs-address",
        action="store_true",
        help="wait for each Ingress to get an address (Argo CD's rule; default: Healthy at once)",
    )
    p.add_argument(
        "--no-custom-resource-health",
        action="store_true",
        help="give custom resources without a rule no health signal, as Argo CD does",
    )
    p.add_argument("--values", action="append", default=[], type=Path, help="helm values file")
    p.add_argument("--set", action="append", default=[], dest="sets", help="helm K=V")
    p.add_argument(
        "--ignore-field",
        action="append",
        default=[],
        metavar="POINTER",
        help="JSON pointer never compared nor applied, e.g. /spec/replicas (repeatable)",
    )
    p.add_argument(
        "--ignore-manager",
        action="append",
        default=[],
        metavar="NAME",
        help="fields owned by this field manager are not drift, e.g. an HPA (repeatable)",
    )
    p.add_argument(
        "--no-force-conflicts",
        dest="force_conflicts",
        action="store_false",
        help="fail on fields another manager owns instead of taking them over",
    )
    p.add_argument(
        "--allow-remote-renders",
        action="store_true",
        help="let kustomize fetch remote resources and helm chart dependencies (off: refused)",
    )
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")


def build_request(args: argparse.Namespace, kube: KubeClient, *, dry_run: bool) -> SyncRequest:
    path = str(args.path).strip("/") or "."
    app = args.app or _app_name(path, args.repo)
    return SyncRequest(
        app=app,
        repo=args.repo,
        path=path,
        revision=args.revision,
        namespace=args.namespace or kube.config.namespace,
        render=_render_params(args),
        prune=args.prune,
        allow_empty=args.allow_empty,
        create_namespace=args.create_namespace,
        health=HealthOptions(
            ingress_needs_address=args.ingress_needs_address,
            custom_resource_health=not args.no_custom_resource_health,
        ),
        dry_run=dry_run,
        timeout=timeout_seconds(args.timeout),
        trigger=Trigger.CLI,
        credentials=git_credentials_from_env(),
        force_conflicts=args.force_conflicts,
        ignore=IgnoreRules(tuple(args.ignore_field), tuple(args.ignore_manager)),
        adopt_legacy=True,  # no registry: the app is its name, as before apps had uids
    )


def git_credentials_from_env() -> GitCredentials | None:
    """Git credentials come from the environment, never argv (visible to every user in ps)."""
    token = os.environ.get("GITFLEET_GIT_TOKEN", "")
    password = os.environ.get("GITFLEET_GIT_PASSWORD", "") or token
    if not password:
        return None
    username = os.environ.get("GITFLEET_GIT_USERNAME", "") or "x-access-token"
    return GitCredentials(username=username, password=password)


def _app_name(path: str, repo: str) -> str:
    base = Path(path).name if path != "." else Path(repo.rstrip("/")).name.removesuffix(".git")
    name = re.sub(r"[^a-z0-9-]+", "-", base.lower()).strip("-")
    if not name:
        raise UsageError("cannot derive an app name from --path; pass --app NAME")
    return name[:63]


def _render_params(args: argparse.Namespace) -> RenderParams:
    sets = []
    for item in args.sets:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--set {item!r} must look like key=value")
        sets.append((key, value))
    values = []
    for file in args.values:
        try:
            values.append(file.read_text())
        except OSError as e:
            raise UsageError(f"cannot read --values {file}: {e.strerror}") from e
    allow_remote = bool(getattr(args, "allow_remote_renders", False))
    return RenderParams(values=tuple(sets), values_yaml=tuple(values), allow_remote=allow_remote)


def _client(args: argparse.Namespace) -> KubeClient:
    return KubeClient.from_kubeconfig(args.kubeconfig, args.context)


def run_sync(args: argparse.Namespace) -> int:
    setup_tracing("gitfleet-cli")
    kube = _client(args)
    request = build_request(args, kube, dry_run=False)
    progress = output.ProgressLine(sys.stderr) if args.output == "text" else None
    result = sync.run(request, kube=kube, caches=SyncCaches.at(), progress=progress)
    if progress:
        progress.clear()
    flush()
    _print_result(result, args.output)
    return exit_code(result)


def exit_code(result: SyncResult) -> int:
    if result.error:
        return 2 if result.error_stage in USAGE_STAGES else 1
    return 0 if result.succeeded and str(result.health) == "Healthy" else 1


def _print_result(result: SyncResult, fmt: str) -> None:
    if fmt == "json":
        print(json.dumps(result.to_json(), indent=2))
        return
    print(output.result_table(result))


def run_diff(args: argparse.Namespace) -> int:
    setup_tracing("gitfleet-cli")
    kube = _client(args)
    request = build_request(args, kube, dry_run=True)
    caches = SyncCaches.at()
    try:
        state = sync.preview(request, kube=kube, caches=caches)
    except FleetError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    changed = [d for d in state.decisions.values() if d.apply]
    pruned = [
        r for r in state.results.values() if str(r.action) == "skipped" and "pruning" in r.message
    ]
    if args.output == "json":
        print(json.dumps(_diff_json(changed, pruned), indent=2))
    else:
        for d in sorted(changed, key=lambda d: d.ref):
            print(diff.unified(d.desired, d.live, ref=d.ref), end="")
        for r in pruned:
            print(f"--- live/{r.ref}\n+++ (pruned)\n")
    return 1 if changed or pruned else 0


def _diff_json(changed: list[Any], pruned: list[Any]) -> dict[str, Any]:
    return {
        "changed": [
            {
                "object": str(d.ref),
                "action": str(d.action),
                "diff": diff.unified(d.desired, d.live, ref=d.ref),
            }
            for d in changed
        ],
        "pruned": [str(r.ref) for r in pruned],
    }
