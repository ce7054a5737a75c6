"""Retry backoff grows and caps; reconcile due times spread per application and stay stable."""

from __future__ import annotations

import statistics
import subprocess
import sys

import pytest

from fleet.control.backoff import delay, next_due, spread
from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT


@pytest.mark.parametrize(
    ("attempt", "expected"),
    [(0, 5.0), (1, 10.0), (2, 20.0), (3, 40.0), (6, 180.0), (10_000, 180.0)],
)
def test_delay_doubles_until_the_cap(attempt: int, expected: float) -> None:
    assert delay(attempt, base=5, max_delay=180) == expected


def test_delay_uses_the_given_factor() -> None:
    assert delay(2, base=1, factor=3, max_delay=100) == 9


@pytest.mark.parametrize(
    ("jitter", "draw", "expected"),
    [(0.0, 0.99, 40.0), (0.5, 0.0, 40.0), (0.5, 0.5, 30.0), (1.0, 0.75, 10.0), (1.0, 0.0, 40.0)],
)
def test_jitter_takes_off_up_to_its_share(jitter: float, draw: float, expected: float) -> None:
    assert delay(3, base=5, max_delay=180, jitter=jitter, rand=lambda: draw) == expected


def test_jittered_delay_never_exceeds_the_cap() -> None:
    assert delay(50, base=5, max_delay=180, jitter=0.3, rand=lambda: 0.0) == 180


@pytest.mark.parametrize(
    ("attempt", "base", "factor", "jitter", "message"),
    [
        (-1, 5.0, 2.0, 0.0, "attempt: must be 0 or more"),
        (1, -1.0, 2.0, 0.0, "base and max_delay: must not be negative"),
        (1, 5.0, 0.5, 0.0, "factor: must be at least 1"),
        (1, 5.0, 2.0, 1.5, "jitter: must be between 0 and 1"),
    ],
)
def test_delay_rejects_invalid_arguments(
    attempt: int, base: float, factor: float, jitter: float, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        delay(attempt, base=base, factor=factor, max_delay=60.0, jitter=jitter)


def test_next_due_stays_within_the_jitter_share() -> None:
    dues = [next_due(1000.0, 180.0, jitter_share=0.1, key=f"shop-{i}") for i in range(2000)]
    assert min(dues) >= 1000 + 162
    assert max(dues) < 1000 + 198
    assert abs(statistics.mean(dues) - 1180) < 1.5


def test_next_due_spreads_apps_registered_together() -> None:
    dues = {round(next_due(0.0, 180.0, jitter_share=0.1, key=f"shop-{i}")) for i in range(1000)}
    assert len(dues) == 37  # every whole second from 162 to 198 is used


def test_next_due_is_the_same_for_an_app_every_time() -> None:
    # spread("shop-cart") is 0.5085416296561949: 50 + 60 * (1 + 0.2 * (2 * spread - 1))
    for _ in range(2):
        assert next_due(50.0, 60.0, jitter_share=0.2, key="shop-cart") == 110.20499911174866
    assert next_due(50.0, 60.0, jitter_share=0.0, key="shop-cart") == 110.0


def test_spread_is_identical_in_a_process_with_another_hash_seed() -> None:
    code = "from fleet.control.backoff import spread; print(repr(spread('shop-cart')))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONHASHSEED": "7", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert float(out) == spread("shop-cart") == 0.5085416296561949


@pytest.mark.parametrize(
    ("interval", "share", "message"),
    [
        (0.0, 0.1, "interval: must be positive"),
        (60.0, 1.0, "jitter_share: must be at least 0 and below 1"),
        (60.0, -0.1, "jitter_share"),
    ],
)
def test_next_due_rejects_invalid_arguments(interval: float, share: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        next_due(0.0, interval, jitter_share=share, key="shop")
