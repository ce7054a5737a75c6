"""Which watch events are drift worth a self-heal sync, and when to stop healing: pure functions.

A change is drift when someone other than gitfleet changed a field gitfleet declared, however
it was written. The API server's managed fields decide it by ownership, never by time: server-
side apply moves ownership of a field to whoever changes its value (`kubectl edit`, `kubectl
scale`, a forced apply, an HPA writing the `/scale` subresource). A write through a subresource
is recorded without a timestamp (or one that ties with gitfleet's own apply), so "who wrote
last" cannot see it; "which fields did gitfleet lose" can. So, comparing the state before the
event with the state after it (`judge`):

- a field gitfleet's Apply entry owned before and does not own after, that another manager
  owns now, is drift by that manager (named per field, with its operation and subresource);
- a field gitfleet lost that nobody owns now was removed: drift by the newest other manager,
  unless gitfleet applied in the same event (its Apply entry's time moved: gitfleet's apply
  stopped declaring it, our own write);
- a field taken by a manager the app ignores (an HPA owning `spec.replicas`) is not drift;
- a controller that only adds what gitfleet never declared (the Deployment controller's
  revision annotation, status) leaves gitfleet's fields alone: activity, not drift.

A deleted object is drift when the last sync declared it. Without the earlier state (an object
first seen now), any change whose newest writer is not gitfleet counts: a needless sync costs
little, a missed edit a lot.

`Judgement.activity` says whether the event may have changed what the last sync left, which is
what keeps a periodic check from being quiet (`worker.quiet`). gitfleet's own writes are not
activity: its applies (its Apply entry's time moved and no other manager took a field), and
objects being deleted (`deletionTimestamp` set: a prune, a hook cleanup or a recreate in
progress; the DELETED event that follows is judged on its own). Hooks are never drift nor
activity: each sync creates and deletes its own.

`Fights` turns repeated drift of one object into a growing delay, and after `limit` heals
within `window` seconds gives up: two controllers that own the same field would otherwise
rewrite it forever. Time is passed in, so tests drive it without sleeping.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from fleet.kube.client import FIELD_MANAGER
from fleet.model import Manifest

MAX_DELAY = 60.0


@dataclass(frozen=True)
class FieldChange:
    """One declared field another manager changed: `field` as a path (`spec.replicas`,
    `spec.template.spec.containers[name=web].image`), who owns it now and how they wrote it."""

    field: str
    manager: str
    operation: str = ""
    subresource: str = ""

    def describe(self) -> str:
        how = f" via /{self.subresource}" if self.subresource else ""
        by = self.manager or "an unknown manager"
        return f"{self.field or 'the object'} changed by {by}{how}"


@dataclass(frozen=True)
class Judgement:
    """What one event did: `drift`, the declared fields other managers changed; `ignored`,
    those changed by managers the app ignores; `activity`, whether it counts as a change to
    the app's objects at all (gitfleet's own writes do not)."""

    drift: tuple[FieldChange, ...] = ()
    ignored: tuple[FieldChange, ...] = ()
    activity: bool = True

    @property
    def is_drift(self) -> bool:
        return bool(self.drift)


OWN = Judgement(activity=False)


def _entries(obj: Manifest | None) -> list[dict[str, Any]]:
    found = ((obj or {}).get("metadata") or {}).get("managedFields") or []
    return [e for e in found if isinstance(e, dict) and e.get("subresource") != "status"]


def _is_own_apply(entry: Mapping[str, Any], manager: str) -> bool:
    return (
        entry.get("manager") == manager
        and entry.get("operation") == "Apply"
        and not entry.get("subresource")
    )


def last_managers(obj: Manifest) -> set[str]:
    """The managers of the newest non-status change (several when they share its second)."""
    entries = _entries(obj)
    if not entries:
        return set()
    newest = max(str(e.get("time", "")) for e in entries)
    return {str(e.get("manager", "")) for e in entries if str(e.get("time", "")) == newest}


def is_own_change(obj: Manifest, manager: str = FIELD_MANAGER) -> bool:
    """Whether the newest change to `obj` was made by `manager` alone."""
    return last_managers(obj) == {manager}


def _leaves(tree: Mapping[str, Any], prefix: tuple[str, ...]) -> set[tuple[str, ...]]:
    found: set[tuple[str, ...]] = set()
    for name, sub in tree.items():
        if name == ".":
            found.add(prefix)
        elif not isinstance(sub, Mapping) or not sub:
            found.add((*prefix, name))
        else:
            found |= _leaves(sub, (*prefix, name))
    return found


def _owned(obj: Manifest | None, manager: str) -> set[tuple[str, ...]]:
    """FieldsV1 leaf paths `manager`'s Apply entry owns on `obj` (("f:data", "f:k"), ...)."""
    paths: set[tuple[str, ...]] = set()
    for entry in _entries(obj):
        if _is_own_apply(entry, manager) and isinstance(entry.get("fieldsV1"), Mapping):
            paths |= _leaves(entry["fieldsV1"], ())
    return paths


def owned_paths(obj: Manifest | None, manager: str = FIELD_MANAGER) -> set[str]:
    """The leaf paths `manager`'s Apply entry owns on `obj`, dotted (`f:data.f:k`, ...)."""
    return {".".join(path) for path in _owned(obj, manager)}


def _applied_at(obj: Manifest | None, manager: str) -> str:
    """When `manager` last applied (its Apply entry's time, which only its own applies move:
    another manager taking its fields shrinks the entry but keeps the time)."""
    for entry in _entries(obj):
        if _is_own_apply(entry, manager):
            return str(entry.get("time", ""))
    return ""


def field_name(path: tuple[str, ...]) -> str:
    """A FieldsV1 path as a person reads it: `spec.containers[name=web].image`."""
    out = ""
    for token in path:
        kind, _, raw = token.partition(":")
        if kind == "f":
            out += f".{raw}" if out else raw
        elif kind == "k":
            try:
                keys = json.loads(raw)
                out += "[" + ",".join(f"{k}={v}" for k, v in keys.items()) + "]"
            except (ValueError, AttributeError):
                out += f"[{raw}]"
        elif kind in ("v", "i"):
            out += f"[{raw}]"
    return out


def _owner_of(path: tuple[str, ...], entries: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The entry that owns `path` (or a field under it); the newest when several do."""
    owners = []
    for entry in entries:
        node: Any = entry.get("fieldsV1")
        for token in path:
            node = node.get(token) if isinstance(node, Mapping) else None
            if node is None:
                break
        if node is not None:
            owners.append(entry)
    if not owners:
        return None
    return max(owners, key=lambda e: str(e.get("time") or "~"))  # no time: a subresource write


def _newest(entries: list[dict[str, Any]]) -> dict[str, Any] | None:
    return max(entries, key=lambda e: str(e.get("time") or "~")) if entries else None


def _change(path: tuple[str, ...], entry: Mapping[str, Any] | None) -> FieldChange:
    if entry is None:
        return FieldChange(field_name(path), "")
    return FieldChange(
        field_name(path),
        str(entry.get("manager", "")),
        str(entry.get("operation", "")),
        str(entry.get("subresource", "")),
    )


def _deleting(obj: Manifest) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def judge(
    kind: str,
    obj: Manifest,
    old: Manifest | None,
    *,
    declared: bool,
    ignore_managers: Collection[str] = (),
    manager: str = FIELD_MANAGER,
) -> Judgement:
    """What a watch event of type `kind` on an object gitfleet manages did (module doc)."""
    if kind == "DELETED":
        if not declared:
            return OWN  # pruned, or never ours to keep: nothing to restore
        return Judgement(drift=(FieldChange("", "", "Delete"),))
    if _deleting(obj):
        return OWN
    if old is None:
        if is_own_change(obj, manager):
            return OWN
        newest = _newest([e for e in _entries(obj) if e.get("manager") != manager])
        return Judgement(drift=(_change((), newest),) if declared else ())
    lost = _owned(old, manager) - _owned(obj, manager)
    ours_changed = _applied_at(old, manager) != _applied_at(obj, manager)
    others = [e for e in _entries(obj) if e.get("manager") != manager]
    drift: list[FieldChange] = []
    ignored: list[FieldChange] = []
    for path in sorted(lost):
        if any(other[: len(path)] == path and other != path for other in lost):
            continue  # a list element: its lost fields are reported, not the element too
        owner = _owner_of(path, others)
        if owner is None and ours_changed:
            continue  # our apply stopped declaring it
        change = _change(path, owner if owner is not None else _newest(others))
        (ignored if change.manager in ignore_managers else drift).append(change)
    if ours_changed and not drift and not ignored:
        return OWN
    return Judgement(tuple(drift) if declared else (), tuple(ignored))


def is_drift(kind: str, obj: Manifest, old: Manifest | None, *, declared: bool) -> bool:
    """Whether a watch event of type `kind` shows drift of an object gitfleet manages."""
    return judge(kind, obj, old, declared=declared).is_drift


@dataclass
class Fights:
    """Debounce delays per object that double with each heal within `window` seconds."""

    base: float = 1.0
    limit: int = 5
    window: float = 300.0
    _seen: dict[str, list[float]] = field(default_factory=dict)

    def note(self, key: str, now: float) -> float | None:
        """Count a drift of `key`; the delay before healing it, or None to stop healing."""
        recent = [t for t in self._seen.get(key, []) if now - t < self.window] + [now]
        self._seen[key] = recent
        if len(recent) > self.limit:
            return None
        return min(self.base * 2.0 ** (len(recent) - 1), MAX_DELAY)

    def count(self, key: str) -> int:
        return len(self._seen.get(key, []))

    def forget(self, now: float) -> None:
        """Drop objects with no drift inside the window."""
        self._seen = {
            k: times for k, times in self._seen.items() if times and now - times[-1] < self.window
        }
