"""A project's age private key, which decrypts the SOPS-encrypted Secrets its apps render.

Stored Fernet-encrypted like cluster and git credentials (`fleet.control.registry.secrets`),
one per project, written by an admin (`PUT /api/v1/projects/{name}/age-key`) and never
returned: the API answers only that one is stored, its public id (a digest from which the key
cannot be recovered) and when it was set. The worker reads it for each sync of the project's
apps and hands it to the render stage (`fleet.engine.render.sops`), which passes it to `sops`
in an environment variable only. Deleting the project deletes its key.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from redis import Redis
from redis.client import Pipeline

from fleet.control.keys import Keys
from fleet.control.registry import records
from fleet.control.registry.errors import NotFound
from fleet.control.registry.secrets import SecretBox
from fleet.control.registry.transact import now, transact


@dataclass(frozen=True)
class StoredAgeKey:
    """What is kept, encrypted: the key and when it was set."""

    key: str
    updated: str = ""

    def __repr__(self) -> str:
        return f"StoredAgeKey(key_id={key_id(self.key)!r}, updated={self.updated!r})"


@dataclass(frozen=True)
class AgeKeyInfo:
    """What may be shown of a project's key."""

    project: str
    stored: bool
    key_id: str = ""
    updated: str = ""


def key_id(key: str) -> str:
    """A short public id of an age key (a digest, from which the key cannot be recovered)."""
    return hashlib.sha256(b"gitfleet-age-key-id:" + key.encode()).hexdigest()[:12]


class AgeKeys:
    """The projects' age keys, encrypted with the fleet's `SecretBox`."""

    def __init__(self, redis: Redis, keys: Keys, box: SecretBox) -> None:
        self.redis = redis
        self.keys = keys
        self.box = box

    def put(self, project: str, key: str) -> AgeKeyInfo:
        """Store `key` (checked by the caller with `fleet.engine.render.sops.check_age_key`)."""
        stored = StoredAgeKey(key, now())
        sealed = self.box.encrypt(records.to_json(stored))

        def write(pipe: Pipeline) -> None:
            pipe.set(self.keys.project_age_key(project), sealed)

        # through the registry's transaction: the generation bump tells the workers, whose
        # syncs keep the key while the registry stands (`fleet.control.registry.syncreads`)
        transact(self.redis, self.keys, lambda: self._check_project(project), write)
        return AgeKeyInfo(project, True, key_id(key), stored.updated)

    def key_for(self, project: str) -> str:
        """The project's key, "" when none is stored."""
        stored = self._stored(project)
        return stored.key if stored else ""

    def info(self, project: str) -> AgeKeyInfo:
        self._check_project(project)
        stored = self._stored(project)
        if stored is None:
            return AgeKeyInfo(project, False)
        return AgeKeyInfo(project, True, key_id(stored.key), stored.updated)

    def delete(self, project: str) -> None:
        key = self.keys.project_age_key(project)

        def check() -> None:
            self._check_project(project)
            if not self.redis.exists(key):
                raise NotFound(f"project {project} has no age key")

        def write(pipe: Pipeline) -> None:
            pipe.delete(key)

        transact(self.redis, self.keys, check, write)

    def _stored(self, project: str) -> StoredAgeKey | None:
        raw = self.redis.get(self.keys.project_age_key(project))
        if not isinstance(raw, bytes):
            return None
        return records.from_json(StoredAgeKey, self.box.decrypt(raw))

    def _check_project(self, name: str) -> None:
        known = name == records.DEFAULT_PROJECT.name or self.redis.exists(self.keys.project(name))
        if not known:
            raise NotFound(f"no project named {name}")
