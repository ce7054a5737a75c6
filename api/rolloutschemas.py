"""The `rollout` of an app body, and what the rollout endpoints answer.

    "rollout": {"steps": [{"matchLabels": {"tier": "canary"}, "pause": {"duration": "5m"}},
                          {"maxParallel": "50%", "pause": {"untilPromoted": true}},
                          {}],
                "pollInterval": "30s"}

A step takes, of the clusters no earlier step took, those matching `matchLabels` (all when
absent), at most `maxParallel` of them (a count, or a percentage of the matching ones); clusters
no step took go last (`fleet.control.rollouts.plan`).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, Field, model_validator

from api.schemas import ApiModel, Seconds
from fleet.control.registry.records import RolloutSpec, RolloutStep
from fleet.control.rollouts.plan import parse_max_parallel
from fleet.control.rollouts.state import RolloutState
from fleet.errors import UsageError


def _max_parallel(value: object) -> str:
    text = str(value).strip() if value is not None else ""
    try:
        parse_max_parallel(text)
    except UsageError as e:
        raise ValueError(str(e)) from e
    return text


class PauseIn(ApiModel):
    """After the step passed: wait `duration`, or until a person promotes."""

    duration: Seconds | None = Field(default=None, gt=0)
    until_promoted: bool = False

    @model_validator(mode="after")
    def _one(self) -> PauseIn:
        if (self.duration is None) == (not self.until_promoted):
            raise ValueError("give exactly one of duration or untilPromoted: true")
        return self


class RolloutStepIn(ApiModel):
    match_labels: dict[str, str] = Field(default_factory=dict)
    max_parallel: Annotated[str, BeforeValidator(_max_parallel)] = ""
    pause: PauseIn | None = None


class RolloutIn(ApiModel):
    steps: list[RolloutStepIn] = Field(min_length=1, max_length=50)
    poll_interval: Seconds = Field(default=30.0, gt=0)

    def spec(self) -> RolloutSpec:
        return RolloutSpec(
            steps=tuple(
                RolloutStep(
                    match_labels=dict(s.match_labels),
                    max_parallel=s.max_parallel,
                    pause_s=(s.pause.duration or 0.0) if s.pause else 0.0,
                    pause_manual=bool(s.pause and s.pause.until_promoted),
                )
                for s in self.steps
            ),
            poll_s=self.poll_interval,
        )

    @classmethod
    def of(cls, spec: RolloutSpec) -> RolloutIn:
        steps = []
        for s in spec.steps:
            pause: dict[str, object] | None = None
            if s.pause_manual:
                pause = {"untilPromoted": True}
            elif s.pause_s:
                pause = {"duration": s.pause_s}
            steps.append(
                {"matchLabels": s.match_labels, "maxParallel": s.max_parallel, "pause": pause}
            )
        return cls.model_validate({"steps": steps, "pollInterval": spec.poll_s})


class RolloutStepOut(ApiModel):
    clusters: list[str]
    started: float
    passed: float
    instances: dict[str, str]


class RolloutOut(ApiModel):
    """A rollout as `GET /apps/{name}/rollout` shows it; `pins`: the revision each instance
    syncs at. `phase` is None before the coordinator first looked at the app."""

    app: str
    phase: str | None = None
    revision: str = ""
    stable: str = ""
    step: int = 0
    steps: list[RolloutStepOut] = Field(default_factory=list)
    reason: str = ""
    paused_until: float = 0.0
    started: float = 0.0
    updated: float = 0.0
    trace_id: str = ""
    pins: dict[str, str] = Field(default_factory=dict)

    @classmethod
    def of(cls, app: str, state: RolloutState | None, pins: dict[str, str]) -> RolloutOut:
        if state is None:
            return cls(app=app, pins=pins)
        return cls(
            app=app,
            phase=state.phase.value,
            revision=state.revision,
            stable=state.stable,
            step=state.step + 1,
            steps=[
                RolloutStepOut(
                    clusters=list(s.clusters),
                    started=s.started,
                    passed=s.passed,
                    instances=dict(s.instances),
                )
                for s in state.steps
            ],
            reason=state.reason,
            paused_until=state.until,
            started=state.started,
            updated=state.updated,
            trace_id=state.trace_id,
            pins=pins,
        )
