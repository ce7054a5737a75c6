"""The newest commit of an app's revision, as the coordinator sees it (for rollouts).

The coordinator keeps its own bare-repository cache (`<GITFLEET_CACHE_DIR>/coordinator/git`)
and fetches with the same rules as a worker: the URL checked against the fleet's
`RemotePolicy` (GITFLEET_INSECURE_GIT_HOSTS) and the project's `sourceRepos`, the app's or the
admin's repository credentials, the project's fetch limits. It runs in the scheduler's tick,
so a remote that hangs delays the tick by up to the project's fetch timeout (`limits`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from fleet.control.policy import check_source
from fleet.control.registry.records import AppRecord
from fleet.control.registry.store import Store
from fleet.engine.caches import default_cache_dir
from fleet.engine.source.cache import SourceCache
from fleet.engine.source.remotes import RemotePolicy

FETCH_REUSE_S = 1.0


class Heads(Protocol):
    def head(self, app: AppRecord) -> str:
        """The commit `app.source.revision` names now; raises FleetError when it cannot tell."""
        ...


class GitHeads:
    def __init__(
        self, store: Store, *, root: Path | None = None, remotes: RemotePolicy | None = None
    ) -> None:
        self.store = store
        if remotes is None:
            remotes = RemotePolicy.from_setting(os.environ.get("GITFLEET_INSECURE_GIT_HOSTS", ""))
        self.remotes = remotes
        folder = root or default_cache_dir() / "coordinator"
        self.cache = SourceCache(folder / "git", remotes=remotes)

    def head(self, app: AppRecord) -> str:
        project = self.store.get_project(app.project)
        check_source(app, project, self.remotes)
        resolved = self.cache.resolve(
            app.source.repo,
            app.source.revision,
            credentials=self.store.git_credentials_for(app),
            max_age=FETCH_REUSE_S,  # many apps on one repository: one fetch per tick
            limits=project.limits,
        )
        return resolved.commit
