"""A newer revision requested while a sync waits on a wave's health cancels the wait.

Flux 2.7+ (`CancelHealthCheckOnNewRevision`) stops waiting for health when a new revision
arrives; gitfleet does the same. The caller (the worker) gives the sync a callable,
`SyncRequest.newer`, that answers the newest sync requested for the same instance meanwhile
(`contract.NewerRequest`); the engine never reads Redis itself. At each safe point of a health
wait (between polls: every write of the wave has returned, nothing is being pruned) the
`RevisionWatch` asks it; a request it has not seen yet is resolved to a commit, and a commit
other than the one this sync pinned raises `NewerRevision`. `fleet.engine.sync.run` then
re-plans the whole sync with that commit, so later waves and prune run only for the newer
revision: nothing of the older one is left half-pruned, since prune comes after every wave.

A request for the commit this sync already pinned (an interval tick, a self-heal) changes
nothing, and each request is resolved once, however many polls see it.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleet.engine.caches import SyncCaches
from fleet.engine.contract import SyncRequest
from fleet.errors import FleetError

MAX_REPLANS = 5  # a sync re-plans at most this many times, then finishes what it runs


class NewerRevision(Exception):  # a signal, not a FleetError: nothing failed
    """A newer revision was requested while this sync waited: stop here and re-plan."""

    def __init__(self, commit: str, asked: str, waiting: str) -> None:
        super().__init__(f"{waiting} cancelled: revision {asked} ({commit[:12]}) requested")
        self.commit = commit
        self.asked = asked
        self.waiting = waiting


@dataclass
class RevisionWatch:
    """Checks `request.newer` against the commit this sync pinned (`pinned`)."""

    request: SyncRequest
    caches: SyncCaches
    pinned: str
    seen: str = ""  # the key of the last request resolved

    def __call__(self, waiting: str) -> None:
        """Raise NewerRevision when a request not seen yet asks for another commit."""
        if self.request.newer is None or not self.pinned:
            return
        newer = self.request.newer()
        if newer is None or newer.key == self.seen:
            return
        self.seen = newer.key
        asked = newer.revision or self.request.revision
        try:
            resolved = self.caches.source.resolve(
                self.request.repo,
                asked,
                credentials=self.request.credentials,
                max_age=0.0,
                limits=self.request.limits,
            )
        except FleetError:
            return  # the newer sync will report why its revision cannot be fetched
        if resolved.commit != self.pinned:
            raise NewerRevision(resolved.commit, asked, waiting)
