"""API tokens: random text handed out once, stored only as its SHA-256 digest.

A plain SHA-256 (not a slow password hash) is enough because tokens are 256 random bits, not
something a person chose: there is nothing to brute-force, and the lookup on every request must
be one GET. A leaked Redis dump therefore yields no usable token.

A token may expire: its record carries the instant (the API refuses it after) and its key
expires a day later, so an expired token soon leaves nothing behind but its name, which a new
token may take. A member token dies with its project: `of_project` and `forget` let the store revoke
them in the transaction that deletes the project.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import UTC, datetime, timedelta

from redis import Redis
from redis.client import Pipeline

from fleet.control.keys import Keys
from fleet.control.registry import records
from fleet.control.registry.errors import AlreadyExists, NotFound
from fleet.control.registry.records import Role, TokenRecord
from fleet.control.registry.transact import now, transact

BOOTSTRAP_TOKEN = "bootstrap-admin"
KEEP_EXPIRED = timedelta(days=1)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return "gf_" + secrets.token_urlsafe(32)


class Tokens:
    def __init__(self, redis: Redis, keys: Keys) -> None:
        self.redis = redis
        self.keys = keys

    def create(
        self,
        name: str,
        role: Role,
        project: str | None = None,
        *,
        expires: datetime | None = None,
    ) -> str:
        """A new token, refused after `expires` if given; its text is returned here and never
        again."""
        plaintext = new_token()
        until = expires.astimezone(UTC).isoformat() if expires else ""
        self._store(TokenRecord(name, Role(role), project, now(), until), plaintext, create=True)
        return plaintext

    def lookup(self, plaintext: str) -> TokenRecord | None:
        return self.lookup_digest(digest(plaintext))

    def lookup_digest(self, value: str) -> TokenRecord | None:
        raw = self.redis.get(self.keys.token(value))
        return records.from_json(TokenRecord, raw) if isinstance(raw, bytes) else None

    def list(self) -> list[TokenRecord]:
        digests: dict[bytes, bytes] = self.redis.hgetall(self.keys.tokens)  # type: ignore[assignment]
        raws = [self.redis.get(self.keys.token(d.decode())) for d in digests.values()]
        found = [records.from_json(TokenRecord, r) for r in raws if isinstance(r, bytes)]
        return sorted(found, key=lambda t: t.name)

    def revoke(self, name: str) -> None:
        old = self.redis.hget(self.keys.tokens, name)
        if not isinstance(old, bytes):
            raise NotFound(f"no token named {name}")

        def write(pipe: Pipeline) -> None:
            pipe.delete(self.keys.token(old.decode()))
            pipe.hdel(self.keys.tokens, name)

        transact(self.redis, self.keys, lambda: None, write)

    def of_project(self, project: str) -> dict[str, str]:
        """name -> digest of the member tokens of `project`."""
        digests: dict[bytes, bytes] = self.redis.hgetall(self.keys.tokens)  # type: ignore[assignment]
        found = {}
        for name, value in digests.items():
            raw = self.redis.get(self.keys.token(value.decode()))
            if isinstance(raw, bytes) and records.from_json(TokenRecord, raw).project == project:
                found[name.decode()] = value.decode()
        return found

    def forget(self, pipe: Pipeline, tokens: dict[str, str]) -> None:
        """Revoke `tokens` (name -> digest, from `of_project`) inside the caller's MULTI."""
        for name, value in tokens.items():
            pipe.delete(self.keys.token(value))
            pipe.hdel(self.keys.tokens, name)

    def undo_bootstrap(self) -> None:
        """Revoke a generated admin token that could not be handed over, so that the next start
        generates another instead of locking everyone out."""
        found = self.redis.hget(self.keys.tokens, BOOTSTRAP_TOKEN)

        def write(pipe: Pipeline) -> None:
            if isinstance(found, bytes):
                self.forget(pipe, {BOOTSTRAP_TOKEN: found.decode()})
            pipe.delete(self.keys.bootstrap)

        transact(self.redis, self.keys, lambda: None, write)

    def ensure_admin(self, plaintext: str | None) -> str | None:
        """The bootstrap admin token: `plaintext` when given (replacing an earlier one); else
        one generated on the very first start and returned to be shown once; else None."""
        record = TokenRecord(BOOTSTRAP_TOKEN, Role.ADMIN, None, now())
        if plaintext:
            if self.lookup(plaintext) is None:
                self._store(record, plaintext, create=False)
            return None
        if not self.redis.set(self.keys.bootstrap, now(), nx=True):
            return None
        generated = new_token()
        self._store(record, generated, create=False)
        return generated

    def _store(self, record: TokenRecord, plaintext: str, *, create: bool) -> None:
        old: list[bytes] = []

        def check() -> None:
            found = self.redis.hget(self.keys.tokens, record.name)
            held = self.lookup_digest(found.decode()) if isinstance(found, bytes) else None
            if create and held is not None and not held.expired(datetime.now(UTC)):
                raise AlreadyExists(f"token {record.name} already exists")
            old[:] = [found] if isinstance(found, bytes) else []

        def write(pipe: Pipeline) -> None:
            for previous in old:
                pipe.delete(self.keys.token(previous.decode()))
            key = self.keys.token(digest(plaintext))
            pipe.set(key, records.to_json(record))
            if record.expires:  # kept a day past it, so a late caller hears "expired"
                pipe.expireat(key, datetime.fromisoformat(record.expires) + KEEP_EXPIRED)
            pipe.hset(self.keys.tokens, record.name, digest(plaintext))

        transact(self.redis, self.keys, check, write)
