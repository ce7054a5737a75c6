"""Pure comparison of what we declare (a partial apply configuration) against the live object.

`compare` is the cheap local check that runs for every object of every sync; only when it says
something changed does the sync ask the API server for a dry-run. It therefore walks the
desired object alongside the live one without deep copies: only desired's top level and
metadata are copied, plus the containers on the path of an ignored JSON pointer.

Semantics of `compare`:
- Only fields we declare are compared; live may carry more (server defaults, other managers).
  `apiVersion`, `kind`, `status` and server-set metadata are never compared.
- Maps compare key by key. Lists of maps are matched by merge key (`name` for containers,
  volumes, env, imagePullSecrets; `mountPath` for volumeMounts; `containerPort`, then `port`,
  then `name` for ports), so extra live elements (an injected sidecar) are not drift; other
  lists compare by position and length. `metadata.finalizers` compares as a set we add to.
- Scalars compare with their types (`"1"` is not `1`), except resource quantities inside
  `requests`, `limits`, `hard` and similar maps, which compare by value (`0.5` == `"500m"`),
  because the API server rewrites them into canonical form.
- A declared null means "not declared"; a declared zero value (false, 0, "", {}, []) that the
  server omitted is not drift.
- `changed` pointers address the desired object (list indices are desired positions);
  `removed` pointers address the live object: fields our manager's Apply entry owns that we no
  longer declare, still present, and owned by nobody else (so the next apply really removes
  them).

Ignore rules: JSON pointers are removed from both sides before comparing; fields owned by the
named managers (any operation, including subresources such as `scale`) are skipped.
"""

from __future__ import annotations

import base64
import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, NamedTuple

import yaml

from fleet.engine.diff.managed_fields import (
    Item,
    Path,
    RichPath,
    escape,
    fields_of,
    is_apply_by,
    live_path,
    managed_paths,
    merge_key,
    owned_fields,
    pair_items,
    parse_pointer,
    plain,
    pointer,
    without_pointers,
)
from fleet.model import Manifest, ObjectRef

__all__ = [
    "Drift",
    "IgnoreRules",
    "compare",
    "normalize",
    "owned_fields",
    "strip_ignored",
    "unified",
]

SERVER_METADATA = frozenset(
    {"managedFields", "resourceVersion", "uid", "generation", "creationTimestamp", "selfLink"}
    | {"deletionTimestamp", "deletionGracePeriodSeconds"}
)
SERVER_ANNOTATIONS = frozenset(
    {"kubectl.kubernetes.io/last-applied-configuration", "deployment.kubernetes.io/revision"}
)
NOT_COMPARED = frozenset({"apiVersion", "kind", "status"})
QUANTITY_MAPS = frozenset(
    {"requests", "limits", "hard", "capacity", "default", "defaultRequest", "max", "min"}
)
MASK_SAME, MASK_LIVE, MASK_DESIRED = "********", "--------", "++++++++"
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+|[numkMGTPE])?$")
_SUFFIX = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


@dataclass(frozen=True)
class IgnoreRules:
    """Differences not to report: JSON pointers, and fields other managers own (an HPA)."""

    json_pointers: tuple[str, ...] = ()
    managers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Drift:
    """Where live differs from desired. `changed`: pointers into desired; `removed`: pointers
    into live of fields we applied before, no longer declare, and that are still there."""

    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()

    @property
    def in_sync(self) -> bool:
        return not self.changed and not self.removed


def _copy(value: Any) -> Any:
    """Deep copy of JSON-shaped data; several times faster than copy.deepcopy."""
    if isinstance(value, Mapping):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy(item) for item in value]
    return value


def _is_secret(obj: Mapping[str, Any] | None) -> bool:
    return obj is not None and obj.get("kind") == "Secret" and obj.get("apiVersion") == "v1"


def _fold_string_data(secret: dict[str, Any]) -> None:
    """Replace `stringData` by the base64 `data` entries the API server stores (it wins)."""
    string_data = secret.pop("stringData", None)
    if isinstance(string_data, Mapping) and string_data:
        encoded = {k: base64.b64encode(str(v).encode()).decode() for k, v in string_data.items()}
        secret["data"] = {**(secret.get("data") or {}), **encoded}


def _clean_metadata(meta: Mapping[str, Any]) -> dict[str, Any]:
    out = {key: value for key, value in meta.items() if key not in SERVER_METADATA}
    annotations = out.get("annotations")
    if isinstance(annotations, Mapping) and SERVER_ANNOTATIONS.intersection(annotations):
        out["annotations"] = {k: v for k, v in annotations.items() if k not in SERVER_ANNOTATIONS}
    return out


def normalize(obj: Manifest) -> Manifest:
    """A copy without status and server-set metadata, `stringData` folded into `data`, and
    empty annotations/labels dropped. ownerReferences are kept: they are part of the object."""
    out: Manifest = _copy(obj)
    out.pop("status", None)
    if isinstance(out.get("metadata"), Mapping):
        meta = out["metadata"] = _clean_metadata(out["metadata"])
        for name in ("annotations", "labels"):
            if name in meta and not meta[name]:
                del meta[name]
    if _is_secret(out):
        _fold_string_data(out)
    return out


def _declared(desired: Manifest) -> Manifest:
    """The part of desired that compare looks at, sharing everything it does not change."""
    view = {key: value for key, value in desired.items() if key not in NOT_COMPARED}
    if isinstance(view.get("metadata"), Mapping):
        view["metadata"] = _clean_metadata(view["metadata"])
    if _is_secret(desired):
        _fold_string_data(view)
    return view


def _quantity(value: Any) -> Decimal | None:
    """A Kubernetes resource quantity's value ("500m", "1Gi", 2, "1e3"), or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    match = _QUANTITY.match(str(value).strip())
    if match is None:
        return None
    number, suffix = Decimal(match.group(1)), match.group(2) or ""
    if suffix in _BINARY:
        return number * (1 << _BINARY[suffix])
    exponent = _SUFFIX[suffix] if suffix in _SUFFIX else int(suffix[1:])
    return number.scaleb(exponent)


def _same(desired: Any, live: Any, *, quantity: bool) -> bool:
    if quantity:
        wanted = _quantity(desired)
        if wanted is not None and wanted == _quantity(live):
            return True
    if isinstance(desired, (int, float)) and isinstance(live, (int, float)):
        return isinstance(desired, bool) == isinstance(live, bool) and desired == live
    return type(desired) is type(live) and desired == live


class _Here(NamedTuple):
    """Where the walk is: pointer into desired, path into live, and the enclosing keys."""

    pointer: str
    path: Path
    field: str
    parent: str

    def key(self, name: str) -> _Here:
        return _Here(f"{self.pointer}/{escape(name)}", (*self.path, name), name, self.field)

    def item(self, desired_index: int, live_index: int) -> _Here:
        pointer = f"{self.pointer}/{desired_index}"
        return _Here(pointer, (*self.path, live_index), self.field, self.parent)


@dataclass
class _Walk:
    ignored: set[Path]
    changed: list[str] = field(default_factory=list)


def _walk_value(desired: Any, live: Any, here: _Here, walk: _Walk) -> None:
    if here.path in walk.ignored:
        return
    if isinstance(desired, Mapping):
        _walk_map(desired, live, here, walk)
    elif isinstance(desired, list):
        _walk_list(desired, live, here, walk)
    elif not _same(desired, live, quantity=here.parent in QUANTITY_MAPS):
        walk.changed.append(here.pointer)


def _walk_map(desired: Mapping[str, Any], live: Any, here: _Here, walk: _Walk) -> None:
    if not isinstance(live, Mapping):
        walk.changed.append(here.pointer)
        return
    for key, value in desired.items():
        if key in live:
            if value is not None:
                _walk_value(value, live[key], here.key(key), walk)
        elif value:  # a declared false, 0, "", {} or [] the server omitted is no drift
            walk.changed.append(here.key(key).pointer)


def _walk_list(desired: list[Any], live: Any, here: _Here, walk: _Walk) -> None:
    key = merge_key(here.field, desired)
    if not isinstance(live, list):
        walk.changed.append(here.pointer)
    elif key is not None:
        for index, match in pair_items(desired, live, key):
            if match is None:
                walk.changed.append(here.item(index, index).pointer)
            else:
                _walk_value(desired[index], live[match], here.item(index, match), walk)
    elif here.path == ("metadata", "finalizers"):
        walk.changed += [here.item(i, i).pointer for i, v in enumerate(desired) if v not in live]
    elif len(desired) != len(live):
        walk.changed.append(here.pointer)
    else:
        for index, (want, have) in enumerate(zip(desired, live, strict=True)):
            _walk_value(want, have, here.item(index, index), walk)


def _declares(desired: Any, path: RichPath) -> bool:
    """Whether desired still declares the value at a path resolved against live."""
    node = desired
    for step in path:
        if isinstance(step, Item):
            index = step.find(node) if isinstance(node, list) else None
            if index is None:
                return False
            node = node[index]
        elif isinstance(node, Mapping) and node.get(step) is not None:
            node = node[step]
        else:
            return False
    return True


def _is_under(path: Path, prefixes: set[Path]) -> bool:
    return any(path[:length] in prefixes for length in range(1, len(path) + 1))


def _removed(desired: Manifest, live: Manifest, manager: str, skip: set[Path]) -> list[str]:
    mine = is_apply_by(manager)
    others = {plain(p) for p in managed_paths(live, lambda entry: not mine(entry))}
    blocked, found = set(skip), []
    for path in sorted(managed_paths(live, mine), key=lambda p: (len(p), pointer(plain(p)))):
        flat = plain(path)
        if flat in others or _is_under(flat, blocked) or _declares(desired, path):
            continue
        blocked.add(flat)  # report a removed element once, not each of its fields again
        found.append(pointer(flat))
    return sorted(found)


def compare(
    desired: Manifest,
    live: Manifest | None,
    *,
    manager: str = "gitfleet",
    ignore: IgnoreRules = IgnoreRules(),
) -> Drift:
    """How `live` differs from what `desired` declares (see the module doc for the rules)."""
    if live is None:
        return Drift(changed=("",))
    declared = _declared(desired)
    ignored = fields_of(live, ignore.managers) if ignore.managers else set()
    walk = _Walk(ignored)
    wanted = without_pointers(declared, ignore.json_pointers)
    _walk_map(wanted, without_pointers(live, ignore.json_pointers), _Here("", (), "", ""), walk)
    skip = ignored | {live_path(live, parse_pointer(p)) for p in ignore.json_pointers}
    return Drift(tuple(walk.changed), tuple(_removed(declared, live, manager, skip)))


def _strip(desired: Any, live: Any, path: Path, ignored: set[Path], field: str) -> Any:
    if isinstance(desired, Mapping) and isinstance(live, Mapping):
        return {
            key: _strip(value, live[key], (*path, key), ignored, key) if key in live else value
            for key, value in desired.items()
            if (*path, key) not in ignored
        }
    if not isinstance(desired, list) or not isinstance(live, list):
        return desired
    key = merge_key(field, desired)
    if key is not None:
        pairs = list(pair_items(desired, live, key))
    else:
        pairs = [(i, i if i < len(live) else None) for i in range(len(desired))]
    return [
        desired[i] if j is None else _strip(desired[i], live[j], (*path, j), ignored, field)
        for i, j in pairs
        if j is None or (*path, j) not in ignored
    ]


def strip_ignored(desired: Manifest, rules: IgnoreRules, live: Manifest | None) -> Manifest:
    """`desired` without the fields the rules ignore, to apply so we never fight over them.

    Pointers are removed as they address desired. Fields the named managers own in `live` are
    removed where desired declares them (matching list elements by merge key). Without this,
    applying `spec.replicas: 2` would undo an HPA's scaling on every sync. The input is not
    modified; unchanged parts are shared with it.
    """
    stripped: Manifest = without_pointers(desired, rules.json_pointers)
    if not rules.managers or live is None:
        return stripped
    result: Manifest = _strip(stripped, live, (), fields_of(live, rules.managers), "")
    return result


def _overlay(base: dict[str, Any], top: Mapping[str, Any], field: str = "") -> dict[str, Any]:
    """Lay desired over (a copy of) live, merging maps and keyed lists; mutates `base`.

    Quantities equal in value keep live's spelling, so `0.5` over `500m` shows no change."""
    for key, value in top.items():
        current = base.get(key)
        by = merge_key(key, value) if isinstance(value, list) else None
        if isinstance(value, Mapping) and isinstance(current, dict):
            _overlay(current, value, key)
        elif by is not None and isinstance(current, list):
            _overlay_list(current, value, by)
        elif value is not None and not _same(value, current, quantity=field in QUANTITY_MAPS):
            base[key] = value
    return base


def _overlay_list(current: list[Any], items: list[Any], key: str) -> None:
    for index, match in list(pair_items(items, current, key)):
        if match is None:
            current.append(items[index])
        elif isinstance(current[match], dict):
            _overlay(current[match], items[index])
        else:
            current[match] = items[index]


def _mask(before: Manifest | None, after: Manifest) -> None:
    """Replace Secret values by masks: equal on both sides when equal, different when not."""
    old = (before or {}).get("data") or {}
    new = after.get("data") or {}
    same = {key for key in new if key in old and old[key] == new[key]}
    for key in old:
        old[key] = MASK_SAME if key in same else MASK_LIVE
    for key in new:
        new[key] = MASK_SAME if key in same else MASK_DESIRED


def _dump(obj: Manifest | None) -> list[str]:
    if obj is None:
        return []
    text: str = yaml.dump(obj, Dumper=_Dumper, sort_keys=True, default_flow_style=False)
    return text.splitlines(keepends=True)


def unified(desired: Manifest, live: Manifest | None, *, ref: ObjectRef) -> str:
    """A unified diff of live against live-with-desired-laid-over, both normalized, as YAML.

    Secret values never appear: equal values show the same mask on both sides, different
    values different masks. Empty when there is nothing to show.
    """
    before = normalize(live) if live is not None else None
    after = _overlay(_copy(before) if before is not None else {}, normalize(desired))
    if _is_secret(after):
        _mask(before, after)
    lines = difflib.unified_diff(
        _dump(before), _dump(after), fromfile=f"live/{ref}", tofile=f"desired/{ref}"
    )
    return "".join(lines)
