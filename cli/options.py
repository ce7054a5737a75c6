"""Options the commands share and how they are read: the coordinator connection (`--server`,
`--token`, `-o`), `K=V` labels and durations such as `--timeout 5m`.

A value a person can fix is a `UsageError` (a `ClientError` for the coordinator commands) of one
line naming the option, which `cli.main` prints with exit code 2.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from api.client import ClientError, CoordinatorClient
from fleet.control.windows import parse_duration
from fleet.errors import UsageError


def connection_options() -> argparse.ArgumentParser:
    """Options every coordinator command takes (a parent parser)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--server", help="coordinator URL (default: $GITFLEET_SERVER)")
    common.add_argument("--token", help="API token (default: $GITFLEET_TOKEN)")
    common.add_argument("-o", "--output", choices=("text", "json"), default="text")
    return common


def client_of(args: argparse.Namespace) -> CoordinatorClient:
    """The client `--server` and `--token` (or GITFLEET_SERVER and GITFLEET_TOKEN) name."""
    server = args.server or os.environ.get("GITFLEET_SERVER", "")
    token = args.token or os.environ.get("GITFLEET_TOKEN", "")
    if not server:
        raise ClientError("no server: pass --server URL or set GITFLEET_SERVER")
    if not token:
        raise ClientError("no token: pass --token T or set GITFLEET_TOKEN")
    return CoordinatorClient(server, token)


def file_or_stdin(path: str | None, option: str, what: str) -> str:
    """A secret from `option` FILE or, without it, piped on standard input: never from argv,
    which every user of the machine can read in `ps`."""
    if path:
        try:
            return Path(path).read_text()
        except OSError as e:
            raise ClientError(f"{option} {path}: {e.strerror}") from None
    if sys.stdin.isatty():
        raise ClientError(f"give {option} FILE, or pipe {what} on standard input")
    return sys.stdin.read()


def labels_of(items: list[str], option: str) -> dict[str, str]:
    labels = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ClientError(f"{option} {item!r} must look like key=value")
        labels[key] = value
    return labels


def timeout_seconds(text: str) -> float:
    """`--timeout`: a bare number of seconds (`90`, `1.5`) or a duration (`90s`, `5m`, `1h30m`,
    read by `fleet.control.windows.parse_duration`)."""
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    try:
        return parse_duration(text).total_seconds()
    except ValueError:
        raise UsageError(f"--timeout {text!r} is not a duration like 90s, 5m or 1h30m") from None
