"""Web UI sessions: server-side, in Redis, holding who signed in and never their token.

Signing in with a token creates a session under a random id (256 bits, `secrets`), stored at
`Keys.ui_session` with a TTL (SESSION_TTL, 8 hours, as Argo CD's default session lasts a day and
an on-call shift is shorter). The session keeps the SHA-256 digest of the token, the same digest
the token store is keyed by, so each request resolves the token record again and passes the
same checks as a bearer request (`api.auth.admit`): a revoked or expired token, or a member
token whose project was deleted, ends the session at once. The browser holds only the session
id, in an HttpOnly, SameSite=Strict cookie (Secure when the request came over https).

Each session carries its own CSRF token (`csrf`), sent back in a hidden form field or the
`X-CSRF-Token` header of every state-changing request and compared in constant time
(`api.ui.web.check_csrf`).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta

from pydantic import TypeAdapter
from redis import Redis

from fleet.control.keys import Keys
from fleet.control.registry.tokens import digest

COOKIE = "gitfleet_session"
SESSION_TTL = timedelta(hours=8)


@dataclass(frozen=True)
class Session:
    """One signed-in browser: `id` is the cookie's value, `token_digest` names the token it
    signed in with, `csrf` is the token its forms send back."""

    id: str
    token_digest: str
    csrf: str


_SESSION: TypeAdapter[Session] = TypeAdapter(Session)


class Sessions:
    """Create, find and end sessions in Redis."""

    def __init__(self, redis: Redis, keys: Keys, *, ttl: timedelta = SESSION_TTL) -> None:
        self.redis = redis
        self.keys = keys
        self.ttl = ttl

    def create(self, token: str) -> Session:
        """A new session for the plaintext `token` (already checked by the caller)."""
        session = Session(
            id=secrets.token_urlsafe(32),
            token_digest=digest(token),
            csrf=secrets.token_urlsafe(32),
        )
        self.redis.set(self.keys.ui_session(session.id), _SESSION.dump_json(session), ex=self.ttl)
        return session

    def get(self, session_id: str | None) -> Session | None:
        if not session_id or len(session_id) > 128:
            return None
        raw = self.redis.get(self.keys.ui_session(session_id))
        return _SESSION.validate_json(raw) if isinstance(raw, bytes) else None

    def delete(self, session_id: str) -> None:
        self.redis.delete(self.keys.ui_session(session_id))
