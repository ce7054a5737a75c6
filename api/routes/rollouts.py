"""/api/v1/apps/{name}/rollout: a progressive rollout's status, and promote, abort, retry.

The coordinator's scheduler runs the rollout (`fleet.control.rollouts`); these handlers read its
state and change it in a transaction, and the next scheduler tick acts on the change. A
command that does not fit the rollout's phase answers 409 saying why; an app without a
`rollout` answers 404.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter, Depends, HTTPException

from api.auth import Principal, authorize, require_writer
from api.deps import StoreDep
from api.rolloutschemas import RolloutOut
from api.routes.apps import visible_app
from fleet.control.registry.records import AppRecord
from fleet.control.registry.store import Store
from fleet.control.rollouts import commands
from fleet.control.rollouts.state import RolloutState, RolloutStore

router = APIRouter(prefix="/apps", tags=["rollouts"], dependencies=[Depends(authorize)])

Command = Callable[[RolloutState | None], RolloutState]


def _rollout_app(store: Store, principal: Principal, name: str) -> AppRecord:
    record = visible_app(store, principal, name)
    if record.rollout is None:
        raise HTTPException(404, f"app {name} has no rollout: add `rollout.steps` to it with PUT")
    return record


def _out(store: Store, name: str) -> RolloutOut:
    states = RolloutStore(store.redis, store.keys.p)
    return RolloutOut.of(name, states.get(name), states.pins(name))


@router.get("/{name}/rollout")
def rollout_status(name: str, store: StoreDep, principal: Principal) -> RolloutOut:
    _rollout_app(store, principal, name)
    return _out(store, name)


def _command(store: Store, principal: Principal, name: str, command: Command) -> RolloutOut:
    _rollout_app(store, principal, name)
    require_writer(principal, f"change the rollout of {name}")
    try:
        RolloutStore(store.redis, store.keys.p).update(name, command)
    except commands.RolloutRefused as e:
        raise HTTPException(409, str(e)) from e
    return _out(store, name)


@router.post("/{name}/rollout/promote")
def promote_rollout(name: str, store: StoreDep, principal: Principal) -> RolloutOut:
    return _command(store, principal, name, commands.promote)


@router.post("/{name}/rollout/abort")
def abort_rollout(name: str, store: StoreDep, principal: Principal) -> RolloutOut:
    return _command(store, principal, name, commands.abort)


@router.post("/{name}/rollout/retry")
def retry_rollout(name: str, store: StoreDep, principal: Principal) -> RolloutOut:
    return _command(store, principal, name, commands.retry)
