"""Register the cluster the coordinator runs in as the destination `in-cluster` (as Argo CD
does), when it runs in a pod with a ServiceAccount token (`fleet.kube.incluster`).

Idempotent: every replica tries at each start, the first creates it and the rest find it
there. An existing `in-cluster` is left as it is (labels someone added stay; a cluster an admin
registered under that name is not replaced). GITFLEET_IN_CLUSTER=false turns it off; the chart
sets it from `rbac.inCluster.enabled`. The record holds no credential: workers reach the
cluster as their own pod's ServiceAccount, bound by the chart's RBAC.
"""

from __future__ import annotations

import logging

from fleet.control.registry.errors import AlreadyExists
from fleet.control.registry.records import ClusterCredentials, ClusterRecord
from fleet.control.registry.store import Store
from fleet.kube import incluster

log = logging.getLogger("api.incluster")


def register(store: Store) -> ClusterRecord | None:
    """The `in-cluster` record, created if missing; None when not running in a cluster."""
    if not incluster.is_in_cluster():
        return None
    record = ClusterRecord(incluster.NAME, incluster.SERVER, labels={})
    try:
        created = store.put_cluster(record, ClusterCredentials(in_cluster=True), create=True)
    except AlreadyExists:  # an earlier start, another replica, or an admin registered it
        return store.get_cluster(incluster.NAME)
    log.info("registered the cluster this coordinator runs in as %s", incluster.NAME)
    return created
