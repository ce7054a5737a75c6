"""Shared `Annotated` dependencies: the store, the dispatcher, the settings, the caller.

Handlers see the dispatcher (`fleet.control.routing.dispatch.Dispatcher`, which the lifespan
opens) only as a `SyncRequester`, the two calls they make of it, so tests can hand the app a
recording stand-in through `app.dependency_overrides[get_dispatcher]`.
"""

from __future__ import annotations

from typing import Annotated, Any, Protocol

from fastapi import Depends, Request

from api.settings import Settings
from fleet.control.registry.store import Store
from fleet.model import Trigger


class QueuedJob(Protocol):
    """The job that will carry a requested sync, as the API reports it."""

    @property
    def job_id(self) -> str: ...

    @property
    def queue(self) -> str: ...

    @property
    def merged(self) -> bool: ...


class SyncRequester(Protocol):
    """What handlers ask of the dispatcher: enqueue a sync, and wait for a dry run's answer."""

    def request_sync(
        self,
        app: str,
        cluster: str,
        *,
        trigger: Trigger,
        revision: str | None = None,
        dry_run: bool = False,
        carrier: dict[str, str] | None = None,
        prune: bool | None = None,
    ) -> QueuedJob: ...

    def wait(self, job: Any, timeout: float) -> dict[str, Any] | None: ...


def get_store(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_dispatcher(request: Request) -> SyncRequester:
    """The app's dispatcher; tests override this."""
    dispatcher: SyncRequester = request.app.state.dispatcher
    return dispatcher


StoreDep = Annotated[Store, Depends(get_store)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
DispatcherDep = Annotated[SyncRequester, Depends(get_dispatcher)]
