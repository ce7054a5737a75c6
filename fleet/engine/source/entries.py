"""Tree entries read as git checks them before a checkout: the names and modes a commit may hold.

A git tree is bytes anyone can write: an entry may be named `/etc/cron.d/x`, `..`, `.git` or
`a/../../b`, point a symlink anywhere, or be a submodule. Git itself refuses such trees when it
checks out (`verify_path` in git's read-cache.c); the render folder is a checkout too, so every
entry is checked the same way before its path is used:

- a name is one path element: not empty, not `.` or `..`, without `/` or NUL, and not `.git`
  in any case or any spelling NTFS reads as `.git` (`.git.`, `git~1`), as git does with
  `core.protectNTFS`, its default since 2.24 (dulwich's `validate_path_element_ntfs`);
- a regular file (644 or 755) is read;
- a symlink is never followed or written: one pointing inside the repository is left out (as
  it always was), one pointing outside it (absolute, or `..` past the root) is refused, so a
  tool reading the folder could never be led out of it (Argo CD CVE-2022-24904);
- a submodule (gitlink) is refused: it is not fetched, so the app would render without it;
- any other mode is refused.

A refusal is a SourceError naming the entry's path in the repository.
"""

from __future__ import annotations

import posixpath
import stat
from collections.abc import Callable, Iterator

from dulwich.index import validate_path_element_ntfs
from dulwich.objects import S_IFGITLINK, ShaFile, Tree

from fleet.errors import SourceError

Getter = Callable[[bytes], ShaFile]


def walk_files(get: Getter, tree: Tree, base: str) -> Iterator[tuple[str, bytes]]:
    """Every regular file below `tree` (the tree at repository path `base`), keyed by its path
    relative to `base`; raises SourceError on the first entry git would refuse."""
    pending: list[tuple[str, Tree]] = [("", tree)]
    while pending:
        prefix, current = pending.pop()
        for raw_name, mode, sha in current.iteritems():
            name = check_name(raw_name, _join(base, prefix.rstrip("/")))
            path = prefix + name
            if stat.S_ISDIR(mode):
                child = get(sha)
                if isinstance(child, Tree):
                    pending.append((path + "/", child))
            elif stat.S_ISREG(mode):
                yield path, get(sha).as_raw_string()
            else:
                check_special(get, _join(base, path), mode, sha)


def check_name(raw: bytes, folder: str) -> str:
    """`raw` decoded, if it is one path element git would check out; `folder` is where."""
    name = raw.decode("utf-8", "surrogateescape")
    if b"/" in raw or b"\0" in raw or not validate_path_element_ntfs(raw):
        raise SourceError(
            f"{folder or '.'}: tree entry {name!r} is not a path git would check out (git "
            "refuses names that are empty, '.', '..' or '.git' in any spelling, or contain "
            "'/'); refusing to read this commit"
        )
    return name


def check_special(get: Getter, path: str, mode: int, sha: bytes) -> None:
    """Refuse a symlink pointing outside the repository, a submodule, or an unknown mode;
    return for a symlink inside the repository, which is left out."""
    if stat.S_ISLNK(mode):
        target = get(sha).as_raw_string().decode("utf-8", "surrogateescape")
        if points_outside(path, target):
            raise SourceError(
                f"{path}: symlink to {target!r} points outside the repository; a symlink may "
                "only point inside it (and gitfleet never follows one)"
            )
        return
    if mode == S_IFGITLINK:
        raise SourceError(
            f"{path}: a submodule; gitfleet does not fetch submodules, so an app's files "
            "cannot include one (vendor its files instead)"
        )
    raise SourceError(f"{path}: tree entry mode {mode:o} is not a file, folder or symlink")


def points_outside(path: str, target: str) -> bool:
    """Whether a symlink at repository path `path` to `target` leaves the repository."""
    if target.startswith("/") or "\0" in target:
        return True
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
    return resolved == ".." or resolved.startswith("../")


def _join(folder: str, name: str) -> str:
    return posixpath.join(folder, name) if folder and name else folder or name
