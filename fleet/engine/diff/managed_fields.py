"""Reading `metadata.managedFields`: which concrete paths of a live object a manager owns.

The API server records, per field manager and operation, a FieldsV1 tree: `f:<name>` is a map
field, `k:<json>` a list element identified by its key fields (`k:{"name":"app"}`), `v:<json>`
an element of a set-like list (`v:"example.com/keep"`), `i:<n>` an element by position, and
`.` marks the node itself (written for list elements, and for maps by Update operations). An
empty `{}` is a leaf: the whole value there is owned.

Paths are resolved against the live object, so a `k:` element becomes its index in the live
list; elements or fields no longer present live are dropped. Resolved paths hold `Item`s where
the tree named a list element, so the same element can be found again in another version of
the list (the desired object, whose order may differ). `plain()` turns them into indices.

An owned path is a leaf or a list element; a map's own `.` marker is not reported, because
owning a map node says nothing about the keys other managers put in it. A Secret's owned
`stringData` keys resolve to nothing (the API server stores `data` only); that is right, since
dropping a `stringData` key from the apply does not remove the stored `data` key either.

The module also holds the other path vocabulary `fleet.engine.diff.compare` needs: JSON pointers
(RFC 6901) and how the elements of well-known lists are identified (merge keys), as Kubernetes
defines them for strategic merge and server-side apply.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

Path = tuple[str | int, ...]
Entry = Mapping[str, Any]  # one element of metadata.managedFields
# The key that identifies elements of these lists; any other list is matched by position.
MERGE_KEYS: dict[str, tuple[str, ...]] = {
    "containers": ("name",),
    "initContainers": ("name",),
    "ephemeralContainers": ("name",),
    "volumes": ("name",),
    "env": ("name",),
    "imagePullSecrets": ("name",),
    "volumeMounts": ("mountPath",),
    "volumeDevices": ("devicePath",),
    "ports": ("containerPort", "port", "name"),
}


@lru_cache(maxsize=4096)
def _token_value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _key_matches(keys: Any, candidate: Any) -> bool:
    """Key fields the candidate carries must be equal; a missing one was defaulted server-side."""
    if not isinstance(keys, dict) or not isinstance(candidate, Mapping):
        return False
    present = [name for name in keys if name in candidate]
    return bool(present) and all(candidate[name] == keys[name] for name in present)


@dataclass(frozen=True)
class Item:
    """A list element named by FieldsV1: its index in the live list and its raw token."""

    index: int
    token: str  # "k:{...}", "v:<json>" or "i:<n>"

    def find(self, items: list[Any]) -> int | None:
        """The index of this element in another version of the list, or None."""
        kind, _, raw = self.token.partition(":")
        if kind == "i":
            return self.index if self.index < len(items) else None
        value = _token_value(raw)
        for index, candidate in enumerate(items):
            if _key_matches(value, candidate) if kind == "k" else candidate == value:
                return index
        return None


RichPath = tuple[str | Item, ...]


def _resolve(token: str, node: Any) -> str | Item | None:
    kind, _, raw = token.partition(":")
    if kind == "f":
        return raw if isinstance(node, Mapping) and raw in node else None
    if not isinstance(node, list) or kind not in ("k", "v", "i"):
        return None
    if kind == "i":
        index = int(raw) if raw.isdigit() and int(raw) < len(node) else None
    else:
        index = Item(-1, token).find(node)
    return None if index is None else Item(index, token)


def _walk(fields: Mapping[str, Any], node: Any, prefix: RichPath, out: set[RichPath]) -> None:
    for token, sub in fields.items():
        step = _resolve(token, node) if token != "." else None
        if step is None:
            continue
        path = (*prefix, step)
        if not sub or (isinstance(step, Item) and "." in sub):
            out.add(path)
        if isinstance(sub, Mapping) and sub:
            _walk(sub, node[step.index if isinstance(step, Item) else step], path, out)


def entries(live: Mapping[str, Any]) -> list[Entry]:
    managed = (live.get("metadata") or {}).get("managedFields") or []
    return [entry for entry in managed if isinstance(entry, Mapping)]


def managed_paths(live: Mapping[str, Any], accept: Callable[[Entry], bool]) -> set[RichPath]:
    """Paths owned by the managedFields entries `accept` selects, resolved against `live`."""
    out: set[RichPath] = set()
    for entry in filter(accept, entries(live)):
        fields = entry.get("fieldsV1")
        if isinstance(fields, Mapping):
            _walk(fields, live, (), out)
    return out


def plain(path: RichPath) -> Path:
    return tuple(step.index if isinstance(step, Item) else step for step in path)


def is_apply_by(manager: str) -> Callable[[Entry], bool]:
    """Selects `manager`'s Apply entry for the object itself (not a subresource)."""
    return lambda e: (
        e.get("manager") == manager and e.get("operation") == "Apply" and not e.get("subresource")
    )


def owned_fields(live: Mapping[str, Any], manager: str = "gitfleet") -> set[Path]:
    """Concrete paths into `live` that `manager` owns through server-side apply."""
    return {plain(path) for path in managed_paths(live, is_apply_by(manager))}


def fields_of(live: Mapping[str, Any], managers: Collection[str]) -> set[Path]:
    """Concrete paths into `live` owned by any of `managers`, by any operation."""
    return {plain(path) for path in managed_paths(live, lambda e: e.get("manager") in managers)}


def escape(token: str | int) -> str:
    return str(token).replace("~", "~0").replace("/", "~1")


def pointer(path: Iterable[str | int]) -> str:
    """The JSON pointer (RFC 6901) of a path: ("data", "a/b") -> "/data/a~1b"."""
    return "".join(f"/{escape(token)}" for token in path)


def parse_pointer(text: str) -> tuple[str, ...]:
    """The tokens of a JSON pointer; "" (the whole document) has none."""
    if not text.startswith("/"):
        return ()
    return tuple(t.replace("~1", "/").replace("~0", "~") for t in text[1:].split("/"))


def _without(node: Any, tokens: tuple[str, ...]) -> Any:
    """`node` without the value at `tokens`, copying only the containers on the way."""
    if not tokens:
        return node
    head, rest = tokens[0], tokens[1:]
    if isinstance(node, Mapping) and head in node:
        mapping = dict(node)
        if rest:
            mapping[head] = _without(node[head], rest)
        else:
            del mapping[head]
        return mapping
    if isinstance(node, list) and head.isdigit() and int(head) < len(node):
        items = list(node)
        if rest:
            items[int(head)] = _without(node[int(head)], rest)
        else:
            del items[int(head)]
        return items
    return node


def without_pointers(obj: Any, pointers: Iterable[str]) -> Any:
    """`obj` without the values the JSON pointers address; `obj` itself is not modified."""
    for text in pointers:
        obj = _without(obj, parse_pointer(text))
    return obj


def live_path(live: Mapping[str, Any], tokens: tuple[str, ...]) -> Path:
    """A pointer's tokens as a path into live: digits index the lists they meet."""
    node: Any = live
    path: list[str | int] = []
    for token in tokens:
        if isinstance(node, list) and token.isdigit():
            path.append(int(token))
            node = node[int(token)] if int(token) < len(node) else None
        else:
            path.append(token)
            node = node.get(token) if isinstance(node, Mapping) else None
    return tuple(path)


def merge_key(field: str, items: list[Any]) -> str | None:
    """The key that identifies the elements of list `field`, or None to match by position."""
    for key in MERGE_KEYS.get(field, ()):
        if items and all(isinstance(item, Mapping) and key in item for item in items):
            return key
    return None


def pair_items(desired: list[Any], live: list[Any], key: str) -> Iterator[tuple[int, int | None]]:
    """(desired index, live index or None) for each desired element, matched by merge key."""
    positions: dict[Any, int] = {}
    for index, item in enumerate(live):
        if isinstance(item, Mapping):
            positions.setdefault(_hashable(item.get(key)), index)
    for index, item in enumerate(desired):
        yield index, positions.get(_hashable(item.get(key)))


def _hashable(value: Any) -> Any:
    return value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)
