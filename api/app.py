"""The coordinator's FastAPI application: `create_app(settings)`.

The lifespan opens one Redis connection pool for the process, the encryption box
(`fleet.control.registry.secrets`), the store, the metrics registry and the dispatcher that
enqueues syncs for the workers (`fleet.control.routing.dispatch`). It also makes sure a bootstrap
admin token exists: GITFLEET_ADMIN_TOKEN when set, otherwise one generated on the very first
start and printed once to stderr (never logged), since the log may be shipped elsewhere.

Handlers are sync functions over the sync Redis client, so FastAPI runs them in its thread
pool; none of them runs a sync itself.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from redis import Redis

from api import errors
from api.metrics import registry_for
from api.routes import appops, apps, clusters, ops, projects, tokens, webhooks
from api.settings import Settings
from fleet.control.registry.secrets import SecretBox
from fleet.control.registry.store import Store
from fleet.control.routing.dispatch import Dispatcher
from fleet.control.scheduler import scheduling

API_PREFIX = "/api/v1"


def _bootstrap(store: Store, settings: Settings) -> None:
    generated = store.tokens.ensure_admin(Settings.reveal(settings.admin_token))
    if generated:
        print(
            "gitfleet: no GITFLEET_ADMIN_TOKEN was set, so this admin token was generated. "
            f"It is shown only this once:\n\n    {generated}\n",
            file=sys.stderr,
            flush=True,
        )


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings.from_env()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        redis = Redis.from_url(settings.redis_url)
        box = SecretBox.open(Settings.reveal(settings.secret_key), redis, prefix=settings.prefix)
        store = Store(redis, box, prefix=settings.prefix)
        _bootstrap(store, settings)
        app.state.settings = settings
        app.state.store = store
        app.state.dispatcher = Dispatcher(redis, prefix=settings.prefix)
        app.state.metrics = registry_for(store)
        try:
            if settings.scheduler:
                with scheduling(store, app.state.dispatcher):
                    yield
            else:
                yield
        finally:
            redis.close()

    app = FastAPI(
        title="gitfleet coordinator",
        version="0.1.0",
        description="Register clusters, projects and applications; sync them from git.",
        lifespan=lifespan,
    )
    errors.install(app)
    app.include_router(ops.router)
    for module in (clusters, projects, apps, appops, tokens, webhooks):
        app.include_router(module.router, prefix=API_PREFIX)
    # Git hosts are configured with a bare URL too, as the issue and Argo CD users expect.
    app.include_router(webhooks.router, include_in_schema=False)
    return app
