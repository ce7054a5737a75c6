"""Table-driven tests of the health rules.

Each file in `tests/data/health/` is one case: a two-document YAML stream whose first document
is `{expect: {health: ..., message_contains: ...}}` (or `message:` for an exact match) and whose
second document is the live object. The test id is the file name. Optional keys of `expect`:
`expects_status` (what the caller knows of the CRD's status subresource) and
`ingress_needs_address` (the app's option).
"""

from __future__ import annotations

import copy
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.engine.health import rules as health_rules
from fleet.engine.health.assess import (
    RULES,
    HealthOptions,
    assess,
    assess_missing,
    is_ready,
    worst,
)
from fleet.model import Health, HealthStatus, Manifest, ObjectRef
from tests.support.paths import DATA

FIXTURES = DATA / "health"
CASES = sorted(FIXTURES.glob("*.yaml"))


def load_case(path: Path) -> tuple[dict[str, Any], Manifest]:
    documents = list(yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader))
    assert len(documents) == 2, f"{path.name}: want an expectation and an object"
    header, obj = documents
    expect = header["expect"]
    assert ("message" in expect) != ("message_contains" in expect), f"{path.name}: one message key"
    return expect, obj


def test_the_health_fixtures_are_found() -> None:
    assert len(CASES) >= 60


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_assess_gives_the_health_and_reason_the_fixture_expects(path: Path) -> None:
    expect, obj = load_case(path)
    before = copy.deepcopy(obj)

    options = HealthOptions(ingress_needs_address=expect.get("ingress_needs_address", False))
    status = assess(obj, options, expects_status=expect.get("expects_status"))

    assert status.health == Health(expect["health"]), status.message
    if "message" in expect:
        assert status.message == expect["message"]
    else:
        assert expect["message_contains"] in status.message
    assert obj == before, "assess must not modify the object it judges"


def _healths_by_rule() -> dict[object, set[Health]]:
    """The healths the fixtures expect, by the rule that judges them (aliases such as the
    extensions/v1beta1 kinds share their apps/v1 rule)."""
    seen: dict[object, set[Health]] = defaultdict(set)
    for path in CASES:
        expect, obj = load_case(path)
        ref = ObjectRef.of(obj)
        seen[RULES.get((ref.group, ref.kind), "generic")].add(Health(expect["health"]))
    return seen


def test_every_kind_with_its_own_rule_has_a_healthy_and_an_unhealthy_fixture() -> None:
    seen = _healths_by_rule()
    constant = {health_rules.exists, health_rules.argo_application}
    judged = {rule: key for key, rule in RULES.items() if rule not in constant}
    for rule, key in [*judged.items(), ("generic", ("*", "generic"))]:
        assert Health.HEALTHY in seen[rule], f"no Healthy fixture for {key}"
        assert seen[rule] - {Health.HEALTHY}, f"no fixture that is not Healthy for {key}"


def _malformed(group: str, kind: str) -> Manifest:
    return {
        "apiVersion": f"{group}/v1" if group else "v1",
        "kind": kind,
        "metadata": {"name": "x", "namespace": "ns", "generation": "two", "annotations": None},
        "spec": {"replicas": "three", "updateStrategy": "fast", "suspend": "yes", "type": 7},
        "status": {"conditions": ["Ready", {"type": 1}], "phase": ["Running"], "replicas": None},
    }


@pytest.mark.parametrize("key", sorted(RULES), ids=lambda key: f"{key[0] or 'core'}.{key[1]}")
def test_rules_judge_malformed_objects_without_raising(key: tuple[str, str]) -> None:
    status = assess(_malformed(*key))

    assert isinstance(status.health, Health)
    assert status.message


def test_an_object_not_in_the_cluster_is_missing() -> None:
    ref = ObjectRef("apps", "v1", "Deployment", "shop", "cart")

    assert assess_missing(ref) == HealthStatus(Health.MISSING, "not found in the cluster")


@pytest.mark.parametrize("health", list(Health))
def test_only_a_healthy_object_is_ready(health: Health) -> None:
    assert is_ready(HealthStatus(health, "any")) is (health is Health.HEALTHY)


@pytest.mark.parametrize(
    ("healths", "expected"),
    [
        ([], Health.HEALTHY),
        ([Health.HEALTHY, Health.HEALTHY], Health.HEALTHY),
        ([Health.HEALTHY, Health.SUSPENDED], Health.SUSPENDED),
        ([Health.SUSPENDED, Health.UNKNOWN], Health.UNKNOWN),
        ([Health.UNKNOWN, Health.PROGRESSING], Health.PROGRESSING),
        ([Health.PROGRESSING, Health.MISSING], Health.MISSING),
        ([Health.MISSING, Health.DEGRADED], Health.DEGRADED),
        (list(reversed(Health)), Health.DEGRADED),
    ],
    ids=lambda value: ("+".join(value) or "none") if isinstance(value, list) else str(value),
)
def test_application_health_is_the_worst_by_precedence(
    healths: list[Health], expected: Health
) -> None:
    assert worst(healths) == expected
    assert worst(HealthStatus(h, "why") for h in healths) == expected
