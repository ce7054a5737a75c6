"""The warm state a sync reuses: git objects and renders (and, in workers, the watches' index
of labelled objects that prune reads instead of listing).

One-shot commands keep it on disk under GITFLEET_CACHE_DIR (default ~/.cache/gitfleet), so a
second `gitfleet sync` of an unchanged app fetches nothing new and renders nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from fleet.engine.prune import LabelledIndex
from fleet.engine.render.cache import Renderer
from fleet.engine.source.cache import SourceCache
from fleet.engine.source.remotes import RemotePolicy


def default_cache_dir() -> Path:
    configured = os.environ.get("GITFLEET_CACHE_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "gitfleet"


@dataclass
class SyncCaches:
    source: SourceCache
    renderer: Renderer
    labelled: LabelledIndex | None = None  # a worker's watches; one-shot commands LIST

    @classmethod
    def at(cls, root: Path | None = None, *, remotes: RemotePolicy | None = None) -> SyncCaches:
        """Caches under `root`; `remotes` limits what the source cache fetches (workers)."""
        root = root or default_cache_dir()
        (root / "git").mkdir(parents=True, exist_ok=True)
        (root / "render").mkdir(parents=True, exist_ok=True)
        return cls(SourceCache(root / "git", remotes=remotes), Renderer(root / "render"))
