"""Receiving a pack within the sync's limits: how many bytes, and for how long.

dulwich's `GitClient.fetch` spools the pack a remote sends into a temporary file and indexes it
when the transfer ends; nothing in it bounds how much is received or for how long, so a remote
could fill the worker's disk or hold a worker forever. `fetch` here takes the same steps with
dulwich's public calls: `fetch_pack` with a pack-data writer of ours, then `add_thin_pack` from
the spooled file. The writer counts every byte against `Limits.max_fetch_bytes` and checks the
`Limits.fetch_timeout_s` deadline on every chunk. A remote that stops sending is bounded too:
each HTTP read times out after the fetch timeout (at most `READ_TIMEOUT_S`), through dulwich's
`http.timeout` setting. An SSH remote that stops sending is bounded only by ssh's own settings.

Nor may a remote send the fetch elsewhere: urllib3 follows redirects by default, so a host a
project may use could answer `302 Location: http://10.0.0.1/...` and make the worker fetch from
an address no URL rule or `sourceRepos` glob ever checked. `refuse_redirects` makes a redirect
fail the fetch, naming where it pointed; the app must name the final URL itself.

What is not bounded here: how large one object becomes once inflated (a pack's objects are
zlib streams, so a small pack can hold a large blob); `Limits.max_file_bytes` bounds what a
render reads, not what the fetch indexes.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from typing import Any

from dulwich.client import FetchPackResult, GitClient
from dulwich.config import ConfigDict
from dulwich.repo import Repo

from fleet.engine.limits import MIB, Limits, hint, size_text
from fleet.errors import SourceError

READ_TIMEOUT_S = 60.0
SPOOL_BYTES = 16 * MIB  # packs up to this size stay in memory, larger ones go to a file


def client_config(limits: Limits) -> ConfigDict:
    """dulwich settings for one fetch: HTTP reads time out within the fetch timeout."""
    config = ConfigDict()
    timeout = min(limits.fetch_timeout_s, READ_TIMEOUT_S)
    config.set((b"http",), b"timeout", f"{timeout:g}".encode())
    return config


class _NoRedirects:
    """A urllib3 pool manager that never follows a redirect and refuses every 3xx answer."""

    def __init__(self, pool: Any, url: str) -> None:
        self._pool = pool
        self._url = url

    def request(self, method: str, url: str, **kw: Any) -> Any:
        response = self._pool.request(method, url, redirect=False, **kw)
        if 300 <= response.status < 400:
            location = response.headers.get("Location", "")
            response.release_conn()
            raise SourceError(
                f"fetch of {self._url} refused: the git server answered {response.status}, a "
                f"redirect to {location or 'an unnamed location'}; gitfleet never follows "
                "redirects (they could lead anywhere), so give the app the final URL"
            )
        return response

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)


def refuse_redirects(client: GitClient, url: str) -> None:
    """Make an HTTP client's fetches fail on a redirect instead of following it."""
    pool = getattr(client, "pool_manager", None)
    if pool is not None:
        client.pool_manager = _NoRedirects(pool, url)  # type: ignore[attr-defined]


def fetch(
    client: GitClient,
    remote_path: str,
    repo: Repo,
    determine_wants: Callable[..., Any],
    *,
    url: str,
    limits: Limits,
) -> FetchPackResult:
    """Fetch what `determine_wants` asks for from `remote_path` into `repo`, within `limits`."""
    budget = _Budget(url, limits)
    store_path = getattr(repo.object_store, "path", None)
    with tempfile.SpooledTemporaryFile(SPOOL_BYTES, prefix="incoming-", dir=store_path) as pack:

        def write(data: bytes) -> int:
            budget.spend(len(data))
            return pack.write(data)

        result = client.fetch_pack(remote_path, determine_wants, repo.get_graph_walker(), write)
        if pack.tell():
            pack.seek(0)
            repo.object_store.add_thin_pack(pack.read, None)
    return result


class _Budget:
    """Bytes received so far against the limit, and the deadline."""

    def __init__(self, url: str, limits: Limits) -> None:
        self.url = url
        self.limits = limits
        self.received = 0
        self.deadline = time.monotonic() + limits.fetch_timeout_s

    def spend(self, count: int) -> None:
        self.received += count
        if self.received > self.limits.max_fetch_bytes:
            size = size_text(self.limits.max_fetch_bytes)
            raise SourceError(
                f"fetch of {self.url} stopped: more than {size} of pack data, the most one fetch "
                f"may receive ({hint('max_fetch_bytes')})"
            )
        if time.monotonic() > self.deadline:
            error = SourceError(
                f"fetch of {self.url} stopped: it took longer than "
                f"{self.limits.fetch_timeout_s:g}s ({hint('fetch_timeout_s')})"
            )
            error.retryable = True  # a slow network may be faster next time
            raise error
