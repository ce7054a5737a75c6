"""The one way a gitfleet process connects to Redis: `connect(GITFLEET_REDIS_URL)`.

Redis holds the registry, every encrypted credential and the work queues, so it is a trust
boundary (SECURITY.md, "Redis"). Everything about the connection comes from the one URL, read
by redis-py's `Redis.from_url` and never rebuilt from host and port, so nothing can drop a part
of it: the password (`redis://:PASSWORD@host:6379/0`, or `USER:PASSWORD@` for an ACL user),
TLS (`rediss://`, with query options such as `ssl_cert_reqs=required` and
`ssl_ca_certs=/path/ca.pem`, or `ssl_certfile`/`ssl_keyfile` for a client certificate), the
database. The API, the scheduler in it, the workers and rq on their behalf all share the pool
`connect` returns.

Sentinel (Redis run as a replicated set with automatic failover) has a URL of its own, which
redis-py's `from_url` does not read: `redis+sentinel://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT
...]/MASTER_NAME[/DB][?sentinel_password=...]` (ports default to 26379; the password is the
master's, `sentinel_password` the sentinels' own when they require one). The client asks the
sentinels where the master is and asks again after a failover (`redis.sentinel.Sentinel`).

`connect` asks Redis once (PING), so a process with a wrong URL, a missing password or a
certificate it cannot verify stops at start with an error naming GITFLEET_REDIS_URL, instead
of failing on its first command. Messages show the URL through `redacted`, never its password.

After the start, a Redis restart is an outage to ride out, not a reason to exit: commands fail
with `TRANSIENT` errors while it lasts (the API answers 503, loops log one `Outage` warning
and retry), and the pool reconnects once Redis answers again.
"""

from __future__ import annotations

import logging
from urllib.parse import parse_qs, unquote, urlsplit, urlunsplit

from redis import AuthenticationError, Redis, RedisError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.sentinel import Sentinel

from fleet.errors import Fault, FleetError

SENTINEL_SCHEME = "redis+sentinel"
SENTINEL_PORT = 26379
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
        redis = sentinel_master(url) if is_sentinel(url) else Redis.from_url(url)
    except ValueError as e:
        raise RedisUnavailable(
            f"GITFLEET_REDIS_URL is not a Redis URL ({where}): {e}. Use "
            "redis://[:PASSWORD@]HOST:PORT/DB, rediss://... for TLS, or "
            f"{SENTINEL_SCHEME}://[:PASSWORD@]HOST:PORT[,HOST:PORT]/MASTER_NAME/DB"
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


def is_sentinel(url: str) -> bool:
    return url.startswith(f"{SENTINEL_SCHEME}://")


def sentinel_master(url: str) -> Redis:
    """A client of the master the sentinels of `url` name, following failovers."""
    parts = urlsplit(url)
    hosts = parts.netloc.rsplit("@", 1)[-1]
    names = [name for name in parts.path.split("/") if name]
    if not hosts or not names or len(names) > 2:
        raise ValueError("give the sentinels and the master's name: HOST:PORT[,...]/MASTER_NAME")
    sentinels = [_host_port(entry) for entry in hosts.split(",")]
    db_name = names[1] if len(names) == 2 else "0"
    if not db_name.isdigit():
        raise ValueError(f"the database {db_name!r} is not a number")
    db = int(db_name)
    query = parse_qs(parts.query)
    sentinel_password = query.get("sentinel_password", [None])[0]
    # Only the sentinels get a socket timeout: the master's connections block as long as a
    # command asks (a queue's BLPOP), as `Redis.from_url`'s do.
    sentinel_kwargs: dict[str, object] = {"socket_timeout": 5.0}
    if sentinel_password:
        sentinel_kwargs["password"] = sentinel_password
    sentinel = Sentinel(sentinels, sentinel_kwargs=sentinel_kwargs)  # type: ignore[no-untyped-call, unused-ignore]
    master: Redis = sentinel.master_for(  # type: ignore[no-untyped-call, unused-ignore]
        names[0],
        db=db,
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
    )
    return master


def _host_port(entry: str) -> tuple[str, int]:
    """`HOST`, `HOST:PORT`, `[IPV6]` or `[IPV6]:PORT` of one sentinel."""
    entry = entry.strip()
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        port = rest.removeprefix(":")
    elif entry.count(":") == 1:
        host, _, port = entry.partition(":")
    else:
        host, port = entry, ""
    if not host or (port and not port.isdigit()):
        raise ValueError(f"sentinel {entry!r} is not HOST:PORT")
    return host, int(port) if port else SENTINEL_PORT


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
