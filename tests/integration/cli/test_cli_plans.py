"""`gitfleet app suspend|resume|set --prune-budget|plan|plan approve|sync --plan` against the
real coordinator served over HTTP, with a worker and a testbed cluster behind it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from dataclasses import replace as replaced

import pytest
import uvicorn
from pydantic import SecretStr

from api.app import create_app
from api.settings import Settings
from cli.main import main
from deploy.testbed.process import free_port
from fleet.control.registry.records import DEFAULT_PROJECT, Role
from fleet.model import ObjectRef
from tests.support import manifests as m
from tests.support.fleet import INSECURE_GIT_HOSTS, FleetEnv, wait_until

TOKEN = "gf_cli-plans-admin-token-0123456789"


@dataclass
class Served:
    url: str

    def run(
        self, capsys: pytest.CaptureFixture[str], *argv: str, token: str = TOKEN
    ) -> tuple[int, str, str]:
        code = main([*argv, "--server", self.url, "--token", token])
        out, err = capsys.readouterr()
        return code, out, err


@pytest.fixture
def served(fleet: FleetEnv) -> Iterator[Served]:
    settings = Settings(
        redis_url=fleet.redis_url,
        admin_token=SecretStr(TOKEN),
        secret_key=SecretStr(fleet.secret_key),
        prefix=fleet.prefix,
        insecure_git_hosts=INSECURE_GIT_HOSTS,
    )
    app = create_app(settings)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield Served(f"http://127.0.0.1:{port}")
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def _settings(fleet: FleetEnv, cluster: str, app: str) -> dict[str, str] | None:
    live = fleet.live(cluster, ObjectRef("", "v1", "ConfigMap", app, "settings"))
    return None if live is None else live["data"]


def test_suspend_budget_and_an_approved_plan_from_the_cli(
    fleet: FleetEnv, served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    app, cluster = fleet.app_name(0), sorted(fleet.clusters)[0]
    fleet.repo.commit({f"apps/{app}/cm.yaml": m.configmap("settings", "k: v1")})
    gated = fleet.store.put_project(replaced(DEFAULT_PROJECT, name=f"{fleet.prefix}-gated"))
    record = fleet.add_app(app, cluster)
    fleet.store.put_app(replaced(record, project=gated.name), create=False)
    fleet.worker_thread("alpha")

    code, out, err = served.run(capsys, "app", "suspend", app)
    assert code == 0, err
    assert f"app {app} is suspended" in out
    code, out, _ = served.run(capsys, "app", "get", app)
    assert code == 0 and "suspended: no automated sync" in out
    code, out, err = served.run(capsys, "app", "resume", app)
    assert code == 0 and "resumed" in out, err

    code, _, err = served.run(capsys, "app", "set", app, "--prune-budget", "30%")
    assert code == 0, err
    assert fleet.store.get_app(app).sync_policy.prune_budget_percent == 30.0

    code, out, err = served.run(capsys, "project", "require-plan", gated.name, cluster)
    assert code == 0, err
    assert fleet.store.get_project(gated.name).require_plan_for == (cluster,)
    code, _, err = served.run(capsys, "app", "sync", app)
    assert code == 2 and "waiting for an approved plan" in err

    code, out, err = served.run(capsys, "app", "plan", app)
    assert code == 0, err
    assert "create" in out and "ConfigMap/settings" in out and "not approved" in out
    plan_id = out.split()[1]
    reviewer = fleet.store.create_token(f"{fleet.prefix}-reviewer", Role.ADMIN)  # four eyes
    code, out, err = served.run(
        capsys, "app", "plan", "approve", plan_id, "-o", "json", token=reviewer
    )
    assert code == 0, err
    assert json.loads(out)["approved"] is True

    code, out, err = served.run(capsys, "app", "sync", app, "--plan", plan_id)
    assert code == 0, err
    wait_until(
        lambda: _settings(fleet, cluster, app) == {"k": "v1"}, timeout=60, what="the plan's sync"
    )
