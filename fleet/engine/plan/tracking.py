"""Ownership marks: how gitfleet knows an object in the cluster is one it applied, and per-object
policies read from annotations.

Every object an application applies carries two marks:

- the label `gitfleet.io/app=<app>`, so the objects of an app can be *found* with a label
  selector even when the inventory is lost;
- the annotation `gitfleet.io/tracking=<project>/<app>@<uid>:<group>/<kind>:<namespace>/<name>`,
  Argo CD's tracking id with the owner spelled out, so an object can be *trusted*: the id names
  the app by its uid (`Owner`), which a later app of the same name does not share, and the object
  itself, so an object copied with `kubectl get -o yaml | kubectl apply` under another name or
  namespace, or a label copied by a template, is not taken for ours. Prune deletes only what
  `Ownership.owns` confirms.

Ids written before apps had uids (`<app>:<group>/<kind>:<namespace>/<name>`) are *legacy*: they
name an app only by its name, which may since have been deleted and given to another app. A
legacy id counts as this app's only for the objects `Ownership.legacy` lists, which the sync
takes from the app's own inventory (`fleet.engine.inventory`: the one stamped with this app's
uid, or a legacy inventory the app adopts because its record predates uids). The next apply
rewrites the id in the new form.

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
from collections.abc import Iterable, Mapping
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
    "Owner",
    "Ownership",
    "TrackingId",
    "is_prune_disabled",
    "is_self_heal_disabled",
    "mark",
    "owner_of",
    "parse_tracking_id",
    "prune_disabled_by",
    "sync_options",
    "tracking_id",
    "tracking_of",
    "validate_app_name",
    "wants_replace",
]


@dataclass(frozen=True)
class Owner:
    """The application identity an object is tracked by.

    `uid` is the app's for life (`fleet.control.registry.records.AppRecord.uid`); empty only in
    a legacy id. `project` is carried for people reading the annotation; ownership is decided
    by name and uid, so an app moved to another project keeps what it owns (and the new
    project's boundaries decide what it may still touch).
    """

    app: str
    uid: str = ""
    project: str = ""

    @property
    def legacy(self) -> bool:
        return not self.uid

    def __str__(self) -> str:
        """`<project>/<app>@<uid>` (no `<project>/` when empty; the bare app for a legacy id)."""
        head = f"{self.project}/{self.app}" if self.project else self.app
        return f"{head}@{self.uid}" if self.uid else head

    def describe(self) -> str:
        """The owner as a message names it."""
        if self.legacy:
            return f"app {self.app} (a tracking id from before apps had uids)"
        where = f" of project {self.project}" if self.project else ""
        return f"app {self.app}{where} (uid {self.uid})"


@dataclass(frozen=True)
class TrackingId:
    """A parsed tracking annotation: the app that applied the object, and the object it names.

    `group` is empty for the core group, `namespace` for cluster-scoped objects. There is no
    version: an object keeps its identity when its API version changes. `uid` and `project`
    are empty in a legacy id.
    """

    app: str
    group: str
    kind: str
    namespace: str
    name: str
    uid: str = ""
    project: str = ""

    @property
    def owner(self) -> Owner:
        return Owner(self.app, self.uid, self.project)

    def names(self, ref: ObjectRef) -> bool:
        """Whether the id names `ref` (any version)."""
        return _identity_of(self) == _identity(ref)


def _identity(ref: ObjectRef) -> tuple[str, str, str, str]:
    return (ref.group, ref.kind, ref.namespace, ref.name)


def _identity_of(found: TrackingId) -> tuple[str, str, str, str]:
    return (found.group, found.kind, found.namespace, found.name)


def validate_app_name(app: str) -> str:
    """Return `app` if it is a DNS-1123 label (the rule for app names), else raise UsageError."""
    if not _DNS_LABEL.fullmatch(app):
        raise UsageError(
            f"application name {app!r} is not a DNS-1123 label: use at most 63 lowercase letters, "
            "digits and '-', starting and ending with a letter or digit"
        )
    return app


def tracking_id(owner: Owner, ref: ObjectRef) -> str:
    """`<project>/<app>@<uid>:<group>/<kind>:<namespace>/<name>`: Argo CD's tracking id, whose
    first part names the owner (`Owner.__str__`)."""
    return f"{owner}:{ref.group}/{ref.kind}:{ref.namespace}/{ref.name}"


def parse_tracking_id(value: str) -> TrackingId | None:
    """The parsed id (new or legacy form), or None when `value` is not a well-formed one.

    The owner, group, kind and namespace never contain ':' (project and app names are DNS
    labels, uids hex and '-'), so the first two ':' split the id; the name may contain ':'
    (ClusterRole `system:node`) but never '/'.
    """
    head, _, rest = value.partition(":")
    group_kind, _, where = rest.partition(":")
    group, slash, kind = group_kind.partition("/")
    namespace, slash2, name = where.partition("/")
    if not (slash and slash2 and kind and name) or "/" in kind + name:
        return None
    owner = _parse_owner(head)
    if owner is None:
        return None
    return TrackingId(owner.app, group, kind, namespace, name, owner.uid, owner.project)


def _parse_owner(head: str) -> Owner | None:
    qualified, at, uid = head.partition("@")
    project, _, app = qualified.rpartition("/")
    if not app or (at and not uid) or "/" in project or "@" in uid:
        return None
    return Owner(app, uid, project)


def _meta(obj: Manifest, field: str) -> Mapping[str, Any]:
    value = (obj.get("metadata") or {}).get(field)
    return value if isinstance(value, Mapping) else {}


def _annotation(obj: Manifest, name: str) -> str | None:
    value = _meta(obj, "annotations").get(name)
    return None if value is None else str(value).strip()


def mark(obj: Manifest, owner: Owner) -> Manifest:
    """A copy of `obj` carrying the app label and tracking annotation.

    Only the top level, `metadata`, `labels` and `annotations` are copied; the rest is shared
    with `obj`, which is left unchanged. The namespace must already be filled in, since the
    tracking id names it.
    """
    meta = dict(obj.get("metadata") or {})
    meta["labels"] = {**_meta(obj, "labels"), APP_LABEL: owner.app}
    annotations = {**_meta(obj, "annotations")}
    annotations[TRACKING_ANNOTATION] = tracking_id(owner, ObjectRef.of(obj))
    meta["annotations"] = annotations
    return {**obj, "metadata": meta}


def tracking_of(live: Manifest) -> TrackingId | None:
    """The parsed tracking annotation; None when it is absent or malformed."""
    value = _annotation(live, TRACKING_ANNOTATION)
    return parse_tracking_id(value) if value else None


def owner_of(live: Manifest) -> Owner | None:
    """The owner named by the tracking annotation; None when it is absent or malformed."""
    found = tracking_of(live)
    return found.owner if found else None


@dataclass(frozen=True)
class Ownership:
    """What one sync (or cascading delete) may treat as its own: objects whose tracking id names
    `owner` (app and uid), and, among objects with a legacy id naming the app, those in
    `legacy` (from the app's own inventory; see the module docstring)."""

    owner: Owner
    legacy: frozenset[tuple[str, str, str, str]] = frozenset()

    @classmethod
    def of(cls, owner: Owner, legacy: Iterable[ObjectRef] = ()) -> Ownership:
        return cls(owner, frozenset(_identity(ref) for ref in legacy))

    def is_ours(self, found: TrackingId, ref: ObjectRef) -> bool:
        """Whether the id `found`, read on the live object `ref`, names this owner."""
        if found.app != self.owner.app:
            return False
        if found.uid:
            return found.uid == self.owner.uid
        return _identity(ref) in self.legacy

    def other_owner(self, live: Manifest, ref: ObjectRef) -> str | None:
        """Who else tracks `live` (the object `ref`), as a message names them; None when nobody
        else does: no tracking id, or one naming this owner."""
        found = tracking_of(live)
        if found is None or self.is_ours(found, ref):
            return None
        if found.app != self.owner.app:
            return found.owner.describe()
        if found.uid:
            return f"another {found.owner.describe()}, not this one (uid {self.owner.uid})"
        return f"{found.owner.describe()}, and this app's inventory does not list it"

    def owns(self, live: Manifest, ref: ObjectRef) -> bool:
        """Whether the tracking id names this owner and this very object `ref`."""
        found = tracking_of(live)
        return found is not None and self.is_ours(found, ref) and found.names(ref)


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
