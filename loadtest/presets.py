"""The command line of `gitfleet bench` and its presets, kept free of heavy imports.

`cli.main` builds every command's parser at each start, so this module imports nothing beyond
the standard library; the benchmark itself (`loadtest.bench`) loads only when it runs.

Presets (issue 5): `small`, about 200 one-object apps on 2 clusters with 2 workers, and
`large`, 10,000 one-object apps on 3 clusters. An explicit option wins over the preset.
`faults` (issue 12) runs the fault suite instead (`loadtest.faults`), with its own options
(`--quick`, `--outage`, `--fault`).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadtest.faults.settings import add_arguments as fault_arguments

PRESETS: dict[str, dict[str, int]] = {
    "small": {"apps": 200, "objects_per_app": 1, "clusters": 2, "workers": 2, "commits": 20},
    "large": {"apps": 10_000, "objects_per_app": 1, "clusters": 3, "workers": 2, "commits": 20},
}
MAX_TRACING_APPS = 300
# What can serve the bench's repositories (`loadtest.gitserve`, imported only when it runs:
# its dulwich and wsgiref imports would add ~0.1 s to every `gitfleet` process's start).
GIT_SERVERS = ("git", "dulwich")


@dataclass(frozen=True)
class Params:
    """apps x objects_per_app over `clusters` clusters and `workers` workers; `commits`
    monorepo changes; `tracing_apps` fresh apps in each of the six tracing on/off rounds."""

    apps: int
    objects_per_app: int
    clusters: int
    workers: int
    commits: int
    tracing_apps: int
    preset: str
    seed: int = 7
    concurrency: int = 16
    create_concurrency: int = 1
    interval_s: int = 3600
    warm_up_apps: int = 12  # each on every cluster: every worker watches every cluster
    profile: bool = False  # flame graphs of the cold sync and the no-op cycle (py-spy)
    git_server: str = "git"  # the bench's git server backend (`loadtest.gitserve`)

    @property
    def objects(self) -> int:
        return self.apps * self.objects_per_app

    def worker_names(self) -> list[str]:
        return [f"worker-{i + 1}" for i in range(self.workers)]

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, required=True, help="folder for the report")
    parser.add_argument(
        "--preset",
        choices=sorted([*PRESETS, "faults"]),
        default="small",
        help="faults: the fault suite instead (`loadtest.faults`, writes DIR/faults.json)",
    )
    parser.add_argument("--apps", type=int, help="applications (small: 200, large: 10000)")
    parser.add_argument("--objects-per-app", type=int, help="ConfigMaps per application (1)")
    parser.add_argument("--clusters", type=int, help="testbed clusters (small: 2, large: 3)")
    parser.add_argument("--workers", type=int, help="worker processes (2)")
    parser.add_argument("--commits", type=int, help="monorepo commits to time (20)")
    parser.add_argument(
        "--tracing-apps", type=int, help="apps per tracing on/off round (apps/2, at most 300)"
    )
    parser.add_argument(
        "--create-concurrency",
        type=int,
        default=1,
        help="batch creations (POST /apps/batch, 500 apps each) in flight (1: the registry's "
        "optimistic transactions make concurrent creations conflict and retry, which is slower)",
    )
    parser.add_argument(
        "--clusters-json",
        type=Path,
        help="use this testbed's clusters (testbed/clusters.json) instead of starting one",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="record flame graphs (py-spy) of the API and each worker during the cold sync "
        "and the no-op cycle, in DIR/profiles/",
    )
    parser.add_argument(
        "--git-server",
        choices=GIT_SERVERS,
        default="git",
        help="what serves the bench's repositories: git's own http-backend (git hosts' C "
        "code) or dulwich's pure-Python server (the demo's; about 0.35 s of its CPU per fetch "
        "of a 10,000-app monorepo)",
    )
    fault_arguments(parser, standalone=False)


def resolve(args: argparse.Namespace) -> Params:
    """The preset's values, overridden by every option given; checked for sense."""
    values: dict[str, Any] = dict(PRESETS[args.preset])
    for name in ("apps", "objects_per_app", "clusters", "workers", "commits"):
        if getattr(args, name) is not None:
            values[name] = getattr(args, name)
    tracing = args.tracing_apps or max(min(values["apps"] // 2, MAX_TRACING_APPS), 5)
    params = Params(
        **values,
        tracing_apps=tracing,
        preset=args.preset,
        create_concurrency=args.create_concurrency,
        profile=args.profile,
        git_server=args.git_server,
    )
    checked = ("apps", "objects_per_app", "clusters", "workers", "commits", "tracing_apps")
    for name in (*checked, "create_concurrency"):
        if getattr(params, name) < 1:
            raise SystemExit(f"gitfleet bench: --{name.replace('_', '-')} must be at least 1")
    return params
