"""The environment of a gitfleet process a test starts as a user would (`python -m worker`,
`python -m cli.main api`): the caller's environment without any GITFLEET_ or OTEL_ setting of
its own, so nothing from the machine leaks in, plus the repository on PYTHONPATH, a fresh
secret key and a cache folder of the test's own."""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.fernet import Fernet

from tests.support.paths import REPO_ROOT


def process_env(redis_url: str, folder: Path, **settings: str) -> dict[str, str]:
    """`settings` are further variables (GITFLEET_ADMIN_TOKEN=..., GITFLEET_SECRET_KEY=... to
    share a key with the test)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITFLEET_", "OTEL_"))}
    env.update(
        PYTHONPATH=str(REPO_ROOT),
        GITFLEET_REDIS_URL=redis_url,
        GITFLEET_SECRET_KEY=Fernet.generate_key().decode(),
        GITFLEET_CACHE_DIR=str(folder / "cache"),
    )
    env.update(settings)
    return env
