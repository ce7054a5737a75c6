"""A sync's fingerprint is the same in every worker process: the next periodic check of another
process (or of this one after a restart) compares it, and an unequal one costs a full sync."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

from fleet.engine.contract import SyncRequest
from fleet.engine.fingerprint import fingerprint_of
from fleet.engine.plan.boundaries import Boundaries

ROOT = Path(__file__).resolve().parents[3]
PRINT_FINGERPRINT = """
from fleet.engine.fingerprint import fingerprint_of
from fleet.engine.contract import SyncRequest
from fleet.engine.plan.boundaries import Boundaries
kinds = frozenset(f"group{i}.example/Kind{i}" for i in range(12))
request = SyncRequest(
    app="shop", repo="https://git.example/r.git", path="apps/shop",
    prune_kinds_allowed=frozenset({"Namespace", "ClusterRole", "StorageClass", "PriorityClass"}),
    boundaries=Boundaries(namespaces=("shop-*",), cluster_kinds=kinds, project="p", cluster="c"),
)
print(fingerprint_of(request, "render-key"))
"""


def _fingerprint_with_seed(seed: int) -> str:
    env = {**os.environ, "PYTHONHASHSEED": str(seed), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", PRINT_FINGERPRINT],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return done.stdout.strip()


def test_the_fingerprint_does_not_depend_on_the_string_hash_seed() -> None:
    """Sets of strings iterate in an order that depends on PYTHONHASHSEED, which differs per
    process; a fingerprint built from their repr differed between two workers."""
    fingerprints = {_fingerprint_with_seed(seed) for seed in (1, 2, 3, 4)}
    assert len(fingerprints) == 1, fingerprints


def test_the_fingerprint_still_tells_different_knobs_apart() -> None:
    request = SyncRequest(app="x", repo="r", path="p", prune_kinds_allowed=frozenset({"A", "B"}))
    fewer = dataclasses.replace(request, prune_kinds_allowed=frozenset({"A"}))
    bounded = dataclasses.replace(request, boundaries=Boundaries(cluster_kinds=frozenset({"A"})))
    prints = {fingerprint_of(r, "k") for r in (request, fewer, bounded)}
    assert len(prints) == 3
    assert fingerprint_of(request, "k") != fingerprint_of(request, "other")
    # what a sync's repr leaves out (credentials, the lease, hints) stays out of it
    assert fingerprint_of(request, "k") == fingerprint_of(
        dataclasses.replace(request, first_sync=True, retry=True), "k"
    )
