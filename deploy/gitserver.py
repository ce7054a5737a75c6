"""A git smart-HTTP server: dulwich's WSGI app on 127.0.0.1 in a background thread.

Serves any number of repositories by name, optionally behind HTTP basic auth, and records the
paths it was asked for so a test can tell whether a fetch went over the network. The demo and
the benchmarks serve their generated repositories with it; tests use it too.
"""

from __future__ import annotations

import base64
import contextlib
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from socketserver import ThreadingMixIn
from types import TracebackType
from typing import Any
from wsgiref.simple_server import make_server

from dulwich.errors import NotGitRepository
from dulwich.repo import Repo
from dulwich.server import Backend
from dulwich.web import WSGIRequestHandlerLogger, WSGIServerLogger, make_wsgi_chain

Environ = dict[str, Any]
StartResponse = Callable[..., Any]
App = Callable[[Environ, StartResponse], Iterable[bytes]]


class ThreadingServer(ThreadingMixIn, WSGIServerLogger):
    daemon_threads = True


class _NamedBackend(Backend):
    """Opens `/<name>` as the repository registered under that name; 404 otherwise."""

    def __init__(self) -> None:
        self.paths: dict[str, Path] = {}
        self._open: dict[str, Repo] = {}
        self._lock = threading.Lock()

    def open_repository(self, path: str | bytes) -> Repo:
        name = (path.decode() if isinstance(path, bytes) else path).strip("/")
        with self._lock:
            if name not in self.paths:
                raise NotGitRepository(f"no repository named {name!r}")
            if name not in self._open:
                self._open[name] = Repo(str(self.paths[name]))
            return self._open[name]

    def close(self) -> None:
        with self._lock:
            for repo in self._open.values():
                repo.close()
            self._open.clear()


class _BasicAuth:
    """WSGI middleware: 401 with WWW-Authenticate unless the request carries the credentials."""

    def __init__(self, app: App, username: str, password: str) -> None:
        self.app = app
        token = base64.b64encode(f"{username}:{password}".encode()).decode()
        self.expected = f"Basic {token}"

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("HTTP_AUTHORIZATION") == self.expected:
            return self.app(environ, start_response)
        headers = [("WWW-Authenticate", 'Basic realm="gitfleet-test"'), ("Content-Length", "0")]
        start_response("401 Unauthorized", headers)
        return [b""]


class GitHttpServer:
    """Serve repositories over smart HTTP at http://127.0.0.1:<port>/<name>."""

    def __init__(
        self,
        repos: dict[str, Path] | None = None,
        *,
        username: str = "",
        password: str = "",
        port: int = 0,
    ) -> None:
        self._port = port
        self._backend = _NamedBackend()
        self._backend.paths.update(repos or {})
        self._auth = (username, password) if username or password else None
        self.requests: list[str] = []
        self._server: ThreadingServer | None = None
        self._thread: threading.Thread | None = None

    def add(self, name: str, path: Path) -> str:
        """Serve the repository at `path` as `name`; return its URL."""
        self._backend.paths[name] = path
        return self.url_for(name)

    def url_for(self, repo_name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{repo_name}"

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("GitHttpServer is not started")
        return int(self._server.server_address[1])

    def start(self) -> GitHttpServer:
        server = make_server(
            "127.0.0.1",
            self._port,
            self._app(),
            server_class=ThreadingServer,
            handler_class=WSGIRequestHandlerLogger,
        )
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._backend.close()
        self._server = self._thread = None

    def __enter__(self) -> GitHttpServer:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _app(self) -> App:
        app: App = make_wsgi_chain(self._backend)
        if self._auth is not None:
            app = _BasicAuth(app, *self._auth)
        return self._recording(app)

    def _recording(self, app: App) -> App:
        def record(environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
            self.requests.append(f"{environ['REQUEST_METHOD']} {environ.get('PATH_INFO', '')}")
            return app(environ, start_response)

        return record


def main(argv: list[str] | None = None) -> int:
    """`python -m deploy.gitserver --port P --repo NAME=PATH...`: serve until interrupted."""
    import argparse
    import signal

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--repo", action="append", default=[], help="NAME=PATH (repeatable)")
    args = parser.parse_args(argv)
    repos = dict(item.split("=", 1) for item in args.repo)
    server = GitHttpServer({n: Path(p) for n, p in repos.items()}, port=args.port).start()
    print(f"serving on http://127.0.0.1:{server.port}/", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with contextlib.suppress(KeyboardInterrupt):
        stop.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
