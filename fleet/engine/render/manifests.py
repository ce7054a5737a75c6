"""Where rendered text becomes Kubernetes objects: YAML and JSON parsing, and validation (pure).

Every renderer ends here: the plain renderer with each file it reads, kustomize and helm with
the tool's output. Each object must have apiVersion, kind and metadata.name; a `List` is
expanded into its items. Errors name the file (or the tool's output), the document and the line.
Only a hook (an Argo CD, gitfleet or Helm hook annotation) may have `metadata.generateName`
instead of a name, as in Argo CD's own examples: each sync run names it
(`fleet.engine.plan.hooks`). A normal object needs a name, since gitfleet tracks it by name.

Text is untrusted, so parsing is bounded (`fleet.engine.limits`). YAML is composed into its
node graph first (libyaml, which itself stops at 1,000 levels) and measured before a single
Python object is built: a document whose aliases would expand past `max_alias_nodes` (a
"billion laughs": nine levels of nine aliases are 387 million nodes in 342 bytes), refers to
itself, or nests deeper than `max_depth` is refused. JSON nested past Python's recursion limit
is refused as too deep, and any JSON document deeper than `max_depth` too, so no later stage
(copying, diffing, encoding) can recurse out of bounds.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, SequenceNode

from fleet.engine.limits import Limits, hint
from fleet.engine.plan.order import is_hook
from fleet.errors import RenderError
from fleet.model import Manifest

DEFAULT_LIMITS = Limits()


def parse_manifests(name: str, data: bytes, limits: Limits = DEFAULT_LIMITS) -> list[Manifest]:
    """Parse one file (multi-document YAML, or JSON when `name` ends in .json) into objects."""
    is_json = name.endswith(".json")
    parse = _json_documents if is_json else yaml_documents
    documents = parse(name, data, limits)
    objects: list[Manifest] = []
    for index, doc in enumerate(documents, start=1):
        if doc is not None:
            objects.extend(_expand(doc, f"{name} document {index}"))
    return objects


def yaml_documents(name: str, data: bytes, limits: Limits = DEFAULT_LIMITS) -> list[Any]:
    """Every document of a YAML stream, each measured before it is built; a syntax error or a
    document over the limits is a RenderError naming `name`."""
    loader, aliases = yaml.CSafeLoader(data), b"*" in data
    documents: list[Any] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                break
            measure(node, f"{name} document {len(documents) + 1}", limits, aliases=aliases)
            documents.append(loader.construct_document(node))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        raise RenderError(f"{name}: invalid YAML{where}: {problem}") from e
    finally:
        loader.dispose()
    return documents


def check_file(name: str, data: bytes, limits: Limits) -> None:
    """Refuse a YAML or JSON file a tool will read whose aliases or nesting are over
    `limits`, before the tool expands them; a file that does not parse is the tool's to judge
    (it may never read it, or it may be a template)."""
    if name.endswith(".json"):
        with contextlib.suppress(ValueError):
            _json_documents(name, data, limits)
        return
    loader, aliases = yaml.CSafeLoader(data), b"*" in data
    try:
        index = 0
        while loader.check_node():
            node = loader.get_node()
            index += 1
            if node is not None:
                measure(node, f"{name} document {index}", limits, aliases=aliases)
    except yaml.YAMLError:
        return
    finally:
        loader.dispose()


def measure(root: Node, where: str, limits: Limits, *, aliases: bool = True) -> None:
    """Refuse a composed YAML document that nests deeper than `limits.max_depth` or whose
    aliases add more than `limits.max_alias_nodes` nodes when expanded. One pass over the
    distinct nodes, without recursion: each node's expanded size and depth are kept by id, so
    an alias costs what it points at once, not once per use. Without `aliases` (the text has
    no `*`, which every alias needs) the document is a tree and only its depth is measured."""
    if not aliases:
        _measure_tree(root, where, limits)
        return
    size: dict[int, int] = {}  # expanded size of each collection, by id
    depth: dict[int, int] = {}
    open_nodes: set[int] = set()
    leaves = 0  # scalars are counted where they are used, never kept
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key, children = id(node), _children(node)
        if finished:
            inner = [id(c) for c in children if id(c) in size]
            size[key] = 1 + len(children) - len(inner) + sum(size[k] for k in inner)
            depth[key] = 1 + max((depth[k] for k in inner), default=0)
            open_nodes.discard(key)
            if depth[key] > limits.max_depth:
                raise _too_deep(where, limits)
        elif key in open_nodes:
            raise RenderError(f"{where}: a YAML alias refers to a node that contains it")
        elif key not in size and isinstance(node, MappingNode | SequenceNode):
            open_nodes.add(key)
            stack.append((node, True))
            stack.extend((c, False) for c in children)
        else:
            leaves += 0 if key in size else 1
    distinct = len(size) + leaves
    expanded = size.get(id(root), 1)
    if expanded - distinct > limits.max_alias_nodes:
        added = f"more than {limits.max_alias_nodes} nodes"
        raise RenderError(f"{where}: YAML aliases expand to {added} ({hint('max_alias_nodes')})")


def _measure_tree(root: Node, where: str, limits: Limits) -> None:
    stack: list[tuple[Node, int]] = [(root, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, MappingNode):
            children = [part for pair in node.value for part in pair]
        elif isinstance(node, SequenceNode):
            children = node.value
        else:
            continue
        if level > limits.max_depth:
            raise _too_deep(where, limits)
        stack.extend((child, level + 1) for child in children)


def _children(node: Node) -> list[Node]:
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, SequenceNode):
        return list(node.value)
    return []


def _json_documents(name: str, data: bytes, limits: Limits) -> list[Any]:
    try:
        document = json.loads(data)
    except RecursionError as e:
        raise _too_deep(name, limits) from e
    except ValueError as e:  # includes JSONDecodeError and UnicodeDecodeError
        line = f" at line {e.lineno}" if isinstance(e, json.JSONDecodeError) else ""
        raise RenderError(f"{name}: invalid JSON{line}: {e}") from e
    if depth_of(document) > limits.max_depth:
        raise _too_deep(name, limits)
    return [document]


def depth_of(value: Any) -> int:
    """How deeply maps and lists nest in `value` (a scalar is 0), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in item)
    return deepest


def _too_deep(where: str, limits: Limits) -> RenderError:
    levels = f"{limits.max_depth} levels"
    return RenderError(f"{where}: document nested deeper than {levels} ({hint('max_depth')})")


def _expand(doc: Any, where: str) -> list[Manifest]:
    if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
        return [validate(item, f"{where} item {i}") for i, item in enumerate(doc["items"], 1)]
    return [validate(doc, where)]


def validate(obj: Any, where: str) -> Manifest:
    """Return `obj` if it is a Kubernetes object (apiVersion, kind, metadata.name), else raise."""
    if not isinstance(obj, dict):
        raise RenderError(f"{where}: expected a Kubernetes object (a mapping), got {_type(obj)}")
    metadata = obj.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    for field, value in (("apiVersion", obj.get("apiVersion")), ("kind", obj.get("kind"))):
        if not isinstance(value, str) or not value:
            raise RenderError(f"{where}: object has no {field}; every object needs {_NEEDS}")
    if not isinstance(name, str) or not name:
        kind = obj["kind"]
        prefix = metadata.get("generateName") if isinstance(metadata, dict) else None
        if not isinstance(prefix, str) or not prefix:
            raise RenderError(f"{where}: {kind} has no metadata.name; every object needs {_NEEDS}")
        if not is_hook(obj):
            raise RenderError(
                f"{where}: {kind} has metadata.generateName ({prefix!r}) but no metadata.name; "
                "only hooks (argocd.argoproj.io/hook, gitfleet.io/hook or helm.sh/hook) may "
                "use generateName: give it a metadata.name"
            )
    return obj


_NEEDS = "apiVersion, kind and metadata.name"


def _type(value: Any) -> str:
    return "a list" if isinstance(value, list) else f"{type(value).__name__} {str(value)[:40]!r}"
