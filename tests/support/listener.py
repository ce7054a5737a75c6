"""A listener an attacker would run: plain HTTP on 127.0.0.1 that asks for basic auth (401 with
`WWW-Authenticate`, as a git host does) and records every request's path and Authorization
header, so a test can assert that no credential ever reached it."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType


class CredentialListener:
    def __init__(self) -> None:
        self.requests: list[tuple[str, str | None]] = []  # (path, Authorization header)
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                listener.requests.append((self.path, self.headers.get("Authorization")))
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="collector"')
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_POST = do_GET

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path}"

    @property
    def authorizations(self) -> list[str]:
        """Every Authorization header that arrived."""
        return [auth for _, auth in self.requests if auth is not None]

    def start(self) -> CredentialListener:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> CredentialListener:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
