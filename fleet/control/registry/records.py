"""What the coordinator registers: clusters, projects, applications and API tokens.

Frozen dataclasses, pure and free of I/O, so the store, the API and the workers share one
vocabulary, and one generic pair of functions (`to_json`, `from_json`) turns any of them into
the JSON kept in Redis. The reader is pydantic's (`TypeAdapter`, following the type hints and
ignoring unknown keys), so adding a field with a default never breaks records written by an
older version. The writer sorts keys, so equal records always have the same text
(`fleet.control.pushes.spec_of` digests it).

Credentials never live in these records. `ClusterCredentials` and
`fleet.engine.source.cache.GitCredentials` are stored apart, encrypted
(`fleet.control.registry.store`), and their `repr` hides every secret.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeVar

from pydantic import TypeAdapter

from fleet.control.windows import SyncWindow
from fleet.engine.limits import Limits
from fleet.kube import incluster
from fleet.kube.kubeconfig import ClusterConfig, ServiceAccount, parse

T = TypeVar("T")


class Role(StrEnum):
    """admin: everything; member: the apps of one project; viewer: read only."""

    ADMIN = "admin"
    MEMBER = "member"
    VIEWER = "viewer"


@dataclass(frozen=True, slots=True)
class ClusterRecord:
    """A registered cluster. `labels` feed application cluster selectors."""

    name: str
    server: str
    labels: dict[str, str] = field(default_factory=dict)
    created: str = ""

    def matches(self, selector: dict[str, str]) -> bool:
        """Whether every label of `selector` is on this cluster (an empty selector matches)."""
        return all(self.labels.get(key) == value for key, value in selector.items())


@dataclass(frozen=True, slots=True)
class ClusterCredentials:
    """How to reach a cluster: a kubeconfig (and context), or a server, bearer token and CA;
    or `in_cluster`: the cluster the reading process runs in, as its pod's ServiceAccount
    (`fleet.kube.incluster`, read when the connection is made; nothing secret is stored)."""

    kubeconfig: str = field(default="", repr=False)
    context: str = ""
    server: str = ""
    token: str = field(default="", repr=False)
    ca_pem: str = ""
    insecure: bool = False
    in_cluster: bool = False

    def config(self, name: str) -> ClusterConfig:
        """Connection settings for the cluster registered as `name`."""
        if self.in_cluster:
            return incluster.config(name)
        if self.kubeconfig:
            parsed = parse(self.kubeconfig, context=self.context or None, source="kubeconfig")
            return dataclasses.replace(parsed, name=name)
        return ClusterConfig(
            name=name,
            server=self.server,
            ca_pem=self.ca_pem.encode(),
            insecure=self.insecure,
            token=self.token,
        )


@dataclass(frozen=True, slots=True)
class Destination:
    """Where a project lets apps deploy: fnmatch globs for the cluster and the namespace."""

    cluster: str = "*"
    namespace: str = "*"


@dataclass(frozen=True, slots=True)
class DestinationServiceAccount:
    """The ServiceAccount (`namespace:name`) a project's syncs act as on the clusters and
    destination namespaces matching the globs (`fleet.control.policy.acting_as`)."""

    cluster: str
    namespace: str = "*"
    service_account: str = ""

    def account(self) -> ServiceAccount:
        namespace, _, name = self.service_account.partition(":")
        return ServiceAccount(namespace, name)


@dataclass(frozen=True, slots=True)
class ProjectRecord:
    """Bounds on what apps of the project may deploy.

    source_repos: globs of allowed repository URLs.
    destinations: allowed (cluster, namespace) glob pairs.
    cluster_kinds: allowed cluster-scoped kinds as `group/Kind` (`Kind` for the core group),
    or `*` for all; none unless listed.
    destination_service_accounts: who the project's syncs act as, per destination; the first
    entry matching wins (none: the cluster's registered credentials).
    has_webhook_secret: the project has its own webhook secret (stored encrypted, apart):
    deliveries signed with it reach this project's apps, and the global secret no longer does.
    allow_remote_renders: kustomize may fetch remote resources and bases, helm dependencies
    from chart repositories (refused otherwise: the worker would fetch any URL a repo names).
    limits: bounds on fetching and rendering the project's repositories (`fleet.engine.limits`).
    """

    name: str
    description: str = ""
    source_repos: tuple[str, ...] = ()
    destinations: tuple[Destination, ...] = ()
    cluster_kinds: tuple[str, ...] = ()
    destination_service_accounts: tuple[DestinationServiceAccount, ...] = ()
    has_webhook_secret: bool = False
    allow_remote_renders: bool = False
    limits: Limits = field(default_factory=Limits)
    created: str = ""
    # Cluster globs whose syncs need a plan a person approved (`fleet.control.plans`).
    require_plan_for: tuple[str, ...] = ()


DEFAULT_PROJECT = ProjectRecord(
    name="default",
    description="built in; like Argo CD's default project it allows every repo, destination "
    "and cluster-scoped kind",
    source_repos=("*",),
    destinations=(Destination("*", "*"),),
    cluster_kinds=("*",),
)


@dataclass(frozen=True, slots=True)
class HelmSource:
    values_yaml: str = ""
    value_files: tuple[str, ...] = ()
    parameters: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AppSource:
    repo: str
    path: str = "."
    revision: str = "HEAD"
    helm: HelmSource = field(default_factory=HelmSource)


@dataclass(frozen=True, slots=True)
class AppDestination:
    """One named cluster, or every cluster whose labels match `selector` (one instance each)."""

    namespace: str
    cluster: str = ""
    selector: dict[str, str] | None = None


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retry a failed sync `limit` times, waiting backoff_s * factor**n, at most max_backoff_s."""

    limit: int = 5
    backoff_s: float = 5.0
    factor: float = 2.0
    max_backoff_s: float = 180.0


@dataclass(frozen=True, slots=True)
class IgnoreDifference:
    json_pointers: tuple[str, ...] = ()
    managers: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncPolicy:
    automated: bool = False
    prune: bool = False
    self_heal: bool = False
    allow_empty: bool = False
    interval_s: float = 180.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    sync_windows: tuple[SyncWindow, ...] = ()
    create_namespace: bool = False
    ignore_differences: tuple[IgnoreDifference, ...] = ()
    # Health: an Ingress waits for its controller to publish an address (Argo CD's rule) rather
    # than being Healthy at once (gitfleet's default; `fleet.engine.health.rules.ingress`).
    ingress_needs_address: bool = False
    # Custom resources without a rule are judged by their conditions; False: no health signal,
    # as in Argo CD (`fleet.engine.health.assess.HealthOptions`).
    custom_resource_health: bool = True
    # How long one sync may take, health waits of its waves included (Flux's `spec.timeout`);
    # a wave still waiting then fails the sync, which reports what it did not apply.
    timeout_s: float = 300.0
    # No automated sync at all (interval, webhook, self-heal, rollout steps) while set, like
    # Flux's `spec.suspend`; a person's sync still runs (`fleet.control.policy.window_block`).
    suspended: bool = False
    # Prune budget: a sync that would delete more than this many objects (0: no limit) or this
    # share of the app's objects (percent, 0: no limit) deletes nothing and asks
    # (`fleet.engine.prune.PruneBudget`); a person allows one sync over it.
    prune_budget_count: int = 0
    prune_budget_percent: float = 0.0
    # The delete calls' propagationPolicy: background (default), foreground or orphan; an
    # object's `gitfleet.io/prune-propagation` annotation overrides it for that object.
    prune_propagation: str = "background"
    # A cascading app delete still unfinished after this many seconds fails, naming what is
    # left and what holds it (0: 120 s, `worker.teardown.PRUNE_TIMEOUT`).
    deletion_timeout_s: float = 0.0


@dataclass(frozen=True, slots=True)
class PostBuild:
    """Flux's post-build substitution, on when an app has one: `${var}` in its rendered
    objects and helm values takes `substitute`'s values and the destination cluster's
    (`fleet.control.policy.variables_for`, `fleet.engine.render.substitute`)."""

    substitute: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RolloutStep:
    """One step of a progressive rollout (`fleet.control.rollouts`): of the clusters no earlier
    step took, those matching `match_labels` (all when empty), at most `max_parallel` of them
    ("" all, "2" a count, "50%" a share rounded up); then a pause: `pause_s` seconds, or until a
    person promotes (`pause_manual`)."""

    match_labels: dict[str, str] = field(default_factory=dict)
    max_parallel: str = ""
    pause_s: float = 0.0
    pause_manual: bool = False


@dataclass(frozen=True, slots=True)
class RolloutSpec:
    """Ordered steps a new revision goes through; `poll_s`: how often the coordinator asks git
    for the newest commit of the app's revision."""

    steps: tuple[RolloutStep, ...] = ()
    poll_s: float = 30.0


@dataclass(frozen=True, slots=True)
class AppRecord:
    """An application. `has_credentials`: git credentials are stored (encrypted) for it.
    `deleting`: a cascading delete is pruning its objects; the record goes once that is done.
    `uid`: given by the store when the app is created and kept for life; the objects the app
    applies are tracked by it, so a later app of the same name owns none of them. Empty for a
    record stored before apps had uids (see `owner_uid`)."""

    name: str
    source: AppSource
    destination: AppDestination
    project: str = "default"
    sync_policy: SyncPolicy = field(default_factory=SyncPolicy)
    depends_on: tuple[str, ...] = ()
    has_credentials: bool = False
    deleting: bool = False
    created: str = ""
    updated: str = ""
    uid: str = ""
    post_build: PostBuild | None = None  # None: no `${var}` substitution
    owner_set: str = ""  # the app set that generated it (`fleet.control.appsets`); "" none
    rollout: RolloutSpec | None = None  # None: a new revision reaches every cluster at once

    @property
    def owner_uid(self) -> str:
        """The uid objects are tracked by: `uid`, or for a record stored before apps had one, a
        uid derived from its name and creation time (stable, and no later app's)."""
        seed = f"gitfleet:app:{self.name}:{self.created}"
        return self.uid or str(uuid.uuid5(uuid.NAMESPACE_URL, seed))


@dataclass(frozen=True, slots=True)
class TokenRecord:
    """An API token; only the SHA-256 of its text is stored. `expires`: ISO 8601 instant after
    which it is refused ("" never)."""

    name: str
    role: Role
    project: str | None = None
    created: str = ""
    expires: str = ""

    def expired(self, now: datetime) -> bool:
        return bool(self.expires) and datetime.fromisoformat(self.expires) <= now


def to_data(record: Any) -> dict[str, Any]:
    """A JSON-ready dict of a record (tuples become lists when dumped)."""
    data: dict[str, Any] = dataclasses.asdict(record)
    return data


def to_json(record: Any) -> str:
    return json.dumps(to_data(record), sort_keys=True)


def from_json(cls: type[T], text: str | bytes) -> T:
    """Build `cls` from its JSON, following its type hints; unknown keys are ignored."""
    adapter = _adapters.get(cls) or _adapters.setdefault(cls, TypeAdapter(cls))
    record: T = adapter.validate_json(text)
    return record


_adapters: dict[type[Any], TypeAdapter[Any]] = {}  # building one costs far more than a read
