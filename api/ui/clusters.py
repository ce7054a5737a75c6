"""/ui/clusters: every registered cluster, whether it answers, and (admins) add or remove one.

Adding pastes a kubeconfig into the REST handler (`api.routes.clusters.add_cluster`, admins
only): it is validated there (no exec plugins, an https server, ...), stored encrypted, and
never shown again; the page lists name, server, labels, how many apps deploy there,
reachability (`api.ui.live.Prober`: /version within 3 s, remembered 15 s) and the last time the
coordinator or a sync heard from it. A refusal is shown in words; a validation error names the
field and never echoes the pasted text.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import Response
from pydantic import SecretStr, ValidationError

from api.auth import Principal, can_see
from api.deps import StoreDep
from api.errors import validation_errors
from api.routes import clusters as rest
from api.schemas import ClusterIn
from api.ui.live import Prober, Reachability, prober_of
from api.ui.web import CsrfChecked, done, page, refusal, refused
from fleet.control.registry.store import Store
from fleet.errors import FleetError

router = APIRouter(prefix="/ui/clusters", include_in_schema=False)
Text = Annotated[str, Form()]


@dataclass(frozen=True)
class ClusterRow:
    name: str
    server: str
    labels: dict[str, str]
    apps: int
    reachability: Reachability
    last_contact: str


def cluster_rows(store: Store, principal: Principal, prober: Prober) -> list[ClusterRow]:
    clusters = store.list_clusters()
    apps = [a for a in store.list_apps_cached() if can_see(principal, a.project)]
    pairs = [(a.name, c) for a in apps for c in store.instances(a, clusters)]
    users = Counter(name for _, name in pairs)
    heard: dict[str, list[datetime]] = defaultdict(list)
    for (_, name), status in zip(pairs, store.many_statuses(pairs), strict=True):
        if status and status.updated:  # every instance's status in one round trip
            heard[name].append(status.updated)
    with ThreadPoolExecutor(max_workers=8) as pool:
        probes = list(pool.map(lambda c: prober.probe(store, c.name), clusters))
    found = []
    for cluster, probe in zip(clusters, probes, strict=True):
        contact = prober.last_contact.get(cluster.name)
        latest: list[datetime] = [*heard[cluster.name], *([contact] if contact else [])]
        found.append(
            ClusterRow(
                name=cluster.name,
                server=cluster.server,
                labels=cluster.labels,
                apps=users[cluster.name],
                reachability=probe,
                last_contact=max(latest).isoformat(timespec="seconds") if latest else "",
            )
        )
    return found


@router.get("")
def clusters_page(request: Request, store: StoreDep, principal: Principal) -> Response:
    found = cluster_rows(store, principal, prober_of(request))
    return page(request, "clusters.html", principal, clusters=found)


def _labels(text: str) -> dict[str, str]:
    pairs = [p.strip() for p in text.replace("\n", ",").split(",") if p.strip()]
    labels = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"labels: {pair!r} is not key=value")
        labels[key.strip()] = value.strip()
    return labels


@router.post("")
def add_cluster(
    request: Request,
    store: StoreDep,
    principal: Principal,
    _: CsrfChecked,
    name: Text = "",
    kubeconfig: Text = "",
    context: Text = "",
    labels: Text = "",
) -> Response:
    try:
        body = ClusterIn(
            name=name,
            kubeconfig=SecretStr(kubeconfig),
            context=context or None,
            labels=_labels(labels),
        )
        rest.add_cluster(body, store, principal)
    except ValidationError as e:
        words = "; ".join(f"{x['field']}: {x['message']}" for x in validation_errors(e.errors()))
        return refused(request, principal, 422, words)
    except (ValueError, HTTPException, FleetError) as e:
        return refusal(request, principal, e)
    return done(request, f"cluster {name} registered", "/ui/clusters")


@router.post("/{name}/delete")
def remove_cluster(
    request: Request,
    name: str,
    store: StoreDep,
    principal: Principal,
    _: CsrfChecked,
    force: Annotated[bool, Form()] = False,
) -> Response:
    try:
        rest.delete_cluster(name, store, principal, force=force)
    except (HTTPException, FleetError) as e:
        return refusal(request, principal, e)
    return done(request, f"cluster {name} removed", "/ui/clusters")
