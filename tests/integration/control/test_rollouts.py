"""Progressive rollouts against the real fleet: two testbed clusters, a real worker, the real
scheduler (ticking in its thread) and the real API.

One app over both clusters (selected by label), in two steps: the canary cluster, then the rest,
with a pause until a person promotes after the first. A broken revision stops at the canary and
leaves the other cluster at the old content; a good one goes through both steps in order; a
rollout paused after its first step is aborted and the canary goes back to the stable revision.
The testbed has two clusters (the issue says three): the steps are canary, then the rest.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import pytest
import uvicorn
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cli.main import main
from deploy.testbed.process import free_port
from fleet.control.registry.records import (
    AppDestination,
    AppRecord,
    AppSource,
    RetryPolicy,
    RolloutSpec,
    RolloutStep,
    SyncPolicy,
)
from fleet.control.registry.syncrecords import SyncRecord
from fleet.control.rollouts.heads import GitHeads
from fleet.control.rollouts.state import RolloutStore
from fleet.control.scheduler import Scheduler
from fleet.engine.source.remotes import RemotePolicy
from fleet.model import ObjectRef, Trigger
from tests.support import manifests as m
from tests.support.fleet import INSECURE_GIT_HOSTS, FleetEnv, wait_until

ADMIN_TOKEN = "gf_rollout-test-admin-token-0123456789"


@contextmanager
def served(api: TestClient) -> Iterator[str]:
    """The API behind `api` over real HTTP on a loopback port, for the CLI."""
    port = free_port()
    config = uvicorn.Config(api.app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started, timeout=10, what="the API serving")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


class Ticking:
    """The coordinator's scheduler in its thread, ticking every 0.2 s."""

    def __init__(self, fleet: FleetEnv, holder: str = "replica-1") -> None:
        remotes = RemotePolicy.from_setting(INSECURE_GIT_HOSTS)
        heads = GitHeads(fleet.store, root=fleet.folder / holder, remotes=remotes)
        self.scheduler = Scheduler(
            fleet.store, fleet.dispatcher, period=0.2, heads=heads, holder=holder
        )

    def __enter__(self) -> Scheduler:
        self.scheduler.start()
        return self.scheduler

    def __exit__(self, *_: object) -> None:
        self.scheduler.stop()


def _setup(
    fleet: FleetEnv, *, rollout: bool = True, joined: bool = True
) -> tuple[str, str, str, str]:
    """Label the clusters, commit v1 and register the app; returns (app, canary, other, v1).
    With `joined` False, the other cluster is not selected yet (`_join` selects it)."""
    canary, other = sorted(fleet.clusters)
    for name, ring in ((canary, "canary"), (other, "main")):
        found = fleet.store.get_cluster(name)
        selected = joined or name == canary
        labels = {"fleet": fleet.prefix, "ring": ring} if selected else {"ring": ring}
        fleet.store.put_cluster(replace(found, labels=labels))
    app = fleet.app_name(0)
    v1 = fleet.repo.commit({f"apps/{app}/cm.yaml": m.configmap("settings", "k: v1")})
    steps = (
        RolloutStep(match_labels={"ring": "canary"}, pause_manual=True),
        RolloutStep(),
    )
    record = AppRecord(
        name=app,
        source=AppSource(repo=fleet.repo_url, path=f"apps/{app}"),
        destination=AppDestination(namespace=app, selector={"fleet": fleet.prefix}),
        sync_policy=SyncPolicy(
            automated=True,
            create_namespace=True,
            interval_s=3600,
            retry=RetryPolicy(limit=0),
            timeout_s=20,
        ),
        rollout=RolloutSpec(steps=steps, poll_s=0.2) if rollout else None,
    )
    fleet.created += [(app, canary, app), (app, other, app)]
    fleet.store.put_app(record, create=True)
    return app, canary, other, v1


def _join(fleet: FleetEnv, cluster: str) -> None:
    found = fleet.store.get_cluster(cluster)
    fleet.store.put_cluster(replace(found, labels={**found.labels, "fleet": fleet.prefix}))


def _content(fleet: FleetEnv, app: str, cluster: str) -> str:
    live = fleet.live(cluster, ObjectRef("", "v1", "ConfigMap", app, "settings"))
    return str((live or {}).get("data", {}).get("k", ""))


def _at(fleet: FleetEnv, app: str, cluster: str, revision: str) -> bool:
    status = fleet.status(app, cluster)
    return status.revision == revision and status.health == "Healthy"


def _rollout(api: TestClient, app: str, action: str = "") -> dict[str, Any]:
    path = f"/api/v1/apps/{app}/rollout" + (f"/{action}" if action else "")
    answer = api.post(path) if action else api.get(path)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _synced_at(fleet: FleetEnv, app: str, cluster: str, revision: str) -> SyncRecord:
    for entry in fleet.store.history(app, cluster):
        if isinstance(entry, SyncRecord) and entry.revision == revision and not entry.error:
            return entry
    raise AssertionError(f"no sync of {app}@{cluster} at {revision}")


def test_a_rollout_stops_at_a_broken_step_then_rolls_a_good_revision_in_order(
    fleet: FleetEnv,
    fleet_api: Any,
    spans: InMemorySpanExporter,
) -> None:
    app, canary, other, v1 = _setup(fleet)
    api: TestClient = fleet_api(ADMIN_TOKEN)
    fleet.worker_thread("w1")
    states = RolloutStore(fleet.redis, fleet.prefix)
    with Ticking(fleet):
        wait_until(
            lambda: _at(fleet, app, canary, v1) and _at(fleet, app, other, v1),
            timeout=60,
            what="both clusters at v1 (the baseline)",
        )
        assert _rollout(api, app)["phase"] == "Completed"

        broken = fleet.repo.commit({f"apps/{app}/cm.yaml": "data: [unclosed\n"})
        wait_until(
            lambda: _rollout(api, app)["phase"] == "Failed", timeout=60, what="the rollout failing"
        )
        failed = _rollout(api, app)
        assert failed["revision"] == broken and failed["stable"] == v1
        assert failed["step"] == 1 and canary in failed["reason"], failed
        assert "failed" in failed["reason"]
        assert _content(fleet, app, other) == "v1"  # the later step stays at the old revision
        assert states.pin(app, other) == v1
        assert not any(
            isinstance(e, SyncRecord) and e.revision == broken
            for e in fleet.store.history(app, other)
        )
        assert _rollout(api, app, "retry")["phase"] == "Progressing"  # the failed step again
        wait_until(
            lambda: _rollout(api, app)["phase"] == "Failed", timeout=60, what="failing again"
        )
        assert _content(fleet, app, other) == "v1"

        good = fleet.repo.commit({f"apps/{app}/cm.yaml": m.configmap("settings", "k: v3")})
        wait_until(
            lambda: _rollout(api, app)["phase"] == "Paused", timeout=60, what="step 1 passing"
        )
        paused = _rollout(api, app)
        assert paused["revision"] == good and paused["stable"] == v1, paused
        assert _content(fleet, app, canary) == "v3" and _content(fleet, app, other) == "v1"

        assert _rollout(api, app, "promote")["phase"] == "Progressing"
        wait_until(lambda: _rollout(api, app)["phase"] == "Completed", timeout=60, what="step 2")
        assert _content(fleet, app, other) == "v3"
        first = _synced_at(fleet, app, canary, good)
        second = _synced_at(fleet, app, other, good)
        assert first.finished is not None and second.started is not None
        assert second.started > first.finished  # step 2 began after step 1's sync at v3 ended

        done = _rollout(api, app)
        assert done["stable"] == good and done["pins"] == {canary: good, other: good}
        assert first.trace_id == second.trace_id == done["traceId"]  # one trace per rollout
        roots = [s for s in spans.get_finished_spans() if s.name == "gitfleet.rollout"]
        assert any(format(s.context.trace_id, "032x") == done["traceId"] for s in roots)

        refused = api.post(f"/api/v1/apps/{app}/rollout/promote")
        assert refused.status_code == 409 and "not Paused" in refused.text


def test_an_aborted_rollout_puts_the_canary_back_at_the_stable_revision(
    fleet: FleetEnv, fleet_api: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    app, canary, other, v1 = _setup(fleet)
    api: TestClient = fleet_api(ADMIN_TOKEN)
    fleet.worker_thread("w1")
    with Ticking(fleet, holder="replica-1"):
        wait_until(
            lambda: _at(fleet, app, canary, v1) and _at(fleet, app, other, v1),
            timeout=60,
            what="both clusters at v1",
        )
        v2 = fleet.repo.commit({f"apps/{app}/cm.yaml": m.configmap("settings", "k: v2")})
        wait_until(
            lambda: _rollout(api, app)["phase"] == "Paused", timeout=60, what="step 1 passing"
        )
        assert _content(fleet, app, canary) == "v2"
    # another replica leads from here: it knows the rollout from Redis alone
    with Ticking(fleet, holder="replica-2"), served(api) as url:

        def cli(*argv: str) -> tuple[int, str]:
            code = main(["app", "rollout", *argv, "--server", url, "--token", ADMIN_TOKEN])
            out, err = capsys.readouterr()
            return code, out + err

        code, out = cli("status", app)
        assert code == 0 and "Paused at step 1/2" in out and "rollout promote" in out, out
        code, out = cli("abort", app)
        assert code == 0 and "Aborted" in out, out
        wait_until(
            lambda: _content(fleet, app, canary) == "v1", timeout=60, what="the canary back at v1"
        )
        aborted = _rollout(api, app)
        assert aborted["revision"] == v2 and aborted["reason"] == "aborted by a person"
        assert aborted["pins"] == {canary: v1, other: v1}
        assert _content(fleet, app, other) == "v1"
        code, out = cli("promote", app)
        assert code == 2 and "not Paused" in out, out

        one_step = fleet.folder / "rollout.yaml"
        one_step.write_text("steps:\n- maxParallel: 100%\npollInterval: 1s\n")
        assert cli("set", app, "--file", str(one_step))[0] == 0
        spec = api.get(f"/api/v1/apps/{app}").json()["spec"]["rollout"]
        assert [s["maxParallel"] for s in spec["steps"]] == ["100%"]
        assert cli("set", app, "--off")[0] == 0
        states = RolloutStore(fleet.redis, fleet.prefix)
        wait_until(
            lambda: states.get(app) is None and not states.pins(app),
            timeout=10,
            what="the rollout state and pins dropped",
        )
        code, out = cli("status", app)
        assert code == 2 and "has no rollout" in out, out


def test_an_app_that_gains_a_rollout_keeps_the_revision_it_runs_as_stable(
    fleet: FleetEnv, fleet_api: Any
) -> None:
    app, canary, other, v1 = _setup(fleet, rollout=False)
    api: TestClient = fleet_api(ADMIN_TOKEN)
    fleet.worker_thread("w1")
    with Ticking(fleet):
        wait_until(
            lambda: _at(fleet, app, canary, v1) and _at(fleet, app, other, v1),
            timeout=60,
            what="both clusters at v1",
        )
        v2 = fleet.repo.commit({f"apps/{app}/cm.yaml": m.configmap("settings", "k: v2")})
        spec = RolloutSpec(steps=(RolloutStep(max_parallel="1", pause_manual=True),), poll_s=0.2)
        fleet.store.put_app(replace(fleet.store.get_app(app), rollout=spec))
        wait_until(
            lambda: _rollout(api, app)["phase"] == "Paused", timeout=60, what="step 1 passing"
        )
        paused = _rollout(api, app)
        assert paused["revision"] == v2 and paused["stable"] == v1
        assert [s["clusters"] for s in paused["steps"]] == [[canary], [other]]
        assert _content(fleet, app, canary) == "v2" and _content(fleet, app, other) == "v1"


def test_a_cluster_that_joins_mid_rollout_runs_the_stable_revision_whatever_syncs_it_first(
    fleet: FleetEnv, fleet_api: Any
) -> None:
    """The new cluster is synced (as a webhook would ask) while no scheduler ticks, so the
    rollout controller has not seen it: the worker pins it to the stable revision itself,
    instead of syncing the head the paused rollout has only put on the canary."""
    app, canary, other, v1 = _setup(fleet, joined=False)
    api: TestClient = fleet_api(ADMIN_TOKEN)
    fleet.worker_thread("w1")
    with Ticking(fleet):
        wait_until(lambda: _at(fleet, app, canary, v1), timeout=60, what="the canary at v1")
        v2 = fleet.repo.commit({f"apps/{app}/cm.yaml": m.configmap("settings", "k: v2")})
        wait_until(
            lambda: _rollout(api, app)["phase"] == "Paused", timeout=60, what="step 1 passing"
        )
    _join(fleet, other)
    fleet.dispatcher.request_sync(app, other, trigger=Trigger.WEBHOOK)
    wait_until(lambda: _at(fleet, app, other, v1), timeout=60, what="the newcomer at v1")
    assert _content(fleet, app, other) == "v1" and _content(fleet, app, canary) == "v2"
    states = RolloutStore(fleet.redis, fleet.prefix)
    assert states.pins(app) == {canary: v2, other: v1}
