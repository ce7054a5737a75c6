"""Ownership marks: how gitfleet knows an object in the cluster is one it applied, and per-object
policies read from annotations.

Every object an application applies carries two marks:

- the label `gitfleet.io/app=<app>`, so the objects of an app can be *found* with a label
  selector even when the inventory is lost;
- the annotation `gitfleet.io/tracking=<app>:<group>/<kind>:<namespace>/<name>`, in the format of
  Argo CD's tracking id, so an object can be *trusted*: the id names the object itself, and an
  object copied with `kubectl get -o yaml | kubectl apply` under another name or namespace, or a
  label copied by a template, is not taken for ours. Prune deletes only what `tracks` confirms.

Per-object policies keep the names users already have in their repositories:
`argocd.argoproj.io/sync-options` and `gitfleet.io/sync-options` (comma-separated `Key=Value`,
ours winning on the same key), `gitfleet.io/prune: "false"`, Flux's
`kustomize.toolkit.fluxcd.io/prune: disabled` (label or annotation), and
`gitfleet.io/self-heal: "false"`. Argo CD's `Prune=confirm` (prune only after a person confirms)
keeps the object too: gitfleet has no confirmation step, and keeping is the safe reading.

Everything here is a pure function of one object.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fleet.errors import UsageError
from fleet.model import Manifest, ObjectRef

APP_LABEL = "gitfleet.io/app"
TRACKING_ANNOTATION = "gitfleet.io/tracking"
PRUNE_ANNOTATION = "gitfleet.io/prune"
SELF_HEAL_ANNOTATION = "gitfleet.io/self-heal"
FLUX_PRUNE = "kustomize.toolkit.fluxcd.io/prune"
# Lowest precedence first: a key set by a later annotation wins.
SYNC_OPTIONS_ANNOTATIONS = ("argocd.argoproj.io/sync-options", "gitfleet.io/sync-options")
_PRUNE_KEEP_VALUES = frozenset({"false", "confirm"})
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")

__all__ = [
    "APP_LABEL",
    "TRACKING_ANNOTATION",
    "TrackingId",
    "is_prune_disabled",
    "is_self_heal_disabled",
    "mark",
    "owner_of",
    "parse_tracking_id",
    "prune_disabled_by",
    "sync_options",
    "tracking_id",
    "tracks",
    "validate_app_name",
    "wants_replace",
]


@dataclass(frozen=True)
class TrackingId:
    """A parsed tracking annotation: the app that applied the object, and the object it names.

    `group` is empty for the core group, `namespace` for cluster-scoped objects. There is no
    version: an object keeps its identity when its API version changes.
    """

    app: str
    group: str
    kind: str
    namespace: str
    name: str

    def names(self, ref: ObjectRef) -> bool:
        """Whether the id names `ref` (any version)."""
        return (self.group, self.kind, self.namespace, self.name) == (
            ref.group,
            ref.kind,
            ref.namespace,
            ref.name,
        )


def validate_app_name(app: str) -> str:
    """Return `app` if it is a DNS-1123 label (the rule for app names), else raise UsageError."""
    if not _DNS_LABEL.fullmatch(app):
        raise UsageError(
            f"application name {app!r} is not a DNS-1123 label: use at most 63 lowercase letters, "
            "digits and '-', starting and ending with a letter or digit"
        )
    return app


def tracking_id(app: str, ref: ObjectRef) -> str:
    """`<app>:<group>/<kind>:<namespace>/<name>`, as Argo CD writes its tracking id."""
    return f"{app}:{ref.group}/{ref.kind}:{ref.namespace}/{ref.name}"


def parse_tracking_id(value: str) -> TrackingId | None:
    """The parsed id, or None when `value` is not a well-formed tracking id.

    The app, group, kind and namespace never contain ':' or '/', so the first two ':' split the
    id; the name may contain ':' (ClusterRole `system:node`) but never '/'.
    """
    app, _, rest = value.partition(":")
    group_kind, _, where = rest.partition(":")
    group, slash, kind = group_kind.partition("/")
    namespace, slash2, name = where.partition("/")
    if not (slash and slash2 and app and kind and name) or "/" in kind + name:
        return None
    return TrackingId(app, group, kind, namespace, name)


def _meta(obj: Manifest, field: str) -> Mapping[str, Any]:
    value = (obj.get("metadata") or {}).get(field)
    return value if isinstance(value, Mapping) else {}


def _annotation(obj: Manifest, name: str) -> str | None:
    value = _meta(obj, "annotations").get(name)
    return None if value is None else str(value).strip()


def mark(obj: Manifest, app: str) -> Manifest:
    """A copy of `obj` carrying the app label and tracking annotation.

    Only the top level, `metadata`, `labels` and `annotations` are copied; the rest is shared
    with `obj`, which is left unchanged. The namespace must already be filled in, since the
    tracking id names it.
    """
    meta = dict(obj.get("metadata") or {})
    meta["labels"] = {**_meta(obj, "labels"), APP_LABEL: app}
    annotations = {**_meta(obj, "annotations")}
    annotations[TRACKING_ANNOTATION] = tracking_id(app, ObjectRef.of(obj))
    meta["annotations"] = annotations
    return {**obj, "metadata": meta}


def _tracking(live: Manifest) -> TrackingId | None:
    value = _annotation(live, TRACKING_ANNOTATION)
    return parse_tracking_id(value) if value else None


def owner_of(live: Manifest) -> str | None:
    """The app named by the tracking annotation; None when it is absent or malformed."""
    found = _tracking(live)
    return found.app if found else None


def tracks(live: Manifest, app: str, ref: ObjectRef) -> bool:
    """Whether the tracking annotation names `app` and this very object `ref`."""
    found = _tracking(live)
    return found is not None and found.app == app and found.names(ref)


def _options(text: str) -> dict[str, str]:
    options = {}
    for item in text.split(","):
        key, equals, value = item.partition("=")
        if equals and key.strip():
            options[key.strip()] = value.strip()
    return options


def sync_options(obj: Manifest) -> dict[str, str]:
    """`Key=Value` options from Argo CD's and gitfleet's sync-options; gitfleet's win."""
    options: dict[str, str] = {}
    for name in SYNC_OPTIONS_ANNOTATIONS:
        options.update(_options(_annotation(obj, name) or ""))
    return options


def _sync_option_source(obj: Manifest, key: str) -> str | None:
    """The sync-options annotation that decides `key`, or None when none sets it."""
    for name in reversed(SYNC_OPTIONS_ANNOTATIONS):
        if key in _options(_annotation(obj, name) or ""):
            return name
    return None


def prune_disabled_by(live: Manifest) -> str | None:
    """What keeps `live` from being pruned, as words for a message; None when nothing does."""
    if (_annotation(live, PRUNE_ANNOTATION) or "").lower() == "false":
        return f"annotation {PRUNE_ANNOTATION}"
    prune = sync_options(live).get("Prune", "").lower()
    if prune in _PRUNE_KEEP_VALUES:
        return f"annotation {_sync_option_source(live, 'Prune')} (Prune={prune})"
    if str(_meta(live, "labels").get(FLUX_PRUNE, "")).strip().lower() == "disabled":
        return f"label {FLUX_PRUNE}"
    if (_annotation(live, FLUX_PRUNE) or "").lower() == "disabled":
        return f"annotation {FLUX_PRUNE}"
    return None


def is_prune_disabled(live: Manifest) -> bool:
    return prune_disabled_by(live) is not None


def wants_replace(obj: Manifest) -> bool:
    """Whether the object opts in to delete-and-recreate (`Replace=true`)."""
    return sync_options(obj).get("Replace", "").lower() == "true"


def is_self_heal_disabled(live: Manifest) -> bool:
    """Whether drift on this object is left alone (`gitfleet.io/self-heal: "false"`)."""
    return (_annotation(live, SELF_HEAL_ANNOTATION) or "").lower() == "false"
