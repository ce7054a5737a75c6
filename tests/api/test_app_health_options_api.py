"""An app's health choices through the API: `syncPolicy.ingressNeedsAddress` and
`syncPolicy.customResourceHealth` are stored on the record, shown back as sent, default to
gitfleet's behaviour, and reach the engine's request (`fleet.control.policy.request_for`)."""

from __future__ import annotations

from fleet.control.policy import request_for
from fleet.engine.health.assess import HealthOptions
from fleet.model import Trigger
from tests.api.conftest import Api, add_app, add_cluster

MANUAL = Trigger.MANUAL


def test_the_health_options_are_stored_shown_and_passed_to_the_sync(api: Api) -> None:
    add_cluster(api, "east")
    policy = {"ingressNeedsAddress": True, "customResourceHealth": False}

    created = add_app(api, "strict", syncPolicy=policy)
    plain = add_app(api, "plain")

    assert created["spec"]["syncPolicy"]["ingressNeedsAddress"] is True
    assert created["spec"]["syncPolicy"]["customResourceHealth"] is False
    assert plain["spec"]["syncPolicy"]["ingressNeedsAddress"] is False
    assert plain["spec"]["syncPolicy"]["customResourceHealth"] is True
    shown = api.client.get("/api/v1/apps/strict").json()["spec"]["syncPolicy"]
    assert (shown["ingressNeedsAddress"], shown["customResourceHealth"]) == (True, False)
    record = api.store.get_app("strict")
    request = request_for(record, api.store.get_project(record.project), "east", trigger=MANUAL)
    assert request.health == HealthOptions(ingress_needs_address=True, custom_resource_health=False)


def test_a_health_option_that_is_not_a_boolean_is_refused_naming_the_field(api: Api) -> None:
    add_cluster(api, "east")

    response = api.client.post(
        "/api/v1/apps",
        json={
            "name": "bad",
            "source": {"repo": "https://git.example.com/team/shop.git", "path": "deploy"},
            "destination": {"cluster": "east", "namespace": "shop"},
            "syncPolicy": {"ingressNeedsAddress": "sometimes"},
        },
    )

    assert response.status_code == 422
    assert "body.syncPolicy.ingressNeedsAddress" in response.text
