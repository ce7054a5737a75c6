"""Encryption at rest for cluster and git credentials: Fernet keyed by GITFLEET_SECRET_KEY.

Why Fernet: authenticated encryption (AES-CBC + HMAC-SHA256) with a timestamp, from the
`cryptography` package we already depend on, and `MultiFernet` gives key rotation for free.

The key setting may hold several keys separated by commas: the first encrypts, all of them
decrypt, so a rotation is "prepend the new key, restart, re-save, drop the old one". Each entry
is either a Fernet key (urlsafe base64 of 32 bytes) or any other text, a passphrase, from which
a key is derived as urlsafe-base64(SHA-256(passphrase)). A passphrase is only as strong as its
entropy: use a generated key in production.

The coordinator and the workers refuse to start without the setting (`require_key`): a key
stored next to the data protects nothing against someone who can read Redis. Only with
`--insecure-dev` (a local trial) do they generate a key and store it in Redis
(`<p>:secret-key`, set only if absent, so the first process to start wins and every
coordinator and worker agrees), and every process that falls back to it logs one warning
saying so. The key itself is never logged.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import threading

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from redis import Redis

from fleet.control.keys import Keys
from fleet.errors import FleetError

log = logging.getLogger(__name__)

_warned = threading.Event()


class SecretError(FleetError):
    """A stored secret cannot be decrypted: the key changed or the data is corrupt."""

    stage = "secrets"


def key_from(text: str) -> bytes:
    """A Fernet key from `text`: used as is when it is one, else derived with SHA-256."""
    raw = text.strip().encode()
    try:
        if len(base64.urlsafe_b64decode(raw)) == 32 and len(raw) == 44:
            return raw
    except (binascii.Error, ValueError):
        pass
    return base64.urlsafe_b64encode(hashlib.sha256(raw).digest())


def key_id(key: bytes) -> str:
    """A short public id of a Fernet key (a digest, from which the key cannot be recovered)."""
    return hashlib.sha256(b"gitfleet-key-id:" + key).hexdigest()[:12]


def require_key(setting: str | None, *, insecure_dev: bool) -> None:
    """Refuse to go on without a key setting, unless `insecure_dev` allows the stored key."""
    if (setting and setting.strip()) or insecure_dev:
        return
    raise SecretError(
        "GITFLEET_SECRET_KEY is not set: it encrypts every cluster and git credential, and "
        "gitfleet will not keep that key in Redis next to them. Set it to the same key on the "
        'coordinator and every worker (make one with `python -c "from cryptography.fernet '
        'import Fernet; print(Fernet.generate_key().decode())"`), or pass --insecure-dev for '
        "a local trial."
    )


class SecretBox:
    """Encrypts with the first key, decrypts with any of them."""

    def __init__(self, keys: list[bytes]) -> None:
        if not keys:
            raise ValueError("keys: give at least one key")
        self._fernets = [(key_id(k), Fernet(k)) for k in keys]
        self._fernet = MultiFernet([f for _, f in self._fernets])

    @classmethod
    def from_setting(cls, setting: str) -> SecretBox:
        """Keys from a comma-separated setting (newest first)."""
        entries = [part for part in setting.split(",") if part.strip()]
        if not entries:
            raise ValueError("GITFLEET_SECRET_KEY: the setting is empty")
        return cls([key_from(entry) for entry in entries])

    @classmethod
    def open(
        cls,
        setting: str | None,
        redis: Redis,
        *,
        prefix: str = "gitfleet",
        insecure_dev: bool = False,
    ) -> SecretBox:
        """The box for this process: from the setting, or (`insecure_dev` only) from the key
        kept in Redis."""
        if setting and setting.strip():
            return cls.from_setting(setting)
        require_key(setting, insecure_dev=insecure_dev)
        key = Keys(prefix).secret_key
        redis.set(key, Fernet.generate_key(), nx=True)
        stored = redis.get(key)
        if not isinstance(stored, bytes):
            raise SecretError(f"the encryption key at Redis key {key} is missing")
        if not _warned.is_set():
            _warned.set()
            log.warning(
                "GITFLEET_SECRET_KEY is unset (--insecure-dev): credentials are encrypted with "
                "a key stored in Redis at %s, which does not protect them from anyone who can "
                "read Redis. Set GITFLEET_SECRET_KEY (a Fernet key) on every coordinator and "
                "worker.",
                key,
            )
        return cls([stored])

    def encrypt(self, plaintext: str) -> bytes:
        return self._fernet.encrypt(plaintext.encode())

    def decrypt(self, token: bytes) -> str:
        try:
            return self._fernet.decrypt(token).decode()
        except InvalidToken as e:
            raise SecretError(
                "a stored credential cannot be decrypted: GITFLEET_SECRET_KEY differs from the "
                "key it was encrypted with (keep the old key in the list while rotating)"
            ) from e

    def key_ids(self) -> tuple[str, ...]:
        """The ids of this box's keys, the encrypting one first."""
        return tuple(kid for kid, _ in self._fernets)

    def key_id_of(self, token: bytes) -> str:
        """The id of the key that signed `token` ("" for none of ours): checks the HMAC only,
        never decrypts, so a backup can name the key of each secret it carries."""
        for kid, fernet in self._fernets:
            try:
                fernet.extract_timestamp(token)
            except InvalidToken:
                continue
            return kid
        return ""

    def rotate(self, token: bytes) -> bytes:
        """Re-encrypt `token` with the newest key."""
        return self._fernet.rotate(token)
