"""`gitfleet api [--host H] [--port P] [--insecure-dev]`: run the coordinator under uvicorn.

Before uvicorn starts, the command checks what the coordinator cannot run without, so a
misconfiguration is one line naming the variable (exit code 2), not a traceback from the
lifespan: GITFLEET_SECRET_KEY (unless `--insecure-dev`) and a Redis that accepts
GITFLEET_REDIS_URL, password and TLS settings included (`fleet.control.connection`).

The coordinator's modules (FastAPI, uvicorn) load only when this command runs, not whenever
`cli.main` builds its parser.

SIGTERM (or Ctrl-C) stops gracefully: uvicorn stops accepting connections, lets the requests in
flight finish for up to `DRAIN_TIMEOUT_S` (30 s), then runs the lifespan's end, which stops the
scheduler thread (releasing its lock) and closes the Redis pool.
"""

from __future__ import annotations

import argparse
from typing import Any

DRAIN_TIMEOUT_S = 30
INSECURE_DEV_HELP = (
    "run without GITFLEET_SECRET_KEY: credentials are then encrypted with a key kept in Redis, "
    "which protects nothing from anyone who can read Redis (a local trial only)"
)


def run(args: argparse.Namespace) -> int:
    import logging

    import uvicorn

    from api.app import create_app
    from api.settings import Settings
    from fleet.control.connection import connect
    from fleet.control.registry.secrets import require_key
    from fleet.telemetry.sdk import setup_tracing

    settings = Settings.from_env().model_copy(update={"insecure_dev": args.insecure_dev})
    require_key(Settings.reveal(settings.secret_key), insecure_dev=settings.insecure_dev)
    connect(settings.redis_url).close()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    setup_tracing("gitfleet-api")
    uvicorn.run(
        create_app(settings),
        host=args.host,
        port=args.port,
        log_level="info",
        timeout_graceful_shutdown=DRAIN_TIMEOUT_S,
    )
    return 0


def register(subparsers: Any) -> None:
    api = subparsers.add_parser("api", help="run the coordinator API (FastAPI under uvicorn)")
    api.add_argument("--host", default="127.0.0.1")
    api.add_argument("--port", type=int, default=8080)
    api.add_argument("--insecure-dev", action="store_true", help=INSECURE_DEV_HELP)
    api.set_defaults(run=run)
