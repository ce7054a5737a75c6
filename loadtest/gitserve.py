"""`python -m loadtest.gitserve --port P --repo NAME=PATH [--backend git|dulwich]`: the
benchmark's smart-HTTP git server, with a request log.

Two backends answer the same URLs (`http://127.0.0.1:P/NAME`):
- `git` (the default): git's own `git http-backend`, run as a CGI program for each request, as
  git hosts serve fetches with git's C code;
- `dulwich`: the product's `deploy.gitserver` (dulwich's pure-Python server), as the demo uses.

Why the benchmark defaults to git: on a 10,000-app monorepo dulwich's server spent 0.31-0.40 s
of CPU answering each one-commit fetch (it walks every tree of the commit the client already
has), against 17-29 ms in gitfleet's own fetching client; that server time was most of the
commit-to-converged figure, and it is not gitfleet's. `--backend dulwich` keeps the old figure
measurable.

Both log each request (method and path) on stdout through dulwich's request logger, which the
benchmark counts (`loadtest.fleetrun.Fleet.git_requests`).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from wsgiref.simple_server import make_server

from dulwich.web import WSGIRequestHandlerLogger

from deploy import gitserver
from deploy.gitserver import App, Environ, StartResponse
from loadtest.presets import GIT_SERVERS

CGI_TIMEOUT_S = 120.0
_CGI_VARIABLES = ("REQUEST_METHOD", "QUERY_STRING", "CONTENT_TYPE", "CONTENT_LENGTH", "REMOTE_ADDR")


class GitBackendError(RuntimeError):
    """`git http-backend` is missing or answered without CGI headers."""


def git_http_backend(root: Path) -> App:
    """A WSGI app running `git http-backend` for the repositories under `root` (one entry per
    served name, a symlink to the repository)."""
    git = shutil.which("git")
    if git is None:
        raise GitBackendError("git is not installed: apt-get install git, or use --backend dulwich")

    def app(environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        env = {"PATH": os.environ.get("PATH", ""), "HOME": str(root)}
        env |= {k: str(environ[k]) for k in _CGI_VARIABLES if environ.get(k)}
        env |= {k: str(v) for k, v in environ.items() if k.startswith("HTTP_")}
        env |= {"GIT_PROJECT_ROOT": str(root), "GIT_HTTP_EXPORT_ALL": "1"}
        env["PATH_INFO"] = environ.get("PATH_INFO", "")
        # GIT_PROTOCOL is left unset: protocol v0, one POST per fetch as with dulwich's server,
        # so the benchmark's fetch counts mean the same with either backend
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        done = subprocess.run(
            [git, "http-backend"], input=body, env=env, capture_output=True, timeout=CGI_TIMEOUT_S
        )
        status, headers, payload = _parse_cgi(done.stdout)
        if done.returncode != 0 and not headers:
            status, payload = "500 Internal Server Error", done.stderr
        start_response(status, [*headers, ("Content-Length", str(len(payload)))])
        return [payload]

    return app


def _parse_cgi(output: bytes) -> tuple[str, list[tuple[str, str]], bytes]:
    """(status, headers, body) of a CGI program's output."""
    head, sep, body = output.partition(b"\r\n\r\n")
    if not sep:
        head, sep, body = output.partition(b"\n\n")
    if not sep:
        return "502 Bad Gateway", [], output
    status = "200 OK"
    headers = []
    for line in head.decode("latin-1").splitlines():
        name, _, value = line.partition(":")
        if name.lower() == "status":
            status = value.strip()
        elif name and name.lower() != "content-length":
            headers.append((name.strip(), value.strip()))
    return status, headers, body


def serve(repos: Mapping[str, Path], port: int, backend: str) -> tuple[str, contextlib.ExitStack]:
    """Start serving `repos`; (base URL, what stops it)."""
    stack = contextlib.ExitStack()
    if backend == "dulwich":
        server = stack.enter_context(gitserver.GitHttpServer(dict(repos), port=port))
        return f"http://127.0.0.1:{server.port}/", stack
    root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gitfleet-git-")))
    for name, path in repos.items():
        (root / name).symlink_to(Path(path).resolve())
    httpd = make_server(
        "127.0.0.1",
        port,
        git_http_backend(root),
        server_class=gitserver.ThreadingServer,
        handler_class=WSGIRequestHandlerLogger,
    )
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    stack.callback(thread.join, 10)
    stack.callback(httpd.server_close)
    stack.callback(httpd.shutdown)
    return f"http://127.0.0.1:{httpd.server_address[1]}/", stack


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--repo", action="append", default=[], help="NAME=PATH (repeatable)")
    parser.add_argument("--backend", choices=GIT_SERVERS, default="git")
    args = parser.parse_args(argv)
    repos = {n: Path(p) for n, p in (item.split("=", 1) for item in args.repo)}
    url, stack = serve(repos, args.port, args.backend)
    with stack:
        print(f"serving on {url} ({args.backend})", flush=True)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
