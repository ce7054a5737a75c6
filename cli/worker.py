"""`gitfleet worker [--name N] [--insecure-dev]`: run one shard member (see `worker.process`).

Redis from GITFLEET_REDIS_URL, the credential key from GITFLEET_SECRET_KEY (required unless
`--insecure-dev`), caches under GITFLEET_CACHE_DIR; the process runs until SIGTERM or Ctrl-C,
finishing the current sync first.
"""

from __future__ import annotations

from typing import Any

from worker.command import add_arguments, run


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("worker", help="run a worker that syncs its share of the apps")
    add_arguments(parser)
    parser.set_defaults(run=run)
