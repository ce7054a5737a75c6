"""`gitfleet api` runs the coordinator; `gitfleet cluster ...` and `gitfleet app ...` call it.

The client commands talk to `--server URL` with `--token T` (or GITFLEET_SERVER and
GITFLEET_TOKEN) over httpx. Every failure a person can fix, an unreachable server, a refused
token, a 4xx with the server's message naming the field, is one line on stderr and exit code
2, never a traceback: `ClientError` is a `UsageError`, which `cli.main` prints.
`-o json` prints the server's answer as it came.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import httpx

from fleet.errors import UsageError

DEFAULT_TIMEOUT = 60.0


class ClientError(UsageError):
    """A request to the coordinator failed in a way the caller can act on."""


class ApiClient:
    def __init__(self, server: str, token: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.server = server.rstrip("/")
        self.token = token
        self.timeout = timeout

    def call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, Any] | None = None,
        ok: tuple[int, ...] = (),
    ) -> Any:
        """The decoded JSON answer; ClientError for anything but 2xx (or a status in `ok`)."""
        try:
            response = httpx.request(
                method,
                self.server + path,
                json=body,
                params=params,
                headers={"Authorization": f"Bearer {self.token}"},
                timeout=self.timeout,
            )
        except httpx.TransportError as e:
            reason = type(e).__name__
            raise ClientError(
                f"cannot reach the gitfleet server at {self.server} ({reason})"
            ) from e
        return self._decode(response, ok)

    def _decode(self, response: httpx.Response, ok: tuple[int, ...]) -> Any:
        data = _json(response)
        if response.status_code < 300 or response.status_code in ok:
            return data
        detail = data.get("detail") if isinstance(data, dict) else None
        message = detail if isinstance(detail, str) else response.reason_phrase
        if response.status_code == 401:
            raise ClientError(f"the server refused the token (401): {message}")
        raise ClientError(
            f"{response.request.method} {response.request.url.path} failed "
            f"({response.status_code}): {message}"
        )


def _json(response: httpx.Response) -> Any:
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return {"detail": response.text.strip()[:200]}


def client_of(args: argparse.Namespace) -> ApiClient:
    server = args.server or os.environ.get("GITFLEET_SERVER", "")
    token = args.token or os.environ.get("GITFLEET_TOKEN", "")
    if not server:
        raise ClientError("no server: pass --server URL or set GITFLEET_SERVER")
    if not token:
        raise ClientError("no token: pass --token T or set GITFLEET_TOKEN")
    return ApiClient(server, token)


def connection_options() -> argparse.ArgumentParser:
    """Options every client command takes."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--server", help="coordinator URL (default: $GITFLEET_SERVER)")
    common.add_argument("--token", help="API token (default: $GITFLEET_TOKEN)")
    common.add_argument("-o", "--output", choices=("text", "json"), default="text")
    return common


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=False))


def table(rows: list[list[str]], columns: list[str]) -> str:
    widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(columns)]
    lines = [columns, *rows]
    return "\n".join(
        "  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def labels_of(items: list[str], option: str) -> dict[str, str]:
    labels = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ClientError(f"{option} {item!r} must look like key=value")
        labels[key] = value
    return labels


# -- gitfleet api -----------------------------------------------------------------------------


def run_api(args: argparse.Namespace) -> int:
    import logging

    import uvicorn

    from api.app import create_app
    from fleet.telemetry.sdk import setup_tracing

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    setup_tracing("gitfleet-api")
    uvicorn.run(create_app(), host=args.host, port=args.port, log_level="info")
    return 0


# -- gitfleet cluster -------------------------------------------------------------------------


def run_cluster_add(args: argparse.Namespace) -> int:
    try:
        text = Path(args.kubeconfig).read_text()
    except OSError as e:
        raise ClientError(f"cannot read --kubeconfig {args.kubeconfig}: {e.strerror}") from e
    body = {"name": args.name, "kubeconfig": text, "labels": labels_of(args.label, "--label")}
    if args.context:
        body["context"] = args.context
    created = client_of(args).call("POST", "/api/v1/clusters", body=body)
    if args.output == "json":
        print_json(created)
    else:
        print(f"cluster {created['name']} registered ({created['server']})")
    return 0


def run_cluster_list(args: argparse.Namespace) -> int:
    found = client_of(args).call("GET", "/api/v1/clusters")
    if args.output == "json":
        print_json(found)
        return 0
    rows = [
        [c["name"], c["server"], ",".join(f"{k}={v}" for k, v in sorted(c["labels"].items()))]
        for c in found
    ]
    print(table(rows, ["NAME", "SERVER", "LABELS"]))
    return 0


def run_cluster_rm(args: argparse.Namespace) -> int:
    params = {"force": "true"} if args.force else None
    client_of(args).call("DELETE", f"/api/v1/clusters/{args.name}", params=params)
    if args.output == "json":
        print_json({"name": args.name, "deleted": True})
    else:
        print(f"cluster {args.name} unregistered")
    return 0


def register(subparsers: Any) -> None:
    from cli import client_apps

    api = subparsers.add_parser("api", help="run the coordinator API (FastAPI under uvicorn)")
    api.add_argument("--host", default="127.0.0.1")
    api.add_argument("--port", type=int, default=8080)
    api.set_defaults(run=run_api)
    common = connection_options()
    cluster = subparsers.add_parser("cluster", help="register and list clusters")
    verbs = cluster.add_subparsers(dest="verb", required=True)
    add = verbs.add_parser("add", parents=[common], help="register a cluster from a kubeconfig")
    add.add_argument("name")
    add.add_argument("--kubeconfig", required=True, type=Path)
    add.add_argument("--context")
    add.add_argument("--label", action="append", default=[], help="K=V, repeatable")
    add.set_defaults(run=run_cluster_add)
    verbs.add_parser("list", parents=[common]).set_defaults(run=run_cluster_list)
    rm = verbs.add_parser("rm", parents=[common], help="unregister a cluster")
    rm.add_argument("name")
    rm.add_argument("--force", action="store_true", help="even if apps target it")
    rm.set_defaults(run=run_cluster_rm)
    client_apps.register(subparsers, common)
