"""`fleet.gcwatch.CollectionWatch` with the real collector: a slow full collection freezes its
survivors, a fast one does not, and the periodic refresh unfreezes them for one full walk."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from fleet.gcwatch import CollectionWatch


class Clock:
    """A full collection "takes" `step` seconds: the watch reads the clock at start and stop."""

    def __init__(self, step: float) -> None:
        self.now = 0.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def _collect_watched(watch: CollectionWatch, *generations: int) -> None:
    """Run the collections with `watch` installed (a full one when none is named)."""
    watch.install()
    try:
        for generation in generations or (2,):
            gc.collect(generation)
    finally:
        watch.uninstall()


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_a_slow_full_collection_freezes_what_survived_it(unfrozen: None) -> None:
    kept = [{"app": i, "spec": [i]} for i in range(20_000)]
    watch = CollectionWatch(slow_s=0.5, refresh_s=1e9, clock=Clock(step=1.0))
    _collect_watched(watch)

    assert watch.freezes == 1
    assert gc.get_freeze_count() >= len(kept)
    # the survivors left the walked generations: a collection now sees only what is new
    assert not any(o is kept or o is kept[0] for o in gc.get_objects(generation=2))


def test_slow_collections_close_together_freeze_once(unfrozen: None) -> None:
    """A client that makes full collections slow on purpose gets one freeze per gap, so only
    that many sets of its requests' cycles are pinned until the refresh."""
    watch = CollectionWatch(slow_s=0.5, refresh_s=1e9, min_gap_s=1e9, clock=Clock(step=1.0))
    _collect_watched(watch, 2, 2, 2)

    assert watch.freezes == 1


def test_a_fast_full_collection_or_a_young_one_freezes_nothing(unfrozen: None) -> None:
    watch = CollectionWatch(slow_s=0.5, refresh_s=1e9, clock=Clock(step=0.001))
    _collect_watched(watch, 2, 0)

    assert watch.freezes == 0
    assert gc.get_freeze_count() == 0


def test_the_refresh_unfreezes_so_the_next_full_collection_walks_everything(
    unfrozen: None,
) -> None:
    kept = [[i] for i in range(5_000)]
    gc.freeze()
    assert gc.get_freeze_count() >= len(kept)
    watch = CollectionWatch(slow_s=1e9, refresh_s=0.5, clock=Clock(step=1.0))
    _collect_watched(watch)

    assert watch.refreshes == 1
    assert gc.get_freeze_count() == 0


def test_install_is_idempotent_and_uninstall_removes_the_hook() -> None:
    watch = CollectionWatch()
    watch.install().install()
    assert gc.callbacks.count(watch) == 1
    watch.uninstall()
    assert watch not in gc.callbacks
