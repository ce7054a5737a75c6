"""`gitfleet cluster add|list|rm`, against the coordinator.

The commands talk to `--server URL` with `--token T` (or GITFLEET_SERVER and GITFLEET_TOKEN)
through `api.client`. Every failure a person can fix is one line on stderr and exit code 2,
never a traceback. `-o json` prints the server's answer as it came.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from api.client import ClientError
from cli.options import client_of, connection_options, labels_of
from cli.output import print_json, table


def run_add(args: argparse.Namespace) -> int:
    try:
        text = Path(args.kubeconfig).read_text()
    except OSError as e:
        raise ClientError(f"cannot read --kubeconfig {args.kubeconfig}: {e.strerror}") from e
    body = {"name": args.name, "kubeconfig": text, "labels": labels_of(args.label, "--label")}
    if args.context:
        body["context"] = args.context
    created = client_of(args).call("POST", "/api/v1/clusters", body=body)
    if args.output == "json":
        print_json(created)
    else:
        print(f"cluster {created['name']} registered ({created['server']})")
    return 0


def run_list(args: argparse.Namespace) -> int:
    found = client_of(args).call("GET", "/api/v1/clusters")
    if args.output == "json":
        print_json(found)
        return 0
    rows = [
        [c["name"], c["server"], ",".join(f"{k}={v}" for k, v in sorted(c["labels"].items()))]
        for c in found
    ]
    print(table(rows, ["NAME", "SERVER", "LABELS"]))
    return 0


def run_rm(args: argparse.Namespace) -> int:
    params = {"force": "true"} if args.force else None
    client_of(args).call("DELETE", f"/api/v1/clusters/{args.name}", params=params)
    if args.output == "json":
        print_json({"name": args.name, "deleted": True})
    else:
        print(f"cluster {args.name} unregistered")
    return 0


def register(subparsers: Any) -> None:
    common = connection_options()
    cluster = subparsers.add_parser("cluster", help="register and list clusters")
    verbs = cluster.add_subparsers(dest="verb", required=True)
    add = verbs.add_parser("add", parents=[common], help="register a cluster from a kubeconfig")
    add.add_argument("name")
    add.add_argument("--kubeconfig", required=True, type=Path)
    add.add_argument("--context")
    add.add_argument("--label", action="append", default=[], help="K=V, repeatable")
    add.set_defaults(run=run_add)
    verbs.add_parser("list", parents=[common]).set_defaults(run=run_list)
    rm = verbs.add_parser("rm", parents=[common], help="unregister a cluster")
    rm.add_argument("name")
    rm.add_argument("--force", action="store_true", help="even if apps target it")
    rm.set_defaults(run=run_rm)
