"""One render job: what it renders, with which parameters, and every repository path it reads.

A `RenderJob` is the app's path in a git snapshot, the `RenderParams`, the renderer picked, and
the directories and files outside the path that the render follows (kustomize bases, helm
`file://` dependencies, values files). The render cache keys on exactly these inputs, and
`materialize` writes exactly these into the folder a tool runs in, so a reference the key does
not cover fails loudly instead of serving a stale render. Also here: the repository path
helpers every renderer shares.
"""

from __future__ import annotations

import dataclasses
import posixpath
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleet.engine.render.manifests import yaml_documents
from fleet.engine.source.cache import Snapshot
from fleet.errors import RenderError


@dataclass(frozen=True)
class RenderParams:
    """How to render. `values_files` are relative to the application path; `values` are helm
    `--set` pairs; `values_yaml` are extra values documents (e.g. a local `--values FILE`)."""

    renderer: str = "auto"  # auto | plain | kustomize | helm
    release_name: str = ""
    namespace: str = ""
    values_files: tuple[str, ...] = ()
    values: tuple[tuple[str, str], ...] = ()
    values_yaml: tuple[str, ...] = ()


@dataclass(frozen=True)
class RenderJob:
    """One render: where, with what, and which repository paths it reads."""

    snap: Snapshot
    path: str
    params: RenderParams
    renderer: str
    inputs: tuple[str, ...] = ()  # directories/files outside `path` the render reads

    def with_inputs(self, paths: Iterable[str]) -> RenderJob:
        """This job reading `paths` too: those outside `path`, none inside another."""
        outside = sorted({p for p in paths if not is_within(p, self.path)})
        kept = [p for p in outside if not any(is_within(p, q) for q in outside if q != p)]
        return dataclasses.replace(self, inputs=tuple(kept))

    def read_yaml(self, path: str) -> dict[str, Any]:
        """The first document of a YAML file in the snapshot, or {} when it is not a mapping."""
        data = self.snap.read_file(path) or b""
        documents = [d for d in yaml_documents(path, data) if d is not None]
        return documents[0] if documents and isinstance(documents[0], dict) else {}


def reachable(job: RenderJob, neighbours: Callable[[RenderJob, str], Iterator[str]]) -> list[str]:
    """The path and every directory reachable from it through `neighbours`, transitively."""
    seen, queue = {job.path}, [job.path]
    while queue:
        folder = queue.pop()
        for target in neighbours(job, folder):
            if target.startswith(("/", "../")) or target == "..":
                where = f"{folder or '.'} refers to a path outside the repository"
                raise RenderError(f"{where} ({target!r} from the repository root)")
            entry = job.snap.entry(target)
            if target not in seen and entry is not None and entry.is_dir:
                seen.add(target)
                queue.append(target)
    return sorted(seen)


# -- the render folder ---------------------------------------------------------------------


def materialize(job: RenderJob, root: Path) -> Path:
    """Write the path and the render's other inputs below `root`, at their repository paths."""
    for folder in (job.path, *job.inputs):
        entry = job.snap.entry(folder)
        if entry is None:
            continue
        if not entry.is_dir:
            write(root / folder, job.snap.read_file(folder) or b"")
            continue
        for name, data in job.snap.read_tree(folder).items():
            if ".." not in name.split("/"):  # git forbids it; a crafted tree must not escape
                write(root / join(folder, name), data)
    (root / job.path).mkdir(parents=True, exist_ok=True)
    return root


def write(target: Path, data: bytes) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return target


# -- repository paths -----------------------------------------------------------------------


def clean(path: str) -> str:
    return "/".join(p for p in path.replace("\\", "/").split("/") if p not in ("", "."))


def join(folder: str, name: str) -> str:
    return posixpath.join(folder, name) if folder else name


def is_within(path: str, folder: str) -> bool:
    return not folder or path == folder or path.startswith(folder + "/")


def is_file(snap: Snapshot, path: str) -> bool:
    entry = snap.entry(path)
    return entry is not None and not entry.is_dir
