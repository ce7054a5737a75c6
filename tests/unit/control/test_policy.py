"""From an AppRecord and its project to the engine's SyncRequest; repo URL normal forms."""

from __future__ import annotations

from dataclasses import replace

import pytest

from api.routes.webhooks import revision_matches
from fleet.control.policy import check_app_allowed, repo_allowed, request_for
from fleet.control.registry.records import (
    DEFAULT_PROJECT,
    AppDestination,
    AppRecord,
    AppSource,
    Destination,
    HelmSource,
    IgnoreDifference,
    ProjectRecord,
    SyncPolicy,
)
from fleet.control.registry.repos import normalize_repo
from fleet.engine.source.cache import GitCredentials
from fleet.model import Trigger


@pytest.mark.parametrize(
    ("url", "normal"),
    [
        ("https://github.com/acme/shop.git", "github.com/acme/shop"),
        ("https://user:pw@GitHub.com/acme/shop/", "github.com/acme/shop"),
        ("git@github.com:acme/shop.git", "github.com/acme/shop"),
        ("ssh://git@github.com:22/acme/shop", "github.com/acme/shop"),
        ("http://127.0.0.1:8999/shop", "127.0.0.1:8999/shop"),
        ("file:///tmp/repos/shop/", "/tmp/repos/shop"),
    ],
)
def test_repository_urls_compare_in_a_normal_form(url: str, normal: str) -> None:
    assert normalize_repo(url) == normal


@pytest.mark.parametrize(
    ("revision", "ref", "matches"),
    [
        ("main", "refs/heads/main", True),
        ("refs/heads/main", "refs/heads/main", True),
        ("HEAD", "refs/heads/main", True),
        ("HEAD", "refs/heads/dev", False),
        ("dev", "refs/heads/main", False),
        ("v1.0", "refs/tags/v1.0", True),
        ("HEAD", "refs/tags/main", False),
    ],
)
def test_a_push_matches_the_apps_tracking_its_branch_or_tag(
    revision: str, ref: str, matches: bool
) -> None:
    assert revision_matches(revision, ref, "main") is matches


def shop(**kw: object) -> AppRecord:
    base = AppRecord(
        name="shop",
        source=AppSource(repo="https://github.com/acme/shop.git", path="/deploy/", revision="main"),
        destination=AppDestination(namespace="shop", cluster="east"),
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def test_request_for_maps_source_policy_helm_and_ignore_rules() -> None:
    helm = HelmSource(values_yaml="a: 1\n", value_files=("v.yaml",), parameters={"img": "x"})
    rules = (IgnoreDifference(("/spec/replicas",), ("hpa",)), IgnoreDifference(("/spec/replicas",)))
    policy = SyncPolicy(
        prune=True, allow_empty=True, create_namespace=True, ignore_differences=rules
    )
    app = shop(source=AppSource("https://g/x.git", "deploy", "main", helm), sync_policy=policy)
    creds = GitCredentials("bot", "pw")

    request = request_for(
        app, DEFAULT_PROJECT, "east", trigger=Trigger.WEBHOOK, revision="abc", credentials=creds
    )

    assert (request.app, request.repo, request.path, request.revision) == (
        "shop",
        "https://g/x.git",
        "deploy",
        "abc",
    )
    assert (request.prune, request.allow_empty, request.create_namespace) == (True, True, True)
    assert request.render.values == (("img", "x"),)
    assert request.render.values_yaml == ("a: 1\n",)
    assert request.render.values_files == ("v.yaml",)
    assert request.render.release_name == "shop"
    assert request.ignore.json_pointers == ("/spec/replicas",)
    assert request.ignore.managers == ("hpa",)
    assert request.credentials == creds and request.trigger == "webhook"


def test_the_default_project_lets_every_namespace_and_cluster_kind_through() -> None:
    request = request_for(shop(), DEFAULT_PROJECT, "east", trigger=Trigger.MANUAL)

    assert request.allowed_cluster_kinds is None
    assert request.allowed_namespaces == ("*",)
    assert request.path == "deploy"
    assert request.revision == "main"


def test_a_project_allows_namespaces_per_cluster_and_only_listed_cluster_kinds() -> None:
    project = ProjectRecord(
        "team",
        source_repos=("https://github.com/acme/*",),
        destinations=(Destination("prod-*", "shop"), Destination("*", "sandbox")),
        cluster_kinds=("Namespace",),
    )

    on_prod = request_for(shop(), project, "prod-eu", trigger=Trigger.MANUAL)
    on_lab = request_for(shop(), project, "lab", trigger=Trigger.MANUAL)

    assert on_prod.allowed_namespaces == ("shop", "sandbox")
    assert on_lab.allowed_namespaces == ("sandbox",)
    assert on_prod.allowed_cluster_kinds == frozenset({"Namespace"})
    assert check_app_allowed(shop(), project, ["prod-eu"]) == []
    assert len(check_app_allowed(shop(), project, ["prod-eu", "lab"])) == 1


def test_a_source_repo_glob_without_a_scheme_matches_the_https_and_ssh_urls_of_one_repo() -> None:
    project = ProjectRecord("team", source_repos=("github.com/acme/*",))

    assert repo_allowed(project, "ssh://git@github.com/acme/shop.git")
    assert repo_allowed(project, "https://github.com/acme/shop")
    assert not repo_allowed(project, "https://github.com/other/shop")
    assert not repo_allowed(ProjectRecord("empty"), "https://github.com/acme/shop")


def test_scp_like_addresses_and_local_paths_are_no_allowed_source() -> None:
    project = ProjectRecord("team", source_repos=("github.com/acme/*",))

    assert not repo_allowed(project, "git@github.com:acme/shop.git")
    assert not repo_allowed(project, "github.com/acme/../../var/cache/gitfleet")
    assert not repo_allowed(DEFAULT_PROJECT, "/var/cache/gitfleet/git/abc")
