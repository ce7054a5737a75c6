"""`gitfleet appset create|get|list|delete`: app sets, one app per element of a generator.

`create -f FILE` sends the set's body, YAML or JSON, as POST /api/v1/appsets takes it (see
`api.routes.appsets` and the README's "App sets"); with `--replace` it replaces the set of that
name (PUT). `delete` removes the set and its apps following the set's `deletionPolicy`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from api.client import ClientError
from cli.options import client_of, connection_options
from cli.output import print_json, table


def _body(path: str) -> dict[str, Any]:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
    except OSError as e:
        raise ClientError(f"-f {path}: {e.strerror}") from None
    try:
        body = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ClientError(f"-f {path}: not YAML or JSON: {e}") from None
    if not isinstance(body, dict):
        raise ClientError(f"-f {path}: give one app set, a mapping with name, generator, template")
    return body


def _show(args: argparse.Namespace, view: dict[str, Any]) -> int:
    if args.output == "json":
        print_json(view)
        return 0
    generator = ", ".join(sorted(view["generator"]))
    print(
        f"appset {view['name']} (project {view['project']}, generator {generator}, "
        f"deletion {view['deletionPolicy']})"
    )
    print(f"apps: {', '.join(view['apps']) or 'none'}")
    for error in view["errors"]:
        print(f"error: {error}")
    return 0


def run_create(args: argparse.Namespace) -> int:
    body = _body(args.file)
    client = client_of(args)
    if args.replace:
        return _show(args, client.call("PUT", f"/api/v1/appsets/{body.get('name')}", body=body))
    return _show(args, client.call("POST", "/api/v1/appsets", body=body))


def run_get(args: argparse.Namespace) -> int:
    return _show(args, client_of(args).call("GET", f"/api/v1/appsets/{args.name}"))


def run_list(args: argparse.Namespace) -> int:
    views = client_of(args).call("GET", "/api/v1/appsets")
    if args.output == "json":
        print_json(views)
        return 0
    rows = [
        (
            v["name"],
            v["project"],
            ",".join(sorted(v["generator"])),
            str(len(v["apps"])),
            str(len(v["errors"])),
        )
        for v in views
    ]
    print(table(rows, ("NAME", "PROJECT", "GENERATOR", "APPS", "ERRORS")))
    return 0


def run_delete(args: argparse.Namespace) -> int:
    answer = client_of(args).call("DELETE", f"/api/v1/appsets/{args.name}")
    if args.output == "json":
        print_json(answer)
    else:
        apps = ", ".join(answer["apps"]) or "none"
        print(f"appset {args.name} deleted ({answer['deletionPolicy']}); apps removed: {apps}")
    return 0


def register(subparsers: Any) -> None:
    common = connection_options()
    appset = subparsers.add_parser("appset", help="app sets: one app per generated element")
    verbs = appset.add_subparsers(dest="verb", required=True)
    create = verbs.add_parser("create", parents=[common], help="create an app set from a file")
    create.add_argument("-f", "--file", required=True, help="the set's YAML or JSON ('-': stdin)")
    create.add_argument("--replace", action="store_true", help="replace the set of that name")
    create.set_defaults(run=run_create)
    get = verbs.add_parser("get", parents=[common], help="an app set, its apps and its errors")
    get.add_argument("name")
    get.set_defaults(run=run_get)
    listing = verbs.add_parser("list", parents=[common], help="the app sets you may see")
    listing.set_defaults(run=run_list)
    delete = verbs.add_parser(
        "delete", parents=[common], help="delete an app set and its apps (its deletionPolicy)"
    )
    delete.add_argument("name")
    delete.set_defaults(run=run_delete)
