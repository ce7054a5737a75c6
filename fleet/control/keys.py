"""Every Redis key gitfleet writes and every rq queue it names, built here and nowhere else.

Each key comes from one template below (rq's scattered key building is the habit to avoid), so
a reader sees the whole layout at once. `<p>` is the prefix (GITFLEET_PREFIX, `gitfleet` by
default), so several fleets or tests can share one Redis.

The registry (`fleet.control.registry`):

    <p>:clusters, <p>:projects, <p>:apps      sets of names (the indexes)
    <p>:cluster:<name>, :project:, :app:       JSON records (`fleet.control.registry.records`)
    <p>:cluster-credentials:<name>             Fernet-encrypted ClusterCredentials
    <p>:app-credentials:<name>                 Fernet-encrypted git credentials, bound to the
                                               repository URL they were given for
    <p>:repositories                           set of repository credentials' names
    <p>:repository:<name>                      repository credentials' URL prefix and projects
    <p>:repository-credentials:<name>          their Fernet-encrypted GitCredentials
                                               (`fleet.control.registry.gitcreds`)
    <p>:registry:generation                    bumped by every registry write, see
                                               `fleet.control.registry.transact`
    <p>:secret-key                             the Fernet key made when GITFLEET_SECRET_KEY is
                                               unset (`fleet.control.registry.secrets`)
    <p>:project-webhook-secret:<name>          Fernet-encrypted webhook secret of a project
    <p>:tokens, <p>:token:<sha256>             token name -> digest, digest -> TokenRecord
                                               (expiring with the token, when it has an expiry)
    <p>:bootstrap-token-generated              set once the first start generated an admin token
    <p>:status:<app>                           hash cluster -> status JSON (written by workers)
    <p>:history:<app>:<cluster>                list of sync records, newest first
    <p>:operation:<app>                        last operation requested through the API
    <p>:stats:syncs                            hash result -> count, for /metrics
    <p>:stats:duration:sync                    histogram of whole syncs: bucket upper bound ->
    <p>:stats:duration:stage:<stage>           count, plus `sum` and `count`; one per stage

Pushes (`fleet.control.pushes`):

    <p>:synced:<repo>                          hash instance -> what it last matched
    <p>:pushes:<repo>:<ref>                    list of recent pushes with their changed files,
    <p>:pushes:<repo>:<ref>:<project>          one per project with its own webhook secret
    <p>:delivery:<id>                          a webhook delivery id seen, with a TTL
                                               (`fleet.control.deliveries`)

Routing (`fleet.control.routing`) and the scheduler (`fleet.control.scheduler`):

    <p>:workers                                sorted set worker -> deadline (ms), live workers
    <p>:worker:<name>                          a live worker's metadata (JSON), with its TTL
    <p>:lease:<app@cluster>                    holder of an instance's lease, with its TTL
    <p>:fence:<app@cluster>                    hash: its fencing `token` (a counter bumped at
                                               each acquisition) and the lease's `until` (ms)
    <p>:pending                                set of instances with a pending sync
    <p>:pending:<app@cluster>                  hash: the instance's pending sync
    <p>:deferred, <p>:deferred-intents         sorted set instance -> due time, hash -> intent
    <p>:scheduler:lease:<name>                 the scheduler lock (`coordinator`), a lease
    <p>:scheduler:last                         hash instance -> when an interval sync was asked
    <p>:scheduler:blocked                      hash instance -> why a sync window blocks it

The worker (`worker.journal`):

    <p>:journal                                list of the syncs each worker ran

rq queues (`Queues`):

    <p>-shard-<worker>                         one queue per live worker, its shard's jobs

A queue name is not a key: rq builds its own keys from it (`rq:queue:<queue>`, `rq:wip:<queue>`
and the other registries, `rq:job:<id>` for each job), so those follow rq's layout, not ours.
"""

from __future__ import annotations


class Keys:
    """Every Redis key, from one prefix: attributes for fixed keys, methods for the others."""

    def __init__(self, prefix: str = "gitfleet") -> None:
        self.p = prefix
        self.pattern = f"{prefix}:*"  # a SCAN pattern that matches every key below
        self.generation = f"{prefix}:registry:generation"
        self.clusters = f"{prefix}:clusters"
        self.projects = f"{prefix}:projects"
        self.apps = f"{prefix}:apps"
        self.repositories = f"{prefix}:repositories"
        self.secret_key = f"{prefix}:secret-key"
        self.tokens = f"{prefix}:tokens"
        self.bootstrap = f"{prefix}:bootstrap-token-generated"
        self.sync_counts = f"{prefix}:stats:syncs"
        self.sync_durations = f"{prefix}:stats:duration:sync"
        self.workers = f"{prefix}:workers"
        self.pending_index = f"{prefix}:pending"
        self.deferred = f"{prefix}:deferred"
        self.deferred_intents = f"{prefix}:deferred-intents"
        self.scheduler_last = f"{prefix}:scheduler:last"
        self.scheduler_blocked = f"{prefix}:scheduler:blocked"
        self.journal = f"{prefix}:journal"

    # -- the registry -------------------------------------------------------------------------

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

    def repository(self, name: str) -> str:
        return f"{self.p}:repository:{name}"

    def repository_credentials(self, name: str) -> str:
        return f"{self.p}:repository-credentials:{name}"

    def project_webhook_secret(self, name: str) -> str:
        return f"{self.p}:project-webhook-secret:{name}"

    def token(self, digest: str) -> str:
        return f"{self.p}:token:{digest}"

    def status(self, app: str) -> str:
        return f"{self.p}:status:{app}"

    def history(self, app: str, cluster: str) -> str:
        return f"{self.p}:history:{app}:{cluster}"

    def operation(self, app: str) -> str:
        return f"{self.p}:operation:{app}"

    def stage_durations(self, stage: str) -> str:
        """The histogram of one sync stage; `stage_durations("*")` is a SCAN pattern for all."""
        return f"{self.p}:stats:duration:stage:{stage}"

    # -- pushes -------------------------------------------------------------------------------

    def synced(self, repo: str) -> str:
        """instance -> what it last matched, for the apps on `repo` (`fleet.control.pushes`)."""
        return f"{self.p}:synced:{repo}"

    def pushes(self, repo: str, ref: str, project: str = "") -> str:
        """The recent pushes to `ref` of `repo` with their changed files
        (`fleet.control.pushes`), as told by the global webhook secret or, with `project`,
        by that project's own."""
        return f"{self.p}:pushes:{repo}:{ref}" + (f":{project}" if project else "")

    def delivery(self, delivery_id: str) -> str:
        """A webhook delivery id already accepted (`fleet.control.deliveries`)."""
        return f"{self.p}:delivery:{delivery_id}"

    # -- routing and the scheduler ------------------------------------------------------------

    def worker(self, name: str) -> str:
        return f"{self.p}:worker:{name}"

    def lease(self, instance: str) -> str:
        return f"{self.p}:lease:{instance}"

    def fence(self, instance: str) -> str:
        """The fencing token and deadline of `instance`'s lease (`routing.leases`)."""
        return f"{self.p}:fence:{instance}"

    def pending(self, instance: str) -> str:
        return f"{self.p}:pending:{instance}"

    def scheduler_lease(self, name: str) -> str:
        return f"{self.p}:scheduler:lease:{name}"


class Queues:
    """The rq queue names, from the same prefix: one queue per worker, for its shard."""

    def __init__(self, prefix: str = "gitfleet") -> None:
        self.p = prefix
        self._shard = f"{prefix}-shard-"
        self.rq_pattern = f"rq:*{self._shard}*"  # a SCAN pattern for rq's keys of these queues

    def shard(self, worker: str) -> str:
        """The queue `worker` takes its jobs from."""
        return f"{self._shard}{worker}"

    def worker_of(self, queue: str) -> str:
        """The worker whose queue `queue` is."""
        return queue.removeprefix(self._shard)
