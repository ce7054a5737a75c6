"""Which instances a git push cannot change, so a push to a monorepo syncs only what it touched.

Argo CD users annotate apps with `manifest-generate-paths` for this; here it is automatic. Two
records in Redis make it work:

- *synced*: per repository, for every instance whose last sync (or quiet check) succeeded, the
  commit it matched, the repository paths its render read (`RenderResult.inputs`: the app
  path, plus any kustomize base, chart or values file outside it) and a hash of the app record
  it synced (`spec_of`), so an app changed since then (a new path, new values) always syncs.
  Workers write it.
- *pushes*: per repository and ref, the last `KEEP_PUSHES` push events whose payload listed
  the changed files (GitHub lists them per commit): before, after and those paths.
  The webhook handler writes it, one chain per secret that signed the deliveries (the global
  one, or a project's own), and reads for each app only the chain its project's secret wrote.

A push from `before` to `after` cannot change an instance that matched commit R, with the app
record as it is now, when the pushes from R up to `after` form an unbroken chain and none of
their changed files lies under one of its inputs: its render at `after` reads exactly the
bytes it read at R. Anything less certain (no file list, a forced push, a commit not in the
chain, no synced record, an app changed since) counts as affected, and the instance syncs as
before. Desired state only: drift in the cluster is the watches' business, not a push's.

`unaffected` is pure; `PushLog` holds the Redis side.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import PlainSerializer, TypeAdapter
from redis import Redis
from redis.client import Pipeline

from fleet.control.keys import Keys
from fleet.control.registry import records
from fleet.control.registry.records import AppRecord

KEEP_PUSHES = 200


def _sorted(paths: frozenset[str]) -> list[str]:
    return sorted(paths)


@dataclass(frozen=True)
class Push:
    before: str
    after: str
    # every file the push added, modified or removed; stored sorted
    paths: Annotated[frozenset[str], PlainSerializer(_sorted, return_type=list[str])]


@dataclass(frozen=True)
class SyncedAt:
    revision: str
    inputs: tuple[str, ...]
    spec: str = ""  # `spec_of` the app record synced


PUSH: TypeAdapter[Push] = TypeAdapter(Push)
SYNCED: TypeAdapter[SyncedAt] = TypeAdapter(SyncedAt)


def spec_of(app: AppRecord) -> str:
    """A hash of everything in an app record but its timestamps."""
    text = records.to_json(dataclasses.replace(app, created="", updated=""))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Specs:
    """`spec_of`, remembered per record object: `Store.list_apps_cached` hands out the same
    objects while the registry is unchanged, so a push to 10,000 apps does not hash every
    record again (half a second of the webhook's answer)."""

    def __init__(self) -> None:
        self._known: dict[int, tuple[AppRecord, str]] = {}

    def of(self, app: AppRecord) -> str:
        known = self._known.get(id(app))
        if known is None or known[0] is not app:
            known = (app, spec_of(app))
            self._known[id(app)] = known
        return known[1]

    def keep(self, apps: Sequence[AppRecord]) -> None:
        """Forget the records not in `apps` (replaced or deleted ones) once they are as many
        as the live ones: an id cannot be reused while its record is held here, so the extra
        entries cost memory only, and the pass over every app runs once in many pushes."""
        if len(self._known) > 2 * len(apps) + 1000:
            self._known = {id(a): (a, self.of(a)) for a in apps}


def changed_paths(payload: Mapping[str, Any]) -> frozenset[str] | None:
    """The files a GitHub-style push event changed; None when the payload cannot tell
    (no `commits`, a forced push, or a list GitHub cut short)."""
    commits = payload.get("commits")
    if payload.get("forced") or not isinstance(commits, list) or not commits:
        return None
    if len(commits) >= 20 or int(payload.get("size") or len(commits)) > len(commits):
        return None  # GitHub lists at most 20 commits; the rest are unknown
    found: set[str] = set()
    for commit in commits:
        if not isinstance(commit, dict):
            return None
        for field in ("added", "modified", "removed"):
            paths = commit.get(field)
            if not isinstance(paths, list):
                return None
            found.update(str(p).strip("/") for p in paths)
    return frozenset(found)


def touches(paths: Iterable[str], inputs: Sequence[str]) -> bool:
    """Whether any changed file lies at or under one of `inputs` ("." is the whole repo)."""
    return _touched(prefixes_of(paths), inputs)


def prefixes_of(paths: Iterable[str]) -> frozenset[str]:
    """Each path and every directory above it ("a/b/c.yaml": a, a/b, a/b/c.yaml). A file lies
    at or under an input exactly when the input, without its slashes at either end, is one
    of these: asked once per instance, a set lookup instead of a prefix test per changed file."""
    found: set[str] = set()
    for path in paths:
        found.add(path)
        cut = path.find("/")
        while cut != -1:
            found.add(path[:cut])
            cut = path.find("/", cut + 1)
    return frozenset(found)


def _touched(prefixes: frozenset[str], inputs: Sequence[str]) -> bool:
    roots = [i.strip("/") for i in inputs]
    if not roots or any(r in ("", ".") for r in roots):
        return True
    return any(r in prefixes for r in roots)


def unaffected(
    chain: Sequence[Push], after: str, synced: Mapping[str, SyncedAt], specs: Mapping[str, str]
) -> set[str]:
    """The instances of `synced` that `chain` (newest push first, ending at `after`) cannot
    have changed, `specs` giving each instance's current `spec_of`; see the module docstring."""
    since: dict[str, frozenset[str]] = {after: frozenset()}
    changed: frozenset[str] = frozenset()
    expected = after
    for push in chain:
        if push.after != expected:
            break  # a gap: what happened before it is unknown
        changed |= push.paths
        since.setdefault(push.before, changed)
        expected = push.before
    prefixes: dict[str, frozenset[str]] = {}  # of the revisions instances are at, when asked
    found = set()
    for instance, at in synced.items():
        paths = since.get(at.revision)
        if at.spec != specs.get(instance) or paths is None or not at.inputs:
            continue
        under = prefixes.get(at.revision)
        if under is None:
            under = prefixes[at.revision] = prefixes_of(paths)
        if not _touched(under, at.inputs):
            found.add(instance)
    return found


class PushLog:
    def __init__(self, redis: Redis, *, prefix: str = "gitfleet") -> None:
        self.redis = redis
        self.keys = Keys(prefix)

    def record(self, repo: str, ref: str, push: Push, *, project: str = "") -> None:
        """Keep a push whose changed files are known (`repo` normalized), as told by the global
        webhook secret or, with `project`, by that project's own: one project's deliveries
        never decide what another's apps may skip."""
        key = self.keys.pushes(repo, ref, project)
        pipe = self.redis.pipeline(transaction=True)
        pipe.lpush(key, PUSH.dump_json(push))
        pipe.ltrim(key, 0, KEEP_PUSHES - 1)
        pipe.execute()

    def chain(self, repo: str, ref: str, *, project: str = "") -> list[Push]:
        key = self.keys.pushes(repo, ref, project)
        raw: list[bytes] = self.redis.lrange(key, 0, -1)  # type: ignore[assignment]
        return [PUSH.validate_json(item) for item in raw]

    def note_synced(self, repo: str, instance: str, at: SyncedAt | None) -> None:
        """What `instance` matched after a sync or quiet check; None forgets it (a failed
        sync: the next push must sync it whatever it touches)."""
        self.stage_synced(self.redis, repo, instance, at)

    def stage_synced(
        self, pipe: Redis | Pipeline, repo: str, instance: str, at: SyncedAt | None
    ) -> None:
        """`note_synced` as a command on `pipe` (a caller's write, e.g. a sync's fenced one)."""
        if at is None:
            pipe.hdel(self.keys.synced(repo), instance)
            return
        pipe.hset(self.keys.synced(repo), instance, SYNCED.dump_json(at))

    def synced(self, repo: str, instances: Sequence[str]) -> dict[str, SyncedAt]:
        if not instances:
            return {}
        raws = self.redis.hmget(self.keys.synced(repo), list(instances))
        return {
            instance: _synced_at(raw)
            for instance, raw in zip(instances, raws, strict=True)
            if isinstance(raw, bytes)
        }


@functools.lru_cache(maxsize=1 << 16)
def _synced_at(raw: bytes) -> SyncedAt:
    """A stored `SyncedAt`, parsed once: a push reads the records of every instance on the
    repository, and most are the same bytes as at the last push."""
    return SYNCED.validate_json(raw)
