"""The Redis key layout is pinned: stored data and running workers depend on every byte of it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fleet.control.keys import Keys, Queues

KEYS: dict[str, Callable[[Keys], str]] = {
    "gitfleet:*": lambda k: k.pattern,
    "gitfleet:registry:generation": lambda k: k.generation,
    "gitfleet:registry:app-changes": lambda k: k.app_changes,
    "gitfleet:registry:app-changes-floor": lambda k: k.app_changes_floor,
    "gitfleet:clusters": lambda k: k.clusters,
    "gitfleet:projects": lambda k: k.projects,
    "gitfleet:apps": lambda k: k.apps,
    "gitfleet:cluster:east": lambda k: k.cluster("east"),
    "gitfleet:project:team-a": lambda k: k.project("team-a"),
    "gitfleet:app:shop": lambda k: k.app("shop"),
    "gitfleet:cluster-credentials:east": lambda k: k.cluster_credentials("east"),
    "gitfleet:app-credentials:shop": lambda k: k.app_credentials("shop"),
    "gitfleet:repositories": lambda k: k.repositories,
    "gitfleet:repository:team-a-git": lambda k: k.repository("team-a-git"),
    "gitfleet:repository-credentials:team-a-git": lambda k: k.repository_credentials("team-a-git"),
    "gitfleet:secret-key": lambda k: k.secret_key,
    "gitfleet:tokens": lambda k: k.tokens,
    "gitfleet:token:9f86d0": lambda k: k.token("9f86d0"),
    "gitfleet:bootstrap-token-generated": lambda k: k.bootstrap,
    "gitfleet:status:shop": lambda k: k.status("shop"),
    "gitfleet:history:shop:east": lambda k: k.history("shop", "east"),
    "gitfleet:operation:shop": lambda k: k.operation("shop"),
    "gitfleet:ui-session:s3ss10n": lambda k: k.ui_session("s3ss10n"),
    "gitfleet:stats:syncs": lambda k: k.sync_counts,
    "gitfleet:stats:duration:sync": lambda k: k.sync_durations,
    "gitfleet:stats:duration:stage:render": lambda k: k.stage_durations("render"),
    "gitfleet:synced:github.com/acme/shop": lambda k: k.synced("github.com/acme/shop"),
    "gitfleet:pushes:github.com/acme/shop:refs/heads/main": lambda k: k.pushes(
        "github.com/acme/shop", "refs/heads/main"
    ),
    "gitfleet:pushes:github.com/acme/shop:refs/heads/main:team-a": lambda k: k.pushes(
        "github.com/acme/shop", "refs/heads/main", "team-a"
    ),
    "gitfleet:delivery:72d3162e-cc78": lambda k: k.delivery("72d3162e-cc78"),
    "gitfleet:project-webhook-secret:team-a": lambda k: k.project_webhook_secret("team-a"),
    "gitfleet:project-age-key:team-a": lambda k: k.project_age_key("team-a"),
    "gitfleet:notify:subscriptions": lambda k: k.notify("subscriptions"),
    "gitfleet:appset:set:web": lambda k: k.appset("set:web"),
    "gitfleet:plan:id:abc": lambda k: k.plan("id:abc"),
    "gitfleet:commit-clock:stats": lambda k: k.commit_clock("stats"),
    "gitfleet:workers": lambda k: k.workers,
    "gitfleet:worker:w1": lambda k: k.worker("w1"),
    "gitfleet:lease:shop@east": lambda k: k.lease("shop@east"),
    "gitfleet:fence:shop@east": lambda k: k.fence("shop@east"),
    "gitfleet:pending": lambda k: k.pending_index,
    "gitfleet:pending:shop@east": lambda k: k.pending("shop@east"),
    "gitfleet:deferred": lambda k: k.deferred,
    "gitfleet:deferred-intents": lambda k: k.deferred_intents,
    "gitfleet:checks": lambda k: k.checks_index,
    "gitfleet:checks:w-a": lambda k: k.checks("w-a"),
    "gitfleet:check-intents:w-a": lambda k: k.check_intents("w-a"),
    "gitfleet:check-result:check-shop_40east-0a1b": lambda k: k.check_result(
        "check-shop_40east-0a1b"
    ),
    "gitfleet:scheduler:lease:coordinator": lambda k: k.scheduler_lease("coordinator"),
    "gitfleet:scheduler:last": lambda k: k.scheduler_last,
    "gitfleet:scheduler:blocked": lambda k: k.scheduler_blocked,
    "gitfleet:rollouts": lambda k: k.rollouts,
    "gitfleet:rollout:shop": lambda k: k.rollout("shop"),
    "gitfleet:rollout-pins:shop": lambda k: k.rollout_pins("shop"),
    "gitfleet:journal": lambda k: k.journal,
}


@pytest.mark.parametrize(("expected", "build"), KEYS.items(), ids=list(KEYS))
def test_each_key_keeps_its_stored_layout(expected: str, build: Callable[[Keys], str]) -> None:
    assert build(Keys()) == expected


def test_every_key_starts_with_the_prefix_it_was_given() -> None:
    assert Keys("t1").cluster("east") == "t1:cluster:east"
    assert Keys("t1").workers == "t1:workers"
    assert Keys("t1").p == "t1"


def test_the_stage_histograms_scan_pattern_matches_only_stage_histograms() -> None:
    assert Keys().stage_durations("*") == "gitfleet:stats:duration:stage:*"


def test_every_key_the_class_offers_is_pinned_here() -> None:
    """A key added to `Keys` without a line above fails here, so the layout stays pinned."""
    keys = Keys()
    offered = {n for n in (*vars(keys), *vars(Keys)) if not n.startswith("_")} - {"p"}
    pinned: list[str] = []
    for build in KEYS.values():
        build(_Recorder(keys, pinned))  # type: ignore[arg-type]
    assert offered == set(pinned)


class _Recorder:
    """Stands in for `Keys` and notes which member a builder in `KEYS` reads."""

    def __init__(self, keys: Keys, seen: list[str]) -> None:
        self._keys, self._seen = keys, seen

    def __getattr__(self, name: str) -> object:
        self._seen.append(name)
        return getattr(self._keys, name)


def test_each_worker_has_one_queue_named_after_it() -> None:
    queues = Queues()
    assert queues.shard("w1") == "gitfleet-shard-w1"
    assert queues.worker_of("gitfleet-shard-w1") == "w1"
    assert queues.rq_pattern == "rq:*gitfleet-shard-*"
    assert Queues("t1").shard("w-b") == "t1-shard-w-b"
    assert Queues("t1").worker_of("t1-shard-w-b") == "w-b"
