"""Where rendered text becomes Kubernetes objects: YAML and JSON parsing, and validation (pure).

Every renderer ends here: the plain renderer with each file it reads, kustomize and helm with
the tool's output. Each object must have apiVersion, kind and metadata.name; a `List` is
expanded into its items. Errors name the file (or the tool's output), the document and the line.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from fleet.errors import RenderError
from fleet.model import Manifest


def parse_manifests(name: str, data: bytes) -> list[Manifest]:
    """Parse one file (multi-document YAML, or JSON when `name` ends in .json) into objects."""
    is_json = name.endswith(".json")
    documents = _json_documents(name, data) if is_json else yaml_documents(name, data)
    objects: list[Manifest] = []
    for index, doc in enumerate(documents, start=1):
        if doc is not None:
            objects.extend(_expand(doc, f"{name} document {index}"))
    return objects


def yaml_documents(name: str, data: bytes) -> list[Any]:
    """Every document of a YAML stream; a syntax error is a RenderError naming `name`."""
    try:
        return list(yaml.load_all(data, Loader=yaml.CSafeLoader))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        raise RenderError(f"{name}: invalid YAML{where}: {problem}") from e


def _json_documents(name: str, data: bytes) -> list[Any]:
    try:
        return [json.loads(data)]
    except ValueError as e:  # includes JSONDecodeError and UnicodeDecodeError
        line = f" at line {e.lineno}" if isinstance(e, json.JSONDecodeError) else ""
        raise RenderError(f"{name}: invalid JSON{line}: {e}") from e


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
        raise RenderError(f"{where}: {kind} has no metadata.name; every object needs {_NEEDS}")
    return obj


_NEEDS = "apiVersion, kind and metadata.name"


def _type(value: Any) -> str:
    return "a list" if isinstance(value, list) else f"{type(value).__name__} {str(value)[:40]!r}"
