"""`Placement` keeps `assign`'s exact answer while applications come and go.

Each step compares the kept map with `assign` over the same set, for load factors where the
bound rarely binds (1.25: the incremental path) and where it binds all the time (1.0: walks,
so full recomputations), so a shortcut that diverged from `assign` even once would fail here.
"""

from __future__ import annotations

import random

import pytest

from fleet.control.routing.sharding import NoWorkers, Placement, assign


def _names(rng: random.Random, count: int) -> list[str]:
    return [f"app-{rng.randrange(10**9)}@cluster-{rng.randrange(3)}" for _ in range(count)]


@pytest.mark.parametrize(("workers", "c"), [(1, 1.25), (3, 1.25), (5, 1.25), (4, 1.0), (3, 1.1)])
def test_every_change_leaves_the_map_assign_would_compute(workers: int, c: float) -> None:
    rng = random.Random(workers * 100 + int(c * 100))
    names = [f"worker-{i}" for i in range(workers)]
    apps = set(_names(rng, 300))
    placement = Placement(sorted(apps), names, c=c, vnodes=50)
    assert placement.placed == assign(sorted(apps), names, c=c, vnodes=50)
    for _ in range(200):
        removed = rng.sample(sorted(apps), k=rng.randrange(0, 3))
        added = _names(rng, rng.randrange(0, 3))
        placement.update(added, removed)
        apps = (apps - set(removed)) | set(added)
        assert placement.placed == assign(sorted(apps), names, c=c, vnodes=50)


@pytest.mark.parametrize(("workers", "c"), [(3, 1.25), (4, 1.0)])
def test_an_unplaced_instance_gets_the_owner_it_would_have_once_added(
    workers: int, c: float
) -> None:
    rng = random.Random(workers)
    names = [f"worker-{i}" for i in range(workers)]
    apps = _names(rng, 200)
    placement = Placement(apps, names, c=c, vnodes=50)
    for app in _names(rng, 50):
        assert placement.owner_if_added(app) == assign([*apps, app], names, c=c, vnodes=50)[app]
    assert placement.placed == assign(apps, names, c=c, vnodes=50)  # asking changed nothing


def test_the_common_case_recomputes_nothing() -> None:
    """At 1.25 with fair loads, an add or remove moves no other application's owner."""
    rng = random.Random(5)
    names = [f"worker-{i}" for i in range(3)]
    apps = _names(rng, 3000)
    placement = Placement(apps, names)
    assert placement.walked == 0
    before = dict(placement.placed)
    placement.update(["new-app@cluster-0"], [apps[0]])
    changed = {a for a in before if a in placement.placed and before[a] != placement.placed[a]}
    assert changed == set()


def test_no_workers_is_the_retryable_error() -> None:
    with pytest.raises(NoWorkers):
        Placement(["a@c"], [])
