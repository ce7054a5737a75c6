"""Open probes and metrics: /healthz (the process answers), /readyz (Redis answers), /metrics.

/readyz also says when the registry is empty (`warning`): after a Redis lost without its data
directory, the clusters still run what it managed, and the fix is a restore.

These carry no token: orchestrators and Prometheus call them, and they reveal no registry
content beyond counts.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from redis import RedisError

from api.deps import StoreDep
from fleet.control.registry.backup import EMPTY_WARNING, is_empty

router = APIRouter(tags=["operations"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
def readyz(store: StoreDep, response: Response) -> dict[str, str]:
    try:
        store.redis.ping()
    except RedisError as e:
        response.status_code = 503
        return {"status": "unavailable", "redis": type(e).__name__}
    if is_empty(store.redis, store.keys):  # 200 all the same: a new fleet starts empty
        return {"status": "ok", "redis": "ok", "registry": "empty", "warning": EMPTY_WARNING}
    return {"status": "ok", "redis": "ok"}


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    try:
        body = await run_in_threadpool(generate_latest, request.app.state.metrics)
    except RedisError as e:
        return Response(f"redis unavailable: {type(e).__name__}\n", status_code=503)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
