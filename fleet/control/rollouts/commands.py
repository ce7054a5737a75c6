"""What a person can do to a rollout: promote past a pause, abort, retry (pure state changes).

Each is a function from the stored state to the new one, run by `RolloutStore.update` in a
transaction; the controller carries it out on its next tick (an abort's pins back to stable, a
retry's new syncs). A command that does not fit the phase raises `RolloutRefused` saying why.
"""

from __future__ import annotations

import time
from dataclasses import replace

from fleet.control.rollouts.state import Phase, RolloutState, StepState
from fleet.errors import Fault, FleetError


class RolloutRefused(FleetError):
    stage = "rollout"
    fault = Fault.USER


def promote(state: RolloutState | None) -> RolloutState:
    """Past the current pause (timed or manual): the next step starts on the next tick."""
    state = _existing(state)
    if state.phase != Phase.PAUSED:
        raise RolloutRefused(
            f"rollout of {state.app} is {state.phase}, not Paused: only a paused rollout can be "
            "promoted"
        )
    now = time.time()
    return replace(state, phase=Phase.PROGRESSING, step=state.step + 1, until=0.0, updated=now)


def abort(state: RolloutState | None) -> RolloutState:
    """Stop the rollout and move every instance back to the stable revision."""
    state = _existing(state)
    if state.phase not in (Phase.PROGRESSING, Phase.PAUSED, Phase.FAILED):
        raise RolloutRefused(f"rollout of {state.app} is {state.phase}: nothing to abort")
    if not state.stable:
        raise RolloutRefused(f"rollout of {state.app} has no stable revision to go back to")
    return replace(state, phase=Phase.ABORTED, reason="aborted by a person", updated=time.time())


def retry(state: RolloutState | None) -> RolloutState:
    """Run a failed rollout's failed step again (an aborted one from its first step)."""
    state = _existing(state)
    if state.phase not in (Phase.FAILED, Phase.ABORTED):
        raise RolloutRefused(
            f"rollout of {state.app} is {state.phase}: only a Failed or Aborted one is retried"
        )
    first = 0 if state.phase == Phase.ABORTED else state.step
    steps = tuple(StepState(s.clusters) if i >= first else s for i, s in enumerate(state.steps))
    return replace(
        state, phase=Phase.PROGRESSING, step=first, steps=steps, reason="", updated=time.time()
    )


def _existing(state: RolloutState | None) -> RolloutState:
    if state is None:
        raise RolloutRefused(
            "no rollout yet: the coordinator has not looked at this app's revision"
        )
    return state
