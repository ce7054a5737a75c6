"""`gitfleet project age-key set|show|delete PROJECT`: the age key of a project's SOPS files.

`set` reads the key from `--key-file FILE` (what `age-keygen -o FILE` wrote) or, without it,
from standard input, never from argv, which every user of the machine can read in `ps`. The
coordinator stores it encrypted and never gives it back: `show` says only whether one is
stored, its public id and when it was set (`api.routes.projects`).
"""

from __future__ import annotations

import argparse
from typing import Any

from cli import plans
from cli.options import client_of, connection_options, file_or_stdin
from cli.output import print_json


def _show(args: argparse.Namespace, info: dict[str, Any]) -> int:
    if args.output == "json":
        print_json(info)
    elif info["stored"]:
        print(f"project {info['project']}: age key {info['keyId']} (set {info['updated']})")
    else:
        print(f"project {info['project']}: no age key")
    return 0


def run_set(args: argparse.Namespace) -> int:
    body = {"ageKey": file_or_stdin(args.key_file, "--key-file", "the age key")}
    return _show(args, client_of(args).call("PUT", _path(args), body=body))


def run_show(args: argparse.Namespace) -> int:
    return _show(args, client_of(args).call("GET", _path(args)))


def run_delete(args: argparse.Namespace) -> int:
    client_of(args).call("DELETE", _path(args))
    if args.output == "json":
        print_json({"project": args.project, "deleted": True})
    else:
        print(f"age key of project {args.project} deleted")
    return 0


def _path(args: argparse.Namespace) -> str:
    return f"/api/v1/projects/{args.project}/age-key"


def register(subparsers: Any) -> None:
    common = connection_options()
    project = subparsers.add_parser("project", help="project settings: the SOPS age key")
    nouns = project.add_subparsers(dest="noun", required=True)
    age_key = nouns.add_parser("age-key", help="the age key that decrypts SOPS-encrypted Secrets")
    verbs = age_key.add_subparsers(dest="verb", required=True)
    put = verbs.add_parser("set", parents=[common], help="store the project's age key")
    put.add_argument("project")
    put.add_argument("--key-file", help="a file age-keygen wrote (default: standard input)")
    put.set_defaults(run=run_set)
    show = verbs.add_parser("show", parents=[common], help="whether a key is stored")
    show.add_argument("project")
    show.set_defaults(run=run_show)
    delete = verbs.add_parser("delete", parents=[common], help="delete the project's age key")
    delete.add_argument("project")
    delete.set_defaults(run=run_delete)
    plans.register_project_noun(nouns, common)
