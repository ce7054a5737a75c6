"""`worker.health`: the worker's /healthz listener for the kubelet, over real HTTP."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from worker.health import HealthServer


def get(port: int, path: str) -> tuple[int, dict[str, str]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_healthz_answers_200_while_alive_503_when_stuck_and_404_elsewhere() -> None:
    alive = [True]
    server = HealthServer("127.0.0.1", 0, lambda: alive[0]).start()
    try:
        assert get(server.port, "/healthz") == (200, {"status": "ok"})
        alive[0] = False
        code, body = get(server.port, "/healthz")
        assert (code, body["status"]) == (503, "stuck")
        assert get(server.port, "/metrics")[0] == 404
    finally:
        server.stop()
