"""The web UI's pages over HTTP, for every route and role: admin, project member, viewer."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser

import pytest
from fastapi.testclient import TestClient

from fleet.control.registry.syncrecords import (
    InstanceStatus,
    ResourceRecord,
    SkipRecord,
    SyncRecord,
    WaveRecord,
)
from fleet.model import Action, Health, Outcome, SyncStatus, Trigger
from tests.api.conftest import (
    ADMIN_TOKEN,
    Api,
    add_app,
    add_cluster,
    fake_kubeconfig,
    preview_resource,
    token_for,
    two_projects,
)
from tests.api.ui_support import browser, csrf_of, signed_in

PAGES = ["/ui/", "/ui/apps/{app}", "/ui/apps/{app}/history", "/ui/clusters"]
ACTIONS = ["sync", "refresh", "delete"]
SHA = "0123456789abcdef0123456789abcdef01234567"


def synced(api: Api, app: str, cluster: str = "east", **fields: object) -> SyncRecord:
    """Write a finished sync of `app` on `cluster`, as a worker would, and return it."""
    start = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
    resources = (
        ResourceRecord(
            version="v1", kind="ConfigMap", namespace="shop", name="settings",
            action=Action.CONFIGURED, health=Health.HEALTHY,
        ),
        ResourceRecord(
            group="apps", version="v1", kind="Deployment", namespace="shop", name="web", wave=1,
            action=Action.CREATED, health=Health.PROGRESSING, message="0 of 2 replicas available",
        ),
    )  # fmt: skip
    values: dict[str, object] = dict(
        app=app, cluster=cluster, trigger=Trigger.MANUAL, revision=SHA,
        sync_status=SyncStatus.SYNCED, health=Health.PROGRESSING, started=start,
        finished=start + timedelta(seconds=2), trace_id="ab" * 16, resources=resources,
        stages={"source": 0.4, "render": 0.3, "order": 0.01, "diff": 0.2, "apply": 0.9,
                "prune": 0.05, "record": 0.04},
        result=Outcome.SUCCEEDED, duration_s=2.0,
    )  # fmt: skip
    record = SyncRecord(**{**values, **fields})  # type: ignore[arg-type]
    api.store.add_history(app, cluster, record)
    status = InstanceStatus(
        sync_status=record.sync_status,
        health=record.health,
        revision=record.revision,
        resources=record.resources,
        last_sync=record,
        message=record.error,
        updated=record.finished,
    )
    api.store.set_status(app, cluster, status)
    return record


def test_the_apps_table_shows_each_app_with_its_status_revision_link_and_health_counts(
    api: Api,
) -> None:
    add_cluster(api, "east")
    add_app(api, "shop")
    add_app(api, "cart")
    synced(api, "shop")
    client = signed_in(api, ADMIN_TOKEN)

    page = client.get("/ui/")

    assert page.status_code == 200
    html = page.text
    assert 'data-app="shop"' in html and 'data-app="cart"' in html
    assert f"https://git.example.com/team/shop/commit/{SHA}" in html and SHA[:8] in html
    assert 'class="badge s-progressing">Progressing' in html
    assert '<span data-count="Progressing">1</span>' in html
    assert '<span data-count="Unknown">1</span>' in html
    polled = client.get("/ui/api/apps").json()
    assert polled["counts"] == {"Progressing": 1, "Unknown": 1}
    shop = next(r for r in polled["rows"] if r["name"] == "shop")
    assert (shop["sync_status"], shop["health"], shop["short_revision"]) == (
        "Synced",
        "Progressing",
        SHA[:8],
    )
    assert shop["last_sync"] == "2026-12-01T07:00:02+00:00"


def test_the_apps_table_filters_searches_and_pages_on_the_server(api: Api) -> None:
    two_projects(api)
    for index in range(120):
        destination = {"cluster": "east", "namespace": "team-a-shop"}
        add_app(api, f"bulk-{index:03d}", project="team-a", destination=destination)
    synced(api, "team-b-shop")
    client = signed_in(api, ADMIN_TOKEN)

    first = client.get("/ui/api/apps").json()
    last = client.get("/ui/api/apps", params={"page": 3}).json()
    assert (first["total"], first["pages"], len(first["rows"]), len(last["rows"])) == (
        122,
        3,
        50,
        22,
    )
    by_project = client.get("/ui/api/apps", params={"project": "team-b"}).json()
    assert [r["name"] for r in by_project["rows"]] == ["team-b-shop"]
    by_health = client.get("/ui/api/apps", params={"health": "Progressing"}).json()
    assert [r["name"] for r in by_health["rows"]] == ["team-b-shop"]
    by_sync = client.get("/ui/api/apps", params={"sync": "Synced", "cluster": "east"}).json()
    assert [r["name"] for r in by_sync["rows"]] == ["team-b-shop"]
    searched = client.get("/ui/", params={"q": "bulk-11"})
    assert searched.text.count('data-app="bulk-11') == 10
    assert "Next</a>" in client.get("/ui/").text


def test_the_app_page_shows_source_destination_each_instance_and_its_object_tree(
    api: Api,
) -> None:
    add_cluster(api, "east")
    add_app(api, "shop")
    synced(api, "shop", error="", health=Health.PROGRESSING)
    client = signed_in(api, ADMIN_TOKEN)

    html = client.get("/ui/apps/shop").text

    assert "https://git.example.com/team/shop.git" in html and "<dd>shop</dd>" in html
    assert "On cluster east" in html
    assert "Cannot reach cluster east now: cluster east at https://127.0.0.1:6443" in html
    assert 'data-ref="ConfigMap/shop/settings"' in html
    assert 'data-ref="Deployment/shop/web"' in html and "0 of 2 replicas available" in html
    assert "data-children=" in html  # Deployments list their ReplicaSets and Pods on demand
    for button in ("Sync</button>", "Refresh</button>", "Delete</button>", "Diff with git"):
        assert button in html
    status = client.get("/ui/api/apps/shop").json()
    assert status["instances"][0]["resources"][1] == {
        "ref": "Deployment/shop/web",
        "health": "Progressing",
        "action": "created",
        "message": "0 of 2 replicas available",
    }


def test_a_failed_sync_shows_its_error_in_words_on_the_app_page(api: Api) -> None:
    add_cluster(api, "east")
    add_app(api, "shop")
    error = "render failed: deploy/web.yaml line 7: mapping values are not allowed here"
    synced(api, "shop", error=error, error_stage="render", result=Outcome.FAILED)
    client = signed_in(api, ADMIN_TOKEN)

    html = client.get("/ui/apps/shop").text

    assert "deploy/web.yaml line 7: mapping values are not allowed here" in html
    assert "Traceback" not in html
    entry = client.get("/ui/apps/shop/history/east/0").text
    assert "render stage: render failed: deploy/web.yaml line 7" in entry


def test_history_lists_each_sync_and_an_entry_draws_its_waterfall_with_the_trace_id(
    api: Api,
) -> None:
    add_cluster(api, "east")
    add_app(api, "shop")
    synced(api, "shop", revision="1" * 40)
    synced(api, "shop")
    skipped = SkipRecord(app="shop", cluster="east", trigger=Trigger.INTERVAL, message="denied")
    api.store.add_history("shop", "east", skipped)
    client = signed_in(api, ADMIN_TOKEN)

    history = client.get("/ui/apps/shop/history").text
    entry = client.get("/ui/apps/shop/history/east/1").text

    assert history.count("/ui/apps/shop/history/east/") == 3
    assert "Roll back to 11111111" in history and "denied" in history
    assert 'id="waterfall"' in entry and "ab" * 16 in entry
    assert f"Roll back to {SHA[:8]}" in entry
    for stage in ("source", "render", "diff", "apply", "prune", "record"):
        assert f'<span class="stage">{stage}</span>' in entry
    assert "wave 1" in entry and "Deployment/web (created)" in entry
    assert "margin-left: 20.00%; width: 15.00%" in entry  # render: after 0.4 s of 2 s, 0.3 s
    assert client.get("/ui/apps/shop/history/east/9").status_code == 404
    assert "This entry is a skipped sync" in client.get("/ui/apps/shop/history/east/0").text


def test_an_entry_draws_each_recorded_wave_as_a_bar_under_the_apply_stage(api: Api) -> None:
    add_cluster(api, "east")
    add_app(api, "shop")
    timed = (
        WaveRecord(phase="PreSync", number=0, offset=0.0, seconds=0.1, objects=1),
        WaveRecord(phase="Sync", number=0, offset=0.1, seconds=0.2, objects=1),
        WaveRecord(phase="Sync", number=1, offset=0.3, seconds=0.6, objects=1, failed=True),
    )
    synced(api, "shop", waves=timed)
    client = signed_in(api, ADMIN_TOKEN)

    entry = client.get("/ui/apps/shop/history/east/0").text

    # apply starts 0.91 s into the 2 s sync: wave 1 at 0.91 + 0.3 s, 0.6 s wide
    assert 'data-wave="1" data-phase="Sync"' in entry
    assert "margin-left: 60.50%; width: 30.00%" in entry
    assert "margin-left: 50.50%; width: 10.00%" in entry  # Sync wave 0
    assert '<span class="stage">PreSync wave 0</span>' in entry
    assert '<span class="stage">wave 1</span>' in entry
    assert "1 object(s): Deployment/web (created) · failed" in entry
    assert (
        "wave 1 (Sync phase) started 0.300 s into the apply stage and took 0.600 s, and failed."
        in entry
    )
    assert entry.index('<span class="stage">apply</span>') < entry.index("PreSync wave 0")
    assert entry.index("PreSync wave 0") < entry.index('<span class="stage">prune</span>')
    assert "this record has no wave timings" not in entry
    rest = api.client.get("/api/v1/apps/shop/history").json()["clusters"]["east"][0]["waves"]
    assert rest[2] == {
        "phase": "Sync", "number": 1, "offset": 0.3, "seconds": 0.6, "objects": 1, "failed": True,
    }  # fmt: skip


def test_a_member_sees_only_their_projects_apps_everywhere(api: Api) -> None:
    two_projects(api)
    client = signed_in(api, token_for(api, "alice", "member", "team-a"))

    table = client.get("/ui/").text
    assert 'data-app="team-a-shop"' in table and "team-b-shop" not in table
    assert [r["name"] for r in client.get("/ui/api/apps").json()["rows"]] == ["team-a-shop"]
    other = client.get("/ui/apps/team-b-shop")
    assert other.status_code == 403
    assert "is a member of project team-a, not of project team-b" in other.text
    assert client.get("/ui/api/apps/team-b-shop").status_code == 403
    assert client.get("/ui/apps/team-b-shop/history").status_code == 403
    csrf = csrf_of(client)
    refused = client.post("/ui/apps/team-b-shop/sync", data={"csrf": csrf})
    assert refused.status_code == 403 and "not of project team-b" in refused.text
    assert api.dispatcher.calls == []
    assert client.post("/ui/apps/team-a-shop/sync", data={"csrf": csrf}).status_code == 303
    clusters = client.get("/ui/clusters").text
    assert "Add a cluster" not in clusters and "Remove</button>" not in clusters
    form = {"csrf": csrf, "name": "west", "kubeconfig": fake_kubeconfig("t")}
    add = client.post("/ui/clusters", data=form)
    assert add.status_code == 403 and "cannot register clusters" in add.text
    remove = client.post("/ui/clusters/east/delete", data={"csrf": csrf})
    assert remove.status_code == 403 and "is not an admin" in remove.text
    other_diff = client.get("/ui/apps/team-b-shop/diff", params={"cluster": "east"})
    assert other_diff.status_code == 403
    entry = client.get("/ui/apps/team-b-shop/history/east/0")
    assert entry.status_code == 403


def test_a_viewer_sees_every_page_but_no_button_that_changes_anything(api: Api) -> None:
    two_projects(api)
    synced(api, "team-a-shop")
    client = signed_in(api, token_for(api, "dashboard", "viewer"))

    for path in [*PAGES, "/ui/apps/{app}/history/east/0"]:
        html = client.get(path.format(app="team-a-shop")).text
        for button in ("Sync</button>", "Refresh</button>", "Delete</button>", "Roll back"):
            assert button not in html, f"{button} on {path}"
        assert "Add a cluster" not in html and "Diff with git" not in html
    csrf = csrf_of(client)
    for action in ACTIONS:
        answer = client.post(f"/ui/apps/team-a-shop/{action}", data={"csrf": csrf})
        assert answer.status_code == 403, action
    rollback = client.post("/ui/apps/team-a-shop/rollback", data={"csrf": csrf, "revision": SHA})
    assert rollback.status_code == 403
    assert client.post("/ui/clusters", data={"csrf": csrf, "name": "x"}).status_code == 403
    assert api.dispatcher.calls == []
    diff = client.get("/ui/apps/team-a-shop/diff", params={"cluster": "east"})
    assert diff.status_code == 403 and "viewer" in diff.text


@pytest.mark.parametrize("page", [*PAGES, "/ui/apps/{app}/history/east/0"])
def test_every_page_names_the_signed_in_user_and_offers_sign_out(api: Api, page: str) -> None:
    add_cluster(api, "east")
    add_app(api, "shop")
    synced(api, "shop")
    client = signed_in(api, ADMIN_TOKEN)

    answer = client.get(page.format(app="shop"))

    assert answer.status_code == 200
    assert "Sign out</button>" in answer.text and "admin" in answer.text
    assert '<html lang="en">' in answer.text and 'name="viewport"' in answer.text


def test_buttons_call_the_rest_handlers_and_show_their_refusals_in_words(api: Api) -> None:
    add_cluster(api, "east")
    add_app(api, "shop")
    client = signed_in(api, ADMIN_TOKEN)
    csrf = csrf_of(client, "/ui/apps/shop")
    as_script = {"Accept": "application/json"}

    api.dispatcher.results[("shop", "east")] = {
        "revision": SHA,
        "resources": [preview_resource("ConfigMap", "settings", "configured")],
    }
    dry = client.post("/ui/apps/shop/sync", data={"csrf": csrf, "dry_run": "true"})
    refresh = client.post("/ui/apps/shop/refresh", data={"csrf": csrf}, headers=as_script)
    rollback = client.post(
        "/ui/apps/shop/rollback", data={"csrf": csrf, "revision": SHA, "cluster": "east"}
    )
    missing = client.post("/ui/apps/shop/rollback", data={"csrf": csrf}, headers=as_script)

    assert dry.status_code == 303
    assert refresh.json()["message"] == (
        "refreshed: east: a sync would change ConfigMap/shop/settings (configured)"
    )
    assert rollback.status_code == 303 and missing.status_code == 422
    calls = [(c["trigger"], c["dry_run"], c["revision"]) for c in api.dispatcher.calls]
    assert calls == [("manual", True, None), ("diff", True, None), ("rollback", False, SHA)]
    deleted = client.post("/ui/apps/shop/delete", data={"csrf": csrf})  # no cascade box ticked
    assert deleted.status_code == 303 and deleted.headers["location"] == "/ui/"
    gone = client.get("/ui/apps/shop")
    assert gone.status_code == 404 and "no app named shop" in gone.text
    assert "<html" in gone.text  # a page, not JSON


def test_a_cascading_delete_asks_the_workers_to_prune(api: Api) -> None:
    add_cluster(api, "east")
    add_app(api, "shop")
    client = signed_in(api, ADMIN_TOKEN)
    csrf = csrf_of(client, "/ui/apps/shop")

    answer = client.post(
        "/ui/apps/shop/delete",
        data={"csrf": csrf, "cascade": "true"},
        headers={"Accept": "application/json"},
    )

    assert "is being deleted" in answer.json()["message"]
    assert [c["trigger"] for c in api.dispatcher.calls] == ["delete"]
    assert "being deleted" in client.get("/ui/apps/shop").text


def test_clusters_page_shows_reachability_and_admins_add_and_remove_by_kubeconfig(
    api: Api,
) -> None:
    add_cluster(api, "east", labels={"env": "prod"})
    add_app(api, "shop")
    client = signed_in(api, ADMIN_TOKEN)
    csrf = csrf_of(client, "/ui/clusters")

    page = client.get("/ui/clusters").text
    assert "env=prod" in page and "https://127.0.0.1:6443" in page
    assert "unreachable" in page  # nothing listens there: said in words
    assert "Add a cluster" in page

    kubeconfig = fake_kubeconfig("very-secret-cluster-token", server="https://127.0.0.1:6999")
    form = {"csrf": csrf, "name": "west", "kubeconfig": kubeconfig, "labels": "env=dev, a=b"}
    added = client.post("/ui/clusters", data=form)
    assert added.status_code == 303
    page = client.get("/ui/clusters").text
    assert 'data-cluster="west"' in page and "env=dev" in page
    assert "very-secret-cluster-token" not in page

    bad = client.post("/ui/clusters", data={**form, "name": "north", "kubeconfig": "x: ["})
    assert bad.status_code == 422 and "kubeconfig" in bad.text and "x: [" not in bad.text
    in_use = client.post("/ui/clusters/east/delete", data={"csrf": csrf})
    assert in_use.status_code == 409 and "shop" in in_use.text
    removed = client.post("/ui/clusters/west/delete", data={"csrf": csrf})
    assert removed.status_code == 303
    assert 'data-cluster="west"' not in client.get("/ui/clusters").text


class Controls(HTMLParser):
    """Every form control of a page, and whether a label names it (wrapping it, or `for`)."""

    def __init__(self) -> None:
        super().__init__()
        self.open_labels = 0
        self.labelled: set[str] = set()
        self.unlabelled: list[str] = []
        self.controls: list[tuple[str, str, bool]] = []  # tag, id or name, inside a label

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "label":
            self.open_labels += 1
            if found.get("for"):
                self.labelled.add(str(found["for"]))
        elif tag in ("input", "select", "textarea") and found.get("type") != "hidden":
            name = str(found.get("id") or found.get("name"))
            self.controls.append((tag, name, self.open_labels > 0))

    def handle_endtag(self, tag: str) -> None:
        if tag == "label":
            self.open_labels -= 1

    def missing(self) -> list[str]:
        return [n for _, n, inside in self.controls if not inside and n not in self.labelled]


def test_every_form_control_on_every_page_has_a_label_for_screen_readers(api: Api) -> None:
    add_cluster(api, "east")
    add_app(api, "shop")
    synced(api, "shop")
    client = signed_in(api, ADMIN_TOKEN)
    pages = [*PAGES, "/ui/apps/{app}/history/east/0"]

    for path in pages:
        parser = Controls()
        parser.feed(client.get(path.format(app="shop")).text)
        assert parser.missing() == [], path
    login = Controls()
    login.feed(browser(api).get("/ui/login").text)
    assert login.controls and login.missing() == []


class SyncForm(HTMLParser):
    """The sync form's fields as a browser would send them: hidden ones, and ticked boxes."""

    def __init__(self) -> None:
        super().__init__()
        self.inside = False
        self.fields: dict[str, str] = {}
        self.boxes: dict[str, bool] = {}  # checkbox name: ticked when the page loads

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "form":
            self.inside = str(found.get("action", "")).endswith("/sync")
        elif tag == "input" and self.inside:
            name, value = str(found["name"]), str(found.get("value") or "")
            if found.get("type") == "checkbox":
                self.boxes[name] = "checked" in found
            else:
                self.fields[name] = value

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False

    def sent(self, **ticked: bool) -> dict[str, str]:
        """What submitting the form sends with these boxes ticked (the others as loaded)."""
        boxes = {**self.boxes, **ticked}
        return {**self.fields, **{name: "true" for name, on in boxes.items() if on}}


def sync_form(client: TestClient, app: str) -> SyncForm:
    form = SyncForm()
    form.feed(client.get(f"/ui/apps/{app}").text)
    return form


def test_the_sync_forms_prune_box_starts_at_the_policy_and_its_choice_reaches_the_workers(
    api: Api,
) -> None:
    add_cluster(api, "east")
    add_app(api, "keep", syncPolicy={"prune": False})
    add_app(api, "tidy", syncPolicy={"prune": True})
    client = signed_in(api, ADMIN_TOKEN)
    keep, tidy = sync_form(client, "keep"), sync_form(client, "tidy")
    assert keep.boxes == {"dry_run": False, "prune": False}
    assert tidy.boxes == {"dry_run": False, "prune": True}
    page = client.get("/ui/apps/keep").text
    assert "> Prune</label>" in page and "syncPolicy.prune off" not in page

    as_loaded = client.post("/ui/apps/keep/sync", data=keep.sent())
    ticked = client.post("/ui/apps/keep/sync", data=keep.sent(prune=True))
    unticked = client.post("/ui/apps/tidy/sync", data=tidy.sent(prune=False))
    no_box = client.post("/ui/apps/tidy/sync", data={"csrf": tidy.fields["csrf"]})

    assert [r.status_code for r in (as_loaded, ticked, unticked, no_box)] == [303] * 4
    calls = [(c["app"], c["prune"]) for c in api.dispatcher.calls]
    assert calls == [("keep", False), ("keep", True), ("tidy", False), ("tidy", None)]
    message = client.post(
        "/ui/apps/keep/sync", data=keep.sent(prune=True), headers={"Accept": "application/json"}
    )
    assert message.json()["message"].startswith("sync requested on 1 cluster(s), prune on; trace")
