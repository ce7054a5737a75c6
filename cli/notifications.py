"""`gitfleet notify add|list|delete|deliveries`: subscriptions to app events, and what was sent.

`add NAME --url URL (--project P | --app A) [--event E ...] [--slack]`: a generic webhook by
default, signed with a secret read from `--secret-file FILE` or standard input (never argv,
which every user of the machine can read in `ps`); `--slack` posts `{"text": ...}` to a
Slack-compatible incoming webhook and takes no secret. The URL is read from argv: put no secret
in a webhook URL (a Slack URL is one, so `--url-file` reads it from a file instead).
`deliveries NAME` lists the newest deliveries: when, the event, the instance, the status, the
attempts, the last HTTP status code and error (`api.routes.subscriptions`).
"""

from __future__ import annotations

import argparse
from typing import Any

from cli.options import client_of, connection_options, file_or_stdin
from cli.output import print_json, table
from fleet.control.notifications.events import EVENTS


def run_add(args: argparse.Namespace) -> int:
    url = args.url or file_or_stdin(args.url_file, "--url-file", "it").strip()
    body: dict[str, Any] = {
        "name": args.name,
        "kind": "slack" if args.slack else "webhook",
        "project": args.project or "",
        "app": args.app or "",
        "events": args.event or [],
        "url": url,
    }
    if not args.slack:
        body["secret"] = file_or_stdin(args.secret_file, "--secret-file", "it").strip()
    created = client_of(args).call("POST", "/api/v1/subscriptions", body=body)
    if args.output == "json":
        print_json(created)
    else:
        scope = f"app {created['app']}" if created["app"] else f"project {created['project']}"
        events = ", ".join(created["events"]) or "all events"
        print(f"subscription {created['name']}: {events} of {scope} to {created['url']}")
    return 0


def run_list(args: argparse.Namespace) -> int:
    found = client_of(args).call("GET", "/api/v1/subscriptions")
    if args.output == "json":
        print_json(found)
        return 0
    rows = [
        (
            s["name"],
            s["kind"],
            f"app/{s['app']}" if s["app"] else f"project/{s['project']}",
            ",".join(s["events"]) or "*",
            s["url"],
        )
        for s in found
    ]
    print(table(rows, ("NAME", "KIND", "SCOPE", "EVENTS", "URL")))
    return 0


def run_delete(args: argparse.Namespace) -> int:
    client_of(args).call("DELETE", f"/api/v1/subscriptions/{args.name}")
    if args.output == "json":
        print_json({"name": args.name, "deleted": True})
    else:
        print(f"subscription {args.name} deleted")
    return 0


def run_deliveries(args: argparse.Namespace) -> int:
    path = f"/api/v1/subscriptions/{args.name}/deliveries?limit={args.limit}"
    found = client_of(args).call("GET", path)
    if args.output == "json":
        print_json(found)
        return 0
    rows = [
        (
            d["updated"],
            d["event"],
            f"{d['app']}@{d['cluster']}" if d["cluster"] else d["app"],
            d["status"],
            str(d["attempts"]),
            str(d["statusCode"] or "-"),
            d["error"],
        )
        for d in found
    ]
    print(table(rows, ("TIME", "EVENT", "INSTANCE", "STATUS", "ATTEMPTS", "CODE", "ERROR")))
    return 0


def register(subparsers: Any) -> None:
    common = connection_options()
    notify = subparsers.add_parser("notify", help="notifications: subscriptions to app events")
    verbs = notify.add_subparsers(dest="verb", required=True)
    add = verbs.add_parser("add", parents=[common], help="subscribe a webhook or Slack URL")
    add.add_argument("name")
    where = add.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="where to post (https; put no secret in it)")
    where.add_argument("--url-file", help="a file holding the URL (a Slack webhook URL)")
    scope = add.add_mutually_exclusive_group(required=True)
    scope.add_argument("--project", help="every app of this project")
    scope.add_argument("--app", help="this app only")
    add.add_argument(
        "--event", action="append", choices=EVENTS, help="an event to send (repeat; default all)"
    )
    add.add_argument("--slack", action="store_true", help="a Slack-compatible incoming webhook")
    add.add_argument("--secret-file", help="the HMAC secret (default: standard input)")
    add.set_defaults(run=run_add)
    listing = verbs.add_parser("list", parents=[common], help="list subscriptions")
    listing.set_defaults(run=run_list)
    delete = verbs.add_parser("delete", parents=[common], help="delete a subscription")
    delete.add_argument("name")
    delete.set_defaults(run=run_delete)
    deliveries = verbs.add_parser("deliveries", parents=[common], help="what was delivered")
    deliveries.add_argument("name")
    deliveries.add_argument("--limit", type=int, default=50)
    deliveries.set_defaults(run=run_deliveries)
