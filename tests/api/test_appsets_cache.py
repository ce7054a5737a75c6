"""The app-set routes build a source cache per request; the repositories it keeps open are
closed when the request ends, not left for the garbage collector (`api.routes.appsets`)."""

from __future__ import annotations

from pathlib import Path

from api.routes.appsets import _appsets
from fleet.control.registry.store import Store
from fleet.control.routing.dispatch import Dispatcher
from tests.api.conftest import settings_for
from tests.support.gitrepo import GitRepo


def test_a_requests_open_repositories_close_when_it_ends(
    redis_url: str, store: Store, tmp_path: Path
) -> None:
    origin = GitRepo.create(tmp_path / "origin")
    origin.commit({"apps/a/cm.yaml": "a: 1\n"})
    settings = settings_for(redis_url)
    dependency = _appsets(store, settings, Dispatcher(store.redis, prefix=settings.prefix))
    sets = next(dependency)
    repos = sets.generators.source.repos
    with repos.borrow(str(origin.path)):
        pass
    with repos.borrow(str(origin.path)):
        pass
    assert repos.opened == 1  # kept open for the rest of the request

    dependency.close()  # the request ends
    with repos.borrow(str(origin.path)):
        pass
    assert repos.opened == 2  # nothing was left open to reuse
    repos.close()
