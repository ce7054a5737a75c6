"""A bounded cache of parsed git trees and commits, shared by every read of a source cache.

Git objects are immutable and named by their content, so a parsed tree can be reused by any
later read of any repository. It matters for monorepos: with 10,000 apps under `apps/`, every
path lookup of every sync would otherwise inflate and parse that 10,000-entry tree again (a
render does half a dozen lookups), which made reading the source cost more than the rest of a
one-object sync. Blobs are not kept: each is read once per render and the render cache keeps
the result.

Thread-safe; least recently used objects leave first once `max_objects` is reached. What
pays is a handful of hot objects (a commit, the root and the big shared trees each sync of a
commit walks), so the bound is small: a parsed one-entry tree takes about 0.8 KB, and in a
fleet of one-object apps each app's own leaf tree is read once per commit, so a larger bound
only held those (4,096 of them were 0.8 KB of a worker's memory per app in a cold sync).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from dulwich.objects import Commit, ShaFile, Tree
from dulwich.repo import Repo

DEFAULT_MAX_OBJECTS = 512


class ParsedObjects:
    def __init__(self, max_objects: int = DEFAULT_MAX_OBJECTS) -> None:
        self.max_objects = max_objects
        self.hits = 0
        self.misses = 0
        self._objects: OrderedDict[bytes, ShaFile] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._objects)

    def getter(self, repo: Repo) -> Callable[[bytes], ShaFile]:
        """`repo[sha]`, answered from the cache for trees and commits."""

        def get(sha: bytes) -> ShaFile:
            with self._lock:
                found = self._objects.get(sha)
                if found is not None:
                    self._objects.move_to_end(sha)
                    self.hits += 1
                    return found
            obj = repo[sha]
            if isinstance(obj, Tree | Commit):
                self._keep(sha, obj)
            return obj

        return get

    def _keep(self, sha: bytes, obj: ShaFile) -> None:
        with self._lock:
            self.misses += 1
            self._objects[sha] = obj
            while len(self._objects) > self.max_objects:
                self._objects.popitem(last=False)
