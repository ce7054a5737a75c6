"""`gitfleet api [--host H] [--port P] [--insecure-dev]`: run the coordinator under uvicorn.

Before uvicorn starts, the command checks what the coordinator cannot run without, so a
misconfiguration is one line naming the variable (exit code 2), not a traceback from the
lifespan: GITFLEET_SECRET_KEY (unless `--insecure-dev`) and a Redis that accepts
GITFLEET_REDIS_URL, password and TLS settings included (`fleet.control.connection`).

The coordinator's modules (FastAPI, uvicorn) load only when this command runs, not whenever
`cli.main` builds its parser.

`--workers N` (or GITFLEET_API_WORKERS) runs N coordinator processes on the one port (uvicorn's
process manager): a coordinator spends its time in Python, one request at a time per process
under the GIL, so on a machine with spare cores N processes answer N times the requests; they
share everything through Redis exactly as replicas in separate pods do (the scheduler and the
notification pump each run in the one process holding their lease). Default 1.

SIGTERM (or Ctrl-C) stops gracefully: uvicorn stops accepting connections, lets the requests in
flight finish for up to `DRAIN_TIMEOUT_S` (30 s), then runs the lifespan's end, which stops the
scheduler thread (releasing its lock) and closes the Redis pool.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

DRAIN_TIMEOUT_S = 30
WORKERS_ENV = "GITFLEET_API_WORKERS"
INSECURE_ENV = "GITFLEET_API_INSECURE_DEV"  # how `--insecure-dev` reaches worker processes
INSECURE_DEV_HELP = (
    "run without GITFLEET_SECRET_KEY: credentials are then encrypted with a key kept in Redis, "
    "which protects nothing from anyone who can read Redis (a local trial only)"
)


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from api.settings import Settings
    from fleet.control.connection import connect
    from fleet.control.registry.secrets import require_key

    if args.workers < 1:
        print(f"gitfleet api: --workers must be at least 1, got {args.workers}", file=sys.stderr)
        return 2
    settings = _settings(args.insecure_dev)
    require_key(Settings.reveal(settings.secret_key), insecure_dev=settings.insecure_dev)
    connect(settings.redis_url).close()
    common: dict[str, Any] = {
        "host": args.host,
        "port": args.port,
        "log_level": "info",
        "timeout_graceful_shutdown": DRAIN_TIMEOUT_S,
    }
    if args.workers == 1:
        uvicorn.run(_configured_app(settings), **common)
        return 0
    os.environ[INSECURE_ENV] = "1" if args.insecure_dev else ""
    uvicorn.run("cli.api_server:app_factory", factory=True, workers=args.workers, **common)
    return 0


def _settings(insecure_dev: bool) -> Any:
    from api.settings import Settings

    update = {"insecure_dev": insecure_dev, "freeze_gc": True}  # a long-lived process
    return Settings.from_env().model_copy(update=update)


def app_factory() -> Any:
    """The app of one of `--workers` processes (uvicorn imports this in each)."""
    return _configured_app(_settings(bool(os.environ.get(INSECURE_ENV))))


def _configured_app(settings: Any) -> Any:
    """Logging and tracing for this process, then the app."""
    import logging

    from api.app import create_app
    from fleet.telemetry.sdk import setup_tracing

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    setup_tracing("gitfleet-api")
    return create_app(settings)


def register(subparsers: Any) -> None:
    api = subparsers.add_parser("api", help="run the coordinator API (FastAPI under uvicorn)")
    api.add_argument("--host", default="127.0.0.1")
    api.add_argument("--port", type=int, default=8080)
    api.add_argument("--insecure-dev", action="store_true", help=INSECURE_DEV_HELP)
    api.add_argument(
        "--workers",
        type=int,
        default=int(os.environ.get(WORKERS_ENV) or 1),
        help=f"coordinator processes on the port (default 1, or {WORKERS_ENV})",
    )
    api.set_defaults(run=run)
