"""`gitfleet bench`: the scaled reconcile benchmark (issue 5), code in `loadtest.bench`.

    gitfleet bench --apps N --objects-per-app K --clusters C --workers W --out DIR
                   [--preset small|large] [--profile]
    gitfleet bench --preset faults --out DIR [--quick] [--fault NAME]   (the fault suite)

Starts its own testbed, Redis, git server, API and workers, measures the raw SSA limit,
kubectl, gitfleet's cold sync, a no-op cycle, monorepo changes, sharding, memory and tracing
side by side, and writes DIR/report.json, DIR/report.md and PNG charts (with --profile, py-spy
flame graphs of the API and each worker in DIR/profiles). The benchmark's modules
load only when the command runs, so other commands start as fast as before; it needs the `bench`
extra (`pip install 'gitfleet[bench]'`) and says so before it starts anything.
"""

from __future__ import annotations

import argparse
from typing import Any

from fleet.errors import UsageError
from loadtest import extra
from loadtest.presets import add_arguments


def run(args: argparse.Namespace) -> int:
    if missing := extra.missing():
        raise UsageError(extra.message(missing))
    if args.preset == "faults":
        from loadtest.faults.command import run_command as run_faults

        return run_faults(args)
    from loadtest.bench import run_command

    return run_command(args)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "bench", help="measure gitfleet at scale beside kubectl and the raw API limit"
    )
    add_arguments(parser)
    parser.set_defaults(run=run)
