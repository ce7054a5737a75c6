"""Registry records survive their JSON form, and old records read with new defaults."""

from __future__ import annotations

import json

from fleet.control.registry import records
from fleet.control.registry.records import (
    AppDestination,
    AppRecord,
    AppSource,
    ClusterCredentials,
    ClusterRecord,
    HelmSource,
    IgnoreDifference,
    RetryPolicy,
    Role,
    SyncPolicy,
    TokenRecord,
)
from fleet.control.windows import SyncWindow


def test_an_app_record_with_every_nested_field_round_trips_through_json() -> None:
    window = SyncWindow("deny", "0 22 * * *", "1h", "Europe/Berlin", True, ("shop-*",))
    app = AppRecord(
        name="shop",
        project="team",
        source=AppSource(
            "https://g/x.git", "deploy", "v1", HelmSource("a: 1", ("v.yaml",), {"k": "v"})
        ),
        destination=AppDestination("shop", selector={"env": "prod"}),
        sync_policy=SyncPolicy(
            automated=True,
            retry=RetryPolicy(3, 1.0, 1.5, 60.0),
            sync_windows=(window,),
            ignore_differences=(IgnoreDifference(("/spec/replicas",), ("hpa",)),),
        ),
        depends_on=("db",),
    )

    assert records.from_json(AppRecord, records.to_json(app)) == app


def test_a_record_written_without_newer_fields_reads_with_their_defaults() -> None:
    old = {"name": "shop", "source": {"repo": "r"}, "destination": {"namespace": "n"}, "gone": 1}

    app = records.from_json(AppRecord, json.dumps(old))

    assert app.sync_policy == SyncPolicy()
    assert app.destination.selector is None
    assert app.depends_on == ()


def test_token_roles_come_back_as_the_enum() -> None:
    token = records.from_json(TokenRecord, records.to_json(TokenRecord("ci", Role.MEMBER, "team")))

    assert token.role is Role.MEMBER


def test_cluster_selectors_match_on_every_label_and_an_empty_one_matches_all() -> None:
    cluster = ClusterRecord("east", "https://e", {"env": "prod", "region": "eu"})

    assert cluster.matches({"env": "prod"})
    assert not cluster.matches({"env": "prod", "region": "us"})
    assert cluster.matches({})


def test_credentials_never_show_in_their_repr() -> None:
    creds = ClusterCredentials(kubeconfig="token: abc", server="https://s", token="t0ken")

    assert "abc" not in repr(creds) and "t0ken" not in repr(creds)
