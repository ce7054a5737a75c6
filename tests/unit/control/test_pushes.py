"""Which instances a push cannot change: the file list of a payload and the chain of pushes."""

from __future__ import annotations

import dataclasses
import random

from fleet.control.pushes import Push, Specs, SyncedAt, changed_paths, spec_of, touches, unaffected
from fleet.control.registry.records import AppDestination, AppRecord, AppSource

A, B, C, D = ("a" * 40, "b" * 40, "c" * 40, "d" * 40)


def commit(*, added=(), modified=(), removed=()) -> dict[str, list[str]]:
    return {"added": list(added), "modified": list(modified), "removed": list(removed)}


def test_changed_paths_joins_every_commits_lists():
    payload = {
        "commits": [commit(modified=["apps/a/cm.yaml"]), commit(added=["x"], removed=["y/z"])]
    }
    assert changed_paths(payload) == {"apps/a/cm.yaml", "x", "y/z"}


def test_changed_paths_is_unknown_when_the_payload_cannot_tell():
    one = [commit(modified=["a"])]
    assert changed_paths({}) is None  # no commits listed (GitLab tag push, Bitbucket, ...)
    assert changed_paths({"commits": one, "forced": True}) is None  # history was rewritten
    assert changed_paths({"commits": [commit(modified=["a"])] * 20}) is None  # GitHub's cap
    assert changed_paths({"commits": one, "size": 3}) is None  # more commits than listed
    assert changed_paths({"commits": [{"modified": ["a"]}]}) is None  # lists missing


def test_touches_matches_whole_path_segments_and_the_repo_root():
    assert touches(["apps/a/cm.yaml"], ["apps/a"])
    assert touches(["base/deploy.yaml"], ["apps/a", "base"])
    assert not touches(["apps/ab/cm.yaml"], ["apps/a"])  # a sibling with a longer name
    assert not touches(["apps/b/cm.yaml"], ["apps/a"])
    assert touches(["anything"], ["."])
    assert touches(["anything"], [])  # inputs unknown: assume it may matter
    assert touches(["apps/a/"], ["/apps/a/"]) and not touches(["/apps/a"], ["apps/a"])


def _touches_by_prefix_test(paths: list[str], inputs: list[str]) -> bool:
    """The rule as first written: one prefix test per changed file and input."""
    roots = [i.strip("/") for i in inputs]
    if not roots or any(r in ("", ".") for r in roots):
        return True
    return any(p == r or p.startswith(f"{r}/") for p in paths for r in roots)


def test_touches_by_directory_set_agrees_with_the_prefix_test_on_random_paths():
    chosen = random.Random(16)
    parts = ["apps", "a", "ab", "b", "base", "", "cm.yaml", "."]

    def path() -> str:
        return "/".join(chosen.choice(parts) for _ in range(chosen.randint(1, 4)))

    for _ in range(5000):
        paths = [path() for _ in range(chosen.randint(0, 3))]
        inputs = [path() for _ in range(chosen.randint(0, 3))]
        assert touches(paths, inputs) == _touches_by_prefix_test(paths, inputs), (paths, inputs)


def same_specs(synced: dict[str, SyncedAt]) -> dict[str, str]:
    return {instance: at.spec for instance, at in synced.items()}


def test_an_instance_is_unaffected_only_when_no_push_since_its_commit_touched_its_inputs():
    chain = [Push(C, D, frozenset({"apps/b/cm.yaml"})), Push(B, C, frozenset({"apps/a/x"}))]
    synced = {
        "a-at-c@east": SyncedAt(C, ("apps/a",), "s1"),  # only D's push since: it touched apps/b
        "a-at-b@east": SyncedAt(B, ("apps/a",), "s1"),  # both pushes since: apps/a changed
        "b-at-c@east": SyncedAt(C, ("apps/b",), "s1"),
        "c-at-b@east": SyncedAt(B, ("apps/c", "base"), "s1"),
        "c-at-a@east": SyncedAt(A, ("apps/c",), "s1"),  # before the recorded chain: unknown
        "d-at-d@east": SyncedAt(D, ("apps/b",), "s1"),  # already at the pushed commit
        "e-no-inputs@east": SyncedAt(C, (), "s1"),
    }
    specs = same_specs(synced)
    assert unaffected(chain, D, synced, specs) == {"a-at-c@east", "c-at-b@east", "d-at-d@east"}
    specs["a-at-c@east"] = "s2"  # the app record changed since that sync (a new path?)
    assert unaffected(chain, D, synced, specs) == {"c-at-b@east", "d-at-d@east"}


def test_a_gap_in_the_chain_ends_what_is_known():
    chain = [Push(C, D, frozenset({"apps/b/x"})), Push(A, B, frozenset({"apps/b/y"}))]
    synced = {"at-c@e": SyncedAt(C, ("apps/a",)), "at-a@e": SyncedAt(A, ("apps/a",))}
    specs = same_specs(synced)
    assert unaffected(chain, D, synced, specs) == {"at-c@e"}  # nothing recorded from B to C
    # a chain that does not end at the given commit tells nothing: only what is already there
    assert unaffected(chain, C, synced, specs) == {"at-c@e"}


def test_the_spec_hash_ignores_timestamps_and_sees_every_other_field():
    app = AppRecord(
        "shop", AppSource(repo="https://g/x.git", path="apps/shop"), AppDestination("shop")
    )
    assert spec_of(app) == spec_of(dataclasses.replace(app, updated="2026-11-29T20:00:00"))
    moved = dataclasses.replace(app, source=AppSource(repo="https://g/x.git", path="apps/new"))
    assert spec_of(moved) != spec_of(app)


def test_remembered_specs_follow_a_replaced_record():
    app = AppRecord(
        "shop", AppSource(repo="https://g/x.git", path="apps/shop"), AppDestination("shop")
    )
    specs = Specs()
    assert specs.of(app) == spec_of(app)
    moved = dataclasses.replace(app, source=AppSource(repo="https://g/x.git", path="apps/new"))
    specs.keep([moved])
    assert specs.of(moved) == spec_of(moved) != specs.of(app) == spec_of(app)
