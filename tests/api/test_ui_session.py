"""The web UI's sign-in, session cookie, CSRF protection and sign-out, over HTTP."""

from __future__ import annotations

from api.ui.session import COOKIE
from fleet.control.registry.tokens import digest
from tests.api.conftest import ADMIN_TOKEN, Api, add_app, add_cluster, token_for
from tests.api.ui_support import browser, csrf_of, signed_in


def test_ui_without_a_session_redirects_to_the_login_page(api: Api) -> None:
    client = browser(api)

    page = client.get("/ui/apps/shop?x=1")
    assert page.status_code == 303
    assert page.headers["location"] == "/ui/login?next=%2Fui%2Fapps%2Fshop%3Fx%3D1"
    assert client.get("/ui").headers["location"] == "/ui/"
    assert client.get("/ui/api/apps").status_code == 401  # the polled JSON: no redirect
    assert client.post("/ui/apps/shop/sync").status_code == 401
    login = client.get("/ui/login")
    assert login.status_code == 200
    assert 'name="token"' in login.text and '<label for="token">' in login.text
    assert client.get("/ui/static/ui.js").status_code == 200  # static files need no session


def test_a_bearer_header_does_not_open_the_ui_only_a_session_does(api: Api) -> None:
    answer = api.client.get("/ui/", follow_redirects=False)  # sends the admin bearer token

    assert answer.status_code == 303


def test_login_sets_an_httponly_samesite_cookie_holding_a_session_id_not_the_token(
    api: Api,
) -> None:
    client = browser(api)

    answer = client.post("/ui/login?next=/ui/clusters", data={"token": ADMIN_TOKEN})

    assert answer.status_code == 303
    assert answer.headers["location"] == "/ui/clusters"
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/ui" in cookie
    assert "Secure" not in cookie  # plain http here; https requests get Secure
    assert ADMIN_TOKEN not in cookie
    session_id = client.cookies[COOKIE]
    stored = api.store.redis.get(api.store.keys.ui_session(session_id))
    assert stored is not None and ADMIN_TOKEN.encode() not in stored
    assert digest(ADMIN_TOKEN).encode() in stored
    assert 0 < api.store.redis.ttl(api.store.keys.ui_session(session_id)) <= 8 * 3600
    page = client.get("/ui/")
    assert page.status_code == 200
    assert page.headers["x-frame-options"] == "DENY"
    assert "script-src 'self'" in page.headers["content-security-policy"]


def test_another_apps_malformed_cookie_does_not_hide_the_session(api: Api) -> None:
    client = signed_in(api, ADMIN_TOKEN)
    session_id = client.cookies[COOKIE]
    headers = {"Cookie": f'other="unterminated; weird=a\\b; {COOKIE}={session_id}'}

    answer = browser(api).get("/ui/", headers=headers)

    assert answer.status_code == 200


def test_login_over_https_marks_the_cookie_secure(api: Api) -> None:
    client = browser(api)
    client.base_url = client.base_url.copy_with(scheme="https")

    answer = client.post("/ui/login", data={"token": ADMIN_TOKEN})

    assert "Secure" in answer.headers["set-cookie"]


def test_login_refuses_a_wrong_token_in_words_and_an_outside_next(api: Api) -> None:
    client = browser(api)

    wrong = client.post("/ui/login", data={"token": "gf_not-a-token"})
    assert wrong.status_code == 401
    assert "invalid or revoked token" in wrong.text
    assert COOKIE not in wrong.headers.get("set-cookie", "")
    outside = client.post("/ui/login?next=//evil.example/", data={"token": ADMIN_TOKEN})
    assert outside.headers["location"] == "/ui/"


def test_a_cross_site_login_is_refused(api: Api) -> None:
    answer = browser(api).post(
        "/ui/login", data={"token": ADMIN_TOKEN}, headers={"Origin": "https://evil.example"}
    )

    assert answer.status_code == 403


def test_state_changing_requests_need_the_sessions_csrf_token_and_this_origin(api: Api) -> None:
    add_cluster(api, "east")
    add_app(api, "shop")
    client = signed_in(api, ADMIN_TOKEN)
    csrf = csrf_of(client, "/ui/apps/shop")

    missing = client.post("/ui/apps/shop/sync", data={})
    wrong = client.post("/ui/apps/shop/sync", data={"csrf": "forged"})
    other_site = client.post(
        "/ui/apps/shop/sync", data={"csrf": csrf}, headers={"Origin": "https://evil.example"}
    )
    assert [r.status_code for r in (missing, wrong, other_site)] == [403, 403, 403]
    assert "CSRF" in missing.text and api.dispatcher.calls == []

    by_form = client.post("/ui/apps/shop/sync", data={"csrf": csrf})
    by_header = client.post(
        "/ui/apps/shop/sync",
        headers={
            "X-CSRF-Token": csrf,
            "Accept": "application/json",
            "Origin": str(client.base_url).rstrip("/"),
        },
    )
    assert by_form.status_code == 303 and by_form.headers["location"] == "/ui/apps/shop"
    assert by_header.status_code == 200 and "sync requested" in by_header.json()["message"]
    assert [(c["app"], c["trigger"], c["dry_run"]) for c in api.dispatcher.calls] == [
        ("shop", "manual", False),
        ("shop", "manual", False),
    ]


def test_logout_deletes_the_session(api: Api) -> None:
    client = signed_in(api, ADMIN_TOKEN)
    session_id = client.cookies[COOKIE]
    csrf = csrf_of(client)

    answer = client.post("/ui/logout", data={"csrf": csrf})

    assert answer.status_code == 303 and answer.headers["location"] == "/ui/login"
    assert api.store.redis.get(api.store.keys.ui_session(session_id)) is None
    replay = browser(api)
    replay.cookies.set(COOKIE, session_id)
    assert replay.get("/ui/").status_code == 303


def test_a_viewer_can_sign_out(api: Api) -> None:
    client = signed_in(api, token_for(api, "dashboard", "viewer"))

    answer = client.post("/ui/logout", data={"csrf": csrf_of(client)})

    assert answer.status_code == 303


def test_revoking_the_token_ends_its_sessions_at_once(api: Api) -> None:
    token = token_for(api, "alice", "admin")
    client = signed_in(api, token)
    assert client.get("/ui/").status_code == 200

    assert api.client.delete("/api/v1/tokens/alice").status_code == 204

    assert client.get("/ui/").status_code == 303
