"""A sync's prune option, end to end: the real API, dispatcher, Redis, a worker and a testbed
cluster. A person's `prune` choice overrides the app's syncPolicy.prune for that one sync."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from fleet.control.routing.dispatch import JobRef
from fleet.model import ObjectRef
from tests.support import manifests as m
from tests.support.fleet import FleetEnv

TOKEN = "test-admin-token"


@pytest.fixture
def api(fleet_api: Callable[..., TestClient]) -> TestClient:
    return fleet_api(TOKEN)


def _sync(fleet: FleetEnv, api: TestClient, app: str, **body: Any) -> dict[str, Any]:
    """A sync through POST /apps/{app}/sync, and the worker's answer."""
    response = api.post(f"/api/v1/apps/{app}/sync", json=body)
    assert response.status_code == 202, response.text
    job = response.json()["jobs"][0]
    answer = fleet.dispatcher.wait(JobRef(job["job_id"], job["queue"], job["merged"]), 120)
    assert answer is not None, f"no answer for the sync of {app} ({body})"
    return answer


def _cm(app: str, name: str) -> ObjectRef:
    return ObjectRef("", "v1", "ConfigMap", app, name)


def _actions(answer: dict[str, Any]) -> dict[str, str]:
    return {r["name"]: r["action"] for r in answer["resources"] if r["kind"] == "ConfigMap"}


def _planned(answer: dict[str, Any], name: str) -> str:
    """What a dry run's plan says it would do to the ConfigMap `name`."""
    return next(c["action"] for c in answer["plan"] if c["name"] == name)


def test_a_sync_with_prune_deletes_what_git_dropped_while_a_plain_sync_keeps_it(
    fleet: FleetEnv, api: TestClient
) -> None:
    app, cluster = fleet.app_name(0), sorted(fleet.clusters)[0]
    files: dict[str, str | bytes | None] = {
        f"apps/{app}/{name}.yaml": m.configmap(name, "k: v1") for name in ("kept", "dropped")
    }
    fleet.repo.commit(files)
    fleet.add_app(app, cluster, prune=False)
    fleet.worker_thread("alpha")
    assert _sync(fleet, api, app)["result"] == "succeeded"
    assert fleet.live(cluster, _cm(app, "dropped")) is not None

    fleet.repo.commit({f"apps/{app}/dropped.yaml": None})
    plain = _sync(fleet, api, app)
    assert plain["result"] == "succeeded", plain
    assert fleet.live(cluster, _cm(app, "dropped")) is not None  # the policy: no prune
    refused = _sync(fleet, api, app, prune=False)
    assert fleet.live(cluster, _cm(app, "dropped")) is not None, refused
    keeping = _sync(fleet, api, app, dryRun=True)
    preview = _sync(fleet, api, app, prune=True, dryRun=True)
    assert fleet.live(cluster, _cm(app, "dropped")) is not None  # a dry run writes nothing
    assert (_planned(keeping, "dropped"), _planned(preview, "dropped")) == ("needs-prune", "delete")

    pruning = _sync(fleet, api, app, prune=True)
    assert pruning["result"] == "succeeded", pruning
    assert fleet.live(cluster, _cm(app, "dropped")) is None
    assert fleet.live(cluster, _cm(app, "kept")) is not None
    assert _actions(plain)["dropped"] == _actions(refused)["dropped"] == "skipped"
    assert _actions(pruning)["dropped"] == "pruned"
    assert api.get(f"/api/v1/apps/{app}").json()["spec"]["syncPolicy"]["prune"] is False
