"""`gitfleet health`: judge live objects read from YAML, as `kubectl get -o yaml` prints them.

Reads a multi-document YAML stream from a file or standard input (`-`), unwraps `kind: List`
documents, runs `fleet.engine.health.assess.assess` on every object and prints a table or JSON. The
exit status says whether every object could be read and judged (0), not how healthy the objects are,
so the command can feed scripts; unreadable or malformed input is an error (2) naming the file and
line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from cli.output import table
from fleet.engine.health.assess import assess
from fleet.errors import RenderError, UsageError
from fleet.model import Manifest, ObjectRef

COLUMNS = ("KIND", "NAMESPACE", "NAME", "HEALTH", "MESSAGE")
Row = dict[str, str]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "health",
        help="judge the health of live objects read from YAML",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "-f", "--filename", required=True, metavar="FILE", help="YAML file, or - for stdin"
    )
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    name: str = args.filename
    rows = [report(obj) for obj in load_objects(read_source(name), name)]
    print(json.dumps(rows, indent=2) if args.output == "json" else render_table(rows))
    return 0


def read_source(name: str) -> str:
    if name == "-":
        return sys.stdin.read()
    try:
        return Path(name).read_text(encoding="utf-8")
    except FileNotFoundError as e:
        raise UsageError(f"{name}: no such file") from e
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{name}: cannot read: {e}") from e


def load_objects(source: str, name: str) -> list[Manifest]:
    """Every object in a YAML stream; raise RenderError naming the line of anything malformed."""
    loader = yaml.CSafeLoader(source)
    objects: list[Manifest] = []
    try:
        while loader.check_node() and (node := loader.get_node()) is not None:
            where = f"{name}: document at line {node.start_mark.line + 1}"
            objects += _objects_in(loader.construct_document(node), where)
    except yaml.YAMLError as e:
        raise RenderError(f"{name}: malformed YAML{_position(e)}: {_problem(e)}") from e
    finally:
        loader.dispose()
    return objects


def _position(error: yaml.YAMLError) -> str:
    mark = getattr(error, "problem_mark", None)
    return f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""


def _problem(error: yaml.YAMLError) -> str:
    problem = getattr(error, "problem", None) or str(error)
    context = getattr(error, "context", None)
    return f"{problem} ({context})" if context else str(problem)


def _objects_in(document: Any, where: str) -> list[Manifest]:
    if document is None:
        return []
    if not isinstance(document, dict):
        raise RenderError(
            f"{where}: expected a Kubernetes object, found a {type(document).__name__}"
        )
    kind = document.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and "items" in document:
        return _list_items(document, where)
    return [_checked(document, where)]


def _list_items(document: Manifest, where: str) -> list[Manifest]:
    """Items of `kind: List` (kubectl) or a typed list such as `DeploymentList` (the API)."""
    items = document.get("items") or []
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise RenderError(f"{where}: items of a {document['kind']} must be objects")
    item_kind = str(document["kind"]).removesuffix("List")
    defaults = {"apiVersion": document.get("apiVersion"), "kind": item_kind} if item_kind else {}
    return [_checked({**defaults, **item}, f"{where}, item {i}") for i, item in enumerate(items, 1)]


def _checked(obj: Manifest, where: str) -> Manifest:
    meta = obj.get("metadata")
    missing = [key for key in ("apiVersion", "kind") if not isinstance(obj.get(key), str)]
    if not isinstance(meta, dict) or not meta.get("name"):
        missing.append("metadata.name")
    if missing:
        raise RenderError(f"{where}: not a Kubernetes object, missing {', '.join(missing)}")
    return obj


def report(obj: Manifest) -> Row:
    ref, status = ObjectRef.of(obj), assess(obj)
    return {
        "apiVersion": ref.api_version,
        "kind": ref.kind,
        "namespace": ref.namespace,
        "name": ref.name,
        "health": str(status.health),
        "message": status.message,
    }


def render_table(rows: list[Row]) -> str:
    """Three spaces between columns, as `kubectl get` prints them."""
    return table([[row[c.lower()] for c in COLUMNS] for row in rows], COLUMNS, gap="   ")
