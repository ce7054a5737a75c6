"""Which watch events are drift worth a self-heal sync, and when to stop healing: pure functions.

A change is drift when someone other than gitfleet changed a field gitfleet declared. The
API server's managed fields tell us both halves:

- *who*: the newest entry (by time) that is not a `status` subresource write. Status is the
  controllers' to write and never drift; when gitfleet's own apply is the newest change, the
  event is our own write coming back.
- *what*: server-side apply moves ownership of a field to whoever changes its value with an
  update (`kubectl edit`, `kubectl scale`, a forced apply). So a field that gitfleet owned
  before the event and no longer owns after it was changed or removed by someone else. A
  controller that only adds what we never declared (the Deployment controller's revision
  annotation) leaves gitfleet's fields alone and triggers nothing, where "newest manager is
  not gitfleet" alone would sync after every rollout and soon look like a fight.

A deleted object is drift when the last sync declared it. Without the earlier state (an object
first seen now), any foreign change counts: a needless sync costs little, a missed edit a lot.

`Fights` turns repeated drift of one object into a growing delay, and after `limit` heals
within `window` seconds gives up: two controllers that own the same field would otherwise
rewrite it forever. Time is passed in, so tests drive it without sleeping.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fleet.kube.client import FIELD_MANAGER
from fleet.model import Manifest

MAX_DELAY = 60.0


def _entries(obj: Manifest) -> list[dict[str, Any]]:
    found = (obj.get("metadata") or {}).get("managedFields") or []
    return [e for e in found if isinstance(e, dict) and e.get("subresource") != "status"]


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


def owned_paths(obj: Manifest, manager: str = FIELD_MANAGER) -> set[str]:
    """Leaf paths of the fields `manager` owns on `obj` (`f:data.f:k`, ...)."""
    paths: set[str] = set()
    for entry in _entries(obj):
        if entry.get("manager") == manager:
            paths |= _leaves(entry.get("fieldsV1") or {}, "")
    return paths


def _leaves(tree: dict[str, Any], prefix: str) -> set[str]:
    found: set[str] = set()
    for name, sub in tree.items():
        path = f"{prefix}.{name}" if prefix else name
        if name == "." or not isinstance(sub, dict) or not sub:
            found.add(path)
        else:
            found |= _leaves(sub, path)
    return found


def is_drift(kind: str, obj: Manifest, old: Manifest | None, *, declared: bool) -> bool:
    """Whether a watch event of type `kind` shows drift of an object gitfleet manages."""
    if kind == "DELETED":
        return declared
    if is_own_change(obj):
        return False
    if old is None:
        return True
    return bool(owned_paths(old) - owned_paths(obj))


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
