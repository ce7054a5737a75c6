"""The one way a gitfleet process connects to Redis: `connect(GITFLEET_REDIS_URL)`.

Redis holds the registry, every encrypted credential and the work queues, so it is a trust
boundary (SECURITY.md, "Redis"). Everything about the connection comes from the one URL, read
by redis-py's `Redis.from_url` and never rebuilt from host and port, so nothing can drop a part
of it: the password (`redis://:PASSWORD@host:6379/0`, or `USER:PASSWORD@` for an ACL user),
TLS (`rediss://`, with query options such as `ssl_cert_reqs=required` and
`ssl_ca_certs=/path/ca.pem`, or `ssl_certfile`/`ssl_keyfile` for a client certificate), the
database. The API, the scheduler in it, the workers and rq on their behalf all share the pool
`connect` returns.

`connect` asks Redis once (PING), so a process with a wrong URL, a missing password or a
certificate it cannot verify stops at start with an error naming GITFLEET_REDIS_URL, instead
of failing on its first command. Messages show the URL through `redacted`, never its password.

After the start, a Redis restart is an outage to ride out, not a reason to exit: commands fail
with `TRANSIENT` errors while it lasts (the API answers 503, loops log one `Outage` warning
and retry), and the pool reconnects once Redis answers again.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit, urlunsplit

from redis import AuthenticationError, Redis, RedisError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from fleet.errors import Fault, FleetError

HOWTO = (
    "Put the password in GITFLEET_REDIS_URL: redis://:PASSWORD@HOST:PORT/DB "
    "(USER:PASSWORD@ for an ACL user; rediss:// for TLS)"
)


class RedisUnavailable(FleetError):
    """Redis cannot be used with the URL given: unreachable, refused, or not a Redis URL."""

    stage = "redis"
    fault = Fault.USER


def redacted(url: str) -> str:
    """`url` with its password replaced by `***`, for messages and logs."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return "<unparsable URL>"
    if not password:
        return url
    user = parts.username or ""
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def connect(url: str) -> Redis:
    """A client for GITFLEET_REDIS_URL `url`, checked with one PING."""
    where = redacted(url)
    try:
        redis = Redis.from_url(url)
    except ValueError as e:
        raise RedisUnavailable(
            f"GITFLEET_REDIS_URL is not a Redis URL ({where}): {e}. Use "
            "redis://[:PASSWORD@]HOST:PORT/DB, or rediss://... for TLS"
        ) from e
    try:
        redis.ping()
    except (AuthenticationError, ResponseError) as e:
        redis.close()
        raise RedisUnavailable(f"Redis at {where} refused gitfleet: {_why(url, e)}. {HOWTO}") from e
    except RedisError as e:
        redis.close()
        raise RedisUnavailable(
            f"cannot connect to Redis at {where} (GITFLEET_REDIS_URL): {e}"
        ) from e
    return redis


def _why(url: str, error: RedisError) -> str:
    said = str(error).rstrip(".")
    if "auth" in said.lower() and "@" not in urlsplit(url).netloc:
        return "it requires a password, and the URL gives none"
    return said


TRANSIENT = (RedisConnectionError, RedisTimeoutError)  # a restart or failover: retry later


class Outage:
    """What a loop that reads Redis logs while Redis is away: one warning when it goes, one
    line when it is back, rather than a traceback on every tick. The client reconnects by
    itself (redis-py retries each command, then opens a new connection on the next one), so a
    loop that catches `TRANSIENT` and calls `failed` needs no restart by hand."""

    def __init__(self, log: logging.Logger, what: str) -> None:
        self.log = log
        self.what = what
        self.down = False

    def failed(self, error: Exception) -> None:
        if not self.down:
            self.down = True
            self.log.warning(
                "%s: Redis unreachable (%s); retrying until it is back", self.what, error
            )

    def ok(self) -> None:
        if self.down:
            self.down = False
            self.log.warning("%s: Redis reachable again", self.what)
