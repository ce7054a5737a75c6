"""Entry point of the `gitfleet` command.

Each command module exposes `register(subparsers)`, which adds its parser and sets `run` (a
function taking the parsed arguments and returning the exit code) as the parser default.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from types import ModuleType

from cli import (
    api_server,
    apps,
    appsets,
    bench,
    clusters,
    health,
    notifications,
    projects,
    registry,
    repos,
    sync,
    testbed,
    worker,
)
from fleet.errors import FleetError

# In help order. Each module keeps its heavy imports (uvicorn, FastAPI, matplotlib) inside the
# function that runs its command, so importing them all here stays cheap.
COMMAND_MODULES: tuple[ModuleType, ...] = (
    testbed,
    health,
    sync,
    api_server,
    clusters,
    apps,
    appsets,
    projects,
    repos,
    notifications,
    registry,
    worker,
    bench,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gitfleet", description=__doc__)
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module in COMMAND_MODULES:
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.run(args)
    except FleetError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
