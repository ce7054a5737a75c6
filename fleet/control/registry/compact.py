"""Hold what app records repeat once: a process that caches every app keeps one copy of each.

At 10,000 apps a parsed `AppRecord` was about 1.4 KB, and most of it was the same in every
record: the repository URL, the cluster and namespace names, the project, and whole parts such
as the sync policy (with its retry policy and its floats) or the empty helm source. `compact`
gives back an equal record whose strings are interned and whose immutable parts are shared with
every other record compacted before it. Records are frozen, so sharing a part is invisible to
readers; only identity changes, and nothing compares records by identity.

The table of shared parts is bounded (`MAX_PARTS`): past it, it starts again empty, which
loses some sharing and nothing else.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
from typing import TypeVar

from fleet.control.registry.records import AppDestination, AppRecord, AppSource, HelmSource

MAX_PARTS = 4096  # distinct shared parts kept; apps mostly share a handful
NO_HELM = HelmSource()

P = TypeVar("P")

_parts: dict[object, object] = {}
_lock = threading.Lock()


def _share(part: P) -> P:
    """The one kept instance equal to `part`; `part` itself when it holds something unhashable
    (a dict)."""
    try:
        hash(part)
    except TypeError:
        return part
    with _lock:
        kept = _parts.get(part)
        if kept is None:
            if len(_parts) >= MAX_PARTS:
                _parts.clear()
            _parts[part] = kept = part
    return kept  # type: ignore[return-value]


def _source(source: AppSource) -> AppSource:
    helm = NO_HELM if source.helm == NO_HELM else source.helm
    return AppSource(
        repo=sys.intern(source.repo),
        path=sys.intern(source.path),
        revision=sys.intern(source.revision),
        helm=helm,
    )


def _destination(destination: AppDestination) -> AppDestination:
    if destination.selector is not None:  # a dict: not hashable, kept as it is
        return AppDestination(
            namespace=sys.intern(destination.namespace),
            cluster=sys.intern(destination.cluster),
            selector=destination.selector,
        )
    return _share(
        AppDestination(
            namespace=sys.intern(destination.namespace), cluster=sys.intern(destination.cluster)
        )
    )


def compact(record: AppRecord) -> AppRecord:
    """An equal record that shares its repeated strings and parts with the other records."""
    return dataclasses.replace(
        record,
        source=_source(record.source),
        destination=_destination(record.destination),
        project=sys.intern(record.project),
        sync_policy=_share(record.sync_policy),
        owner_set=sys.intern(record.owner_set),
        updated=record.created if record.updated == record.created else record.updated,
        depends_on=tuple(sys.intern(name) for name in record.depends_on),
    )
