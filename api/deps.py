"""Shared `Annotated` dependencies: the store, the dispatcher, the settings, the caller.

The dispatcher is typed by a Protocol, the boundary with the worker side
(`fleet.control.routing.dispatch`), so tests can hand the app a dispatcher of their own through
`app.dependency_overrides`.
"""

from __future__ import annotations

from typing import Annotated, Any, Protocol

from fastapi import Depends, HTTPException, Request

from api.settings import Settings
from fleet.control.registry.store import Store


class JobRef(Protocol):
    @property
    def job_id(self) -> str: ...

    @property
    def queue(self) -> str: ...

    @property
    def merged(self) -> bool: ...


class Dispatcher(Protocol):
    def request_sync(
        self,
        app: str,
        cluster: str,
        *,
        trigger: str,
        revision: str | None = None,
        dry_run: bool = False,
        carrier: dict[str, str] | None = None,
    ) -> JobRef: ...

    def wait(self, job: Any, timeout: float) -> dict[str, Any] | None: ...


def get_store(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def optional_dispatcher(request: Request) -> Dispatcher | None:
    """The app's dispatcher (None when fleet.control.routing.dispatch is missing); tests override
    this."""
    dispatcher: Dispatcher | None = request.app.state.dispatcher
    return dispatcher


def get_dispatcher(
    dispatcher: Annotated[Dispatcher | None, Depends(optional_dispatcher)],
) -> Dispatcher:
    if dispatcher is None:
        raise HTTPException(
            503, "cannot enqueue syncs: the dispatcher (fleet.control.routing.dispatch) is missing"
        )
    return dispatcher


StoreDep = Annotated[Store, Depends(get_store)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
DispatcherDep = Annotated[Dispatcher, Depends(get_dispatcher)]
OptionalDispatcherDep = Annotated[Dispatcher | None, Depends(optional_dispatcher)]
