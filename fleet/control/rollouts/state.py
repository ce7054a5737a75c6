"""A rollout's state and the instances' pinned revisions, in Redis.

    <p>:rollouts               set of the apps that have a state below
    <p>:rollout:<app>          the rollout's state (JSON `RolloutState`)
    <p>:rollout-pins:<app>     hash cluster -> the revision the worker syncs it at

Only the scheduler's leader advances a rollout; a person's promote, abort and retry go through
`RolloutStore.update`, a WATCH/MULTI transaction on the state, so neither overwrites the other.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

from pydantic import TypeAdapter
from redis import Redis, WatchError
from redis.typing import EncodableT, FieldT

from fleet.control.keys import Keys


class Phase(StrEnum):
    PROGRESSING = "Progressing"  # a step's syncs run or are judged
    PAUSED = "Paused"  # a step passed; its pause runs (`until`) or waits for a promote
    COMPLETED = "Completed"  # every step passed: `revision` is the stable revision
    FAILED = "Failed"  # a step failed (`reason`); later steps stay at `stable`
    ABORTED = "Aborted"  # a person aborted: every instance back at `stable`


@dataclass(frozen=True)
class StepState:
    """One planned step: its clusters, when it started (epoch seconds, 0 not yet) and passed,
    and per cluster what the judge says."""

    clusters: tuple[str, ...] = ()
    started: float = 0.0
    passed: float = 0.0
    instances: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RolloutState:
    """`revision`: the one being rolled out; `stable`: the one every instance not yet in the
    rollout stays at ("" when the app had none); `step`: the index of the current step;
    `until`: the end of a timed pause (0: none or a manual one); `carrier`: the W3C context of
    the rollout's root span, so every sync it asks for joins its trace."""

    app: str
    revision: str
    uid: str = ""  # the app's uid: a state left by a deleted app of the same name is dropped
    stable: str = ""
    phase: Phase = Phase.PROGRESSING
    step: int = 0
    steps: tuple[StepState, ...] = ()
    reason: str = ""
    until: float = 0.0
    started: float = 0.0
    updated: float = 0.0
    trace_id: str = ""
    carrier: dict[str, str] = field(default_factory=dict)
    checked: float = 0.0  # when the head of the app's revision was last looked up


STATE: TypeAdapter[RolloutState] = TypeAdapter(RolloutState)


class RolloutStore:
    def __init__(self, redis: Redis, prefix: str = "gitfleet") -> None:
        self.redis = redis
        self.keys = Keys(prefix)

    def get(self, app: str) -> RolloutState | None:
        raw: bytes | None = self.redis.get(self.keys.rollout(app))  # type: ignore[assignment]
        return STATE.validate_json(raw) if raw else None

    def apps(self) -> set[str]:
        """The apps with a stored state."""
        raw: set[bytes] = self.redis.smembers(self.keys.rollouts)  # type: ignore[assignment]
        return {name.decode() for name in raw}

    def update(
        self, app: str, change: Callable[[RolloutState | None], RolloutState | None]
    ) -> RolloutState | None:
        """Apply `change` to the stored state atomically (None from it: leave it); returns what
        is stored after."""
        key = self.keys.rollout(app)
        for _ in range(20):
            with self.redis.pipeline() as pipe:
                try:
                    pipe.watch(key)  # type: ignore[no-untyped-call]
                    raw = pipe.get(key)
                    old = STATE.validate_json(raw) if raw else None
                    new = change(old)
                    if new is None:
                        pipe.unwatch()
                        return old
                    pipe.multi()
                    pipe.set(key, STATE.dump_json(new))
                    pipe.sadd(self.keys.rollouts, app)
                    pipe.execute()
                    return new
                except WatchError:
                    continue
        raise RuntimeError(f"rollout of {app}: the state kept changing")

    def pins(self, app: str) -> dict[str, str]:
        raw: dict[bytes, bytes] = self.redis.hgetall(self.keys.rollout_pins(app))  # type: ignore[assignment]
        return {k.decode(): v.decode() for k, v in raw.items()}

    def pin(self, app: str, cluster: str) -> str:
        """The revision `cluster` syncs `app` at ("" when not pinned)."""
        raw: bytes | None = self.redis.hget(self.keys.rollout_pins(app), cluster)  # type: ignore[assignment]
        return raw.decode() if raw else ""

    def pin_for(self, app: str, uid: str, cluster: str, *, claim: bool = True) -> str:
        """The revision a sync of `app` (uid `uid`) at `cluster` must run ("" when the rollout
        pins nothing). A cluster that joined after the rollout was planned has no pin yet: with
        `claim` it is pinned here to the stable revision, only if still unpinned and only while
        the state read is still stored (a WATCH), so whichever of a worker and the rollout
        controller comes first pins it and the other finds that pin; without (a preview) the
        stable revision is answered and nothing written. The worker never syncs a newcomer at
        the head being rolled out, whatever asked for the sync (the scheduler, a webhook) and
        whenever the controller's next tick runs. A state of another uid (a deleted app of the
        same name) pins nothing."""
        pins, key = self.keys.rollout_pins(app), self.keys.rollout(app)
        for _ in range(20):
            with self.redis.pipeline() as pipe:
                try:
                    pipe.watch(key)  # type: ignore[no-untyped-call]
                    pin, raw = pipe.hget(pins, cluster), pipe.get(key)
                    uid_of, stable = _uid_and_stable(raw if isinstance(raw, bytes) else None)
                    if raw is not None and uid_of != uid:
                        return ""
                    if pin:
                        return pin.decode() if isinstance(pin, bytes) else str(pin)
                    if not claim or not stable:  # a preview; no state, or one with no stable
                        return stable
                    pipe.multi()
                    pipe.hsetnx(pins, cluster, stable)
                    pipe.hget(pins, cluster)
                    stored = pipe.execute()[1]
                    return stored.decode() if stored else ""
                except WatchError:
                    continue
        raise RuntimeError(f"rollout of {app}: the state kept changing")

    def drop_pins(self, app: str, clusters: Collection[str]) -> None:
        """Forget the pins of clusters the app no longer targets: one that joins again later
        is a newcomer, pinned to the stable revision of that day, not to what it ran before."""
        if clusters:
            self.redis.hdel(self.keys.rollout_pins(app), *clusters)

    def set_pins(self, app: str, pins: Mapping[str, str]) -> None:
        if pins:
            mapping: dict[FieldT, EncodableT] = dict(pins.items())
            self.redis.hset(self.keys.rollout_pins(app), mapping=mapping)

    def forget(self, app: str) -> None:
        """Drop the state and the pins (the app has no rollout any more, or is gone)."""
        pipe = self.redis.pipeline(transaction=True)
        pipe.delete(self.keys.rollout(app), self.keys.rollout_pins(app))
        pipe.srem(self.keys.rollouts, app)
        pipe.execute()


def _uid_and_stable(raw: bytes | None) -> tuple[str, str]:
    """The app uid and stable revision of a stored state, read without validating the rest:
    a state written by a newer coordinator (a phase this worker does not know) still pins."""
    if raw is None:
        return "", ""
    try:
        found = json.loads(raw)
    except ValueError:
        return "", ""
    if not isinstance(found, dict):
        return "", ""
    return str(found.get("uid", "")), str(found.get("stable", ""))


def with_step(state: RolloutState, index: int, step: StepState) -> RolloutState:
    steps = list(state.steps)
    steps[index] = step
    return replace(state, steps=tuple(steps))
