"""The coordinator's FastAPI application: `create_app(settings)`.

The lifespan refuses to start without GITFLEET_SECRET_KEY (unless `settings.insecure_dev`),
then opens one Redis connection pool for the process (`fleet.control.connection`), the
encryption box (`fleet.control.registry.secrets`), the store, the metrics registry and the
dispatcher that enqueues syncs for the workers (`fleet.control.routing.dispatch`). It also
makes sure a bootstrap admin token exists: GITFLEET_ADMIN_TOKEN when set, otherwise one
generated on the very first start and written to a file only its owner may read (mode 0600,
GITFLEET_ADMIN_TOKEN_FILE, by default under the user's state directory). Only the file's path is
printed: a token in the output would land in whatever collects it (a journal, a log shipper).
In a pod, it registers the cluster it runs in as the destination `in-cluster`
(`api.incluster`; `settings.in_cluster`, on in `gitfleet api` unless GITFLEET_IN_CLUSTER=false).

Before any route, `api.gate.RequestGate` checks the bearer token and the body size, so an
unauthenticated or oversized body is refused before it is read.

Handlers are sync functions over the sync Redis client, so FastAPI runs them in its thread
pool; none of them runs a sync itself.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI

from api import errors, incluster, ui
from api.gate import RequestGate
from api.metrics import registry_for
from api.routes import (
    appops,
    apps,
    appsets,
    clusters,
    ops,
    plans,
    projects,
    registry,
    repositories,
    rollouts,
    subscriptions,
    tokens,
    webhooks,
)
from api.settings import Settings
from fleet.control.connection import connect
from fleet.control.notifications.delivery import DeliveryPump
from fleet.control.notifications.targets import TargetPolicy
from fleet.control.registry.backup import EMPTY_WARNING, is_empty
from fleet.control.registry.secrets import SecretBox, require_key
from fleet.control.registry.store import Store
from fleet.control.rollouts.heads import GitHeads
from fleet.control.routing.dispatch import Dispatcher
from fleet.control.routing.sharding import NoWorkers
from fleet.control.scheduler import scheduling
from fleet.engine.source.remotes import RemotePolicy
from fleet.errors import UsageError
from fleet.gcwatch import CollectionWatch

API_PREFIX = "/api/v1"
log = logging.getLogger("api")


def _bootstrap(store: Store, settings: Settings) -> None:
    generated = store.tokens.ensure_admin(Settings.reveal(settings.admin_token))
    if not generated:
        return
    path = settings.admin_token_file
    try:
        write_private(path, generated)
    except OSError as e:
        store.tokens.undo_bootstrap()  # the next start generates another
        raise UsageError(
            f"cannot write the generated admin token to {path} ({e.strerror}); set "
            "GITFLEET_ADMIN_TOKEN_FILE to a writable path, or GITFLEET_ADMIN_TOKEN"
        ) from None
    print(
        "gitfleet: no GITFLEET_ADMIN_TOKEN was set, so an admin token was generated and "
        f"written to {path} (readable by this user only).",
        file=sys.stderr,
        flush=True,
    )


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path` with mode 0600 (an existing file too), never following a link."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as handle:
        os.fchmod(fd, 0o600)
        handle.write(text + "\n")


def freeze_loaded(store: Store, dispatcher: Dispatcher) -> None:
    """Load the registry's caches, then move every object alive into the garbage collector's
    permanent generation (`gc.freeze`), for a process that lives long (`gitfleet api`).

    With 10,000 apps the caches hold about half a million objects, and each full collection
    walked them all: 80 to 360 ms with every request thread stopped, several a minute under
    load, which set the API's p99. Frozen objects are still freed when nothing refers to
    them; only cycles among them are never collected, and a registry's records have none.
    Apps registered after the start are frozen later, by `fleet.gcwatch.CollectionWatch`, once a
    full collection over them turns slow."""
    store.list_apps_cached()
    with contextlib.suppress(NoWorkers):  # no live worker yet: the map loads on first use
        dispatcher.owners.current()
    gc.collect()
    gc.freeze()


def notification_pump(store: Store, settings: Settings) -> DeliveryPump | None:
    """The thread that posts queued notifications (`fleet.control.notifications.delivery`),
    when the settings turn it on (`gitfleet api` does, with the scheduler)."""
    if not settings.notifications:
        return None
    policy = TargetPolicy.from_setting(settings.notify_allow_hosts)
    return DeliveryPump(store.redis, store.keys, store.box, policy).start()


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings.from_env()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        key = Settings.reveal(settings.secret_key)
        require_key(key, insecure_dev=settings.insecure_dev)
        redis = connect(settings.redis_url)
        box = SecretBox.open(key, redis, prefix=settings.prefix, insecure_dev=settings.insecure_dev)
        store = Store(redis, box, prefix=settings.prefix)
        _bootstrap(store, settings)
        if settings.in_cluster:
            incluster.register(store)
        if is_empty(redis, store.keys):
            log.warning("%s", EMPTY_WARNING)
        app.state.settings = settings
        app.state.store = store
        app.state.dispatcher = Dispatcher(redis, prefix=settings.prefix)
        app.state.metrics = registry_for(store)
        if settings.freeze_gc:
            freeze_loaded(store, app.state.dispatcher)
        pump = notification_pump(store, settings)
        # apps registered later: `fleet.gcwatch`; installed last, so a failed start leaves none
        watch = CollectionWatch().install() if settings.freeze_gc else None
        try:
            if settings.scheduler:
                sets = appsets.appsets_for(store, app.state.dispatcher, settings)
                remotes = RemotePolicy.from_setting(settings.insecure_git_hosts)
                heads = GitHeads(store, remotes=remotes)  # for rollouts
                with scheduling(store, app.state.dispatcher, sets, heads):
                    yield
            else:
                yield
        finally:
            if pump is not None:
                pump.stop()
            if watch is not None:
                watch.uninstall()
                gc.unfreeze()  # an in-process caller gets its collector back as it was
            redis.close()

    app = FastAPI(
        title="gitfleet coordinator",
        version="0.1.0",
        description="Register clusters, projects and applications; sync them from git.",
        lifespan=lifespan,
    )
    errors.install(app)
    webhook_paths = [f"{API_PREFIX}{webhooks.router.prefix}/git", f"{webhooks.router.prefix}/git"]
    app.add_middleware(
        RequestGate,
        settings=settings,
        protected=f"{API_PREFIX}/",
        webhooks=webhook_paths,
        import_path=f"{API_PREFIX}{registry.IMPORT_PATH}",
    )
    app.include_router(ops.router)
    for module in (clusters, projects, repositories, apps, appops, tokens, registry, webhooks):
        app.include_router(module.router, prefix=API_PREFIX)
    app.include_router(appsets.router, prefix=API_PREFIX)
    app.include_router(subscriptions.router, prefix=API_PREFIX)
    app.include_router(rollouts.router, prefix=API_PREFIX)
    app.include_router(plans.router, prefix=API_PREFIX)
    # Git hosts are configured with a bare URL too, as the issue and Argo CD users expect.
    app.include_router(webhooks.router, include_in_schema=False)
    ui.install(app)  # the web UI at /ui/, on the same handlers and token checks
    return app
