"""Request and response bodies for clusters, projects and tokens, and the shared field types.

Field names are camelCase on the wire (Argo CD's spelling: `syncPolicy`, `caData`), snake_case
in Python; both are accepted on input. Unknown fields are refused (`extra="forbid"`) so a typo
is a 422 naming it, not a setting silently ignored. Credentials are `SecretStr` and appear in
no response model.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from fleet.control.registry.records import (
    ClusterCredentials,
    ClusterRecord,
    Destination,
    DestinationServiceAccount,
    ProjectRecord,
    Role,
)
from fleet.control.windows import parse_duration
from fleet.engine.limits import Limits
from fleet.errors import UsageError
from fleet.kube.kubeconfig import parse as parse_kubeconfig

DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
KIND = re.compile(r"^(\*|([a-z0-9.-]+/)?[A-Za-z0-9]+)$")
FILE_KEYS = ("certificate-authority", "client-certificate", "client-key", "tokenFile")


class ApiModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, validate_by_name=True, validate_by_alias=True, extra="forbid"
    )


def _dns_label(value: str) -> str:
    if len(value) > 63 or not DNS1123.match(value):
        raise ValueError(
            f"{value!r} is not a DNS-1123 label (lower case letters, digits and '-', starting "
            "and ending with a letter or digit, at most 63 characters)"
        )
    return value


def _labels(value: dict[str, str]) -> dict[str, str]:
    for key, item in value.items():
        prefix, _, name = key.rpartition("/")
        if len(name) > 63 or not LABEL_NAME.match(name) or len(prefix) > 253:
            raise ValueError(f"label key {key!r} is not a valid Kubernetes label key")
        if item and (len(item) > 63 or not LABEL_NAME.match(item)):
            raise ValueError(f"label {key}: value {item!r} is not a valid Kubernetes label value")
    return value


def _seconds(value: Any) -> Any:
    if isinstance(value, str) and not value.replace(".", "", 1).isdigit():
        try:
            return parse_duration(value).total_seconds()
        except ValueError:
            raise ValueError(
                f"{value!r} is not a duration like 90, '90s', '5m' or '1h30m'"
            ) from None
    return value


Name = Annotated[str, AfterValidator(_dns_label)]
Labels = Annotated[dict[str, str], AfterValidator(_labels)]
Seconds = Annotated[float, BeforeValidator(_seconds)]


def check_kubeconfig(text: str, context: str | None) -> str:
    """The kubeconfig's server, or a ValueError that never quotes the text (it holds secrets)."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise ValueError(f"not valid YAML (line {mark.line + 1})" if mark else "not YAML") from None
    if not isinstance(doc, dict):
        raise ValueError("not a kubeconfig (expected a mapping)")
    _refuse_files(doc)
    try:
        return parse_kubeconfig(text, context=context, source="kubeconfig").server
    except UsageError as e:
        raise ValueError(str(e).removeprefix("kubeconfig: ")) from None
    except (binascii.Error, ValueError, TypeError):
        raise ValueError("certificate or key data is not valid base64") from None


def _refuse_files(doc: dict[str, Any]) -> None:
    for section, inner in (("clusters", "cluster"), ("users", "user")):
        for entry in doc.get(section) or []:
            body = entry.get(inner) if isinstance(entry, dict) else None
            if not isinstance(body, dict):
                continue
            for key in FILE_KEYS:
                if body.get(key):
                    name = entry.get("name", "?")
                    raise ValueError(
                        f"{section}[{name}].{key} names a file on the coordinator; "
                        f"inline it ({'token' if key == 'tokenFile' else key + '-data'})"
                    )


class ClusterIn(ApiModel):
    """A kubeconfig (and optional context), or server + bearer token (+ base64 CA, `caData`)."""

    name: Name
    context: str | None = None
    kubeconfig: SecretStr | None = None
    server: str | None = None
    token: SecretStr | None = None
    ca_data: str | None = None
    insecure: bool = False
    labels: Labels = {}

    @field_validator("kubeconfig")
    @classmethod
    def _valid_kubeconfig(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        if value is not None:
            check_kubeconfig(value.get_secret_value(), info.data.get("context"))
        return value

    @field_validator("ca_data")
    @classmethod
    def _valid_ca(cls, value: str | None) -> str | None:
        _ca_pem(value)
        return value

    @model_validator(mode="after")
    def _one_way_in(self) -> ClusterIn:
        if self.kubeconfig is not None and (self.server or self.token):
            raise ValueError("give either kubeconfig, or server and token, not both")
        if self.kubeconfig is None and not (self.server and self.token):
            raise ValueError("give a kubeconfig, or a server and a token")
        if self.server and not re.match(r"^https?://[^/\s]+", self.server):
            raise ValueError(f"server: {self.server!r} is not an http(s) URL")
        return self

    def credentials(self) -> tuple[str, ClusterCredentials]:
        """(server, credentials), from input the validators have checked."""
        if self.kubeconfig is not None:
            text = self.kubeconfig.get_secret_value()
            server = check_kubeconfig(text, self.context)
            return server, ClusterCredentials(kubeconfig=text, context=self.context or "")
        server = str(self.server).rstrip("/")
        token = self.token.get_secret_value() if self.token else ""
        creds = ClusterCredentials(
            server=server, token=token, ca_pem=_ca_pem(self.ca_data), insecure=self.insecure
        )
        return server, creds

    def record(self, server: str) -> ClusterRecord:
        return ClusterRecord(name=self.name, server=server, labels=dict(self.labels))


def _ca_pem(ca_data: str | None) -> str:
    if not ca_data:
        return ""
    try:
        pem = base64.b64decode(ca_data, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise ValueError("not base64 of a PEM certificate") from None
    if "BEGIN CERTIFICATE" not in pem:
        raise ValueError("does not hold a PEM certificate")
    return pem


class ClusterOut(ApiModel):
    name: str
    server: str
    labels: dict[str, str]
    created: str

    @classmethod
    def of(cls, record: ClusterRecord) -> ClusterOut:
        return cls(
            name=record.name, server=record.server, labels=record.labels, created=record.created
        )


def _kind(value: str) -> str:
    if not KIND.match(value):
        raise ValueError(
            f"{value!r} is not a kind like 'Namespace', 'rbac.authorization.k8s.io/ClusterRole' "
            "or '*'"
        )
    return value


Kind = Annotated[str, AfterValidator(_kind)]


class DestinationIn(ApiModel):
    cluster: str = "*"
    namespace: str = "*"


def _service_account(value: str) -> str:
    namespace, colon, name = value.partition(":")
    if not colon or not DNS1123.match(namespace) or not DNS1123.match(name) or ":" in name:
        raise ValueError(
            f"{value!r} is not a ServiceAccount as namespace:name (each a DNS-1123 label): the "
            "namespace is always named, so an app cannot pick an account by its destination"
        )
    return value


class DestinationServiceAccountIn(ApiModel):
    """Act as `serviceAccount` (`namespace:name`) on matching clusters and namespaces."""

    cluster: str
    namespace: str = "*"
    service_account: Annotated[str, AfterValidator(_service_account)]


def _strong(value: SecretStr) -> SecretStr:
    if len(value.get_secret_value()) < 16:
        raise ValueError("a webhook secret needs at least 16 characters (GitHub: use a random one)")
    return value


WebhookSecret = Annotated[SecretStr, AfterValidator(_strong)]


_LIMITS = Limits()
_TIB = 1024**4


class LimitsIn(ApiModel):
    """Bounds on fetching and rendering a project's repositories (`fleet.engine.limits` gives
    each default and why); a field left out keeps its default. `maxDepth` stays at most 200:
    deeper documents would reach the recursion limits of the stages after the render; timeouts
    at most an hour, byte counts at most 1 TiB (what a process limit can hold)."""

    max_file_bytes: int = Field(default=_LIMITS.max_file_bytes, gt=0, le=_TIB)
    max_render_bytes: int = Field(default=_LIMITS.max_render_bytes, gt=0, le=_TIB)
    max_objects: int = Field(default=_LIMITS.max_objects, gt=0)
    max_depth: int = Field(default=_LIMITS.max_depth, gt=0, le=200)
    max_alias_nodes: int = Field(default=_LIMITS.max_alias_nodes, ge=0)
    render_timeout_s: float = Field(default=_LIMITS.render_timeout_s, gt=0, le=3600)
    render_memory_bytes: int = Field(default=_LIMITS.render_memory_bytes, gt=0, le=_TIB)
    max_fetch_bytes: int = Field(default=_LIMITS.max_fetch_bytes, gt=0, le=_TIB)
    fetch_timeout_s: float = Field(default=_LIMITS.fetch_timeout_s, gt=0, le=3600)

    def record(self) -> Limits:
        return Limits(**self.model_dump())

    @classmethod
    def of(cls, limits: Limits) -> LimitsIn:
        return cls.model_validate(dataclasses.asdict(limits))


class ProjectIn(ApiModel):
    """Globs of allowed repos and destinations; cluster-scoped kinds as `group/Kind` or `*`;
    the ServiceAccount to act as per destination (first match wins); whether renders may fetch
    remote kustomize resources and helm dependencies; the limits on fetch and render."""

    name: Name
    description: str = ""
    source_repos: list[str] = []
    destinations: list[DestinationIn] = []
    cluster_kinds: list[Kind] = []
    destination_service_accounts: list[DestinationServiceAccountIn] = []
    # write-only (never in a response); left out of a PUT, the stored one is kept; null drops it
    webhook_secret: WebhookSecret | None = Field(default=None, exclude=True)
    has_webhook_secret: bool = False  # read-only: what GET says; ignored on input
    allow_remote_renders: bool = False
    limits: LimitsIn = Field(default_factory=LimitsIn)
    require_plan_for: list[str] = []  # cluster globs whose syncs need an approved plan

    def secret(self) -> str | None:
        return self.webhook_secret.get_secret_value() if self.webhook_secret else None

    def record(self, *, keep_webhook_secret: bool = False) -> ProjectRecord:
        """The record; `keep_webhook_secret` marks a stored secret as still in use."""
        return ProjectRecord(
            has_webhook_secret=keep_webhook_secret,
            name=self.name,
            description=self.description,
            source_repos=tuple(self.source_repos),
            destinations=tuple(Destination(d.cluster, d.namespace) for d in self.destinations),
            cluster_kinds=tuple(self.cluster_kinds),
            destination_service_accounts=tuple(
                DestinationServiceAccount(a.cluster, a.namespace, a.service_account)
                for a in self.destination_service_accounts
            ),
            allow_remote_renders=self.allow_remote_renders,
            limits=self.limits.record(),
            require_plan_for=tuple(self.require_plan_for),
        )

    @classmethod
    def of(cls, record: ProjectRecord) -> ProjectIn:
        return cls(
            name=record.name,
            description=record.description,
            source_repos=list(record.source_repos),
            destinations=[
                DestinationIn(cluster=d.cluster, namespace=d.namespace) for d in record.destinations
            ],
            cluster_kinds=list(record.cluster_kinds),
            destination_service_accounts=[
                DestinationServiceAccountIn(
                    cluster=a.cluster, namespace=a.namespace, service_account=a.service_account
                )
                for a in record.destination_service_accounts
            ],
            has_webhook_secret=record.has_webhook_secret,
            allow_remote_renders=record.allow_remote_renders,
            limits=LimitsIn.of(record.limits),
            require_plan_for=list(record.require_plan_for),
        )


TOKEN_LIFE_MAX_S = 10 * 365 * 24 * 3600  # ten years: further is "until revoked", say so


class TokenIn(ApiModel):
    """A token; it may expire, at `expiresAt` (ISO 8601) or `ttl` from now (seconds, or a
    duration like "12h"), not both, at most ten years ahead; without either it lives until
    revoked."""

    name: Name
    role: Role
    project: Name | None = None
    expires_at: datetime | None = None
    ttl: Seconds | None = Field(default=None, gt=0, le=TOKEN_LIFE_MAX_S)

    @model_validator(mode="after")
    def _project_for_members(self) -> TokenIn:
        if (self.role == Role.MEMBER) != (self.project is not None):
            raise ValueError("project: give a project for a member token, and only for one")
        if self.expires_at is not None and self.ttl is not None:
            raise ValueError("give expiresAt or ttl, not both")
        expires, now = self.expires(), datetime.now(UTC)
        if expires is not None and expires <= now:
            raise ValueError("expiresAt: must be in the future")
        if expires is not None and expires > now + timedelta(seconds=TOKEN_LIFE_MAX_S):
            raise ValueError(
                "expiresAt: at most ten years ahead; leave it out for a token that lives "
                "until revoked"
            )
        return self

    def expires(self) -> datetime | None:
        """When the token stops working (a naive `expiresAt` is read as UTC)."""
        if self.ttl is not None:
            return datetime.now(UTC) + timedelta(seconds=self.ttl)
        if self.expires_at is not None and self.expires_at.tzinfo is None:
            return self.expires_at.replace(tzinfo=UTC)
        return self.expires_at
