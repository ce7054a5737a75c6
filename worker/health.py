"""The worker's `/healthz` for the kubelet: a tiny HTTP listener on GITFLEET_WORKER_HEALTH_PORT.

A worker serves no HTTP otherwise, and an exec probe would start a Python interpreter every
period (or need a shell, which the image does not have), so the liveness probe is an `httpGet`
on this port. It answers 200 while the housekeeping thread ticks (the thread that heartbeats
membership, `worker.process.Housekeeper`; it keeps ticking through a Redis outage, so an outage
restarts no worker) and 503 once it has been stuck longer than `stale_after`: by then the fleet
has declared the worker dead and moved its apps, and a restart is the cure. Off by default
(port 0); the chart turns it on.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class HealthServer:
    """Serves `GET /healthz` in a daemon thread; `alive()` says whether the worker is well."""

    def __init__(self, host: str, port: int, alive: Callable[[], bool]) -> None:
        handler = _handler(alive)
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="health", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> HealthServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def _handler(alive: Callable[[], bool]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] != "/healthz":
                self._answer(404, {"status": "not found"})
            elif alive():
                self._answer(200, {"status": "ok"})
            else:
                self._answer(503, {"status": "stuck", "reason": "housekeeping stopped ticking"})

        def _answer(self, code: int, body: dict[str, str]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            """Probes every few seconds would flood the log: stay quiet."""

    return Handler
