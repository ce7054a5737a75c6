"""Layer archives that depend on their content only.

A layer is an uncompressed tar (umoci compresses it) of some paths of a root filesystem. Two
builds from the same inputs must give the same bytes, so `write_layer`:

- writes entries sorted by path, each directory before what it holds, and every ancestor of a
  path too (an OCI runtime would otherwise create missing parents with its own defaults);
- gives every entry the same modification time (SOURCE_DATE_EPOCH) and no user or group
  names, only numeric ids (the image's /etc/passwd names them);
- keeps hard links as links (to the first path in sorted order) and permissions as they are.

`snapshot` lists a tree's paths so that a stage's layer is exactly what the stage added.
"""

from __future__ import annotations

import os
import stat
import tarfile
from collections.abc import Iterable
from pathlib import Path


def snapshot(root: Path) -> set[str]:
    """Every path under `root` (files, links, directories), relative and without a leading /."""
    found: set[str] = set()
    for folder, dirs, files in os.walk(root):
        rel = os.path.relpath(folder, root)
        for name in dirs + files:
            found.add(name if rel == "." else f"{rel}/{name}")
    return found


def with_ancestors(paths: Iterable[str]) -> list[str]:
    """`paths` plus every parent folder of each, sorted so that a folder precedes its content."""
    everything: set[str] = set()
    for path in paths:
        parts = path.split("/")
        everything.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    return sorted(everything, key=lambda p: p.split("/"))


def write_layer(root: Path, paths: Iterable[str], out: Path, *, mtime: int) -> None:
    """Write the tar of `paths` (relative to `root`, with their ancestors) to `out`."""
    links: dict[tuple[int, int], str] = {}
    tmp = out.with_name(out.name + ".partial")
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        for rel in with_ancestors(paths):
            _add(tar, root / rel, rel, mtime=mtime, links=links)
    tmp.rename(out)


def _add(
    tar: tarfile.TarFile, full: Path, rel: str, *, mtime: int, links: dict[tuple[int, int], str]
) -> None:
    info = os.lstat(full)
    entry = tarfile.TarInfo(rel)
    entry.mode = stat.S_IMODE(info.st_mode)
    entry.uid, entry.gid = info.st_uid, info.st_gid
    entry.uname = entry.gname = ""
    entry.mtime = mtime
    if stat.S_ISDIR(info.st_mode):
        entry.type = tarfile.DIRTYPE
        tar.addfile(entry)
    elif stat.S_ISLNK(info.st_mode):
        entry.type, entry.linkname = tarfile.SYMTYPE, os.readlink(full)
        tar.addfile(entry)
    elif stat.S_ISREG(info.st_mode):
        _add_file(
            tar, full, entry, inode=(info.st_dev, info.st_ino), links=links, nlink=info.st_nlink
        )
    # sockets, fifos and device nodes have no place in an image layer: skipped


def _add_file(
    tar: tarfile.TarFile,
    full: Path,
    entry: tarfile.TarInfo,
    *,
    inode: tuple[int, int],
    links: dict[tuple[int, int], str],
    nlink: int,
) -> None:
    if nlink > 1 and inode in links:
        entry.type, entry.linkname = tarfile.LNKTYPE, links[inode]
        tar.addfile(entry)
        return
    if nlink > 1:
        links[inode] = entry.name
    entry.size = full.stat().st_size
    with full.open("rb") as data:
        tar.addfile(entry, data)
