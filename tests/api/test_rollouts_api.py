"""The `rollout` of an app body and the rollout endpoints, through the real API and Redis."""

from __future__ import annotations

from typing import Any

from tests.api.conftest import Api, add_app, add_cluster, app_body

ROLLOUT = {
    "pollInterval": "10s",
    "steps": [
        {"matchLabels": {"ring": "canary"}, "pause": {"untilPromoted": True}},
        {"maxParallel": "50%", "pause": {"duration": "5m"}},
        {"maxParallel": 2},
        {},
    ],
}
SELECTOR = {"namespace": "shop", "clusterSelector": {"env": "prod"}}


def test_a_rollout_round_trips_through_get(api: Api) -> None:
    add_cluster(api, "east", {"env": "prod"})
    add_app(api, "shop", destination=SELECTOR, rollout=ROLLOUT)
    got: dict[str, Any] = api.client.get("/api/v1/apps/shop").json()["spec"]
    steps = got["rollout"]["steps"]
    assert got["rollout"]["pollInterval"] == 10.0
    assert steps[0]["pause"] == {"duration": None, "untilPromoted": True}
    assert steps[1]["maxParallel"] == "50%" and steps[1]["pause"]["duration"] == 300.0
    assert steps[2]["maxParallel"] == "2" and steps[3] == {
        "matchLabels": {},
        "maxParallel": "",
        "pause": None,
    }
    again = api.client.put("/api/v1/apps/shop", json={**got, "name": "shop"})
    assert again.status_code == 200, again.text
    assert again.json()["spec"]["rollout"] == got["rollout"]


def test_a_bad_step_is_refused_naming_the_field(api: Api) -> None:
    add_cluster(api, "east", {"env": "prod"})
    bad = {"steps": [{"maxParallel": "150%"}]}
    answer = api.client.post(
        "/api/v1/apps", json=app_body("shop", rollout=bad, destination=SELECTOR)
    )
    assert answer.status_code == 422 and "maxParallel" in answer.text
    both = {"steps": [{"pause": {"duration": "1m", "untilPromoted": True}}]}
    answer = api.client.post(
        "/api/v1/apps", json=app_body("shop", rollout=both, destination=SELECTOR)
    )
    assert answer.status_code == 422 and "untilPromoted" in answer.text


def test_the_endpoints_say_what_does_not_fit(api: Api) -> None:
    add_cluster(api, "east", {"env": "prod"})
    add_app(api, "plain")
    assert api.client.get("/api/v1/apps/plain/rollout").status_code == 404
    add_app(api, "shop", destination=SELECTOR, rollout=ROLLOUT)
    status = api.client.get("/api/v1/apps/shop/rollout").json()
    assert status["phase"] is None and status["pins"] == {}  # the coordinator has not looked
    refused = api.client.post("/api/v1/apps/shop/rollout/promote")
    assert refused.status_code == 409 and "no rollout yet" in refused.text
