"""Turn errors into 4xx answers that name the field, and never echo what the caller sent.

FastAPI's default 422 body repeats each invalid input value. A request carrying a kubeconfig,
a token or a git password must never see it come back (nor land in a log that records
responses), so the validation handler keeps only where the problem is and what it is:
`{"detail": "body.destination.namespace: ...", "errors": [{"field": ..., "message": ...}]}`.

Registry errors map by kind: NotFound 404, AlreadyExists / InUse / Conflict 409,
InvalidReference and an unreadable registry file (BackupError) 422; no live worker to enqueue
for (NoWorkers) is a 503 a retry can cure, and so is Redis unreachable (a restart, a
failover): the pool reconnects on the next request, so the API needs no restart. Anything
unexpected is a 500 whose body says only that; the traceback goes to the log, without the
request body.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from fleet.control.registry.backup import BackupError
from fleet.control.registry.errors import (
    AlreadyExists,
    Conflict,
    InUse,
    InvalidReference,
    NotFound,
)
from fleet.control.routing.sharding import NoWorkers
from fleet.errors import FleetError

log = logging.getLogger("api")

STATUS: dict[type[FleetError], int] = {
    NotFound: 404,
    AlreadyExists: 409,
    InUse: 409,
    Conflict: 409,
    InvalidReference: 422,
    NoWorkers: 503,
    BackupError: 422,
}


def status_of(error: FleetError, default: int) -> int:
    """The HTTP status of a registry error by its kind (`STATUS`), else `default`."""
    return next((code for kind, code in STATUS.items() if isinstance(error, kind)), default)


def field_name(loc: tuple[int | str, ...] | list[int | str]) -> str:
    return ".".join(str(part) for part in loc)


def validation_errors(errors: list[Any]) -> list[dict[str, str]]:
    """[{field, message}] from pydantic errors, without their `input` and `ctx` values."""
    found = []
    for error in errors:
        message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
        found.append({"field": field_name(error.get("loc", ())), "message": message})
    return found


async def _on_validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = validation_errors(list(exc.errors()))
    summary = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
    return JSONResponse({"detail": summary, "errors": errors}, status_code=422)


async def _on_fleet_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, FleetError)
    status = status_of(exc, 500)
    if status == 500:
        log.error("%s %s failed: %s", request.method, request.url.path, exc)
    return JSONResponse({"detail": str(exc)}, status_code=status)


async def _on_redis_down(request: Request, exc: Exception) -> JSONResponse:
    log.warning(
        "%s %s: Redis unreachable (%s)", request.method, request.url.path, type(exc).__name__
    )
    return JSONResponse(REDIS_DOWN, status_code=503)


REDIS_DOWN = {"detail": "Redis is unreachable (restarting?); retry shortly"}


async def _on_unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("%s %s failed unexpectedly", request.method, request.url.path)
    return JSONResponse({"detail": "internal error; see the coordinator log"}, status_code=500)


def install(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _on_validation)
    app.add_exception_handler(FleetError, _on_fleet_error)
    app.add_exception_handler(RedisConnectionError, _on_redis_down)
    app.add_exception_handler(RedisTimeoutError, _on_redis_down)
    app.add_exception_handler(Exception, _on_unexpected)
