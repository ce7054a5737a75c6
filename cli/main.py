"""Entry point of the `gitfleet` command.

Each command module exposes `register(subparsers)`, which adds its parser and sets `run` (a
function taking the parsed arguments and returning the exit code) as the parser default.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from fleet.errors import FleetError

COMMAND_MODULES = (
    "cli.testbed",
    "cli.health",
    "cli.sync",
    "cli.api_server",
    "cli.clusters",
    "cli.apps",
    "cli.repos",
    "cli.worker",
    "cli.bench",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gitfleet", description=__doc__)
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
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
