"""The parameter sets an app set's generator yields, one per app.

- list: each element as given;
- clusters: each registered cluster matching the selector: `name`, `server`, `labels.<key>`;
- git: each directory of the repository at the revision matching a glob (one `fnmatch`
  pattern per path segment, so `apps/*` never reaches `apps/a/b`), minus the excluded ones:
  `path`, `path.basename`, `path.basenameNormalized` (lower case, runs of other characters
  than letters and digits made `-`, for names) and `path[N]`.

The repository is read through the source cache (`fleet.engine.source.cache`), built with the
fleet's `RemotePolicy`, so only URLs the workers may fetch are fetched, after the project's
`sourceRepos` allow them, within the project's fetch limits; its credentials are the
project's repository credentials.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from fleet.control.appsets.records import AppSetRecord, GitGenerator
from fleet.control.policy import repo_allowed
from fleet.control.registry.errors import NotFound
from fleet.control.registry.records import ClusterRecord
from fleet.control.registry.store import Store
from fleet.engine.source.cache import Snapshot, SourceCache
from fleet.engine.source.remotes import RepoUrlError, parse_remote
from fleet.errors import SourceError, UsageError

Params = dict[str, str]
MAX_DIRECTORIES = 1000  # a glob matching more is refused: one app set, not a fork bomb
MAX_LISTED = 20 * MAX_DIRECTORIES  # directories read while matching, at most


class GeneratorError(UsageError):
    """A generator cannot yield its parameter sets (a refused or unreachable repository, a bad
    glob); the set's existing apps are left as they are."""


@dataclass
class Generators:
    store: Store
    source: SourceCache

    def params(self, appset: AppSetRecord, *, max_age: float = 0.0) -> list[Params]:
        generator = appset.generator
        if generator.list is not None:
            return [dict(e) for e in generator.list.elements]
        if generator.clusters is not None:
            selector = generator.clusters.selector
            clusters = [c for c in self.store.list_clusters() if c.matches(selector)]
            return [cluster_params(c) for c in sorted(clusters, key=lambda c: c.name)]
        if generator.git is not None:
            paths = self.directories(appset, generator.git, max_age=max_age)
            return [path_params(p) for p in paths]
        raise GeneratorError(f"appset {appset.name}: generator: give list, clusters or git")

    def directories(self, appset: AppSetRecord, git: GitGenerator, *, max_age: float) -> list[str]:
        where = f"appset {appset.name}: generator.git"
        try:
            project = self.store.get_project(appset.project)
        except NotFound:
            raise GeneratorError(f"{where}: no project named {appset.project}") from None
        try:
            url = (self.source.remotes.check if self.source.remotes else parse_remote)(git.repo)
        except RepoUrlError as e:
            raise GeneratorError(f"{where}.repo: {e}") from None
        if not repo_allowed(project, git.repo):
            raise GeneratorError(
                f"{where}.repo: {git.repo} is not an allowed source repository of project "
                f"{project.name}"
            )
        try:
            credentials = self.store.repositories.for_app(project.name, url)
            resolved = self.source.resolve(
                git.repo,
                git.revision,
                credentials=credentials,
                max_age=max_age,
                limits=project.limits,
            )
        except (RepoUrlError, SourceError) as e:
            raise GeneratorError(f"{where}.repo: {e}") from None
        include = [d.path for d in git.directories if not d.exclude]
        exclude = [d.path for d in git.directories if d.exclude]
        if not include:
            raise GeneratorError(f"{where}.directories: give at least one path glob to include")
        walk = _Walk(exclude, where)
        with self.source.snapshot(resolved) as snap:
            for glob in include:
                walk.matching(snap, _segments(glob, where))
        return sorted(walk.kept)


def cluster_params(cluster: ClusterRecord) -> Params:
    labels = {f"labels.{k}": v for k, v in cluster.labels.items()}
    return {"name": cluster.name, "server": cluster.server, **labels}


def path_params(path: str) -> Params:
    segments = path.split("/")
    basename = segments[-1]
    indexed = {f"path[{i}]": s for i, s in enumerate(segments)}
    normalized = re.sub(r"[^a-z0-9]+", "-", basename.lower()).strip("-")
    return {
        "path": path,
        "path.basename": basename,
        "path.basenameNormalized": normalized,
        **indexed,
    }


def _segments(glob: str, where: str) -> list[str]:
    parts = [p for p in glob.strip("/").split("/") if p not in ("", ".")]
    if not parts or ".." in parts or "**" in parts:
        raise GeneratorError(
            f"{where}.directories: {glob!r} must be a relative glob, one pattern per segment "
            "(no '..' and no '**')"
        )
    return parts


@dataclass
class _Walk:
    """The directories matching the globs, minus the excluded ones, found by walking the
    snapshot; the walk stops as soon as more than MAX_DIRECTORIES are kept or more than
    MAX_LISTED directories were read (a repository of a million directories is not read
    through before the refusal)."""

    exclude: list[str]
    where: str
    kept: set[str] = field(default_factory=set)
    listed: int = 0

    def matching(self, snap: Snapshot, patterns: list[str], base: str = "") -> None:
        self.listed += 1
        if self.listed > MAX_LISTED:
            raise GeneratorError(
                f"{self.where}.directories: more than {MAX_LISTED} directories to read; "
                "narrow the globs"
            )
        try:
            names = snap.directories(base)
        except SourceError:
            return
        for name in names:
            if not fnmatchcase(name, patterns[0]):
                continue
            path = f"{base}/{name}" if base else name
            if len(patterns) > 1:
                self.matching(snap, patterns[1:], path)
                continue
            if any(_matches(path, g) for g in self.exclude):
                continue
            self.kept.add(path)
            if len(self.kept) > MAX_DIRECTORIES:
                raise GeneratorError(
                    f"{self.where}.directories: more than {MAX_DIRECTORIES} match, "
                    f"at most {MAX_DIRECTORIES}"
                )


def _matches(path: str, glob: str) -> bool:
    parts, patterns = path.split("/"), [p for p in glob.strip("/").split("/") if p]
    return len(parts) == len(patterns) and all(map(fnmatchcase, parts, patterns))
