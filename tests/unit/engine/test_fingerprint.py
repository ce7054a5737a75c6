"""A sync's fingerprint is the same in every worker process: the next periodic check of another
process (or of this one after a restart) compares it, and an unequal one costs a full sync."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleet.engine.contract import SyncRequest
from fleet.engine.fingerprint import fingerprint_of, stable_repr
from fleet.engine.plan.boundaries import Boundaries

ROOT = Path(__file__).resolve().parents[3]
PRINT_FINGERPRINT = """
from fleet.engine.contract import SyncRequest
from fleet.engine.diff.compare import IgnoreRules
from fleet.engine.fingerprint import fingerprint_of
from fleet.engine.health.assess import HealthOptions
from fleet.engine.limits import Limits
from fleet.engine.plan.boundaries import Boundaries
from fleet.engine.prune import PruneBudget
from fleet.engine.render.job import RenderParams
from fleet.kube.kubeconfig import ServiceAccount
from fleet.model import Trigger
kinds = frozenset(f"group{i}.example/Kind{i}" for i in range(12))
request = SyncRequest(
    app="shop", repo="https://git.example/r.git", path="apps/shop", revision="main",
    namespace="shop", prune=True, allow_empty=True, create_namespace=True,
    render=RenderParams(
        renderer="helm", release_name="shop", namespace="shop", values_files=("v.yaml",),
        values=(("image.tag", "1.2"), ("replicas", "3")), values_yaml=("a: 1",),
        allow_remote=True, substitute=(("env", "prod"),),
    ),
    ignore=IgnoreRules(json_pointers=("/spec/replicas",), managers=("hpa",)),
    prune_kinds_allowed=frozenset({"Namespace", "ClusterRole", "StorageClass", "PriorityClass"}),
    boundaries=Boundaries(namespaces=("shop-*",), cluster_kinds=kinds, project="p", cluster="c"),
    service_account=ServiceAccount("shop", "deployer"), trigger=Trigger.INTERVAL,
    limits=Limits(), health=HealthOptions(ingress_needs_address=True),
    app_uid="uid", project="p", adopt_legacy=True,
    prune_budget=PruneBudget(max_count=5, max_percent=10.0), allow_prune_over_budget=True,
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


def test_a_value_without_a_stable_text_is_refused_not_hashed_by_address() -> None:
    """A default repr names the object's address, which differs per process: a new request
    field of such a type must fail here, not quietly make every check a full sync."""

    class Opaque:
        pass

    request = SyncRequest(app="x", repo="r", path="p", app_uid=Opaque())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="no stable text for a"):
        fingerprint_of(request, "k")


def test_one_item_tuples_and_empty_sets_keep_their_shape() -> None:
    assert stable_repr(("a",)) == "('a', )"
    assert stable_repr(frozenset()) != stable_repr({})
    assert (
        stable_repr({"b": frozenset({"y", "x"}), "a": 1}) == "{'a': 1, 'b': frozenset({'x', 'y'})}"
    )
