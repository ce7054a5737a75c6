"""Git credentials, each bound to the repositories it was given for.

Two kinds, both Fernet-encrypted at rest like cluster credentials
(`fleet.control.registry.secrets`), never returned by the API, logged or traced:

- An app's own credentials (the `credentials` of `POST/PUT /apps`), stored with the name of
  the repository URL they were given for (`RemoteUrl.name`: scheme, host, port, path). A worker
  sends them only while the app's URL still has that name (`own_credentials`), and a PUT that
  changes the URL drops them unless they are given again (`fleet.control.registry.store`), so
  a member cannot point an app at a listener of theirs and collect its token. Credentials stored
  before this binding existed are bound to nothing and sent nowhere: give them again.
- Repository credentials an admin registers once (`POST /repositories`), for every repository
  under a URL prefix and for a set of projects, as Argo CD's credential templates and
  project-scoped repositories do. They serve an app with no credentials of its own whose project
  is in scope and whose URL lies under the prefix (`RemoteUrl.within`: `https://h/team-a` covers
  `https://h/team-a/shop`, never `https://h/team-ab`); the longest prefix wins.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from redis import Redis
from redis.client import Pipeline

from fleet.control.keys import Keys
from fleet.control.registry import records
from fleet.control.registry.errors import AlreadyExists, InvalidReference, NotFound
from fleet.control.registry.records import AppRecord
from fleet.control.registry.secrets import SecretBox
from fleet.control.registry.transact import now, transact
from fleet.engine.source.cache import GitCredentials
from fleet.engine.source.remotes import RemoteUrl, identity, parse_remote
from fleet.errors import Fault, FleetError

ALL_PROJECTS = "*"


class CredentialsRefused(FleetError):
    """Stored git credentials do not belong to the URL an app now names."""

    stage = "source"
    fault = Fault.USER


@dataclass(frozen=True)
class BoundCredentials:
    """Git credentials with the repository name they were given for ("" before binding)."""

    url: str = ""
    username: str = ""
    password: str = field(default="", repr=False)

    @classmethod
    def bind(cls, credentials: GitCredentials, repo: str) -> BoundCredentials:
        return cls(identity(repo), credentials.username, credentials.password)

    def credentials(self) -> GitCredentials:
        return GitCredentials(self.username, self.password)


@dataclass(frozen=True)
class RepositoryRecord:
    """Repository credentials' public part: a URL prefix (a `RemoteUrl.name`, whose path may
    be empty for a whole host) and the projects they serve (`*`: every project)."""

    name: str
    url: str
    projects: tuple[str, ...] = ()
    created: str = ""

    def covers(self, project: str, url: RemoteUrl) -> bool:
        in_scope = ALL_PROJECTS in self.projects or project in self.projects
        return in_scope and url.within(parse_remote(self.url, prefix=True))


def own_credentials(app: AppRecord, stored: BoundCredentials) -> GitCredentials:
    """The app's own credentials, when bound to the URL it names; else CredentialsRefused."""
    if stored.url == identity(app.source.repo):
        return stored.credentials()
    if not stored.url:
        raise CredentialsRefused(
            f"the git credentials of app {app.name} were stored before gitfleet bound "
            "credentials to a repository URL, so they are sent nowhere: give them again "
            "(PUT the app with `credentials`)"
        )
    raise CredentialsRefused(
        f"the git credentials of app {app.name} were given for {stored.url}, not for "
        f"{identity(app.source.repo)}: give them again for the new URL"
    )


def best_covering(
    found: list[RepositoryRecord], project: str, url: RemoteUrl
) -> RepositoryRecord | None:
    """Of `found`, the record of the longest prefix that covers `url` for `project`."""
    covering = [r for r in found if r.covers(project, url)]
    if not covering:
        return None
    return max(covering, key=lambda r: (len(parse_remote(r.url, prefix=True).segments), r.name))


class Repositories:
    """Repository credentials an admin registered: records in the clear, secrets encrypted."""

    def __init__(self, redis: Redis, keys: Keys, box: SecretBox) -> None:
        self.redis = redis
        self.keys = keys
        self.box = box

    def create(self, record: RepositoryRecord, credentials: GitCredentials) -> RepositoryRecord:
        """Register them; the projects must exist (or be `*`); the name must be free."""
        record = RepositoryRecord(record.name, record.url, record.projects, now())
        key = self.keys.repository(record.name)

        def check() -> None:
            if self.redis.exists(key):
                raise AlreadyExists(f"repository credentials {record.name} already exist")
            for project in record.projects:
                if project != ALL_PROJECTS and not self._project_exists(project):
                    raise InvalidReference("projects", f"no project named {project}")

        def write(pipe: Pipeline) -> None:
            pipe.set(key, records.to_json(record))
            pipe.set(self.keys.repository_credentials(record.name), self._sealed(credentials))
            pipe.sadd(self.keys.repositories, record.name)

        transact(self.redis, self.keys, check, write)
        return record

    def list(self) -> list[RepositoryRecord]:
        names = sorted(m.decode() for m in self.redis.smembers(self.keys.repositories))  # type: ignore[union-attr]
        raws = self.redis.mget([self.keys.repository(n) for n in names]) if names else []
        return [records.from_json(RepositoryRecord, r) for r in raws if isinstance(r, bytes)]

    def delete(self, name: str) -> None:
        def check() -> None:
            if not self.redis.exists(self.keys.repository(name)):
                raise NotFound(f"no repository credentials named {name}")

        def write(pipe: Pipeline) -> None:
            pipe.delete(self.keys.repository(name), self.keys.repository_credentials(name))
            pipe.srem(self.keys.repositories, name)

        transact(self.redis, self.keys, check, write)

    def for_app(self, project: str, url: RemoteUrl) -> GitCredentials | None:
        """The credentials of the longest prefix that covers `url` for `project`, if any."""
        best = best_covering(self.list(), project, url)
        return self.secret_of(best.name) if best is not None else None

    def secret_of(self, name: str) -> GitCredentials | None:
        """The decrypted credentials of the repository record `name` (None: gone)."""
        raw = self.redis.get(self.keys.repository_credentials(name))
        if not isinstance(raw, bytes):
            return None
        return records.from_json(GitCredentials, self.box.decrypt(raw))

    def _sealed(self, credentials: GitCredentials) -> bytes:
        return self.box.encrypt(records.to_json(credentials))

    def _project_exists(self, name: str) -> bool:
        return name == records.DEFAULT_PROJECT.name or bool(
            self.redis.exists(self.keys.project(name))
        )
