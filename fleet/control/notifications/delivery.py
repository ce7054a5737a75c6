"""Posting queued messages: the coordinator's delivery pump, with retries and backoff.

`DeliveryPump.run_once` claims the deliveries that are due (a Lua script moves each claimed id
`claim_s` into the future in the same step, so two coordinator replicas never post the same
delivery at once, and one that dies mid-post leaves it to be retried), posts each, and then:

- a 2xx answer: delivered, removed from the queue;
- anything else (a non-2xx status, a timeout, a refused connection, a redirect, which is never
  followed): retried after `base_delay * 2**(attempts-1)` seconds, at most `max_delay`, up to
  `max_attempts` posts, then recorded failed.

Every attempt updates the delivery's result (`Outbox.results`, `GET
/api/v1/subscriptions/{name}/deliveries`). A webhook body is the message as JSON, signed with
HMAC-SHA256 under the subscription's secret in `X-Gitfleet-Signature-256: sha256=<hex>` (the
same body and signature on every retry; `X-Gitfleet-Delivery` is the message id, for the
receiver's own dedup); a Slack body is `{"text": ...}`. The target URL is checked again
against `TargetPolicy` at each post, also as it resolves then, and the post connects to the
addresses that lookup answered and were checked, never looking the name up again (DNS
rebinding); HTTPS sends the host name as SNI and checks the certificate against it.

`start()` / `stop()` run it in a thread of the coordinator (`api.app`'s lifespan), apart from
the scheduler, so a slow target never delays a sync being scheduled.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import logging
import socket
import ssl
import threading
import time
from dataclasses import replace
from urllib.parse import SplitResult

from redis import Redis

from fleet.control.keys import Keys
from fleet.control.notifications.outbox import DeliveryResult, Message, Outbox, Pending
from fleet.control.notifications.subscriptions import Subscriptions, Target
from fleet.control.notifications.targets import TargetPolicy, TargetUrlError
from fleet.control.registry import records
from fleet.control.registry.errors import NotFound
from fleet.control.registry.secrets import SecretBox
from fleet.control.registry.transact import now

log = logging.getLogger("gitfleet.notifications")

SIGNATURE_HEADER = "X-Gitfleet-Signature-256"
CLAIM = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, id in ipairs(due) do redis.call('ZADD', KEYS[1], ARGV[2], id) end
return due
"""


def signature_of(secret: str, body: bytes) -> str:
    """The `X-Gitfleet-Signature-256` value of `body` under `secret`."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def webhook_body(message: Message) -> bytes:
    """The JSON a generic webhook receives (camelCase keys, sorted: byte-stable for retries)."""
    data = {
        "id": message.id,
        "event": message.event,
        "app": message.app,
        "project": message.project,
        "cluster": message.cluster,
        "revision": message.revision,
        "syncStatus": message.sync_status,
        "health": message.health,
        "reason": message.reason,
        "recoveredFrom": message.recovered_from,
        "details": message.details,
        "at": message.at,
    }
    return json.dumps(data, sort_keys=True).encode()


def slack_text(message: Message) -> str:
    where = f"{message.app}@{message.cluster}" if message.cluster else message.app
    text = f"[gitfleet] {message.event}: {where}"
    if message.revision:
        text += f" at {message.revision[:12]}"
    if message.reason:
        text += f": {message.reason[:500]}"
    return text


class _PinnedHTTP(http.client.HTTPConnection):
    """An HTTP connection to `address`, the checked address of `host` (the Host header)."""

    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self.address = address

    def _open(self) -> socket.socket:
        return socket.create_connection((self.address, self.port), self.timeout)

    def connect(self) -> None:
        self.sock = self._open()


class _PinnedHTTPS(_PinnedHTTP):
    """HTTPS to the checked address; SNI and the certificate checked against the host name."""

    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, address, timeout)
        self.context = ssl.create_default_context()

    def connect(self) -> None:
        raw = self._open()
        try:
            self.sock = self.context.wrap_socket(raw, server_hostname=self.host)
        except BaseException:
            raw.close()
            raise


def _connection(parts: SplitResult, address: str, timeout: float) -> _PinnedHTTP:
    host = parts.hostname or ""
    if parts.scheme.lower() == "https":
        return _PinnedHTTPS(host, parts.port or 443, address, timeout)
    return _PinnedHTTP(host, parts.port or 80, address, timeout)


class DeliveryPump:
    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        box: SecretBox,
        policy: TargetPolicy,
        *,
        period: float = 1.0,
        base_delay: float = 2.0,
        max_delay: float = 300.0,
        max_attempts: int = 8,
        timeout: float = 5.0,
        claim_s: float = 60.0,
        batch: int = 20,
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.subscriptions = Subscriptions(redis, keys, box)
        self.outbox = Outbox(redis, keys)
        self.policy = policy
        self.period = period
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.max_attempts = max_attempts
        self.timeout = timeout
        self.claim_s = claim_s
        self.batch = batch
        self._claim = redis.register_script(CLAIM)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self, at: float | None = None) -> int:
        """Post every delivery due at `at` (now); how many were attempted."""
        at = time.time() if at is None else at
        queue = self.keys.notify("queue")
        ids = self._claim(keys=[queue], args=[at, at + self.claim_s, self.batch])
        for raw in ids:
            self._deliver(raw.decode() if isinstance(raw, bytes) else str(raw))
        return len(ids)

    def delay(self, attempts: int) -> float:
        """Seconds before the next post, after `attempts` failed ones."""
        return float(min(self.max_delay, self.base_delay * 2 ** max(0, attempts - 1)))

    def _deliver(self, delivery_id: str) -> None:
        raw = self.redis.hget(self.keys.notify("outbox"), delivery_id)
        if not isinstance(raw, bytes):
            self.redis.zrem(self.keys.notify("queue"), delivery_id)
            return
        pending = records.from_json(Pending, raw)
        try:
            kind = self.subscriptions.get(pending.subscription).kind
            target = self.subscriptions.target(pending.subscription)
        except NotFound:
            target = None
        if target is None:  # the subscription was deleted: drop its deliveries
            self._finish(delivery_id)
            return
        code, error = self._post(pending, kind, target)
        attempts = pending.attempts + 1
        delivered = 200 <= code < 300
        given_up = not delivered and attempts >= self.max_attempts
        status = "delivered" if delivered else ("failed" if given_up else "retrying")
        message = pending.message
        result = DeliveryResult(
            delivery_id, message.event, message.app, message.cluster, status, attempts, code,
            error, message.at, now(),
        )  # fmt: skip
        pipe = self.redis.pipeline(transaction=True)
        self.outbox.stage_result(pipe, pending.subscription, result)
        if delivered or given_up:
            pipe.zrem(self.keys.notify("queue"), delivery_id)
            pipe.hdel(self.keys.notify("outbox"), delivery_id)
        else:
            updated = replace(pending, attempts=attempts)
            pipe.hset(self.keys.notify("outbox"), delivery_id, records.to_json(updated))
            pipe.zadd(self.keys.notify("queue"), {delivery_id: time.time() + self.delay(attempts)})
        pipe.execute()
        self.outbox.trim(pending.subscription)
        if given_up:
            log.warning(
                "notification %s to subscription %s failed after %d attempts: %s",
                *(delivery_id, pending.subscription, attempts, error),
            )

    def _finish(self, delivery_id: str) -> None:
        self.redis.zrem(self.keys.notify("queue"), delivery_id)
        self.redis.hdel(self.keys.notify("outbox"), delivery_id)

    def _post(self, pending: Pending, kind: str, target: Target) -> tuple[int, str]:
        """The target's HTTP status (0: no answer) and an error ("" on a 2xx)."""
        try:
            parts = self.policy.check(target.url)
        except TargetUrlError as e:
            return 0, str(e)
        try:
            addresses = self.policy.addresses(parts)  # one lookup: connect to these only
        except TargetUrlError as e:
            return 0, str(e)
        except OSError as e:
            return 0, f"no answer: {type(e).__name__}"
        message = pending.message
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "gitfleet-notifications",
            "X-Gitfleet-Event": message.event,
            "X-Gitfleet-Delivery": message.id,
        }
        if kind == "webhook":
            body = webhook_body(message)
            headers[SIGNATURE_HEADER] = signature_of(target.secret, body)
        else:
            body = json.dumps({"text": slack_text(message)}).encode()
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        error: Exception = OSError("no address")
        for address in addresses:
            connection = _connection(parts, address, self.timeout)
            try:
                connection.connect()
            except OSError as e:  # not reached: the next checked address, if any
                connection.close()
                error = e
                continue
            try:
                connection.request("POST", path, body=body, headers=headers)
                with connection.getresponse() as answer:  # a 3xx too: never followed
                    code = int(answer.status)
                    answer.read(65536)
            except (OSError, http.client.HTTPException) as e:
                return 0, f"no answer: {type(e).__name__}"
            finally:
                connection.close()
            return code, "" if 200 <= code < 300 else f"HTTP {code}"
        return 0, f"no answer: {type(error).__name__}"

    # -- the thread ---------------------------------------------------------------------------

    def start(self) -> DeliveryPump:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(
                target=self._loop, name="gitfleet-notifications", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.timeout + 5)
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.wait(self.period):
            try:
                self.run_once()
            except Exception:
                log.exception("notification delivery pass failed")
