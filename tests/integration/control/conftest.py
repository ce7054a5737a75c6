"""Fixtures for the control-plane tests against the session's real redis-server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from tests.support.redis_server import RedisServer


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    """A connection to the session's redis-server (database 0; tests keep to their own keys)."""
    connection = redis.Redis.from_url(redis_server.url)
    yield connection
    connection.close()
