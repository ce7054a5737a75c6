"""What an app set stores: its generator, its template and its deletion policy.

Pure dataclasses (read and written with `fleet.control.registry.records.to_json` /
`from_json`). The template is an app record's data (`AppRecord` fields, snake_case) whose
strings may hold `{{param}}` (`fleet.control.appsets.template`); the API turns its camelCase
body into it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

MIN_REFRESH_S = 30.0  # a git generator fetches at most this often (`refresh`)


class DeletionPolicy(StrEnum):
    """What removing a generated app does: `cascade` prunes its objects first (as
    `DELETE /apps/X?cascade=true`); `keep` removes the app record only and leaves its objects."""

    CASCADE = "cascade"
    KEEP = "keep"


@dataclass(frozen=True)
class ListGenerator:
    """One app per element; each element's keys are its parameters."""

    elements: tuple[dict[str, str], ...] = ()


@dataclass(frozen=True)
class ClustersGenerator:
    """One app per registered cluster whose labels match `selector` (empty: every cluster);
    parameters `name`, `server` and `labels.<key>`."""

    selector: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class GitDirectory:
    """A glob of directories (`fnmatch` per path segment, `apps/*`); `exclude` removes the
    directories it matches from the others'."""

    path: str
    exclude: bool = False


@dataclass(frozen=True)
class GitGenerator:
    """One app per directory of `repo` at `revision` matching `directories`; parameters
    `path`, `path.basename`, `path.basenameNormalized` and `path[N]` (the Nth segment)."""

    repo: str
    revision: str = "HEAD"
    directories: tuple[GitDirectory, ...] = ()


@dataclass(frozen=True)
class Generator:
    """Exactly one of the three is set."""

    list: ListGenerator | None = None
    clusters: ClustersGenerator | None = None
    git: GitGenerator | None = None

    @property
    def kind(self) -> str:
        return "list" if self.list else "clusters" if self.clusters else "git"


@dataclass(frozen=True)
class AppSetRecord:
    """An app set. Its apps belong to `project` and carry `owner_set = name`. `refresh_s`: how
    old a fetch of the git generator's repository may be when the scheduler lists it (at least
    `MIN_REFRESH_S`). `uid`: given when the set is created and kept for life; the apps it
    makes are recorded under it (`AppSets.owned`), so a later set of the same name, in this
    project or another, owns none of them. `author_role`: the role of the token that last
    created or replaced the set; its reconciles apply the rules of `POST /apps` for that role
    ("" for a set stored before it was recorded: treated as no admin's)."""

    name: str
    generator: Generator
    template: dict[str, Any]
    project: str = "default"
    deletion: DeletionPolicy = DeletionPolicy.CASCADE
    refresh_s: float = 180.0
    given: dict[str, Any] = field(default_factory=dict)  # the template as the API got it
    created: str = ""
    updated: str = ""
    uid: str = ""
    author: str = ""
    author_role: str = ""


@dataclass(frozen=True)
class AppSetStatus:
    """What the last reconcile found: the apps the set owns, the ones it created, changed and
    removed, and what it refused (a rendering error, a project rule), each naming its cause."""

    apps: tuple[str, ...] = ()
    created: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    reconciled: str = ""
