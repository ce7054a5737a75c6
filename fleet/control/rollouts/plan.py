"""Which clusters each rollout step takes (pure).

Clusters are considered in name order. A step takes, of the clusters no earlier step took,
those matching its labels, at most `max_parallel` of them ("" all, "3" a count, "25%" a share
of the matching ones, rounded up, at least one). Clusters no step took form one last step,
so every instance reaches the new revision once every step passed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from fleet.control.registry.records import RolloutStep
from fleet.errors import UsageError


def parse_max_parallel(text: str) -> tuple[int, bool]:
    """(value, is_percentage) of a `max_parallel`; (0, False) for "" (no limit). Raises
    UsageError naming the field."""
    raw = text.strip()
    if not raw:
        return 0, False
    share = raw.endswith("%")
    number = raw[:-1].strip() if share else raw
    if not number.isdigit() or int(number) < 1 or (share and int(number) > 100):
        raise UsageError(
            f"rollout.steps[].maxParallel: {text!r} is not a count (1, 2, ...) or a percentage "
            "(1% to 100%)"
        )
    return int(number), share


def plan_steps(
    steps: Sequence[RolloutStep], clusters: Mapping[str, Mapping[str, str]]
) -> list[list[str]]:
    """The clusters of each step, from `clusters` (name -> labels); a step that takes none is
    kept (empty), and the clusters no step took are added as a last step."""
    left = sorted(clusters)
    planned: list[list[str]] = []
    for step in steps:
        matching = [c for c in left if _matches(clusters[c], step.match_labels)]
        value, share = parse_max_parallel(step.max_parallel)
        if value:
            limit = max(1, math.ceil(len(matching) * value / 100)) if share else value
            matching = matching[:limit]
        planned.append(matching)
        left = [c for c in left if c not in matching]
    if left:
        planned.append(left)
    return planned


def _matches(labels: Mapping[str, str], wanted: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in wanted.items())
