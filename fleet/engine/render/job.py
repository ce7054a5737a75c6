"""One render job: what it renders, with which parameters, and every repository path it reads.

A `RenderJob` is the app's path in a git snapshot, the `RenderParams`, the renderer picked, and
the directories and files outside the path that the render follows (kustomize bases, helm
`file://` dependencies, values files). The render cache keys on exactly these inputs, and
`materialize` writes exactly these into the folder a tool runs in, so a reference the key does
not cover fails loudly instead of serving a stale render. Also here: the repository path
helpers every renderer shares.

Every file a render reads from the repository goes through `RenderJob.file` or `files`, which
refuse one over `Limits.max_file_bytes`; every file written into a render folder goes through
`write_inside`, which proves the target stays under the folder (each part a plain name, the
resolved path below the resolved folder) and never follows a symlink. Tree entry names were
checked as git checks them when the source read them (`fleet.engine.source.entries`); the join
is checked again here so no future reader can bypass it.
"""

from __future__ import annotations

import dataclasses
import os
import posixpath
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleet.engine.limits import Limits, hint, size_text
from fleet.engine.render.manifests import check_file, yaml_documents
from fleet.engine.source.cache import Snapshot
from fleet.errors import RenderError
from fleet.model import Manifest

YAML_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class RenderParams:
    """How to render. `values_files` are relative to the application path; `values` are helm
    `--set` pairs; `values_yaml` are extra values documents (e.g. a local `--values FILE`).
    `allow_remote`: kustomize may fetch remote resources and bases, helm chart dependencies
    from repositories (the project's `allowRemoteRenders`); else both are refused.
    `substitute`: the variables of post-build `${var}` substitution (`substitute`), None when
    the app has it off. `age_key`: the project's age key for SOPS-encrypted objects (`sops`),
    kept out of every repr, comparison and cache key."""

    renderer: str = "auto"  # auto | plain | kustomize | helm
    release_name: str = ""
    namespace: str = ""
    values_files: tuple[str, ...] = ()
    values: tuple[tuple[str, str], ...] = ()
    values_yaml: tuple[str, ...] = ()
    allow_remote: bool = False
    substitute: tuple[tuple[str, str], ...] | None = None
    age_key: str = dataclasses.field(default="", repr=False, compare=False)


@dataclass(frozen=True)
class RenderJob:
    """One render: where, with what, and which repository paths it reads."""

    snap: Snapshot
    path: str
    params: RenderParams
    renderer: str
    inputs: tuple[str, ...] = ()  # directories/files outside `path` the render reads
    limits: Limits = dataclasses.field(default_factory=Limits)

    def with_inputs(self, paths: Iterable[str]) -> RenderJob:
        """This job reading `paths` too: those outside `path`, none inside another."""
        outside = sorted({p for p in paths if not is_within(p, self.path)})
        kept = [p for p in outside if not any(is_within(p, q) for q in outside if q != p)]
        return dataclasses.replace(self, inputs=tuple(kept))

    def read_yaml(self, path: str) -> dict[str, Any]:
        """The first document of a YAML file in the snapshot, or {} when it is not a mapping."""
        data = self.file(path) or b""
        documents = [d for d in yaml_documents(path, data, self.limits) if d is not None]
        return documents[0] if documents and isinstance(documents[0], dict) else {}

    def file(self, path: str) -> bytes | None:
        """The content of the regular file at repository path `path`, or None."""
        data = self.snap.read_file(path)
        return None if data is None else checked_size(path, data, self.limits)

    def files(self, folder: str) -> dict[str, bytes]:
        """Every regular file below `folder`, keyed by its path relative to `folder`."""
        found = self.snap.read_tree(folder)
        return {name: checked_size(join(folder, name), d, self.limits) for name, d in found.items()}

    def checked_file(self, path: str, data: bytes) -> bytes:
        """`data`, unless it is YAML or JSON a tool would choke on (`manifests.check_file`)."""
        name = posixpath.basename(path)
        if name.endswith(YAML_SUFFIXES) or name == "Kustomization":
            check_file(path, data, self.limits)
        return data

    def check_count(self, objects: list[Manifest]) -> list[Manifest]:
        """`objects`, unless the render holds more than `max_objects`."""
        if len(objects) > self.limits.max_objects:
            limit = f"more than {self.limits.max_objects} objects"
            raise RenderError(f"{self.path or '.'} renders {limit} ({hint('max_objects')})")
        return objects


def checked_size(path: str, data: bytes, limits: Limits) -> bytes:
    """`data`, unless it is larger than a file may be."""
    if len(data) > limits.max_file_bytes:
        size = size_text(limits.max_file_bytes)
        raise RenderError(f"{path}: the file is larger than {size} ({hint('max_file_bytes')})")
    return data


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
    root.mkdir(parents=True, exist_ok=True)
    for folder in (job.path, *job.inputs):
        entry = job.snap.entry(folder)
        if entry is None:
            continue
        if not entry.is_dir:
            write_inside(root, folder, job.checked_file(folder, job.file(folder) or b""))
            continue
        for name, data in job.files(folder).items():
            path = join(folder, name)
            write_inside(root, path, job.checked_file(path, data))
    if job.path:
        write_inside(root, job.path, None)
    return root


def write_inside(root: Path, path: str, data: bytes | None) -> Path:
    """Write `data` at relative `path` below `root` (a folder when `data` is None), refusing
    any path that could land outside `root`; never follows a symlink."""
    parts = path.split("/")
    if path.startswith("/") or any(part in ("", ".", "..") or "\0" in part for part in parts):
        raise RenderError(f"{path!r} is not a relative path inside the repository; not written")
    target = root.joinpath(*parts)
    if not target.resolve().is_relative_to(root.resolve()):
        raise RenderError(f"{path!r} resolves outside the render folder; not written")
    try:
        (target if data is None else target.parent).mkdir(parents=True, exist_ok=True)
        if data is not None:
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
            with os.fdopen(os.open(target, flags, 0o644), "wb") as handle:
                handle.write(data)
    except OSError as e:  # a name over the file system's limit, a full disk...: not a crash
        problem = e.strerror or type(e).__name__
        raise RenderError(f"{path!r} cannot be written in the render folder: {problem}") from e
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
