"""`gitfleet repo add|list|remove`: git credentials registered once for many apps (admin).

`repo add NAME --url PREFIX --project P` registers credentials for every repository under
PREFIX, for the apps of the named projects (`--project '*'`: every project). The password or
token is read from GITFLEET_GIT_PASSWORD or GITFLEET_GIT_TOKEN (never from argv, which every
user of the machine can read in `ps`), or asked for on a terminal; the user name from
`--username` or GITFLEET_GIT_USERNAME. The coordinator never gives them back.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from typing import Any

from api.client import ClientError
from cli.options import client_of, connection_options
from cli.output import print_json, table


def secret_from_env() -> str:
    """The password or token: the environment, else a terminal prompt."""
    found = os.environ.get("GITFLEET_GIT_PASSWORD", "") or os.environ.get("GITFLEET_GIT_TOKEN", "")
    if found:
        return found
    if sys.stdin.isatty():
        return getpass.getpass("git password or token: ")
    raise ClientError("no password: set GITFLEET_GIT_PASSWORD or GITFLEET_GIT_TOKEN")


def run_add(args: argparse.Namespace) -> int:
    body = {
        "name": args.name,
        "url": args.url,
        "projects": args.project,
        "username": args.username or os.environ.get("GITFLEET_GIT_USERNAME", ""),
        "password": secret_from_env(),
    }
    created = client_of(args).call("POST", "/api/v1/repositories", body=body)
    if args.output == "json":
        print_json(created)
    else:
        scope = ", ".join(created["projects"])
        print(f"repository credentials {created['name']} registered for {created['url']} ({scope})")
    return 0


def run_list(args: argparse.Namespace) -> int:
    found = client_of(args).call("GET", "/api/v1/repositories")
    if args.output == "json":
        print_json(found)
        return 0
    rows = [[r["name"], r["url"], ",".join(r["projects"]), r["created"]] for r in found]
    print(table(rows, ["NAME", "URL PREFIX", "PROJECTS", "CREATED"]))
    return 0


def run_remove(args: argparse.Namespace) -> int:
    client_of(args).call("DELETE", f"/api/v1/repositories/{args.name}")
    if args.output == "json":
        print_json({"name": args.name, "deleted": True})
    else:
        print(f"repository credentials {args.name} removed")
    return 0


def register(subparsers: Any) -> None:
    common = connection_options()
    repo = subparsers.add_parser("repo", help="git credentials for many apps (admin)")
    verbs = repo.add_subparsers(dest="verb", required=True)
    add = verbs.add_parser(
        "add", parents=[common], help="register credentials for the repositories under a URL"
    )
    add.add_argument("name")
    add.add_argument("--url", required=True, help="URL prefix, e.g. https://github.com/team-a")
    add.add_argument(
        "--project", action="append", required=True, help="project served (repeatable; * for all)"
    )
    add.add_argument("--username", default="", help="default: $GITFLEET_GIT_USERNAME")
    add.set_defaults(run=run_add)
    verbs.add_parser("list", parents=[common]).set_defaults(run=run_list)
    remove = verbs.add_parser("remove", parents=[common], help="remove repository credentials")
    remove.add_argument("name")
    remove.set_defaults(run=run_remove)
