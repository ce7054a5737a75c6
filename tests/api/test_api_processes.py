"""`gitfleet api --workers N`: N coordinator processes on one port, sharing Redis.

Started as a user starts it (the `gitfleet api` command, its own Redis), the coordinator runs
N uvicorn processes under one parent; each serves requests with the same tokens and registry,
a write through one is read through the others, and SIGTERM stops all of them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from deploy.testbed.process import free_port
from tests.support.fleet import wait_until
from tests.support.paths import REPO_ROOT
from tests.support.processenv import process_env
from tests.support.redis_server import RedisServer

ADMIN = "processes-admin-token-0123456789"


def _call(port: int, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=data,
        method=method,
        headers={"Authorization": f"Bearer {ADMIN}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return answer.status, json.loads(answer.read() or b"null")


def _answers(port: int) -> bool:
    try:
        return _call(port, "GET", "/api/v1/projects")[0] == 200
    except OSError:
        return False


@pytest.fixture
def coordinator(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    folder = tmp_path / "redis"
    folder.mkdir()
    redis = RedisServer(folder)
    port, log = free_port(), tmp_path / "api.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "api", "--port", str(port), "--workers", "2"],
        cwd=REPO_ROOT,
        env=process_env(
            redis.url, tmp_path, GITFLEET_ADMIN_TOKEN=ADMIN, GITFLEET_IN_CLUSTER="false"
        ),
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        wait_until(lambda: _answers(port), timeout=60, what="the coordinator answering")
        yield proc, port, log
    finally:
        if proc.poll() is None:
            proc.kill()
            for child in psutil.Process(proc.pid).children(recursive=True):
                child.kill()
        redis.stop()


def _serving(proc: subprocess.Popen[bytes]) -> list[psutil.Process]:
    """The coordinator's server processes: uvicorn spawns each (`spawn_main`)."""
    found = []
    for child in psutil.Process(proc.pid).children(recursive=True):
        try:
            line = " ".join(child.cmdline())
        except psutil.NoSuchProcess:
            continue
        if "spawn_main" in line and "resource_tracker" not in line:
            found.append(child)
    return found


def test_two_processes_serve_one_registry_and_stop_together_on_sigterm(
    coordinator: tuple[subprocess.Popen[bytes], int, Path],
) -> None:
    proc, port, log = coordinator
    wait_until(lambda: len(_serving(proc)) >= 2, timeout=30, what="two coordinator processes")
    servers = {c.pid for c in _serving(proc)}
    assert len(servers) >= 2, log.read_text()
    status, _ = _call(port, "POST", "/api/v1/projects", {"name": "shared"})
    assert status == 201
    # new connections land on either process; every one of them sees the project
    for _ in range(20):
        status, projects = _call(port, "GET", "/api/v1/projects")
        assert status == 200 and "shared" in {p["name"] for p in projects}
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=45)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(psutil.pid_exists(p) for p in servers):
        time.sleep(0.2)
    assert not [p for p in servers if psutil.pid_exists(p)], log.read_text()


def test_workers_below_one_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "cli.main", "api", "--workers", "0"],
        cwd=REPO_ROOT,
        env={**os.environ, "GITFLEET_REDIS_URL": "redis://127.0.0.1:1/0"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2
    assert "--workers must be at least 1" in run.stderr
