"""The registry's Redis keys, its errors, and the one transaction helper every write goes through.

Keys are spelled here and nowhere else (rq's scattered key building is the habit to avoid), so a
reader sees the whole layout at once:

    <p>:clusters, <p>:projects, <p>:apps      sets of names (the indexes)
    <p>:cluster:<name>, :project:, :app:       JSON records (`fleet.control.registry.records`)
    <p>:cluster-credentials:<name>             Fernet-encrypted ClusterCredentials
    <p>:app-credentials:<name>                 Fernet-encrypted GitCredentials
    <p>:status:<app>                           hash cluster -> status JSON (written by workers)
    <p>:history:<app>:<cluster>                list of sync records, newest first
    <p>:operation:<app>                        last operation requested through the API
    <p>:tokens, <p>:token:<sha256>             token name -> digest, digest -> TokenRecord
    <p>:stats:<name>                           counters and histogram buckets for /metrics
    <p>:registry:generation                    bumped by every registry write (see `transact`)
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from redis import Redis, WatchError
from redis.client import Pipeline

from fleet.errors import Fault, FleetError

_ATTEMPTS = 5


class StoreError(FleetError):
    stage = "store"
    fault = Fault.USER


class NotFound(StoreError):
    """No record with that name."""


class AlreadyExists(StoreError):
    """A record with that name is registered already."""


class InUse(StoreError):
    """Deleting the record would strand the applications that use it."""


class InvalidReference(StoreError):
    """The record names something that does not exist (a project, a cluster, an app)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class Conflict(StoreError):
    """Concurrent writes kept changing the registry; retrying the request helps."""

    retryable = True


class Keys:
    """Every Redis key the registry uses, from one prefix."""

    def __init__(self, prefix: str = "gitfleet") -> None:
        self.p = prefix
        self.generation = f"{prefix}:registry:generation"
        self.clusters = f"{prefix}:clusters"
        self.projects = f"{prefix}:projects"
        self.apps = f"{prefix}:apps"
        self.tokens = f"{prefix}:tokens"
        self.bootstrap = f"{prefix}:bootstrap-token-generated"

    def cluster(self, name: str) -> str:
        return f"{self.p}:cluster:{name}"

    def cluster_credentials(self, name: str) -> str:
        return f"{self.p}:cluster-credentials:{name}"

    def project(self, name: str) -> str:
        return f"{self.p}:project:{name}"

    def app(self, name: str) -> str:
        return f"{self.p}:app:{name}"

    def app_credentials(self, name: str) -> str:
        return f"{self.p}:app-credentials:{name}"

    def status(self, app: str) -> str:
        return f"{self.p}:status:{app}"

    def history(self, app: str, cluster: str) -> str:
        return f"{self.p}:history:{app}:{cluster}"

    def operation(self, app: str) -> str:
        return f"{self.p}:operation:{app}"

    def synced(self, repo: str) -> str:
        """instance -> what it last matched, for the apps on `repo` (`fleet.control.pushes`)."""
        return f"{self.p}:synced:{repo}"

    def pushes(self, repo: str, ref: str) -> str:
        """The recent pushes to `ref` of `repo` with their changed files
        (`fleet.control.pushes`)."""
        return f"{self.p}:pushes:{repo}:{ref}"

    def token(self, digest: str) -> str:
        return f"{self.p}:token:{digest}"

    def stats(self, name: str) -> str:
        """`syncs` (hash result -> count), `duration:sync` and `duration:stage:<stage>`
        (histogram: bucket upper bound -> count, plus `sum` and `count`)."""
        return f"{self.p}:stats:{name}"


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def transact(
    redis: Redis, keys: Keys, check: Callable[[], None], write: Callable[[Pipeline], None]
) -> None:
    """Run `check`, then `write` and a generation bump in one MULTI/EXEC; re-run on a race.

    `check` reads through the ordinary client after the WATCH, so any registry write that lands
    between the check and EXEC bumps the generation and makes EXEC refuse the whole write.
    """
    for _ in range(_ATTEMPTS):
        with redis.pipeline() as pipe:
            try:
                pipe.watch(keys.generation)  # type: ignore[no-untyped-call]
                check()
                pipe.multi()
                write(pipe)
                pipe.incr(keys.generation)
                pipe.execute()
                return
            except WatchError:
                continue
    raise Conflict("the registry kept changing while this request ran; retry it")
