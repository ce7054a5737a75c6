"""/subscriptions: who may subscribe to which project's events, and what answers show."""

from __future__ import annotations

from tests.api.conftest import Api, token_for, two_projects

SECRET = "subscription-hmac-secret"


def body(name: str, **scope: str) -> dict[str, object]:
    url = f"https://hooks.example.com/{name}/private-path"
    return {"name": name, "url": url, "secret": SECRET, **scope}


def test_members_subscribe_to_their_own_project_only_and_viewers_read(api: Api) -> None:
    two_projects(api)
    member = api.as_(token_for(api, "a-ci", "member", "team-a"))
    viewer = api.as_(token_for(api, "dash", "viewer"))

    def create(sent: dict[str, object], headers: dict[str, str] | None = None) -> int:
        answer = api.client.post("/api/v1/subscriptions", json=sent, headers=headers)
        return int(answer.status_code)

    assert create(body("a", project="team-a"), member) == 201
    assert create(body("b", project="team-b"), member) == 403
    assert create(body("b2", app="team-b-shop"), member) == 403
    assert create(body("b", app="team-b-shop")) == 201
    assert create(body("v", project="team-a"), viewer) == 403

    seen = api.client.get("/api/v1/subscriptions", headers=member).json()
    assert [s["name"] for s in seen] == ["a"]  # team-b's subscription is not shown
    assert api.client.get("/api/v1/subscriptions/b", headers=member).status_code == 404
    assert api.client.delete("/api/v1/subscriptions/b", headers=member).status_code == 404
    everything = api.client.get("/api/v1/subscriptions", headers=viewer)
    assert [s["name"] for s in everything.json()] == ["a", "b"]
    assert SECRET not in everything.text and "private-path" not in everything.text
    assert everything.json()[0]["url"] == "https://hooks.example.com/..."


def test_bad_subscriptions_are_refused_naming_the_field(api: Api) -> None:
    two_projects(api)
    cases = {
        "project": body("x"),  # neither project nor app
        "events": {**body("x", project="team-a"), "events": ["sync-exploded"]},
        "kind": {**body("x", project="team-a"), "kind": "email"},
        "no project named": body("x", project="team-z"),
        "secret": {**body("x", project="team-a"), "secret": ""},
    }
    for expected, sent in cases.items():
        answer = api.client.post("/api/v1/subscriptions", json=sent)
        assert answer.status_code == 422 and expected in answer.text, (expected, answer.text)
    first = api.client.post("/api/v1/subscriptions", json=body("x", project="team-a"))
    assert first.status_code == 201
    again = api.client.post("/api/v1/subscriptions", json=body("x", project="team-a"))
    assert again.status_code == 409
