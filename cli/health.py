"""`gitfleet health`: judge live objects read from YAML, as `kubectl get -o yaml` prints them.

Reads a multi-document YAML stream from a file or standard input (`-`), unwraps `kind: List`
documents, runs `fleet.engine.health.assess.assess` on every object and prints a table or JSON. The
exit status says whether every object could be read and judged (0), not how healthy the objects are,
so the command can feed scripts; unreadable or malformed input is an error (2) naming the file and
line.

The same judgement as a sync's waves, with two things a sync reads from the cluster taken from
the input instead:
- a custom resource with no status has **no health signal** ("Healthy", message "no health
  signal: ...") when its CustomResourceDefinition in the input declares no status subresource,
  and is Unknown (waiting for its controller) when it declares one or is not in the input;
- an Ingress without an address is Healthy by default, its message saying so; with
  --ingress-needs-address (an app's syncPolicy.ingressNeedsAddress) it is Progressing, as in
  Argo CD;
- a custom resource without a rule is judged by its conditions (kstatus); with
  --no-custom-resource-health (an app's syncPolicy.customResourceHealth: false) it has no health
  signal, as in Argo CD.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from cli.output import table
from fleet.engine.health.assess import (
    DEFAULT_OPTIONS,
    HealthOptions,
    assess,
    status_subresource,
)
from fleet.engine.health.readers import text
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
    parser.add_argument(
        "--ingress-needs-address",
        action="store_true",
        help="judge an Ingress as Argo CD does: Progressing until it has an address",
    )
    parser.add_argument(
        "--no-custom-resource-health",
        action="store_true",
        help="give custom resources without a rule no health signal, as Argo CD does",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    name: str = args.filename
    options = HealthOptions(
        ingress_needs_address=args.ingress_needs_address,
        custom_resource_health=not args.no_custom_resource_health,
    )
    rows = judge(load_objects(read_source(name), name), options)
    print(json.dumps(rows, indent=2) if args.output == "json" else render_table(rows))
    return 0


def judge(objects: list[Manifest], options: HealthOptions = DEFAULT_OPTIONS) -> list[Row]:
    """A row for each object; the CustomResourceDefinitions among `objects` tell whether their
    custom resources expect a controller to report status."""
    crds = {
        _defines(obj): obj
        for obj in objects
        if obj.get("kind") == "CustomResourceDefinition"
        and str(obj.get("apiVersion", "")).startswith("apiextensions.k8s.io/")
    }
    return [report(obj, options, crds) for obj in objects]


def _defines(crd: Manifest) -> tuple[str, str]:
    return text(crd, "spec", "group"), text(crd, "spec", "names", "kind")


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


def report(
    obj: Manifest,
    options: HealthOptions = DEFAULT_OPTIONS,
    crds: dict[tuple[str, str], Manifest] | None = None,
) -> Row:
    ref = ObjectRef.of(obj)
    crd = (crds or {}).get((ref.group, ref.kind))
    expects = status_subresource(crd, ref.version) if crd is not None else None
    status = assess(obj, options, expects_status=expects)
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
