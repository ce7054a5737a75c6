"""GitHub push webhooks: verified by HMAC; they trigger only the apps on the pushed branch."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from dataclasses import replace
from typing import Any

from fastapi.testclient import TestClient

from api.app import create_app
from api.deps import get_dispatcher
from fleet.control.pushes import PushLog, SyncedAt, spec_of
from fleet.control.registry.repos import normalize_repo
from tests.api.conftest import (
    WEBHOOK_SECRET,
    Api,
    RecordingDispatcher,
    add_app,
    add_cluster,
    settings_for,
)

REPO = "https://github.com/acme/shop"


def push(ref: str = "refs/heads/main", clone_url: str = f"{REPO}.git") -> bytes:
    payload = {
        "ref": ref,
        "after": "0123abcd",
        "repository": {
            "clone_url": clone_url,
            "ssh_url": "git@github.com:acme/shop.git",
            "html_url": REPO,
            "default_branch": "main",
        },
    }
    return json.dumps(payload).encode()


def signed(body: bytes, secret: str = WEBHOOK_SECRET) -> dict[str, str]:
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return {
        "X-Hub-Signature-256": f"sha256={digest}",
        "X-GitHub-Event": "push",
        "X-GitHub-Delivery": str(uuid.uuid4()),
    }


def deliver(api: Api, body: bytes, headers: dict[str, str]) -> Any:
    return TestClient(api.client.app).post("/api/v1/webhooks/git", content=body, headers=headers)


def apps_on_one_repo(api: Api) -> None:
    add_cluster(api, "east")
    automated = {"automated": True}
    add_app(
        api,
        "on-main",
        source={"repo": "ssh://git@github.com/acme/shop.git", "revision": "main"},
        syncPolicy=automated,
    )
    add_app(
        api, "on-head", source={"repo": f"{REPO}.git", "revision": "HEAD"}, syncPolicy=automated
    )
    add_app(api, "on-dev", source={"repo": REPO, "revision": "dev"}, syncPolicy=automated)
    add_app(
        api, "other-repo", source={"repo": "https://github.com/acme/cart.git"}, syncPolicy=automated
    )
    add_app(api, "manual", source={"repo": REPO, "revision": "main"})


def test_a_push_with_a_wrong_or_missing_signature_is_rejected_and_triggers_nothing(
    api: Api,
) -> None:
    apps_on_one_repo(api)
    body = push()

    wrong = deliver(api, body, signed(body, secret="not-the-secret"))
    missing = deliver(api, body, {"X-GitHub-Event": "push"})
    tampered = deliver(api, body.replace(b"main", b"dev"), signed(body))

    assert [r.status_code for r in (wrong, missing, tampered)] == [401, 401, 401]
    assert "X-Hub-Signature-256" in wrong.json()["detail"]
    assert api.dispatcher.calls == []


def test_a_signed_push_triggers_only_the_automated_apps_on_that_repo_and_branch(api: Api) -> None:
    apps_on_one_repo(api)
    body = push()

    response = deliver(api, body, signed(body))

    assert response.status_code == 200, response.text
    answer = response.json()
    assert sorted(answer["triggered"]) == ["on-head", "on-main"]
    assert answer["skipped"] == [
        {"app": "manual", "reason": "automated sync is off; sync it by hand"}
    ]
    assert sorted((c["app"], c["trigger"]) for c in api.dispatcher.calls) == [
        ("on-head", "webhook"),
        ("on-main", "webhook"),
    ]


def test_a_push_to_another_branch_triggers_only_the_apps_tracking_it(api: Api) -> None:
    apps_on_one_repo(api)
    body = push(ref="refs/heads/dev", clone_url="https://user:pw@GitHub.com/acme/shop/")

    answer = deliver(api, body, signed(body)).json()

    assert answer["triggered"] == ["on-dev"]


def test_a_push_in_a_deny_window_is_skipped_with_the_reason(api: Api) -> None:
    add_cluster(api, "east")
    deny = {"kind": "deny", "schedule": "* * * * *", "duration": "1h", "manualSync": True}
    add_app(
        api, "frozen", source={"repo": REPO}, syncPolicy={"automated": True, "syncWindows": [deny]}
    )
    body = push()

    answer = deliver(api, body, signed(body)).json()

    assert answer["triggered"] == []
    assert answer["skipped"][0]["app"] == "frozen"
    assert "sync blocked" in answer["skipped"][0]["reason"]


def test_a_signed_payload_without_a_ref_is_refused_naming_the_field(api: Api) -> None:
    body = json.dumps({"repository": {"clone_url": REPO}}).encode()

    response = deliver(api, body, signed(body))

    assert response.status_code == 422
    assert response.json()["detail"].startswith("ref:")


def test_webhooks_are_refused_when_no_secret_is_configured(redis_url: str) -> None:
    app = create_app(settings_for(redis_url, webhook_secret=None))
    dispatcher = RecordingDispatcher()
    app.dependency_overrides[get_dispatcher] = lambda: dispatcher
    body = push()
    with TestClient(app) as client:
        response = client.post("/api/v1/webhooks/git", content=body, headers=signed(body))

    assert response.status_code == 503
    assert "GITFLEET_WEBHOOK_SECRET" in response.json()["detail"]
    assert dispatcher.calls == []


def test_the_bare_webhooks_git_path_verifies_and_triggers_like_the_versioned_one(
    api: Api,
) -> None:
    apps_on_one_repo(api)
    body = push()
    client = TestClient(api.client.app)
    wrong = client.post("/webhooks/git", content=body, headers=signed(body, secret="nope"))
    assert wrong.status_code == 401
    right = client.post("/webhooks/git", content=body, headers=signed(body))
    assert right.status_code == 200
    assert api.dispatcher.calls != []


def test_a_push_syncs_each_app_at_its_own_tracked_revision_never_the_pushed_commit(
    api: Api,
) -> None:
    apps_on_one_repo(api)
    sha = "0a1b2c3d" * 5
    body = json.dumps({**json.loads(push()), "after": sha}).encode()
    assert deliver(api, body, signed(body)).status_code == 200
    assert api.dispatcher.calls and {c["revision"] for c in api.dispatcher.calls} == {None}


def monorepo_push(before: str, after: str, *changed: str) -> bytes:
    payload = {
        **json.loads(push()),
        "before": before,
        "after": after,
        "commits": [{"added": [], "removed": [], "modified": list(changed)}],
    }
    return json.dumps(payload).encode()


def test_a_push_listing_its_files_syncs_only_the_instances_it_can_change(api: Api) -> None:
    add_cluster(api, "east")
    for name in ("alpha", "beta", "gamma"):
        source = {"repo": f"{REPO}.git", "revision": "main", "path": f"apps/{name}"}
        add_app(api, name, source=source, syncPolicy={"automated": True})
    pushes = PushLog(api.store.redis, prefix=api.store.keys.p)
    s0, s1, s2 = ("0" * 39 + "a", "1" * 40, "2" * 40)

    def synced_at(name: str, sha: str) -> SyncedAt:
        return SyncedAt(sha, (f"apps/{name}",), spec_of(api.store.get_app(name)))

    for name in ("alpha", "beta"):  # gamma has never synced: it must sync on any push
        pushes.note_synced(normalize_repo(REPO), f"{name}@east", synced_at(name, s0))

    first = deliver(api, body := monorepo_push(s0, s1, "apps/alpha/cm.yaml"), signed(body)).json()

    assert sorted(first["triggered"]) == ["alpha", "gamma"]
    assert first["unchanged"] == ["beta"]
    assert {c["app"] for c in api.dispatcher.calls} == {"alpha", "gamma"}

    # beta still matches s0; the chain s0 -> s1 -> s2 touched only alpha's files
    api.dispatcher.calls.clear()
    pushes.note_synced(normalize_repo(REPO), "alpha@east", synced_at("alpha", s1))
    second = deliver(api, body := monorepo_push(s1, s2, "apps/alpha/more.yaml"), signed(body))
    assert sorted(second.json()["unchanged"]) == ["beta"]
    assert sorted(second.json()["triggered"]) == ["alpha", "gamma"]

    # an app changed since its last sync (here its path) syncs whatever the push touched
    api.dispatcher.calls.clear()
    beta = api.store.get_app("beta")
    api.store.put_app(replace(beta, source=replace(beta.source, path="apps/beta-v2")))
    s3 = "3" * 40
    third = deliver(api, body := monorepo_push(s2, s3, "apps/alpha/x.yaml"), signed(body))
    assert "beta" in third.json()["triggered"]

    # a push that does not list its files syncs everything, as before
    api.dispatcher.calls.clear()
    unknown = json.loads(monorepo_push(s3, "4" * 40))
    del unknown["commits"]
    fourth = deliver(api, body := json.dumps(unknown).encode(), signed(body)).json()
    assert sorted(fourth["triggered"]) == ["alpha", "beta", "gamma"]


def test_deleting_an_app_forgets_what_its_instances_last_matched(api: Api) -> None:
    add_cluster(api, "east")
    add_app(api, "alpha", source={"repo": f"{REPO}.git", "path": "apps/alpha"})
    pushes, repo = PushLog(api.store.redis, prefix=api.store.keys.p), normalize_repo(REPO)
    spec = spec_of(api.store.get_app("alpha"))
    pushes.note_synced(repo, "alpha@east", SyncedAt("1" * 40, ("apps/alpha",), spec))
    assert list(pushes.synced(repo, ["alpha@east"])) == ["alpha@east"]

    assert api.client.delete("/api/v1/apps/alpha?cascade=false").status_code in (200, 204)

    assert pushes.synced(repo, ["alpha@east"]) == {}
