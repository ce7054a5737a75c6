"""What the coordinator registers: clusters, projects, applications and API tokens.

Frozen dataclasses, pure and free of I/O, so the store, the API and the workers share one
vocabulary, and one generic pair of functions (`to_json`, `from_json`) turns any of them into
the JSON kept in Redis. The generic reader follows the type hints, so adding a field with a
default never breaks records written by an older version.

Credentials never live in these records. `ClusterCredentials` and
`fleet.engine.source.cache.GitCredentials` are stored apart, encrypted
(`fleet.control.registry.store`), and their `repr` hides every secret.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
from collections.abc import Hashable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar, Union, cast, get_args, get_origin, get_type_hints

from fleet.control.windows import SyncWindow
from fleet.kube.kubeconfig import ClusterConfig, parse

T = TypeVar("T")


class Role(StrEnum):
    """admin: everything; member: the apps of one project; viewer: read only."""

    ADMIN = "admin"
    MEMBER = "member"
    VIEWER = "viewer"


@dataclass(frozen=True)
class ClusterRecord:
    """A registered cluster. `labels` feed application cluster selectors."""

    name: str
    server: str
    labels: dict[str, str] = field(default_factory=dict)
    created: str = ""

    def matches(self, selector: dict[str, str]) -> bool:
        """Whether every label of `selector` is on this cluster (an empty selector matches)."""
        return all(self.labels.get(key) == value for key, value in selector.items())


@dataclass(frozen=True)
class ClusterCredentials:
    """How to reach a cluster: a kubeconfig (and context), or a server, bearer token and CA."""

    kubeconfig: str = field(default="", repr=False)
    context: str = ""
    server: str = ""
    token: str = field(default="", repr=False)
    ca_pem: str = ""
    insecure: bool = False

    def config(self, name: str) -> ClusterConfig:
        """Connection settings for the cluster registered as `name`."""
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


@dataclass(frozen=True)
class Destination:
    """Where a project lets apps deploy: fnmatch globs for the cluster and the namespace."""

    cluster: str = "*"
    namespace: str = "*"


@dataclass(frozen=True)
class ProjectRecord:
    """Bounds on what apps of the project may deploy.

    source_repos: globs of allowed repository URLs.
    destinations: allowed (cluster, namespace) glob pairs.
    cluster_kinds: allowed cluster-scoped kinds as `group/Kind` (`Kind` for the core group),
    or `*` for all; none unless listed.
    """

    name: str
    description: str = ""
    source_repos: tuple[str, ...] = ()
    destinations: tuple[Destination, ...] = ()
    cluster_kinds: tuple[str, ...] = ()
    created: str = ""


DEFAULT_PROJECT = ProjectRecord(
    name="default",
    description="built in; like Argo CD's default project it allows every repo, destination "
    "and cluster-scoped kind",
    source_repos=("*",),
    destinations=(Destination("*", "*"),),
    cluster_kinds=("*",),
)


@dataclass(frozen=True)
class HelmSource:
    values_yaml: str = ""
    value_files: tuple[str, ...] = ()
    parameters: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class AppSource:
    repo: str
    path: str = "."
    revision: str = "HEAD"
    helm: HelmSource = field(default_factory=HelmSource)


@dataclass(frozen=True)
class AppDestination:
    """One named cluster, or every cluster whose labels match `selector` (one instance each)."""

    namespace: str
    cluster: str = ""
    selector: dict[str, str] | None = None


@dataclass(frozen=True)
class RetryPolicy:
    """Retry a failed sync `limit` times, waiting backoff_s * factor**n, at most max_backoff_s."""

    limit: int = 5
    backoff_s: float = 5.0
    factor: float = 2.0
    max_backoff_s: float = 180.0


@dataclass(frozen=True)
class IgnoreDifference:
    json_pointers: tuple[str, ...] = ()
    managers: tuple[str, ...] = ()


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class AppRecord:
    """An application. `has_credentials`: git credentials are stored (encrypted) for it.
    `deleting`: a cascading delete is pruning its objects; the record goes once that is done."""

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


@dataclass(frozen=True)
class TokenRecord:
    """An API token; only the SHA-256 of its text is stored."""

    name: str
    role: Role
    project: str | None = None
    created: str = ""


def to_data(record: Any) -> dict[str, Any]:
    """A JSON-ready dict of a record (tuples become lists when dumped)."""
    data: dict[str, Any] = dataclasses.asdict(record)
    return data


def to_json(record: Any) -> str:
    return json.dumps(to_data(record), sort_keys=True)


def from_json(cls: type[T], text: str | bytes) -> T:
    return from_data(cls, json.loads(text))


def from_data(cls: type[T], data: Any) -> T:
    """Build `cls` from dicts and lists, following its type hints; unknown keys are ignored."""
    if not isinstance(data, dict):
        raise ValueError(f"{cls.__name__}: expected an object, got {type(data).__name__}")
    hints = _hints(cast(Hashable, cls))
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    kwargs = {name: _value(hints[name], data[name]) for name in names if name in data}
    return cls(**kwargs)


@functools.cache
def _hints(cls: Any) -> dict[str, Any]:
    return get_type_hints(cls)


def _value(tp: Any, value: Any) -> Any:
    origin = get_origin(tp)
    if value is None:
        return None
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return from_data(tp, value)
    if origin is tuple:
        args = get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_value(args[0], item) for item in value)
        return tuple(_value(arg, item) for arg, item in zip(args, value, strict=True))
    if origin is dict:
        return {str(key): _value(get_args(tp)[1], item) for key, item in value.items()}
    if origin in (Union, types.UnionType):
        kinds = [arg for arg in get_args(tp) if arg is not type(None)]
        return _value(kinds[0], value)
    if isinstance(tp, type) and issubclass(tp, StrEnum):
        return tp(value)
    return value
