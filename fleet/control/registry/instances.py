"""Application instances: one app on one cluster, named `app@cluster`.

The unit of sharding, leasing and queueing is the instance, not the app: an app with a cluster
selector fans out to many clusters, and each of those syncs is independent work that should
spread over the workers. App names are DNS labels, so they never contain `@`; the first `@`
splits an instance key even when a cluster name has one.

Which clusters an app deploys to is decided here (`clusters_for`), from the registered records
alone, so the store, the shard map and the API agree on an app's instances.
"""

from __future__ import annotations

from collections.abc import Sequence

from fleet.control.registry.records import AppRecord, ClusterRecord

SEPARATOR = "@"


def instance_key(app: str, cluster: str) -> str:
    return f"{app}{SEPARATOR}{cluster}"


def split_instance(key: str) -> tuple[str, str]:
    """(`app`, `cluster`) of `app@cluster`; ValueError when there is no `@`."""
    app, sep, cluster = key.partition(SEPARATOR)
    if not (sep and app and cluster):
        raise ValueError(f"instance: {key!r} is not of the form app@cluster")
    return app, cluster


def clusters_for(app: AppRecord, clusters: Sequence[ClusterRecord]) -> list[str]:
    """The registered clusters `app` deploys to, sorted: its cluster, or every cluster whose
    labels match its selector (an empty selector matches all)."""
    dest = app.destination
    if dest.cluster:  # names are unique: the first match is the only one
        for cluster in clusters:
            if cluster.name == dest.cluster:
                return [cluster.name]
        return []
    return sorted(c.name for c in clusters if c.matches(dest.selector or {}))
