"""Turning status writes into messages: dedup, then a queued delivery per subscription.

`observe` runs right after a worker writes an instance's status (`worker.status.write_sync`):
it compares what the sync showed with the last state notified for the instance
(`<p>:notify:last:<app>`, field `<cluster>|<kind>`), keeps the new state and queues one
delivery per matching subscription for each transition (`events.changes`). `notify` is the
same for an event someone else detects (a rollout step): with a `dedupe` token, the same token
is sent once. The app's record is read once per event: an app subscription matches on the
app's uid and project (`Subscription.wants`), never on its name alone.

Queuing is a few Redis commands: the message goes into the outbox (`<p>:notify:outbox`, id ->
pending delivery) and its id into the queue (`<p>:notify:queue`, due now); the coordinator's
`DeliveryPump` posts it later, in its own thread. A sync never waits for a delivery, and a
failure here is logged and never fails the sync.
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from redis import Redis
from redis.client import Pipeline

from fleet.control.keys import Keys
from fleet.control.notifications.events import EVENTS, Change, Seen, changes
from fleet.control.notifications.subscriptions import Subscription, all_subscriptions
from fleet.control.registry import records
from fleet.control.registry.errors import NotFound
from fleet.control.registry.transact import now

log = logging.getLogger("gitfleet.notifications")

KEEP_RESULTS = 200  # delivery results kept per subscription
DEDUPE_TTL = 7 * 24 * 3600  # seconds a `notify` dedupe token is remembered


@dataclass(frozen=True)
class Message:
    """One event, as every subscription that wants it is sent it."""

    id: str
    event: str
    app: str
    project: str
    cluster: str = ""
    revision: str = ""
    sync_status: str = ""
    health: str = ""
    reason: str = ""
    recovered_from: str = ""
    details: dict[str, str] = field(default_factory=dict)
    at: str = ""


@dataclass(frozen=True)
class Pending:
    """A message on its way to one subscription."""

    id: str
    subscription: str
    message: Message
    attempts: int = 0


@dataclass(frozen=True)
class DeliveryResult:
    """What the API shows of one delivery: `status` pending, retrying, delivered or failed;
    `status_code` the target's last HTTP answer (0: none); `error` the last failure."""

    id: str
    event: str
    app: str
    cluster: str
    status: str
    attempts: int = 0
    status_code: int = 0
    error: str = ""
    created: str = ""
    updated: str = ""


class Outbox:
    def __init__(self, redis: Redis, keys: Keys) -> None:
        self.redis = redis
        self.keys = keys

    def queue(self, message: Message, subscriptions: list[Subscription]) -> list[str]:
        """Queue `message` for each of `subscriptions`, due now; the delivery ids."""
        ids = []
        pipe = self.redis.pipeline(transaction=True)
        for subscription in subscriptions:
            pending = Pending(uuid.uuid4().hex, subscription.name, message)
            ids.append(pending.id)
            pipe.hset(self.keys.notify("outbox"), pending.id, records.to_json(pending))
            pipe.zadd(self.keys.notify("queue"), {pending.id: time.time()})
            result = DeliveryResult(
                pending.id, message.event, message.app, message.cluster, "pending", 0, 0, "",
                message.at, message.at,
            )  # fmt: skip
            self.stage_result(pipe, subscription.name, result)
        pipe.execute()
        return ids

    def stage_result(self, pipe: Any, subscription: str, result: DeliveryResult) -> None:
        """Keep `result` (replacing the one with its id), trimming to the newest results."""
        order = self.keys.notify(f"delivery-order:{subscription}")
        results = self.keys.notify(f"deliveries:{subscription}")
        pipe.hset(results, result.id, records.to_json(result))
        pipe.zadd(order, {result.id: time.time()}, nx=True)

    def trim(self, subscription: str) -> None:
        order = self.keys.notify(f"delivery-order:{subscription}")
        old: list[bytes] = self.redis.zrange(order, 0, -KEEP_RESULTS - 1)  # type: ignore[assignment]
        if old:
            self.redis.zrem(order, *old)
            self.redis.hdel(self.keys.notify(f"deliveries:{subscription}"), *old)

    def results(self, subscription: str, limit: int = 50) -> list[DeliveryResult]:
        """The newest `limit` delivery results of `subscription`, newest first."""
        order = self.keys.notify(f"delivery-order:{subscription}")
        ids: list[bytes] = self.redis.zrevrange(order, 0, limit - 1)  # type: ignore[assignment]
        if not ids:
            return []
        raws = self.redis.hmget(self.keys.notify(f"deliveries:{subscription}"), ids)
        return [records.from_json(DeliveryResult, r) for r in raws if isinstance(r, bytes)]


def _app_of(redis: Redis, keys: Keys, app: str) -> records.AppRecord:
    raw = redis.get(keys.app(app))
    if not isinstance(raw, bytes):
        raise NotFound(f"no app named {app}")
    return records.from_json(records.AppRecord, raw)


def notify(
    redis: Redis,
    keys: Keys,
    event: str,
    app: str,
    *,
    cluster: str = "",
    revision: str = "",
    reason: str = "",
    details: dict[str, str] | None = None,
    dedupe: str = "",
    recovered_from: str = "",
    seen: Seen | None = None,
) -> list[str]:
    """Queue `event` of `app` for every subscription that wants it; the delivery ids. With
    `dedupe` (e.g. `rollout-id/step-2/rollout-step-done`), a token already sent sends nothing.
    For the rollout controller: `notify(store.redis, store.keys, ROLLOUT_STEP_DONE, app,
    revision=..., reason=..., details={"step": "2"}, dedupe=f"{rollout}/2/done")`, after the
    rollout's own state is written. Raises ValueError for an unknown event and NotFound for an
    unknown app; it only queues (a few Redis commands), never posts."""
    if event not in EVENTS:
        raise ValueError(f"event: {event!r} is not one of {', '.join(EVENTS)}")
    if dedupe:
        token = hashlib.sha256(f"{app}\0{dedupe}".encode()).hexdigest()[:32]
        if not redis.set(keys.notify(f"sent:{token}"), 1, nx=True, ex=DEDUPE_TTL):
            return []
    record = _app_of(redis, keys, app)
    project, uid = record.project, record.owner_uid
    wanted = [
        s
        for s in all_subscriptions(redis, keys)
        if s.wants(event, app, project, uid, record.created)
    ]
    if not wanted:
        return []
    message = Message(
        id=uuid.uuid4().hex,
        event=event,
        app=app,
        project=project,
        cluster=cluster,
        revision=revision,
        sync_status=str(seen.sync_status) if seen else "",
        health=str(seen.health) if seen else "",
        reason=reason,
        recovered_from=recovered_from,
        details=dict(details or {}),
        at=now(),
    )
    return Outbox(redis, keys).queue(message, wanted)


_KINDS = ("sync", "health")


def read_notified(pipe: Pipeline, keys: Keys, app: str, cluster: str) -> None:
    """Stage the read `observe` makes on `pipe` (its reply is `observe`'s `notified`), so a
    caller reads it in a round trip it makes anyway."""
    pipe.hmget(keys.notify(f"last:{app}"), [f"{cluster}|{k}" for k in _KINDS])


def observe(
    redis: Redis,
    keys: Keys,
    app: str,
    cluster: str,
    seen: Seen,
    revision: str,
    notified: list[Any] | None = None,
) -> None:
    """After a status write: keep the new notified states, queue the transitions' events.
    `notified`: the reply of `read_notified`, read before the write (None: read here).
    Never raises: a notification problem is logged, and the sync it follows stands."""
    try:
        last_key = keys.notify(f"last:{app}")
        raws = notified
        if raws is None:
            raws = redis.hmget(last_key, [f"{cluster}|{k}" for k in _KINDS])
        last = {k: r.decode() for k, r in zip(_KINDS, raws, strict=True) if isinstance(r, bytes)}
        found: list[Change] = changes(seen, last)
        states = {f"{cluster}|{c.kind}": c.state for c in found if c.kind}
        if states:
            redis.hset(last_key, mapping=states)  # type: ignore[arg-type]
        for change in found:
            if change.event:
                notify(
                    redis,
                    keys,
                    change.event,
                    app,
                    cluster=cluster,
                    revision=revision,
                    reason=change.reason,
                    recovered_from=change.recovered_from,
                    seen=seen,
                )
    except Exception:
        log.exception("notifications for %s@%s could not be queued", app, cluster)
