"""Retry delays and reconcile intervals, spread so a fleet does not move in lockstep.

Two kinds of spreading, for two different problems:

- `delay` is exponential backoff for a failing sync. Random jitter (the AWS "full"/"equal"
  jitter family, chosen with `jitter`) keeps many applications that failed together, say when a
  cluster went away, from all retrying at the same instant when it comes back. The randomness is
  injected (`rand`) so tests pass a fixed value.
- `next_due` schedules the periodic reconcile. Its jitter is derived from the application's key,
  not drawn at random: each application keeps its own, stable interval, so 10,000 applications
  registered in the same second drift apart and stay spread, and a restart or a second
  coordinator computes the same due time (a random draw would reshuffle them every cycle).

Both are pure functions of their arguments (no clock, no sleeping).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable


def delay(
    attempt: int,
    *,
    base: float,
    factor: float = 2.0,
    max_delay: float,
    jitter: float = 0.0,
    rand: Callable[[], float] = random.random,
) -> float:
    """Seconds to wait before retry number `attempt` (0 for the first retry).

    The delay grows as base * factor**attempt up to `max_delay`; `jitter` (0..1) then takes off
    a random share of up to `jitter` of it: 0 keeps it exact, 0.5 is "equal jitter" (between half
    and the full delay), 1 is "full jitter" (anywhere up to the full delay). The result never
    exceeds `max_delay`.
    """
    _check_delay(attempt, base=base, factor=factor, max_delay=max_delay, jitter=jitter)
    try:
        grown = base * factor**attempt
    except OverflowError:
        grown = max_delay
    return min(grown, max_delay) * (1.0 - jitter * rand())


def _check_delay(
    attempt: int, *, base: float, factor: float, max_delay: float, jitter: float
) -> None:
    if attempt < 0:
        raise ValueError(f"attempt: must be 0 or more, got {attempt}")
    if base < 0 or max_delay < 0:
        raise ValueError(f"base and max_delay: must not be negative, got {base}, {max_delay}")
    if factor < 1:
        raise ValueError(f"factor: must be at least 1, got {factor}")
    if not 0 <= jitter <= 1:
        raise ValueError(f"jitter: must be between 0 and 1, got {jitter}")


def next_due(last: float, interval: float, *, jitter_share: float, key: str) -> float:
    """When the application `key`, last reconciled at `last`, is due again.

    The interval is stretched or shrunk by up to `jitter_share` (0..1, exclusive of 1) by a
    fixed amount per key, so the mean interval over many applications stays `interval`.
    """
    if interval <= 0:
        raise ValueError(f"interval: must be positive, got {interval}")
    if not 0 <= jitter_share < 1:
        raise ValueError(f"jitter_share: must be at least 0 and below 1, got {jitter_share}")
    return last + interval * (1.0 + jitter_share * (2.0 * spread(key) - 1.0))


def spread(key: str) -> float:
    """A stable number in [0, 1) for `key`, the same in every process (blake2b, not hash())."""
    digest = hashlib.blake2b(key.encode(), digest_size=8, person=b"gitfleet-due").digest()
    return (int.from_bytes(digest, "big") >> 11) / float(1 << 53)
