"""Webhook deliveries: who signed one, whether it came before, whether it is too old.

A push is only a refresh hint (`api.routes.webhooks`): the apps it reaches re-read their own
tracked ref from git, so a delivery can never choose what is deployed. Still, a replayed delivery
should do nothing at all, and a delivery signed for one project must not reach another's apps:

- `signers`: the secrets whose HMAC-SHA256 of the raw body matches `X-Hub-Signature-256`. The
  global secret (GITFLEET_WEBHOOK_SECRET) covers the apps of every project without a secret of
  its own; a project's own secret covers that project's apps, and the global one no longer does.
- `too_old`: a delivery is refused when the host says, in the signed body, that the push is
  older than the bound. GitHub's push event carries `repository.pushed_at` (Unix time of the
  push); `head_commit.timestamp` is the commit's date, which may be days before a legitimate
  push, so it is not used. A payload without `pushed_at` is bounded by the id alone.
- `Deliveries.first`: the delivery id (`X-GitHub-Delivery`, unique per delivery; Gitea sends it
  too) is kept for `DELIVERY_TTL`, longer than any age bound, so the same delivery is accepted
  once.

`signers` and `too_old` are pure; `Deliveries` holds the Redis side.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from redis import Redis

from fleet.control.keys import Keys

DELIVERY_TTL = 24 * 3600  # seconds a delivery id is remembered
MAX_AGE = 600.0  # seconds: the default bound on a push's age (GITFLEET_WEBHOOK_MAX_AGE)


@dataclass(frozen=True)
class Signers:
    """Which secrets verified a delivery. `owned`: every project with its own secret."""

    global_secret: bool
    projects: frozenset[str]
    owned: frozenset[str]

    def any(self) -> bool:
        return self.global_secret or bool(self.projects)

    def covers(self, project: str) -> bool:
        """Whether the delivery may reach the apps of `project`."""
        if project in self.owned:
            return project in self.projects
        return self.global_secret


def signature_of(secret: str, body: bytes) -> str:
    """The `X-Hub-Signature-256` value a host sends for `body` signed with `secret`."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def signers(
    body: bytes, signature: str, *, global_secret: str | None, projects: Mapping[str, str]
) -> Signers:
    """Check `signature` against the global secret and each project's own, in constant time."""
    given = signature.encode()

    def verifies(secret: str) -> bool:
        return hmac.compare_digest(signature_of(secret, body).encode(), given)

    verified = frozenset(name for name, secret in projects.items() if verifies(secret))
    by_global = bool(global_secret) and verifies(str(global_secret))
    return Signers(by_global, verified, frozenset(projects))


def pushed_at(payload: Mapping[str, Any]) -> datetime | None:
    """When the host received the push (`repository.pushed_at`, Unix time), if it says."""
    repo = payload.get("repository")
    value = repo.get("pushed_at") if isinstance(repo, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return datetime.fromtimestamp(value).astimezone()


def too_old(payload: Mapping[str, Any], now: datetime, max_age: float) -> str:
    """Why the push is too old to act on ("" when it is not, or cannot tell)."""
    at = pushed_at(payload)
    if at is None:
        return ""
    age = (now - at).total_seconds()
    if age <= max_age:
        return ""
    return (
        f"repository.pushed_at: the push is {age:.0f}s old, older than the {max_age:.0f}s "
        "gitfleet accepts (GITFLEET_WEBHOOK_MAX_AGE); an old delivery sent again is refused"
    )


class Deliveries:
    """The delivery ids accepted within `DELIVERY_TTL`."""

    def __init__(self, redis: Redis, *, prefix: str = "gitfleet") -> None:
        self.redis = redis
        self.keys = Keys(prefix)

    def first(self, delivery_id: str) -> bool:
        """Remember `delivery_id`; False when it was accepted before (atomic: of two copies
        arriving at once, exactly one is first)."""
        return bool(self.redis.set(self.keys.delivery(delivery_id), 1, nx=True, ex=DELIVERY_TTL))

    def forget(self, delivery_id: str) -> None:
        """Let `delivery_id` be delivered again: its handling failed before it did anything."""
        self.redis.delete(self.keys.delivery(delivery_id))
