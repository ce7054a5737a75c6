"""`gitfleet api [--host H] [--port P]`: run the coordinator (`api.app`) under uvicorn.

The coordinator's modules (FastAPI, uvicorn) load only when this command runs, not whenever
`cli.main` builds its parser.
"""

from __future__ import annotations

import argparse
from typing import Any


def run(args: argparse.Namespace) -> int:
    import logging

    import uvicorn

    from api.app import create_app
    from fleet.telemetry.sdk import setup_tracing

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    setup_tracing("gitfleet-api")
    uvicorn.run(create_app(), host=args.host, port=args.port, log_level="info")
    return 0


def register(subparsers: Any) -> None:
    api = subparsers.add_parser("api", help="run the coordinator API (FastAPI under uvicorn)")
    api.add_argument("--host", default="127.0.0.1")
    api.add_argument("--port", type=int, default=8080)
    api.set_defaults(run=run)
