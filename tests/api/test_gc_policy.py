"""A long-lived coordinator (`Settings.freeze_gc`, set by `gitfleet api`) watches its full
garbage collections for as long as it runs (`fleet.gcwatch`), and only then."""

from __future__ import annotations

import gc

from fastapi.testclient import TestClient

from api.app import create_app
from fleet.gcwatch import CollectionWatch
from tests.api.conftest import ADMIN_TOKEN, settings_for


def _watches() -> list[CollectionWatch]:
    return [c for c in gc.callbacks if isinstance(c, CollectionWatch)]


def test_the_long_lived_coordinator_watches_full_collections_while_it_runs(
    redis_url: str,
) -> None:
    app = create_app(settings_for(redis_url, freeze_gc=True))
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    try:
        with TestClient(app, headers=headers) as client:
            assert client.get("/api/v1/apps").status_code == 200
            assert len(_watches()) == 1
            assert gc.get_freeze_count() > 0  # what was loaded at start
        assert _watches() == []
    finally:
        gc.unfreeze()


def test_a_coordinator_in_tests_or_embedded_leaves_the_collector_alone(redis_url: str) -> None:
    with TestClient(create_app(settings_for(redis_url))):
        assert _watches() == []
