"""`gitfleet registry export FILE` and `gitfleet registry import FILE` (admin token).

A lost Redis is a restore, not a rebuild: `export` writes every cluster, project, app,
repository credential and token digest, with every credential still encrypted, as one versioned
JSON document (`fleet.control.registry.backup`); `import` merges such a file into the
coordinator's registry by name and prints what it created, updated and left unchanged. The file
holds ciphertext only, yet whoever holds it and the key holds every credential: keep it as
you keep GITFLEET_SECRET_KEY, apart from it (README, "Operating Redis"). `import` then warns of
every inventory in the clusters that no registered app owns (objects left unmanaged).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from api.client import ClientError
from cli.options import client_of, connection_options
from cli.output import print_json, table


def run_export(args: argparse.Namespace) -> int:
    text = client_of(args).export_registry()
    path: Path = args.file
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
    except OSError as e:
        raise ClientError(f"cannot write {path}: {e.strerror}") from e
    print(f"registry exported to {path} ({len(text)} bytes)")
    return 0


def run_import(args: argparse.Namespace) -> int:
    path: Path = args.file
    try:
        document = path.read_bytes()
    except OSError as e:
        raise ClientError(f"cannot read {path}: {e.strerror}") from e
    answer: dict[str, Any] = client_of(args).import_registry(document)
    if args.output == "json":
        print_json(answer)
        return 0
    counts: dict[str, dict[str, int]] = answer["counts"]
    columns = ["created", "updated", "unchanged", "kept"]
    rows = [[kind, *(str(c.get(column, 0)) for column in columns)] for kind, c in counts.items()]
    print(table(rows, ["KIND", *(column.upper() for column in columns)]))
    for orphan in answer.get("orphans", []):
        print(
            f"warning: cluster {orphan['cluster']} holds an inventory of app {orphan['app']} "
            f"that no registered app owns ({orphan['reason']}): its objects are unmanaged"
        )
    for cluster, why in answer.get("unreachable", {}).items():
        print(f"warning: cannot read the inventories on cluster {cluster}: {why}")
    return 0


def register(subparsers: Any) -> None:
    common = connection_options()
    registry = subparsers.add_parser("registry", help="back up and restore the registry")
    verbs = registry.add_subparsers(dest="verb", required=True)
    export = verbs.add_parser(
        "export", parents=[common], help="write the whole registry to FILE (mode 0600)"
    )
    export.add_argument("file", type=Path)
    export.set_defaults(run=run_export)
    restore = verbs.add_parser(
        "import", parents=[common], help="merge a registry FILE into the coordinator, by name"
    )
    restore.add_argument("file", type=Path)
    restore.set_defaults(run=run_import)
