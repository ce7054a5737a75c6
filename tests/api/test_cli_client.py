"""The CLI client against the coordinator served over real HTTP (uvicorn on a loopback port)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import uvicorn

from api.app import create_app
from api.deps import get_dispatcher
from cli.main import main
from deploy.testbed.process import free_port
from fleet.control.registry.store import Store
from fleet.control.registry.syncrecords import InstanceStatus, ResourceRecord, SyncRecord
from fleet.model import Action, Health, SyncStatus, Trigger
from tests.api.conftest import (
    ADMIN_TOKEN,
    RecordingDispatcher,
    fake_kubeconfig,
    preview_resource,
    settings_for,
)


@dataclass
class Served:
    url: str
    store: Store
    dispatcher: RecordingDispatcher

    def run(self, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
        code = main([*argv, "--server", self.url, "--token", ADMIN_TOKEN])
        out, err = capsys.readouterr()
        return code, out, err


@pytest.fixture
def served(redis_url: str) -> Iterator[Served]:
    app = create_app(settings_for(redis_url))
    dispatcher = RecordingDispatcher()
    app.dependency_overrides[get_dispatcher] = lambda: dispatcher
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield Served(f"http://127.0.0.1:{port}", app.state.store, dispatcher)
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(fake_kubeconfig("cli-secret-token"))
    return path


def add_east(served: Served, capsys: pytest.CaptureFixture[str], kubeconfig: Path) -> None:
    code, out, _ = served.run(
        capsys, "cluster", "add", "east", "--kubeconfig", str(kubeconfig), "--label", "env=prod"
    )
    assert code == 0 and "cluster east registered" in out


def create_shop_on_east(served: Served, capsys: pytest.CaptureFixture[str], *flags: str) -> None:
    """`app create shop` on cluster east, namespace shop, with `flags`."""
    code, _, err = served.run(
        capsys, "app", "create", "shop", "--repo", "https://git.example.com/shop.git",
        "--path", "deploy", "--cluster", "east", "--namespace", "shop", *flags,
    )  # fmt: skip
    assert code == 0, err


def create_shop(served: Served, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = served.run(
        capsys, "app", "create", "shop", "--repo", "https://git.example.com/shop.git",
        "--path", "deploy", "--cluster-selector", "env=prod", "--namespace", "shop", "--auto-sync",
    )  # fmt: skip
    assert code == 0, err
    assert "app shop created" in out


def test_clusters_are_added_listed_and_removed_through_the_cli(
    served: Served, capsys: pytest.CaptureFixture[str], kubeconfig: Path
) -> None:
    add_east(served, capsys, kubeconfig)

    listed_code, listed, _ = served.run(capsys, "cluster", "list", "-o", "json")
    table_code, table, _ = served.run(capsys, "cluster", "list")
    rm_code, removed, _ = served.run(capsys, "cluster", "rm", "east")

    assert listed_code == table_code == rm_code == 0
    assert [c["name"] for c in json.loads(listed)] == ["east"]
    assert "cli-secret-token" not in listed + table
    assert "east" in table and "env=prod" in table
    assert "cluster east unregistered" in removed


def test_app_get_json_carries_sync_status_health_revision_trace_and_objects(
    served: Served, capsys: pytest.CaptureFixture[str], kubeconfig: Path
) -> None:
    add_east(served, capsys, kubeconfig)
    create_shop(served, capsys)
    resource = ResourceRecord(
        group="apps",
        version="v1",
        kind="Deployment",
        namespace="shop",
        name="cart",
        action=Action.CREATED,
    )
    last = SyncRecord(
        app="shop",
        cluster="east",
        trigger=Trigger.MANUAL,
        revision="abc123",
        trace_id="f" * 32,
        resources=(resource,),
    )
    status = InstanceStatus(
        sync_status=SyncStatus.SYNCED, health=Health.HEALTHY, revision="abc123", last_sync=last
    )
    served.store.set_status("shop", "east", status)

    code, out, _ = served.run(capsys, "app", "get", "shop", "-o", "json")
    text_code, text, _ = served.run(capsys, "app", "get", "shop")

    view = json.loads(out)
    assert code == text_code == 0
    assert (view["sync_status"], view["health"], view["revision"]) == (
        "Synced",
        "Healthy",
        "abc123",
    )
    assert view["last_sync"]["trace_id"] == "f" * 32
    assert view["instances"][0]["resources"] == [
        {
            "group": "apps",
            "version": "v1",
            "kind": "Deployment",
            "namespace": "shop",
            "name": "cart",
            "wave": 0,
            "action": "created",
            "health": "Unknown",
            "message": "",
        }
    ]
    assert "Deployment" in text and "f" * 32 in text


def test_app_wait_exits_1_naming_what_it_waits_for_and_0_once_synced_and_healthy(
    served: Served, capsys: pytest.CaptureFixture[str], kubeconfig: Path
) -> None:
    add_east(served, capsys, kubeconfig)
    create_shop(served, capsys)

    early, waiting, _ = served.run(capsys, "app", "wait", "shop", "--timeout", "1s")
    progressing = InstanceStatus(sync_status=SyncStatus.SYNCED, health=Health.PROGRESSING)
    served.store.set_status("shop", "east", progressing)
    sync_only, _, _ = served.run(capsys, "app", "wait", "shop", "--sync", "--timeout", "5s")
    health, still, _ = served.run(capsys, "app", "wait", "shop", "--health", "--timeout", "1s")
    healthy = InstanceStatus(sync_status=SyncStatus.SYNCED, health=Health.HEALTHY)
    served.store.set_status("shop", "east", healthy)
    done, ready, _ = served.run(capsys, "app", "wait", "shop", "--timeout", "5s")

    assert early == 1
    assert "east to be Synced (is Unknown)" in waiting
    assert "east to be Healthy (is Unknown)" in waiting
    assert sync_only == 0
    assert health == 1 and "east to be Healthy (is Progressing)" in still
    assert done == 0 and "app shop is ready" in ready


def test_sync_rollback_and_delete_print_their_jobs_and_diff_exits_1_on_changes(
    served: Served, capsys: pytest.CaptureFixture[str], kubeconfig: Path
) -> None:
    add_east(served, capsys, kubeconfig)
    create_shop(served, capsys)
    changed = preview_resource("ConfigMap", "cfg", "configured")
    served.dispatcher.results[("shop", "east")] = {"revision": "abc", "resources": [changed]}

    synced = served.run(capsys, "app", "sync", "shop", "--revision", "v2")
    diffed = served.run(capsys, "app", "diff", "shop")
    rolled = served.run(capsys, "app", "rollback", "shop", "v1")
    deleted = served.run(capsys, "app", "delete", "shop", "--no-cascade")

    assert synced[0] == 0 and "east: job-1" in synced[1] and "trace" in synced[1]
    assert diffed[0] == 1 and "ConfigMap" in diffed[1]
    assert rolled[0] == 0 and "automated sync is now off" in rolled[1]
    assert deleted[0] == 0 and "app shop deleted" in deleted[1]
    triggers = [(c["trigger"], c["revision"]) for c in served.dispatcher.calls]
    assert triggers == [("manual", "v2"), ("diff", None), ("rollback", "v1")]


def test_app_sync_prune_and_no_prune_override_the_policy_for_that_sync_only(
    served: Served, capsys: pytest.CaptureFixture[str], kubeconfig: Path
) -> None:
    add_east(served, capsys, kubeconfig)
    create_shop(served, capsys)

    codes = [
        served.run(capsys, "app", "sync", "shop", "--prune")[0],
        served.run(capsys, "app", "sync", "shop", "--no-prune")[0],
        served.run(capsys, "app", "sync", "shop")[0],
    ]

    assert codes == [0, 0, 0]
    assert [c["prune"] for c in served.dispatcher.calls] == [True, False, None]


def test_client_errors_are_one_line_with_exit_code_2_and_no_traceback(
    served: Served, capsys: pytest.CaptureFixture[str], kubeconfig: Path
) -> None:
    add_east(served, capsys, kubeconfig)
    unreachable = main(
        ["cluster", "list", "--server", f"http://127.0.0.1:{free_port()}", "--token", "t"]
    )
    unreachable_err = capsys.readouterr().err
    refused = main(["cluster", "list", "--server", served.url, "--token", "gf_wrong"])
    refused_err = capsys.readouterr().err
    invalid = served.run(
        capsys, "app", "create", "shop", "--repo", "https://g/x.git", "--path", ".",
        "--cluster", "east", "--namespace", "Bad_NS",
    )  # fmt: skip
    missing = served.run(capsys, "app", "get", "nope")

    assert unreachable == 2 and "cannot reach the gitfleet server" in unreachable_err
    assert refused == 2 and "refused the token (401)" in refused_err
    assert invalid[0] == 2 and "body.destination.namespace" in invalid[2]
    assert missing[0] == 2 and "no app named nope" in missing[2]
    for err in (unreachable_err, refused_err, invalid[2], missing[2]):
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1
