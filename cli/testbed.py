"""`gitfleet testbed build|up|down|status`: local Kubernetes clusters for tests and demos."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from deploy.testbed import runner
from deploy.testbed.build import ensure_binaries, tools_dir


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("testbed", help="run local Kubernetes clusters")
    verbs = parser.add_subparsers(dest="verb", required=True)
    build = verbs.add_parser("build", help="build the testbed binaries (cached by pins)")
    build.set_defaults(run=run_build)
    up = verbs.add_parser("up", help="start N clusters")
    up.add_argument("--clusters", type=int, default=2)
    up.add_argument("--dir", type=Path, required=True)
    up.add_argument("--nodes", type=int, default=2, help="fake kwok nodes per cluster")
    up.add_argument("--base-port", type=int, default=0, help="fixed ports from here (0: free)")
    up.set_defaults(run=run_up)
    for verb, func in (("down", run_down), ("status", run_status)):
        sub = verbs.add_parser(verb)
        sub.add_argument("--dir", type=Path, required=True)
        sub.set_defaults(run=func)


def run_build(args: argparse.Namespace) -> int:
    for name, path in sorted(ensure_binaries().items()):
        print(f"{name:28} {path}")
    print(f"tools folder (for PATH or GITFLEET_TOOLS_DIR): {tools_dir()}")
    return 0


def run_up(args: argparse.Namespace) -> int:
    if args.clusters < 1 or args.nodes < 0:
        raise SystemExit("--clusters must be at least 1 and --nodes at least 0")
    clusters = runner.up(
        args.dir, clusters=args.clusters, nodes=args.nodes, base_port=args.base_port
    )
    for c in clusters:
        print(f"{c['name']}  {c['server']}  kubeconfig={c['kubeconfig']}")
    print(f"clusters: {Path(args.dir).resolve() / 'clusters.json'}")
    return 0


def run_down(args: argparse.Namespace) -> int:
    for line in runner.down(args.dir):
        print(line)
    print(f"testbed in {Path(args.dir).resolve()} stopped")
    return 0


def run_status(args: argparse.Namespace) -> int:
    lines = runner.status(args.dir)
    for line in lines:
        print(line)
    return 0
