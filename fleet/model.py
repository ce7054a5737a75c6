"""Shared vocabulary of the pipeline: object references, statuses and the object type.

Objects travel through the pipeline as plain dicts (`Manifest`), exactly as the API server
speaks them; references and results are frozen dataclasses so they hash and compare.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

Manifest = dict[str, Any]


class Health(StrEnum):
    HEALTHY = "Healthy"
    PROGRESSING = "Progressing"
    DEGRADED = "Degraded"
    SUSPENDED = "Suspended"
    MISSING = "Missing"
    UNKNOWN = "Unknown"


class SyncStatus(StrEnum):
    SYNCED = "Synced"
    OUT_OF_SYNC = "OutOfSync"
    UNKNOWN = "Unknown"


class Action(StrEnum):
    CREATED = "created"
    CONFIGURED = "configured"
    UNCHANGED = "unchanged"
    PRUNED = "pruned"
    SKIPPED = "skipped"
    FAILED = "failed"


@dataclass(frozen=True)
class HealthStatus:
    """The health of one object and the reason a person can read."""

    health: Health
    message: str = ""


def split_api_version(api_version: str) -> tuple[str, str]:
    """Split `apps/v1` into (`apps`, `v1`) and `v1` into (``, `v1`)."""
    group, _, version = api_version.rpartition("/")
    return group, version


@dataclass(frozen=True, order=True)
class ObjectRef:
    """Identity of one Kubernetes object. Prints as `Kind/namespace/name`."""

    group: str
    version: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, obj: Manifest) -> ObjectRef:
        group, version = split_api_version(str(obj.get("apiVersion", "")))
        meta = obj.get("metadata") or {}
        return cls(
            group=group,
            version=version,
            kind=str(obj.get("kind", "")),
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
        )

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_kind(self) -> str:
        return f"{self.group}/{self.kind}" if self.group else self.kind

    def __str__(self) -> str:
        if self.namespace:
            return f"{self.kind}/{self.namespace}/{self.name}"
        return f"{self.kind}/{self.name}"
