"""Subscriptions: who is told of which events of which apps, and where.

A subscription names a `project` (every app of it) or an `app`, the `events` it wants (empty:
all of `events.EVENTS`), a `kind` (`webhook`: the JSON message, signed with HMAC-SHA256 of the
raw body under the subscription's secret in `X-Gitfleet-Signature-256: sha256=<hex>`; `slack`:
a Slack-compatible incoming webhook body `{"text": ...}`) and a `url`. A webhook's secret is
stored Fernet-encrypted like cluster credentials (`fleet.control.registry.secrets`), apart from
the record, and never returned: the API answers only whether one is set. A Slack URL is itself
the secret (its path holds the token), so it is stored encrypted as well and shown with its
path cut.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from redis import Redis

from fleet.control.keys import Keys
from fleet.control.registry import records
from fleet.control.registry.errors import AlreadyExists, NotFound
from fleet.control.registry.secrets import SecretBox
from fleet.control.registry.transact import now

KINDS = ("webhook", "slack")


@dataclass(frozen=True)
class Subscription:
    """What is stored in the clear: never the secret nor the URL (both encrypted apart)."""

    name: str
    kind: str
    project: str = ""  # of an app subscription: the app's project when it was made
    app: str = ""
    events: tuple[str, ...] = ()
    shown_url: str = ""  # scheme, host and port only
    created: str = ""
    app_uid: str = ""  # the app's `owner_uid` when it was made ("": stored before uids)

    def wants(
        self, event: str, app: str, project: str, uid: str = "", app_created: str = ""
    ) -> bool:
        """Whether this subscription is told of `event` of `app` (of `project`, with its
        `owner_uid` and creation time). An app subscription is bound to the app it was made
        for: a later app of the same name, in any project, is not it."""
        if self.events and event not in self.events:
            return False
        if not self.app:
            return self.project == project
        if self.app != app or (self.project and self.project != project):
            return False
        if self.app_uid:
            return self.app_uid == uid
        # stored before uids: an app created after the subscription is not the one it was for
        return not (app_created and self.created and app_created > self.created)


@dataclass(frozen=True)
class Target:
    """The encrypted part: where to post, and the signing secret of a webhook."""

    url: str
    secret: str = ""

    def __repr__(self) -> str:
        return "Target(***)"


def shown(url: str) -> str:
    """`url` without its path, query and user-info: what may be shown of it."""
    scheme, _, rest = url.partition("://")
    host = rest.split("/", 1)[0].rpartition("@")[2]
    return f"{scheme}://{host}/..."


def all_subscriptions(redis: Redis, keys: Keys) -> list[Subscription]:
    """Every subscription record, by name (nothing decrypted: no box needed)."""
    names = sorted(n.decode() for n in redis.smembers(keys.notify("subscriptions")))  # type: ignore[union-attr]
    if not names:
        return []
    raws = redis.mget([keys.notify(f"subscription:{n}") for n in names])
    return [records.from_json(Subscription, r) for r in raws if isinstance(r, bytes)]


class Subscriptions:
    def __init__(self, redis: Redis, keys: Keys, box: SecretBox) -> None:
        self.redis = redis
        self.keys = keys
        self.box = box

    def put(self, subscription: Subscription, target: Target) -> Subscription:
        """Store a new subscription (AlreadyExists if the name is taken)."""
        stamped = replace(subscription, shown_url=shown(target.url), created=now())
        name = subscription.name
        if not self.redis.sadd(self.keys.notify("subscriptions"), name):
            raise AlreadyExists(f"a subscription named {name} exists; delete it first")
        pipe = self.redis.pipeline(transaction=True)
        pipe.set(self.keys.notify(f"subscription:{name}"), records.to_json(stamped))
        secret = self.box.encrypt(records.to_json(target))
        pipe.set(self.keys.notify(f"subscription-secret:{name}"), secret)
        pipe.execute()
        return stamped

    def get(self, name: str) -> Subscription:
        raw = self.redis.get(self.keys.notify(f"subscription:{name}"))
        if not isinstance(raw, bytes):
            raise NotFound(f"no subscription named {name}")
        return records.from_json(Subscription, raw)

    def target(self, name: str) -> Target | None:
        raw = self.redis.get(self.keys.notify(f"subscription-secret:{name}"))
        return records.from_json(Target, self.box.decrypt(raw)) if isinstance(raw, bytes) else None

    def all(self) -> list[Subscription]:
        return all_subscriptions(self.redis, self.keys)

    def delete(self, name: str) -> None:
        if not self.redis.srem(self.keys.notify("subscriptions"), name):
            raise NotFound(f"no subscription named {name}")
        self.redis.delete(
            self.keys.notify(f"subscription:{name}"),
            self.keys.notify(f"subscription-secret:{name}"),
            self.keys.notify(f"deliveries:{name}"),
            self.keys.notify(f"delivery-order:{name}"),
        )
