"""The worker command line, shared by `gitfleet worker` and `python -m worker`.

A worker refuses to start without GITFLEET_SECRET_KEY unless `--insecure-dev` is given, and
without a Redis that accepts GITFLEET_REDIS_URL (`worker.process.WorkerProcess`): one line
naming the variable, exit code 2.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from fleet.errors import FleetError
from fleet.telemetry.sdk import flush, setup_tracing
from worker.allocator import limit_arenas
from worker.process import DRAIN_TIMEOUT_S, WorkerProcess
from worker.settings import WorkerSettings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name", help="shard member name (default: <hostname>-<pid>)")
    parser.add_argument("--prefix", help="Redis key prefix (default GITFLEET_PREFIX or gitfleet)")
    parser.add_argument("--ttl", type=float, help="membership TTL in seconds (default 15)")
    parser.add_argument("--lease-ttl", type=float, help="per-instance lease TTL (default 30)")
    parser.add_argument("--debounce", type=float, help="self-heal debounce seconds (default 1)")
    parser.add_argument(
        "--no-self-heal", dest="self_heal", action="store_false", default=None, help="no watches"
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        help="syncs run at once, sharing the caches (default GITFLEET_WORKER_CONCURRENCY or 4)",
    )
    parser.add_argument(
        "--drain-timeout",
        type=float,
        default=float(os.environ.get("GITFLEET_WORKER_DRAIN_S") or DRAIN_TIMEOUT_S),
        help="on SIGTERM, seconds the running syncs get to finish before they are handed back "
        f"to other workers (default GITFLEET_WORKER_DRAIN_S or {DRAIN_TIMEOUT_S:g})",
    )
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument(
        "--insecure-dev",
        action="store_true",
        default=None,
        help="run without GITFLEET_SECRET_KEY: credentials are then encrypted with a key kept in "
        "Redis, which protects nothing from anyone who can read Redis (a local trial only)",
    )


def run(args: argparse.Namespace) -> int:
    limit_arenas()  # before any thread starts
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    for name in filter(None, os.environ.get("GITFLEET_DEBUG_LOGGERS", "").split(",")):
        logging.getLogger(name.strip()).setLevel(logging.DEBUG)  # e.g. gitfleet.quiet
    settings = WorkerSettings.from_env(
        name=args.name,
        prefix=args.prefix,
        ttl=args.ttl,
        lease_ttl=args.lease_ttl,
        debounce=args.debounce,
        self_heal=args.self_heal,
        concurrency=args.concurrency,
        insecure_dev=args.insecure_dev,
    )
    setup_tracing("gitfleet-worker")
    try:
        WorkerProcess(settings, drain_timeout=args.drain_timeout).run(logging_level=args.log_level)
    finally:
        flush()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gitfleet worker", description=__doc__)
    add_arguments(parser)
    try:
        return run(parser.parse_args(argv))
    except FleetError as e:  # a setting the worker cannot start without, as `gitfleet` says it
        print(f"error: {e}", file=sys.stderr)
        return 2
