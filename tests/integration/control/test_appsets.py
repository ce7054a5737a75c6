"""App sets against the real fleet: the API creates a set, the coordinator's app set round
reconciles it (apart from the scheduler's tick, which dispatches what it made),
real workers sync and prune the apps it generates on the testbed clusters (the issue asks for
three; the testbed has two), and the git generator reads a repository served over http. The
last test runs the API as `gitfleet api` does, its own scheduler thread reconciling."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.routes.appsets import appsets_for
from api.settings import Settings
from fleet.control.registry.errors import NotFound
from fleet.control.scheduler import Scheduler, TickReport
from fleet.model import ObjectRef
from tests.support import manifests as m
from tests.support.fleet import INSECURE_GIT_HOSTS, FleetEnv, wait_until

TOKEN = "test-admin-token"


@pytest.fixture
def api(
    fleet_api: Callable[..., TestClient], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> TestClient:
    monkeypatch.setenv("GITFLEET_CACHE_DIR", str(tmp_path / "api-cache"))
    return fleet_api(TOKEN)


@pytest.fixture
def scheduler(fleet: FleetEnv, api: TestClient) -> Iterator[Scheduler]:
    """The coordinator's scheduler with the app sets, ticked by the test (`_tick`)."""
    settings = Settings(prefix=fleet.prefix, insecure_git_hosts=INSECURE_GIT_HOSTS)
    appsets = appsets_for(fleet.store, fleet.dispatcher, settings)
    scheduler = Scheduler(fleet.store, fleet.dispatcher, appsets=appsets)
    yield scheduler
    scheduler.stop()


def _tick(scheduler: Scheduler) -> TickReport:
    """One round of the app sets (fetching anew, as a refresh of 0 once did), then one tick."""
    assert scheduler.appset_runner is not None
    scheduler.appset_runner.round(max_age=0)
    return scheduler.tick()


def _template(fleet: FleetEnv, name: str, path: str, **destination: Any) -> dict[str, Any]:
    return {
        "name": name,
        "source": {"repo": fleet.repo_url, "path": path},
        "destination": {"namespace": name, **destination},
        "syncPolicy": {"automated": True, "createNamespace": True, "interval": "1h"},
    }


def _settings(fleet: FleetEnv, app: str, cluster: str) -> dict[str, Any] | None:
    return fleet.live(cluster, ObjectRef("", "v1", "ConfigMap", app, "settings"))


def _gone(fleet: FleetEnv, app: str) -> bool:
    try:
        fleet.store.get_app(app)
    except NotFound:
        return True
    return False


def _synced(fleet: FleetEnv, app: str, cluster: str) -> None:
    answer = fleet.sync_and_wait(app, cluster)
    assert answer["result"] == "succeeded", (answer.get("error"), answer.get("message"))
    assert _settings(fleet, app, cluster) is not None


def test_git_directories_add_and_remove_apps_and_prune_with_cascade(
    fleet: FleetEnv, api: TestClient, scheduler: Scheduler
) -> None:
    cluster = sorted(fleet.clusters)[0]
    p = fleet.prefix
    fleet.repo.commit(
        {
            f"envs/{p}-one/cm.yaml": m.configmap("settings", "k: one"),
            f"envs/{p}-two/cm.yaml": m.configmap("settings", "k: two"),
            f"envs/{p}-skip/cm.yaml": m.configmap("settings", "k: skip"),
            "envs/README.md": "not a directory",
        }
    )
    body = {
        "name": "dirs",
        "generator": {
            "git": {
                "repo": fleet.repo_url,
                "directories": [{"path": "envs/*"}, {"path": "envs/*-skip", "exclude": True}],
            }
        },
        "template": _template(fleet, "{{path.basename}}", "{{path}}", cluster=cluster),
        "refresh": "30s",
    }
    created = api.post("/api/v1/appsets", json=body)
    assert created.status_code == 201, created.text
    one, two, three = f"{p}-one", f"{p}-two", f"{p}-three"
    assert created.json()["apps"] == [one, two]
    fleet.created.extend((a, cluster, a) for a in (one, two, three))
    assert fleet.store.get_app(one).owner_set == "dirs"
    assert fleet.store.get_app(one).source.path == f"envs/{one}"

    fleet.worker_thread("alpha")
    first = _tick(scheduler)
    assert sorted(first.dispatched) == [f"{one}@{cluster}", f"{two}@{cluster}"]
    for app in (one, two):
        wait_until(lambda a=app: _settings(fleet, a, cluster), timeout=60, what=f"{app} synced")

    fleet.repo.commit({f"envs/{three}/cm.yaml": m.configmap("settings", "k: three")})
    gained = _tick(scheduler)
    assert f"{three}@{cluster}" in gained.dispatched
    assert fleet.store.get_app(three).owner_set == "dirs"
    wait_until(lambda: _settings(fleet, three, cluster), timeout=60, what="the new app synced")

    fleet.repo.commit({f"envs/{one}/cm.yaml": None})
    _tick(scheduler)
    assert fleet.store.get_app(one).deleting  # the cascade: its worker prunes, then removes it
    wait_until(lambda: _gone(fleet, one), timeout=60, what=f"{one} deleted")
    assert _settings(fleet, one, cluster) is None
    assert _settings(fleet, two, cluster) is not None
    shown = api.get("/api/v1/appsets/dirs").json()
    assert sorted(shown["apps"]) == sorted([two, three])
    assert shown["errors"] == []

    stamp = fleet.store.get_app(two).updated
    _tick(scheduler)  # idempotent: nothing left to do, nothing rewritten
    assert fleet.store.get_app(two).updated == stamp

    assert scheduler.appsets is not None
    record = scheduler.appsets.get("dirs")
    assert record.generator.git is not None
    git = dataclasses.replace(record.generator.git, revision="no-such-branch")
    broken = dataclasses.replace(record, generator=dataclasses.replace(record.generator, git=git))
    scheduler.appsets.put(broken, create=False)
    _tick(scheduler)  # a generator that fails deletes nothing
    assert not _gone(fleet, two) and not _gone(fleet, three)
    errors = api.get("/api/v1/appsets/dirs").json()["errors"]
    assert len(errors) == 1 and "no-such-branch" in errors[0], errors

    deleted = api.delete("/api/v1/appsets/dirs")
    assert deleted.status_code == 200, deleted.text
    assert sorted(deleted.json()["apps"]) == sorted([two, three])
    for app in (two, three):
        wait_until(lambda a=app: _gone(fleet, a), timeout=60, what=f"{app} deleted with the set")
        assert _settings(fleet, app, cluster) is None
    assert api.get("/api/v1/appsets/dirs").status_code == 404


def test_a_list_set_with_keep_and_its_apps_cannot_be_edited_alone(
    fleet: FleetEnv, api: TestClient
) -> None:
    cluster = sorted(fleet.clusters)[0]
    p = fleet.prefix
    a, b = f"{p}-red", f"{p}-blue"
    fleet.repo.commit({f"colors/{c}/cm.yaml": m.configmap("settings", f"k: {c}") for c in "rb"})
    elements = [{"color": "red", "dir": "r"}, {"color": "blue", "dir": "b"}]
    body: dict[str, Any] = {
        "name": "colors",
        "generator": {"list": {"elements": elements}},
        "template": _template(fleet, f"{p}-{{{{color}}}}", "colors/{{ dir }}", cluster=cluster),
        "deletionPolicy": "keep",
    }
    created = api.post("/api/v1/appsets", json=body)
    assert created.status_code == 201, created.text
    assert sorted(created.json()["apps"]) == sorted([a, b])
    fleet.created.extend((x, cluster, x) for x in (a, b))
    fleet.worker_thread("alpha")
    for app in (a, b):
        _synced(fleet, app, cluster)

    shown = api.get(f"/api/v1/apps/{a}").json()
    assert shown["owner_set"] == "colors"
    spec = {"name": a, **shown["spec"]}
    changed = api.put(f"/api/v1/apps/{a}", json=spec)
    assert changed.status_code == 409 and "app set colors" in changed.text
    deleted = api.delete(f"/api/v1/apps/{a}")
    assert deleted.status_code == 409 and "app set colors" in deleted.text

    uid = fleet.store.get_app(b).uid
    body["generator"]["list"]["elements"] = elements[1:]
    body["template"]["syncPolicy"]["interval"] = "2h"
    replaced = api.put("/api/v1/appsets/colors", json=body)
    assert replaced.status_code == 200, replaced.text
    assert replaced.json()["apps"] == [b]
    kept = fleet.store.get_app(b)  # the template changed: the app follows, same identity
    assert (kept.sync_policy.interval_s, kept.uid, kept.owner_set) == (7200, uid, "colors")
    assert _gone(fleet, a)
    assert _settings(fleet, a, cluster) is not None  # keep: the objects stay

    unknown = dict(body, name="typo", template=_template(fleet, "{{colour}}", "x", cluster=cluster))
    refused = api.post("/api/v1/appsets", json=unknown)
    assert refused.status_code == 422
    assert "unknown parameter {{colour}}" in refused.text and "template.name" in refused.text

    local = dict(
        body, name="local", generator={"git": {"repo": "/etc", "directories": [{"path": "*"}]}}
    )
    not_fetched = api.post("/api/v1/appsets", json=local)
    assert not_fetched.status_code == 422 and "generator.git.repo" in not_fetched.text

    gone = api.delete("/api/v1/appsets/colors")
    assert gone.status_code == 200, gone.text
    assert gone.json()["apps"] == [b]
    assert _gone(fleet, b) and _settings(fleet, b, cluster) is not None


def test_a_clusters_set_follows_the_labels_of_the_testbed_clusters(
    fleet: FleetEnv, api: TestClient, scheduler: Scheduler
) -> None:
    p = fleet.prefix
    names = sorted(fleet.clusters)
    for index, name in enumerate(names):
        record = fleet.store.get_cluster(name)
        labels = {"fleet": p, "region": f"region-{index}"}
        fleet.store.put_cluster(dataclasses.replace(record, labels=labels))
    fleet.repo.commit({"base/cm.yaml": m.configmap("settings", "k: base")})
    body = {
        "name": "regions",
        "generator": {"clusters": {"selector": {"fleet": p}}},
        "template": _template(fleet, f"{p}-{{{{labels.region}}}}", "base", cluster="{{name}}"),
    }
    created = api.post("/api/v1/appsets", json=body)
    assert created.status_code == 201, created.text
    apps = {name: f"{p}-region-{i}" for i, name in enumerate(names)}
    assert sorted(created.json()["apps"]) == sorted(apps.values())
    fleet.created.extend((app, name, app) for name, app in apps.items())
    fleet.worker_thread("alpha")
    for name, app in apps.items():
        assert fleet.store.get_app(app).destination.cluster == name
        _synced(fleet, app, name)

    last = names[-1]
    record = fleet.store.get_cluster(last)
    fleet.store.put_cluster(dataclasses.replace(record, labels={"region": "elsewhere"}))
    _tick(scheduler)
    wait_until(lambda: _gone(fleet, apps[last]), timeout=60, what="the unlabelled app deleted")
    assert _settings(fleet, apps[last], last) is None  # cascade (the default) pruned it
    assert not _gone(fleet, apps[names[0]])


def test_the_api_process_scheduler_reconciles_sets_without_being_asked(
    fleet: FleetEnv, fleet_api: Callable[..., TestClient], api: TestClient
) -> None:
    coordinator = fleet_api(TOKEN, scheduler=True)  # `gitfleet api`: the scheduler thread runs
    p = fleet.prefix
    body = {
        "name": "labelled",
        "generator": {"clusters": {"selector": {"fleet": p}}},
        "template": {
            "name": f"{p}-{{{{name}}}}",
            "source": {"repo": fleet.repo_url, "path": "base"},
            "destination": {"cluster": "{{name}}", "namespace": p},
        },
    }
    created = coordinator.post("/api/v1/appsets", json=body)
    assert created.status_code == 201, created.text
    assert created.json()["apps"] == []
    name = sorted(fleet.clusters)[0]
    record = fleet.store.get_cluster(name)
    fleet.store.put_cluster(dataclasses.replace(record, labels={"fleet": p}))
    wait_until(lambda: not _gone(fleet, f"{p}-{name}"), timeout=15, what="the tick made the app")
    assert fleet.store.get_app(f"{p}-{name}").owner_set == "labelled"
