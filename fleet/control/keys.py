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
    <p>:registry:app-changes                   sorted set app name -> generation of its last
                                               write; with <p>:registry:app-changes-floor,
                                               see `fleet.control.registry.appcache`
    <p>:secret-key                             the Fernet key made when GITFLEET_SECRET_KEY is
                                               unset (`fleet.control.registry.secrets`)
    <p>:project-webhook-secret:<name>          Fernet-encrypted webhook secret of a project
    <p>:project-age-key:<name>                 Fernet-encrypted age key of a project (SOPS)
    <p>:tokens, <p>:token:<sha256>             token name -> digest, digest -> TokenRecord
                                               (expiring with the token, when it has an expiry)
    <p>:bootstrap-token-generated              set once the first start generated an admin token
    <p>:status:<app>                           hash cluster -> status JSON (written by workers)
    <p>:history:<app>:<cluster>                list of sync records, newest first
    <p>:operation:<app>                        last operation requested through the API
    <p>:ui-session:<id>                        a web UI session (`api.ui.session`): the token's
                                               digest and the CSRF token, with its TTL
    <p>:stats:syncs                            hash result -> count, for /metrics
    <p>:stats:duration:sync                    histogram of whole syncs: bucket upper bound ->
    <p>:stats:duration:stage:<stage>           count, plus `sum` and `count`; one per stage

Pushes (`fleet.control.pushes`):

    <p>:synced:<repo>                          hash instance -> what it last matched
    <p>:pushes:<repo>:<ref>                    list of recent pushes with their changed files,
    <p>:pushes:<repo>:<ref>:<project>          one per project with its own webhook secret
    <p>:delivery:<id>                          a webhook delivery id seen, with a TTL
                                               (`fleet.control.deliveries`)

Notifications (`fleet.control.notifications`) and the commit-to-healthy clock
(`fleet.control.commitclock`): see `Keys.notify` and `Keys.commit_clock`:

    <p>:notify:<part>                          subscriptions, their secrets, dedup state,
                                               the delivery queue and delivery results
    <p>:commit-clock:<part>                    push times, per-instance clocks, histograms
    <p>:appset:<part>                          app sets and their status (`Keys.appset`)
    <p>:plan:<part>                            sync plans, the plan each instance's next
                                               sync runs, one-time prune allowances
                                               (`Keys.plan`, `fleet.control.plans`)

Routing (`fleet.control.routing`) and the scheduler (`fleet.control.scheduler`):

    <p>:workers                                sorted set worker -> deadline (ms), live workers
    <p>:worker:<name>                          a live worker's metadata (JSON), with its TTL
    <p>:lease:<app@cluster>                    holder of an instance's lease, with its TTL
    <p>:fence:<app@cluster>                    hash: its fencing `token` (a counter bumped at
                                               each acquisition) and the lease's `until` (ms)
    <p>:pending                                set of instances with a pending sync
    <p>:pending:<app@cluster>                  hash: the instance's pending sync
    <p>:deferred, <p>:deferred-intents         sorted set instance -> due time, hash -> intent
    <p>:checks                                 set of workers with quiet checks waiting
    <p>:checks:<worker>                        sorted set instance -> when its quiet check
    <p>:check-intents:<worker>                 was asked; hash instance -> check id and intent
    <p>:check-result:<id>                      what a quiet check answered, with a TTL
                                               (`fleet.control.routing.checks`)
    <p>:scheduler:lease:<name>                 the scheduler lock (`coordinator`), a lease
    <p>:scheduler:last                         hash instance -> when an interval sync was asked
    <p>:scheduler:blocked                      hash instance -> why a sync window blocks it
    <p>:rollouts                               set of apps with a rollout state
    <p>:rollout:<app>                          a progressive rollout's state (JSON)
    <p>:rollout-pins:<app>                     hash cluster -> the revision the instance syncs
                                               at (`fleet.control.rollouts.state`)

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
        self.app_changes = f"{prefix}:registry:app-changes"
        self.app_changes_floor = f"{prefix}:registry:app-changes-floor"
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
        self.checks_index = f"{prefix}:checks"
        self.scheduler_last = f"{prefix}:scheduler:last"
        self.scheduler_blocked = f"{prefix}:scheduler:blocked"
        self.journal = f"{prefix}:journal"
        self.rollouts = f"{prefix}:rollouts"

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

    def project_age_key(self, name: str) -> str:
        """The project's age key for SOPS files, encrypted (`fleet.control.registry.agekeys`)."""
        return f"{self.p}:project-age-key:{name}"

    def token(self, digest: str) -> str:
        return f"{self.p}:token:{digest}"

    def status(self, app: str) -> str:
        return f"{self.p}:status:{app}"

    def history(self, app: str, cluster: str) -> str:
        return f"{self.p}:history:{app}:{cluster}"

    def operation(self, app: str) -> str:
        return f"{self.p}:operation:{app}"

    def ui_session(self, session_id: str) -> str:
        return f"{self.p}:ui-session:{session_id}"

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

    # -- notifications and the commit-to-healthy clock -----------------------------------------

    def appset(self, part: str) -> str:
        """App sets (`fleet.control.appsets`): `names` (set of names), `set:<name>` (the
        AppSetRecord JSON), `status:<name>` (what its last reconcile made or refused)."""
        return f"{self.p}:appset:{part}"

    def notify(self, part: str) -> str:
        """Notifications (`fleet.control.notifications`): `subscriptions` (set of names),
        `subscription:<name>`, `subscription-secret:<name>` (encrypted), `last:<app>` (the
        last state notified per cluster and event kind), `queue` (sorted set delivery id ->
        due time), `outbox` (hash id -> pending delivery), `deliveries:<name>` (results)."""
        return f"{self.p}:notify:{part}"

    def plan(self, part: str) -> str:
        """Sync plans (`fleet.control.plans`): `id:<id>` (a stored plan, with a TTL),
        `run:<app@cluster>/<uid>` (the plan the next sync of the instance runs), `prune-allow:
        <app@cluster>/<uid>` (one sync of the instance may prune over the app's budget); `uid`
        the app's `owner_uid`, so a later app of the same name inherits neither."""
        return f"{self.p}:plan:{part}"

    def commit_clock(self, part: str) -> str:
        """The commit-to-healthy clock (`fleet.control.commitclock`): `pushed:<repo>`
        (revision -> when a push named it), `since:<app>` (cluster -> revision and since
        when), `stats` (set of instances with a histogram), `stats:<app@cluster>`."""
        return f"{self.p}:commit-clock:{part}"

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

    def checks(self, worker: str) -> str:
        """The quiet checks waiting for `worker`, by when each was asked."""
        return f"{self.p}:checks:{worker}"

    def check_intents(self, worker: str) -> str:
        return f"{self.p}:check-intents:{worker}"

    def check_result(self, check_id: str) -> str:
        return f"{self.p}:check-result:{check_id}"

    def scheduler_lease(self, name: str) -> str:
        return f"{self.p}:scheduler:lease:{name}"

    def rollout(self, app: str) -> str:
        """The state of `app`'s progressive rollout (`fleet.control.rollouts.state`)."""
        return f"{self.p}:rollout:{app}"

    def rollout_pins(self, app: str) -> str:
        """cluster -> the revision the rollout pins `app`'s instance there to."""
        return f"{self.p}:rollout-pins:{app}"


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
