"""Stage 2's entry point: pick the renderer, run it, and cache the result by what it reads.

Three renderers: plain YAML/JSON directories (`plain`), kustomize (`kustomize`, through
`kubectl kustomize`) and helm (`helm`, through `helm template`). `auto` picks kustomize when the
path holds a kustomization, helm when it holds a Chart.yaml, plain otherwise. Results are cached
by what the render reads and nothing else: the tree id of the path, the ids of directories
outside it that the render follows (kustomize bases and components, helm `file://`
dependencies, values files), the renderer, its parameters and the tool's version. A commit that
does not touch those inputs therefore renders nothing, and the disk cache lets a second one-shot
process skip rendering too.

Only those inputs are written to the temporary directory a tool runs in (`job.materialize`), so
a reference the key does not cover fails loudly instead of serving a stale render.

Every render is bounded by the sync's `Limits` (file and output sizes, object count, nesting,
alias expansion, the tool's time and memory), which are part of the key too: a render cached
under one project's limits is never served under tighter ones.

Post-build `${var}` substitution (`substitute`) runs inside the render, on the text before it
is parsed, and its variables are part of the key: two clusters with different values never
share a render, nor a sync fingerprint. SOPS-encrypted Secrets are decrypted after the cache
(`sops`): the cache, in memory and on disk, keeps what git holds, never a decrypted value.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
from collections import OrderedDict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

from fleet.engine.limits import Limits
from fleet.engine.render import helm, kustomize, plain, sops, substitute
from fleet.engine.render.job import RenderJob, RenderParams, clean
from fleet.engine.source.cache import Resolved, Snapshot, SourceCache
from fleet.errors import RenderError
from fleet.model import Manifest

FORMAT = 3  # bump when the cached representation or a renderer's behaviour changes
RENDERERS = ("plain", "kustomize", "helm")


@dataclass(frozen=True)
class RenderResult:
    objects: tuple[Manifest, ...]
    cache_key: str
    cached: bool
    renderer: str
    inputs: tuple[str, ...] = ()  # repository paths the render read: the app path and more


class Renderer:
    """Renders with a two-level cache (memory LRU, then JSON files under `cache_dir`)."""

    def __init__(self, cache_dir: Path | None, *, memory_entries: int = 512) -> None:
        self.cache_dir = cache_dir
        self.memory_entries = memory_entries
        self.renders = 0
        self._memory: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def render(
        self,
        source: SourceCache,
        resolved: Resolved,
        path: str,
        params: RenderParams,
        *,
        limits: Limits | None = None,
    ) -> RenderResult:
        limits = limits or Limits()
        with source.snapshot(resolved) as snap:
            job = _plan(snap, clean(path), _tool_params(params), limits)
            key = _cache_key(job)
            loaded = self._load(key)
            if loaded is None:
                data = _encode(_run(job), job.path)
        if loaded is None:
            self._store(key, data)
            with self._lock:
                self.renders += 1
        objects, origins = loaded if loaded is not None else _decode(data)
        objects = tuple(sops.decrypt_objects(objects, origins, params.age_key, limits))
        inputs = (job.path, *job.inputs)
        return RenderResult(objects, key, loaded is not None, job.renderer, inputs)

    def _load(self, key: str) -> Rendered | None:
        with self._lock:
            if key in self._memory:
                self._memory.move_to_end(key)
                return _decode(self._memory[key])
        file = self._file(key)
        if file is None or not file.is_file():
            return None
        data = file.read_bytes()
        try:
            objects = _decode(data)
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return None  # a damaged cache file is rendered again and overwritten
        self._remember(key, data)
        return objects

    def _store(self, key: str, data: bytes) -> None:
        self._remember(key, data)
        file = self._file(key)
        if file is None:
            return
        file.parent.mkdir(parents=True, exist_ok=True)
        partial = file.with_name(f".{file.name}.{os.getpid()}.{threading.get_ident()}")
        partial.write_bytes(data)
        partial.replace(file)

    def _remember(self, key: str, data: bytes) -> None:
        with self._lock:
            self._memory[key] = data
            self._memory.move_to_end(key)
            while len(self._memory) > self.memory_entries:
                self._memory.popitem(last=False)

    def _file(self, key: str) -> Path | None:
        return None if self.cache_dir is None else self.cache_dir / key[:2] / f"{key}.json"


# -- planning: which renderer, which inputs, which cache key ---------------------------------


def _tool_params(params: RenderParams) -> RenderParams:
    """What the render itself reads: helm values substituted, and never the age key."""
    values, documents = params.values, params.values_yaml
    if params.substitute is not None:
        variables = dict(params.substitute)
        values, documents = substitute.substitute_values(values, documents, variables)
    return dataclasses.replace(params, values=values, values_yaml=documents, age_key="")


def _plan(snap: Snapshot, path: str, params: RenderParams, limits: Limits) -> RenderJob:
    renderer = _pick(snap, path, params.renderer)
    job = RenderJob(snap, path, params, renderer, limits=limits)
    if renderer == "kustomize":
        return job.with_inputs(kustomize.inputs(job))
    if renderer == "helm":
        return job.with_inputs(helm.inputs(job))
    return job


def _pick(snap: Snapshot, path: str, requested: str) -> str:
    if requested in RENDERERS:
        return requested
    if requested != "auto":
        raise RenderError(f"unknown renderer {requested!r} for {path or '.'}: use {RENDERERS}")
    snap.tree_id(path)  # a missing path is a SourceError, not "plain and empty"
    if kustomize.is_kustomization(snap, path):
        return "kustomize"
    if helm.is_chart(snap, path):
        return "helm"
    return "plain"


def _cache_key(job: RenderJob) -> str:
    parts: dict[str, Any] = {"format": FORMAT, "renderer": job.renderer}
    parts["tree"] = job.snap.tree_id(job.path)
    parts["limits"] = asdict(job.limits)
    if job.params.substitute is not None:
        parts["substitute"] = [list(pair) for pair in job.params.substitute]
    if job.renderer != "plain":
        parts["params"] = asdict(job.params)
        parts["tool"] = tool_version(job.renderer)
        parts["inputs"] = [[p, _entry_id(job, p)] for p in job.inputs]
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _entry_id(job: RenderJob, path: str) -> str:
    entry = job.snap.entry(path)
    return entry.id if entry else ""


def tool_version(renderer: str) -> str:
    """The version of the tool behind `renderer` (kustomize or helm)."""
    return kustomize.tool_version() if renderer == "kustomize" else helm.tool_version()


# -- running renderers and the cached representation ----------------------------------------


Rendered = tuple[tuple[Manifest, ...], tuple[str, ...]]
"""The objects of a render, and for each the file (or the tool's output) it came from."""


def _run(job: RenderJob) -> Rendered:
    if job.renderer in ("kustomize", "helm"):
        objects = kustomize.render(job) if job.renderer == "kustomize" else helm.render(job)
        origin = f"{job.renderer} output of {job.path or '.'}"
        return tuple(objects), tuple(origin for _ in objects)
    found, origins = plain.render_sourced(job)
    return tuple(found), tuple(origins)


def _encode(rendered: Rendered, path: str) -> bytes:
    """The render as JSON, in a bytes object of its own size: orjson's result keeps the whole
    buffer it wrote into (4 KB or more for a one-object render), and the memory cache keeps
    hundreds of them."""
    objects, origins = rendered
    try:
        written = orjson.dumps(
            {"objects": objects, "origins": origins}, option=orjson.OPT_NON_STR_KEYS
        )
        return bytes(memoryview(written))
    except TypeError as e:
        raise RenderError(f"{path or '.'}: a value cannot be represented in JSON: {e}") from e


def _decode(data: bytes) -> Rendered:
    stored = orjson.loads(data)
    return tuple(stored["objects"]), tuple(stored["origins"])
