"""Fixtures for the fleet tests: a `FleetEnv` (own Redis prefix, store, git server, clusters)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.fleet import FleetEnv
from tests.support.redis_server import RedisServer


@pytest.fixture
def fleet(redis_server: RedisServer, testbed: list[Any], tmp_path: Path) -> Iterator[FleetEnv]:
    env = FleetEnv(redis_server.url, tmp_path)
    env.add_clusters(testbed)
    yield env
    env.close()


@pytest.fixture
def registry(redis_server: RedisServer, tmp_path: Path) -> Iterator[FleetEnv]:
    """A fleet without clusters: for tests of dispatching and scheduling alone."""
    env = FleetEnv(redis_server.url, tmp_path)
    yield env
    env.close()
