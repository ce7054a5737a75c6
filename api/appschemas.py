"""The application body: what a caller sends to create or replace an app, and what GET returns.

One model serves both directions (`AppIn.record()` and `AppIn.of(record)`), so a GET body can
be edited and PUT back unchanged. Durations accept seconds or "90s" / "5m" / "1h30m" and come
back as seconds. Sync windows are checked by `fleet.control.windows.SyncWindow` itself, whose errors
name the bad field; one that never opens (`fleet.control.windows.check_opens`) is refused on input
only, so a record stored before that check can still be read and fixed. Git credentials are
write-only: GET says only `hasCredentials`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from api.rolloutschemas import RolloutIn
from api.schemas import ApiModel, Labels, Name, Seconds
from fleet.control.registry.records import (
    AppDestination,
    AppRecord,
    AppSource,
    HelmSource,
    IgnoreDifference,
    PostBuild,
    RetryPolicy,
    SyncPolicy,
)
from fleet.control.registry.repos import has_credentials
from fleet.control.windows import SyncWindow, check_opens
from fleet.engine.render.substitute import is_name
from fleet.engine.source.cache import GitCredentials
from fleet.engine.source.remotes import shown

MAX_BATCH = 500  # apps per POST /apps/batch
MAX_DEPENDENCIES = 64  # dependsOn entries of one app
STORED = "stored"  # validation context of `AppIn.of`: a record read back, not a request


def _repo(value: str) -> str:
    if not value.strip():
        raise ValueError("give the repository URL")
    if has_credentials(value):
        raise ValueError("the URL must not carry a password or token; send it in `credentials`")
    return value.strip()


def _path(value: str) -> str:
    parts = value.replace("\\", "/").strip("/").split("/")  # the engine reads a backslash as "/"
    if value.startswith(("/", "\\")) or ".." in parts:
        raise ValueError(f"{value!r} must be a folder inside the repository, without '..'")
    return value.strip("/") or "."


def _pointer(value: str) -> str:
    if not value.startswith("/"):
        raise ValueError(f"{value!r} is not a JSON pointer (it starts with '/')")
    return value


class HelmIn(ApiModel):
    values_yaml: str = ""
    value_files: list[str] = Field(default_factory=list)
    parameters: dict[str, str] = Field(default_factory=dict)


def _variables(value: dict[str, str]) -> dict[str, str]:
    for name in value:
        if not is_name(name):
            raise ValueError(f"{name!r} is not a variable name: use ^[_a-zA-Z][_a-zA-Z0-9]*$")
        if name.startswith("cluster_"):
            raise ValueError(f"{name}: names starting with cluster_ are the destination cluster's")
    return value


class PostBuildIn(ApiModel):
    """Flux's post-build substitution: present turns `${var}` substitution on for the app;
    `substitute` holds its own variables (the cluster's are added per instance)."""

    substitute: Annotated[dict[str, str], AfterValidator(_variables)] = Field(default_factory=dict)


class SourceIn(ApiModel):
    repo: Annotated[str, AfterValidator(_repo)]
    path: Annotated[str, AfterValidator(_path)] = "."
    revision: str = Field(default="HEAD", min_length=1)
    helm: HelmIn = HelmIn()


class AppDestinationIn(ApiModel):
    """One named `cluster`, or a `clusterSelector` (labels) for one instance per match."""

    namespace: Name
    cluster: Name | None = None
    cluster_selector: Labels | None = None

    @model_validator(mode="after")
    def _one_target(self) -> AppDestinationIn:
        if (self.cluster is None) == (self.cluster_selector is None):
            raise ValueError("give exactly one of cluster or clusterSelector")
        return self


class RetryIn(ApiModel):
    limit: int = Field(default=5, ge=0, le=100)
    backoff: Seconds = Field(default=5.0, gt=0)
    factor: float = Field(default=2.0, ge=1)
    max_backoff: Seconds = Field(default=180.0, gt=0)


class SyncWindowIn(ApiModel):
    kind: str
    schedule: str
    duration: str
    timezone: str = "UTC"
    manual_sync: bool = False
    applications: list[str] = Field(default_factory=lambda: ["*"])

    @model_validator(mode="after")
    def _valid(self, info: ValidationInfo) -> SyncWindowIn:
        window = self.window()
        if not (info.context or {}).get(STORED):
            check_opens(window, datetime.now(UTC))  # a well-formed cron that never fires
        return self

    def window(self) -> SyncWindow:
        return SyncWindow(
            kind=self.kind,
            schedule=self.schedule,
            duration=self.duration,
            timezone=self.timezone,
            manual_sync=self.manual_sync,
            applications=tuple(self.applications),
        )


class IgnoreIn(ApiModel):
    json_pointers: list[Annotated[str, AfterValidator(_pointer)]] = Field(default_factory=list)
    managers: list[str] = Field(default_factory=list)


class SyncPolicyIn(ApiModel):
    automated: bool = False
    prune: bool = False
    self_heal: bool = False
    allow_empty: bool = False
    interval: Seconds = Field(default=180.0, ge=5)
    retry: RetryIn = RetryIn()
    sync_windows: list[SyncWindowIn] = Field(default_factory=list)
    create_namespace: bool = False
    ignore_differences: list[IgnoreIn] = Field(default_factory=list)
    ingress_needs_address: bool = False  # an Ingress waits for an address (Argo CD's rule)
    custom_resource_health: bool = True  # False: custom resources get no health (Argo CD's)
    timeout: Seconds = Field(default=300.0, ge=1, le=86400)  # one sync, health waits included
    suspended: bool = False  # no automated sync while set; a person's sync still runs
    prune_budget_count: int = Field(default=0, ge=0)  # 0: no limit on objects one sync deletes
    prune_budget_percent: float = Field(default=0.0, ge=0, le=100)  # 0: no limit on the share
    prune_propagation: Literal["background", "foreground", "orphan"] = "background"
    deletion_timeout: Seconds = Field(default=0.0, ge=0, le=86400)  # cascading delete; 0: 120s


class CredentialsIn(ApiModel):
    """HTTP credentials for the repository; for a token, put it in `password`."""

    username: str = ""
    password: SecretStr


class AppIn(ApiModel):
    name: Name
    project: Name = "default"
    source: SourceIn
    destination: AppDestinationIn
    sync_policy: SyncPolicyIn = SyncPolicyIn()
    depends_on: list[Name] = Field(default_factory=list)
    credentials: CredentialsIn | None = None
    post_build: PostBuildIn | None = None
    rollout: RolloutIn | None = None

    @field_validator("depends_on")
    @classmethod
    def _bounded(cls, depends_on: list[str], info: ValidationInfo) -> list[str]:
        """A request names at most MAX_DEPENDENCIES apps; a record stored before the bound
        reads back as it is."""
        if len(depends_on) > MAX_DEPENDENCIES and not (info.context or {}).get(STORED):
            raise ValueError(f"at most {MAX_DEPENDENCIES} apps, {len(depends_on)} given")
        return depends_on

    def git_credentials(self) -> GitCredentials | None:
        if self.credentials is None:
            return None
        password = self.credentials.password.get_secret_value()
        return GitCredentials(username=self.credentials.username, password=password)

    def record(self, *, keep_credentials: bool = False) -> AppRecord:
        """The record; `keep_credentials` marks stored credentials as still in use."""
        return AppRecord(
            name=self.name,
            project=self.project,
            source=_source(self.source),
            destination=AppDestination(
                namespace=self.destination.namespace,
                cluster=self.destination.cluster or "",
                selector=self.destination.cluster_selector,
            ),
            sync_policy=_policy(self.sync_policy),
            depends_on=tuple(dict.fromkeys(self.depends_on)),
            has_credentials=keep_credentials,
            post_build=None if self.post_build is None else PostBuild(self.post_build.substitute),
            rollout=None if self.rollout is None else self.rollout.spec(),
        )

    @classmethod
    def of(cls, record: AppRecord) -> AppIn:
        src, dest, policy = record.source, record.destination, record.sync_policy
        return cls.model_validate(
            {
                "name": record.name,
                "project": record.project,
                "source": {
                    "repo": shown(src.repo),  # a record from before user-info was refused
                    "path": src.path,
                    "revision": src.revision,
                    "helm": {
                        "values_yaml": src.helm.values_yaml,
                        "value_files": list(src.helm.value_files),
                        "parameters": src.helm.parameters,
                    },
                },
                "destination": {
                    "namespace": dest.namespace,
                    "cluster": dest.cluster or None,
                    "cluster_selector": dest.selector if not dest.cluster else None,
                },
                "sync_policy": _policy_data(policy),
                "depends_on": list(record.depends_on),
                "post_build": (
                    None
                    if record.post_build is None
                    else {"substitute": dict(record.post_build.substitute)}
                ),
                "rollout": None if record.rollout is None else RolloutIn.of(record.rollout),
            },
            context={STORED: True},
        )


def _source(source: SourceIn) -> AppSource:
    helm = HelmSource(
        values_yaml=source.helm.values_yaml,
        value_files=tuple(source.helm.value_files),
        parameters=dict(source.helm.parameters),
    )
    return AppSource(repo=source.repo, path=source.path, revision=source.revision, helm=helm)


def _policy(policy: SyncPolicyIn) -> SyncPolicy:
    retry = policy.retry
    return SyncPolicy(
        automated=policy.automated,
        prune=policy.prune,
        self_heal=policy.self_heal,
        allow_empty=policy.allow_empty,
        interval_s=policy.interval,
        retry=RetryPolicy(retry.limit, retry.backoff, retry.factor, retry.max_backoff),
        sync_windows=tuple(w.window() for w in policy.sync_windows),
        create_namespace=policy.create_namespace,
        ignore_differences=tuple(
            IgnoreDifference(tuple(rule.json_pointers), tuple(rule.managers))
            for rule in policy.ignore_differences
        ),
        ingress_needs_address=policy.ingress_needs_address,
        custom_resource_health=policy.custom_resource_health,
        timeout_s=policy.timeout,
        suspended=policy.suspended,
        prune_budget_count=policy.prune_budget_count,
        prune_budget_percent=policy.prune_budget_percent,
        prune_propagation=policy.prune_propagation,
        deletion_timeout_s=policy.deletion_timeout,
    )


def _policy_data(policy: SyncPolicy) -> dict[str, object]:
    retry = policy.retry
    return {
        "automated": policy.automated,
        "prune": policy.prune,
        "self_heal": policy.self_heal,
        "allow_empty": policy.allow_empty,
        "interval": policy.interval_s,
        "retry": {
            "limit": retry.limit,
            "backoff": retry.backoff_s,
            "factor": retry.factor,
            "max_backoff": retry.max_backoff_s,
        },
        "sync_windows": [
            {
                "kind": w.kind,
                "schedule": w.schedule,
                "duration": w.duration,
                "timezone": w.timezone,
                "manual_sync": w.manual_sync,
                "applications": list(w.applications),
            }
            for w in policy.sync_windows
        ],
        "create_namespace": policy.create_namespace,
        "ignore_differences": [
            {"json_pointers": list(r.json_pointers), "managers": list(r.managers)}
            for r in policy.ignore_differences
        ],
        "ingress_needs_address": policy.ingress_needs_address,
        "custom_resource_health": policy.custom_resource_health,
        "timeout": policy.timeout_s,
        "suspended": policy.suspended,
        "prune_budget_count": policy.prune_budget_count,
        "prune_budget_percent": policy.prune_budget_percent,
        "prune_propagation": policy.prune_propagation,
        "deletion_timeout": policy.deletion_timeout_s,
    }


class AppBatchIn(ApiModel):
    """Several new apps, created together or not at all (POST /apps/batch)."""

    apps: list[AppIn] = Field(min_length=1, max_length=MAX_BATCH)

    @field_validator("apps")
    @classmethod
    def _distinct_names(cls, apps: list[AppIn]) -> list[AppIn]:
        seen: set[str] = set()
        for app in apps:
            if app.name in seen:
                raise ValueError(f"app {app.name} appears twice in the batch")
            seen.add(app.name)
        return apps


class SyncIn(ApiModel):
    """A manual sync: optionally at another revision, as a dry run, or on one cluster only.
    `prune` overrides the app's syncPolicy.prune for this sync only (null: the policy), as
    Argo CD's sync panel's Prune box does."""

    revision: str | None = Field(default=None, min_length=1)
    dry_run: bool = False
    cluster: Name | None = None
    prune: bool | None = None
    plan: str | None = Field(default=None, min_length=1)  # run exactly this stored plan
    allow_prune_over_budget: bool = False  # this sync may prune over the app's budget, once


class RollbackIn(ApiModel):
    revision: str = Field(min_length=1)
    cluster: Name | None = None
