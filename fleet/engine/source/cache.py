"""Stage 1, source: a cache of git remotes, read straight from the object store.

Each remote gets one bare repository under the cache root, named by a hash of the repository's
normalized name (`fleet.engine.source.remotes.identity`: no credentials, lower-case host, no
default port, `.git` or trailing `/`), never by URL text, so no URL can name a path of its
choosing, spellings of one repository share one cache, and no secret ever reaches a path, a
config file or a message. Fetching is dulwich in-process (no git
binary), full history, refs mirrored to refs/heads/* and refs/tags/*. Reading never checks out:
`tree_id` of an application's path is the render cache key, so a commit that leaves the path
alone re-renders nothing.

A local path (a work tree or a bare repository) is read in place, without a copy; file:// URLs
are fetched like any remote, which keeps the cached commit stable while the origin moves on.
Both are for the one-shot `gitfleet sync` and `diff`: a cache built with a `RemotePolicy` (the
workers') fetches only the URLs that policy accepts, rebuilt from their checked parts, and
refuses everything else before it touches the disk or the network.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import re
import shutil
import stat
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from dulwich.client import GitClient, HTTPUnauthorized, get_transport_and_path
from dulwich.errors import GitProtocolError, HangupException, NotGitRepository
from dulwich.object_store import tree_lookup_path
from dulwich.objects import Commit, ObjectID, ShaFile, Tag, Tree
from dulwich.refs import Ref
from dulwich.repo import Repo

from fleet.engine.limits import Limits
from fleet.engine.source import transfer
from fleet.engine.source.entries import walk_files
from fleet.engine.source.gitobjects import ParsedObjects
from fleet.engine.source.openrepos import OpenRepos, open_repo
from fleet.engine.source.remotes import RemotePolicy, identity
from fleet.errors import SourceError

log = logging.getLogger(__name__)

_SHA = re.compile(r"[0-9a-f]{40}")
_SHORT_SHA = re.compile(r"[0-9a-f]{4,39}")
_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]*@")
_MIRRORED = (b"refs/heads/", b"refs/tags/")
_HEAD = Ref(b"HEAD")
_REFUSED_NAMES = {"", ".", "..", ".git"}
_Getter = Callable[[bytes], ShaFile]


@dataclass(frozen=True)
class GitCredentials:
    """HTTP credentials. For a token, put it in `password`; the username defaults to
    `x-access-token` (GitHub's convention; most hosts accept any name with a token)."""

    username: str = ""
    password: str = ""

    def __repr__(self) -> str:
        return f"GitCredentials(username={self.username!r}, password='***')"


@dataclass(frozen=True)
class Resolved:
    """A revision pinned to a commit. `url` is the remote with credentials removed."""

    url: str
    revision: str
    commit: str


@dataclass(frozen=True)
class Entry:
    """A directory (tree) or a file (blob) in a commit, with its object id."""

    is_dir: bool
    id: str


class Snapshot:
    """Read-only view of one resolved commit on an open repository; no checkout."""

    def __init__(
        self, repo: Repo, resolved: Resolved, objects: ParsedObjects | None = None
    ) -> None:
        self.repo = repo
        self.resolved = resolved
        self._get = (ParsedObjects(max_objects=64) if objects is None else objects).getter(repo)

    def tree_id(self, path: str) -> str:
        """Hex id of the tree at `path` ("" or "." for the root)."""
        return _tree_at(self._get, self.resolved, path).id.decode()

    def read_tree(self, path: str) -> dict[str, bytes]:
        """Every regular file under `path`, keyed by its path relative to `path`. Entries are
        checked as git checks them (`fleet.engine.source.entries`): symlinks inside the
        repository are left out; unsafe names, outside symlinks and submodules are refused."""
        tree = _tree_at(self._get, self.resolved, path)
        return dict(walk_files(self._get, tree, _clean_path(path)))

    def directories(self, path: str) -> list[str]:
        """Names of the directories directly under `path`, sorted (files, submodules and the
        names git itself refuses, `.`, `..` and `.git`, left out): app generators list them."""
        tree = _tree_at(self._get, self.resolved, path)
        found = (
            e.path.decode("utf-8", "replace") for e in tree.iteritems() if stat.S_ISDIR(e.mode)
        )
        return sorted(name for name in found if name.lower() not in _REFUSED_NAMES)

    def read_file(self, path: str) -> bytes | None:
        """The content of one file, or None when there is no regular file at `path`."""
        found = _lookup(self._get, self.resolved, path)
        if found is None or not stat.S_ISREG(found[0]):
            return None
        return self.repo[found[1]].as_raw_string()

    def entry(self, path: str) -> Entry | None:
        """What is at `path` (a directory or a file, and its object id), or None."""
        found = _lookup(self._get, self.resolved, path)
        if found is None:
            return None
        return Entry(is_dir=stat.S_ISDIR(found[0]), id=found[1].decode())


def scrub(text: str, *secrets: str) -> str:
    """Remove user-info from every URL in `text` and replace each known secret by ***."""
    text = _USERINFO.sub(r"\g<scheme>", text)
    for secret in filter(None, secrets):
        text = text.replace(secret, "***")
    return text


def split_credentials(url: str) -> tuple[str, GitCredentials | None]:
    """Return an http(s) URL without user-info and the credentials it carried, if any.
    Other URLs are returned unchanged (an ssh user name is an address, not a secret)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or "@" not in parts.netloc:
        return url, None
    host = parts.netloc.rpartition("@")[2]
    found = GitCredentials(parts.username or "", parts.password or "")
    return urlunsplit(parts._replace(netloc=host)), found


def is_local_path(url: str) -> bool:
    """A plain filesystem path (not a URL and not scp-like `host:path`)."""
    if "://" in url:
        return False
    return url.startswith(("/", ".", "~")) or ":" not in url


class SourceCache:
    """Bare-repository cache of git remotes; see the module docstring."""

    def __init__(self, root: Path, *, remotes: RemotePolicy | None = None) -> None:
        """`remotes`: fetch only what it accepts (workers); None also reads local paths."""
        self.root = root
        self.remotes = remotes
        self.fetches = 0  # network fetches done by this instance (tests and benchmarks count)
        self.objects = ParsedObjects()
        self.repos = OpenRepos()  # the cache's repositories, open between syncs
        self._fetched_at: dict[str, float] = {}  # when the last fetch of a remote ended
        self._began_at: dict[str, float] = {}  # and when it began (monotonic seconds)

    def resolve(
        self,
        url: str,
        revision: str = "HEAD",
        *,
        credentials: GitCredentials | None = None,
        max_age: float = 0.0,
        fetched_since: float | None = None,
        limits: Limits | None = None,
    ) -> Resolved:
        """Fetch `url` if needed and pin `revision` (branch, tag, sha, short sha, HEAD). A
        fetch receives at most `limits.max_fetch_bytes` within `limits.fetch_timeout_s`.

        With `max_age`, a fetch of the same remote that ended less than that many seconds ago
        is reused: a periodic reconcile of many apps on one monorepo fetches it once per
        period, not once per app. With `fetched_since` (a `time.monotonic()` of this process),
        a fetch that began at or after it is reused for a branch, tag or HEAD: a sync right
        after its quiet check reuses the check's fetch (`worker.jobs`), which began after the
        sync was requested; a fetch that only ended since began before and may not have seen
        a push. A full sha not in the cache is fetched all the same. Webhook and manual syncs
        pass neither, or the time their quiet check began, so they see every commit pushed
        before they were handled."""
        clean, embedded = split_credentials(url)
        creds = credentials or embedded
        if self.remotes is not None:
            clean = self.remotes.check(url).url  # refuses local paths, file:// and user-info
        elif is_local_path(clean):
            local = str(Path(clean).expanduser().resolve())
            with open_repo(local) as repo:
                return Resolved(local, revision, _resolve_in(repo, revision, local))
        with self._locked(clean), self._cache_repo(clean) as repo:
            now = time.monotonic()
            fresh = now - self._fetched_at.get(clean, -1e9) < max_age or (
                fetched_since is not None
                and self._began_at.get(clean, -1e9) >= fetched_since
                and not _SHA.fullmatch(revision.lower())
            )
            if not _is_present_commit(repo, revision) and not fresh:
                self._fetch(repo, clean, creds, limits or Limits())
                self._began_at[clean], self._fetched_at[clean] = now, time.monotonic()
            return Resolved(clean, revision, _resolve_in(repo, revision, clean))

    @contextlib.contextmanager
    def snapshot(self, resolved: Resolved) -> Iterator[Snapshot]:
        """Open the resolved commit once for many reads. A cached remote's repository goes
        back to `repos` on exit; a local path's is closed."""
        path = str(self.repo_dir(resolved.url))
        local = is_local_path(resolved.url)
        with open_repo(path) if local else self.repos.borrow(path) as repo:
            yield Snapshot(repo, resolved, self.objects)

    def close(self) -> None:
        """Close the repositories kept open; the cache stays usable (it reopens them)."""
        self.repos.close()

    def tree_id(self, resolved: Resolved, path: str) -> str:
        """Hex id of the tree at `path` ("" or "." for the root) in the resolved commit."""
        with self.snapshot(resolved) as snap:
            return snap.tree_id(path)

    def read_tree(self, resolved: Resolved, path: str) -> dict[str, bytes]:
        """Every regular file under `path`, keyed by its path relative to `path`."""
        with self.snapshot(resolved) as snap:
            return snap.read_tree(path)

    def read_commit_tree(self, resolved: Resolved) -> dict[str, bytes]:
        """Every regular file of the commit, keyed by its path in the repository."""
        return self.read_tree(resolved, "")

    def repo_dir(self, url: str) -> Path:
        """Where the cache keeps the bare repository of `url`."""
        clean, _ = split_credentials(url)
        if is_local_path(clean):
            return Path(clean).expanduser().resolve()
        return self.root / hashlib.sha256(identity(clean).encode()).hexdigest()[:24]

    @contextlib.contextmanager
    def _locked(self, url: str) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        lock_path = self.repo_dir(url).with_suffix(".lock")
        with lock_path.open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def _cache_repo(self, url: str) -> Iterator[Repo]:
        path = self.repo_dir(url)
        fresh = not (path / "HEAD").exists()
        if fresh:
            self.repos.forget(str(path))
            shutil.rmtree(path, ignore_errors=True)
            _init_cache_repo(path, url).close()
        try:
            with self.repos.borrow(str(path)) as repo:
                yield repo
        except SourceError:
            if fresh and not _has_mirrored_refs(path):  # keep a good clone, drop a failed one
                self.repos.forget(str(path))
                shutil.rmtree(path, ignore_errors=True)
            raise

    def _fetch(self, repo: Repo, url: str, creds: GitCredentials | None, limits: Limits) -> None:
        started = time.monotonic()
        secret = creds.password if creds else ""
        try:
            result = _transport_fetch(repo, url, creds, limits)
        except HTTPUnauthorized as e:
            raise SourceError(_auth_failed(url, creds)) from e
        except NotGitRepository as e:
            detail = scrub(str(e) or "the server has no repository at that URL", secret)
            raise SourceError(f"git repository {url} not found: {detail}") from e
        except (HangupException, GitProtocolError, OSError) as e:
            raise _unreachable(url, _detail(e, secret)) from e
        _mirror_refs(repo, result)
        self.fetches += 1
        log.debug("fetched %s in %.3fs", url, time.monotonic() - started)


def _detail(error: Exception, secret: str) -> str:
    """What went wrong, without the secret; an error status as `the server answered HTTP 503`
    (dulwich says `unexpected http resp 503 for <url>/info/refs?service=...`)."""
    text = str(error) or type(error).__name__
    status = _HTTP_STATUS.match(text)
    if status is not None:
        return f"the server answered HTTP {status.group(1)}"
    return scrub(text, secret)


_HTTP_STATUS = re.compile(r"unexpected http resp (\d{3})\b")


def _unreachable(url: str, detail: str) -> SourceError:
    error = SourceError(f"git repository {url} unreachable: {detail}")
    error.retryable = True  # a network or server problem may pass
    return error


def _has_mirrored_refs(path: Path) -> bool:
    with Repo(str(path)) as repo:
        return any(name.startswith(_MIRRORED) for name in repo.refs.allkeys())


def _init_cache_repo(path: Path, url: str) -> Repo:
    repo = Repo.init_bare(str(path), mkdir=True)
    config = repo.get_config()
    config.set((b"remote", b"origin"), b"url", scrub(url).encode())
    config.write_to_path()
    return repo


def _transport_fetch(
    repo: Repo, url: str, creds: GitCredentials | None, limits: Limits
) -> _FetchResult:
    username = password = None
    if creds is not None and (creds.username or creds.password):
        username = creds.username or "x-access-token"
        password = creds.password
    config = transfer.client_config(limits)
    client, remote_path = get_transport_and_path(
        url, config=config, username=username, password=password
    )
    transfer.refuse_redirects(client, url)
    with _closing_http(client):
        wants = _WantMissing(repo)
        result = transfer.fetch(client, remote_path, repo, wants, url=url, limits=limits)
    return _FetchResult(dict(result.refs), dict(result.symrefs))


@contextlib.contextmanager
def _closing_http(client: GitClient) -> Iterator[None]:
    """Close every HTTP response and pooled socket after a fetch. dulwich 1.2 raises on a
    401/404 without releasing the response, which would leave its socket open."""
    pool = getattr(client, "pool_manager", None)
    responses: list[Any] = []
    if pool is not None:
        request = pool.request

        def tracked(*args: Any, **kwargs: Any) -> Any:
            responses.append(request(*args, **kwargs))
            return responses[-1]

        pool.request = tracked
    try:
        yield
    finally:
        for response in responses:
            response.close()
        if pool is not None:
            pool.clear()
        client.close()


@dataclass(frozen=True)
class _FetchResult:
    refs: dict[Ref, ObjectID | None]
    symrefs: dict[Ref, Ref]


class _WantMissing:
    """Fetch every head, tag and HEAD whose object the cache does not have yet."""

    def __init__(self, repo: Repo) -> None:
        self.repo = repo

    def __call__(self, refs: Mapping[Ref, ObjectID], depth: int | None = None) -> list[ObjectID]:
        wanted = {sha for name, sha in refs.items() if sha and _is_fetched_ref(name)}
        return sorted(sha for sha in wanted if not _has(self.repo, sha))


def _is_fetched_ref(name: bytes) -> bool:
    return not name.endswith(b"^{}") and (name == b"HEAD" or name.startswith(_MIRRORED))


def _mirror_refs(repo: Repo, fetched: _FetchResult) -> None:
    """Make the cache's heads and tags equal to the remote's, and follow the remote HEAD."""
    wanted = {n: s for n, s in fetched.refs.items() if s and _is_fetched_ref(n) and n != _HEAD}
    for name in repo.refs.allkeys():
        if name.startswith(_MIRRORED) and name not in wanted:
            repo.refs.remove_if_equals(name, None)
    for name, sha in wanted.items():
        repo.refs[name] = sha
    head = fetched.symrefs.get(_HEAD)
    remote_head = fetched.refs.get(_HEAD)
    if head in wanted:
        repo.refs.set_symbolic_ref(_HEAD, head)
    elif remote_head:
        repo.refs.remove_if_equals(_HEAD, None)  # a detached HEAD: no symref to write through
        repo.refs[_HEAD] = remote_head


def _has(repo: Repo, sha: bytes) -> bool:
    return ObjectID(sha) in repo.object_store


def _auth_failed(url: str, creds: GitCredentials | None) -> str:
    if creds is None or not (creds.username or creds.password):
        return f"authentication required for {url} (HTTP 401): give the repository's credentials"
    return f"authentication failed for {url} (HTTP 401): check the username and password or token"


def _is_present_commit(repo: Repo, revision: str) -> bool:
    rev = revision.lower()
    return bool(_SHA.fullmatch(rev)) and _has(repo, rev.encode())


def _resolve_in(repo: Repo, revision: str, url: str) -> str:
    """Resolve `revision` to a commit sha, peeling annotated tags."""
    sha = _ref_candidate(repo, revision) or _sha_candidate(repo, revision, url)
    if sha is None:
        raise SourceError(
            f"revision {revision!r} not found in {url}: no branch, tag or commit by that name"
        )
    return _peel_to_commit(repo, sha, revision, url)


def _ref_candidate(repo: Repo, revision: str) -> bytes | None:
    """Look the name up like git does: a full ref name or HEAD, then tags, then branches."""
    name = Ref(revision.encode())
    if name == _HEAD or name.startswith(b"refs/"):
        candidates = [name]
    else:
        candidates = [Ref(b"refs/tags/" + name), Ref(b"refs/heads/" + name)]
    for ref in candidates:
        with contextlib.suppress(KeyError):
            return repo.refs[ref]
    return None


def _sha_candidate(repo: Repo, revision: str, url: str) -> bytes | None:
    rev = revision.lower()
    if _SHA.fullmatch(rev):
        return rev.encode() if _has(repo, rev.encode()) else None
    if not _SHORT_SHA.fullmatch(rev):
        return None
    matches = [
        sha for sha in repo.object_store.iter_prefix(rev.encode()) if _is_commitish(repo, sha)
    ]
    if len(matches) > 1:
        raise SourceError(f"revision {revision!r} is ambiguous in {url}: give more digits")
    return matches[0] if matches else None


def _is_commitish(repo: Repo, sha: bytes) -> bool:
    return isinstance(repo[sha], Commit | Tag)


def _peel_to_commit(repo: Repo, sha: bytes, revision: str, url: str) -> str:
    obj = repo[sha]
    while isinstance(obj, Tag):
        obj = repo[obj.object[1]]
    if not isinstance(obj, Commit):
        raise SourceError(
            f"revision {revision!r} in {url} is a {obj.type_name.decode()}, not a commit"
        )
    return obj.id.decode()


def _clean_path(path: str) -> str:
    parts = [p for p in path.replace("\\", "/").split("/") if p not in ("", ".")]
    return "/".join(parts)


def _lookup(get: _Getter, resolved: Resolved, path: str) -> tuple[int, bytes] | None:
    commit = _commit(get, resolved)
    clean = _clean_path(path)
    if not clean:
        return stat.S_IFDIR, commit.tree
    try:
        return tree_lookup_path(get, commit.tree, clean.encode())
    except KeyError:
        return None


def _commit(get: _Getter, resolved: Resolved) -> Commit:
    try:
        commit = get(resolved.commit.encode())
    except KeyError:
        commit = None
    if not isinstance(commit, Commit):
        raise SourceError(
            f"commit {resolved.commit} is not in {resolved.url}: resolve the revision again"
        )
    return commit


def _tree_at(get: _Getter, resolved: Resolved, path: str) -> Tree:
    where = f"commit {resolved.commit[:12]} of {resolved.url} (revision {resolved.revision!r})"
    found = _lookup(get, resolved, path)
    if found is None:
        raise SourceError(f"path {path!r} not found in {where}")
    tree = get(found[1])
    if not isinstance(tree, Tree):
        raise SourceError(f"path {path!r} is a file, not a directory, in {where}")
    return tree
