"""`gitfleet app rollout status|promote|abort|retry|set NAME`: a progressive rollout.

`status` prints the phase, the revision rolled out and the stable one, then one line per step
with its clusters and what each instance's judge says; promote, abort and retry print the state
after the change. `set NAME --file F` gives the app the `rollout` in F (YAML or JSON, the
API's shape), `set NAME --off` removes it (GET the app, change it, PUT it back). Exit codes:
0 done; 2 a request error (an app without a rollout, a command that does not fit the phase, a
bad step: printed on one line); `status` exits 1 when the rollout Failed.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from api.rolloutschemas import RolloutOut
from api.views import AppView
from cli.options import client_of
from cli.output import print_json, table
from fleet.errors import UsageError


def run_rollout(args: argparse.Namespace) -> int:
    path = f"/api/v1/apps/{args.name}/rollout"
    client = client_of(args)
    if args.action == "set":
        return _set(args)
    if args.action == "status":
        answer = client.call("GET", path)
    else:
        answer = client.call("POST", f"{path}/{args.action}")
    rollout = RolloutOut.model_validate(answer)
    if args.output == "json":
        print_json(answer)
    else:
        print(describe(rollout))
    return 1 if args.action == "status" and rollout.phase == "Failed" else 0


def _set(args: argparse.Namespace) -> int:
    if args.off == bool(args.file):
        raise UsageError("app rollout set: give exactly one of --file FILE or --off")
    rollout: Any = None
    if args.file:
        path = Path(args.file)
        try:
            rollout = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as e:
            raise UsageError(f"--file {path}: cannot be read as YAML: {e}") from e
        if isinstance(rollout, dict) and "rollout" in rollout:
            rollout = rollout["rollout"]
    client = client_of(args)
    view = AppView.model_validate(client.call("GET", f"/api/v1/apps/{args.name}"))
    spec = {**view.spec, "name": args.name, "rollout": rollout}
    updated = client.call("PUT", f"/api/v1/apps/{args.name}", body=spec)
    if args.output == "json":
        print_json(updated)
    else:
        print(f"app {args.name}: rollout " + ("removed" if args.off else "set"))
    return 0


def describe(rollout: RolloutOut) -> str:
    if rollout.phase is None:
        return f"rollout of {rollout.app}: not started (the coordinator has not looked yet)"
    lines = [
        f"rollout of {rollout.app}: {rollout.phase} at step {rollout.step}/{len(rollout.steps)}",
        f"revision {rollout.revision[:12]} (stable {rollout.stable[:12] or '-'}); "
        f"trace {rollout.trace_id or '-'}",
    ]
    if rollout.reason:
        lines.append(f"reason: {rollout.reason}")
    if rollout.paused_until:
        lines.append(f"paused until {_when(rollout.paused_until)}")
    elif rollout.phase == "Paused":
        lines.append(f"paused until promoted: gitfleet app rollout promote {rollout.app}")
    rows = [
        [
            str(i),
            ",".join(s.clusters) or "-",
            _when(s.started),
            _when(s.passed),
            "; ".join(f"{c}: {v}" for c, v in s.instances.items()),
        ]
        for i, s in enumerate(rollout.steps, start=1)
    ]
    lines.append(table(rows, ["STEP", "CLUSTERS", "STARTED", "PASSED", "INSTANCES"]))
    return "\n".join(lines)


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%H:%M:%S") if epoch else "-"


def add_verb(verbs: Any, common: argparse.ArgumentParser) -> None:
    """Add `rollout` to the `gitfleet app` verbs (`cli.apps.register`)."""
    parser: argparse.ArgumentParser = verbs.add_parser(
        "rollout", parents=[common], help="a progressive rollout: status, promote, abort, retry"
    )
    parser.add_argument("action", choices=("status", "promote", "abort", "retry", "set"))
    parser.add_argument("name")
    parser.add_argument("--file", help="set: the rollout (YAML or JSON, as in the app body)")
    parser.add_argument("--off", action="store_true", help="set: remove the app's rollout")
    parser.set_defaults(run=run_rollout)
