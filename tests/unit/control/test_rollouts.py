"""Rollout planning, judging and commands (pure functions)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fleet.control.registry.records import RolloutStep
from fleet.control.registry.syncrecords import InstanceStatus, SyncRecord
from fleet.control.rollouts import commands
from fleet.control.rollouts.judge import judge
from fleet.control.rollouts.plan import parse_max_parallel, plan_steps
from fleet.control.rollouts.state import Phase, RolloutState, StepState
from fleet.errors import UsageError
from fleet.model import Health, SyncStatus, Trigger

CLUSTERS = {
    "a": {"tier": "canary"},
    "b": {"tier": "prod"},
    "c": {"tier": "prod"},
    "d": {"tier": "prod"},
    "e": {},
}
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_steps_take_labels_then_shares_of_what_is_left_and_the_rest_goes_last() -> None:
    steps = [
        RolloutStep(match_labels={"tier": "canary"}),
        RolloutStep(match_labels={"tier": "prod"}, max_parallel="50%"),
        RolloutStep(max_parallel="1"),
    ]
    assert plan_steps(steps, CLUSTERS) == [["a"], ["b", "c"], ["d"], ["e"]]


def test_a_step_that_matches_nothing_stays_empty() -> None:
    steps = [RolloutStep(match_labels={"tier": "none"}), RolloutStep()]
    assert plan_steps(steps, CLUSTERS) == [[], ["a", "b", "c", "d", "e"]]


@pytest.mark.parametrize(
    ("text", "parsed"), [("", (0, False)), ("3", (3, False)), ("25%", (25, True))]
)
def test_max_parallel_is_a_count_or_a_percentage(text: str, parsed: tuple[int, bool]) -> None:
    assert parse_max_parallel(text) == parsed


@pytest.mark.parametrize("text", ["0", "-1", "x", "101%", "1.5"])
def test_a_bad_max_parallel_names_the_field(text: str) -> None:
    with pytest.raises(UsageError, match="maxParallel"):
        parse_max_parallel(text)


def _record(revision: str, started: datetime, **fields: object) -> SyncRecord:
    values: dict[str, object] = {
        "sync_status": SyncStatus.SYNCED,
        "health": Health.HEALTHY,
        "finished": started + timedelta(seconds=2),
        **fields,
    }
    return SyncRecord(
        app="shop",
        cluster="a",
        trigger=Trigger.ROLLOUT,
        revision=revision,
        started=started,
        **values,  # type: ignore[arg-type]
    )


def test_an_older_healthy_status_never_passes_a_step() -> None:
    old = _record("old", T0 - timedelta(seconds=5))
    before_step = _record("new", T0 - timedelta(seconds=1))
    verdict = judge("a", "new", T0, [before_step, old], InstanceStatus(health=Health.HEALTHY))
    assert not verdict.done and not verdict.failed


def test_the_sync_that_applied_the_revision_decides() -> None:
    good = _record("new", T0 + timedelta(seconds=1))
    assert judge("a", "new", T0, [good], None).done
    failed = _record("new", T0 + timedelta(seconds=1), error="boom")
    assert "boom" in judge("a", "new", T0, [failed], None).failed
    degraded = _record("new", T0 + timedelta(seconds=1), health=Health.DEGRADED)
    assert "Degraded" in judge("a", "new", T0, [degraded], None).failed


def test_a_progressing_sync_is_judged_on_the_status_only_while_it_describes_that_sync() -> None:
    record = _record("new", T0 + timedelta(seconds=1), health=Health.PROGRESSING)
    same = InstanceStatus(health=Health.HEALTHY, revision="new", last_sync=record)
    assert judge("a", "new", T0, [record], same).done
    other = _record("new", T0 + timedelta(seconds=9))
    stale = InstanceStatus(health=Health.HEALTHY, revision="new", last_sync=other)
    assert not judge("a", "new", T0, [record], stale).done


def test_promote_only_a_paused_rollout_and_retry_only_a_failed_one() -> None:
    state = RolloutState(
        "shop", "new", stable="old", phase=Phase.PAUSED, steps=(StepState(("a",), 1, 2),) * 2
    )
    assert commands.promote(state).step == 1
    with pytest.raises(commands.RolloutRefused, match="Paused"):
        commands.retry(state)
    failed = RolloutState(
        "shop",
        "new",
        stable="old",
        phase=Phase.FAILED,
        step=1,
        steps=(StepState(("a",), 1, 2), StepState(("b",), 3, 0, {"b": "x"})),
    )
    again = commands.retry(failed)
    assert again.phase == Phase.PROGRESSING and again.step == 1
    assert again.steps[0].started == 1 and again.steps[1] == StepState(("b",))
    assert commands.abort(failed).phase == Phase.ABORTED
    with pytest.raises(commands.RolloutRefused):
        commands.promote(None)
