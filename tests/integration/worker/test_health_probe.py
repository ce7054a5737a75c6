"""A worker run with GITFLEET_WORKER_HEALTH_PORT answers the kubelet's /healthz while it is a
member of the fleet, and stops listening when it stops."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request

import pytest

from tests.support.fleet import FleetEnv, WorkerThread
from worker.settings import WorkerSettings


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_health_port_comes_from_the_environment() -> None:
    env = {"GITFLEET_WORKER_HEALTH_PORT": "8081", "GITFLEET_WORKER_HEALTH_HOST": "127.0.0.1"}
    settings = WorkerSettings.from_env(env)
    assert (settings.health_port, settings.health_host) == (8081, "127.0.0.1")
    assert WorkerSettings.from_env({}).health_port == 0  # off unless asked


def test_a_running_worker_answers_healthz_and_stops_listening_when_stopped(
    registry: FleetEnv,
) -> None:
    port = free_port()
    settings = registry.settings("probe", health_port=port, health_host="127.0.0.1")
    worker = WorkerThread(settings).start()
    url = f"http://127.0.0.1:{port}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            assert response.status == 200
        assert worker.process.keeper.is_alive(60.0)
    finally:
        worker.stop()

    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url, timeout=5)
