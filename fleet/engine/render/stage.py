"""Stage 2, render: turn the files at an application's path into Kubernetes objects.

Three renderers: plain YAML/JSON directories (parsed here), kustomize (`kubectl kustomize`) and
helm (`helm template`). Results are cached by what the render reads and nothing else: the tree id
of the path, the ids of directories outside it that the render follows (kustomize bases and
components, helm `file://` dependencies, values files), the renderer, its parameters and the
tool's version. A commit that does not touch those inputs therefore renders nothing, and the
disk cache lets a second one-shot process skip rendering too.

Only those inputs are written to the temporary directory a tool runs in, so a reference the key
does not cover fails loudly instead of serving a stale render.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import posixpath
import subprocess
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml

from fleet.engine.render.tools import find_tool
from fleet.engine.source.cache import Resolved, Snapshot, SourceCache
from fleet.errors import RenderError
from fleet.model import Manifest

FORMAT = 1  # bump when the cached representation or a renderer's behaviour changes
TOOL_TIMEOUT = 60.0
KUSTOMIZATIONS = ("kustomization.yaml", "kustomization.yml", "Kustomization")
KUSTOMIZE_DIR_FIELDS = ("resources", "bases", "components", "generators", "transformers")
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
RENDERERS = ("plain", "kustomize", "helm")


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
class RenderResult:
    objects: tuple[Manifest, ...]
    cache_key: str
    cached: bool
    renderer: str
    inputs: tuple[str, ...] = ()  # repository paths the render read: the app path and more


@dataclass(frozen=True)
class _Job:
    """One render: where, with what, and which repository paths it reads."""

    snap: Snapshot
    path: str
    params: RenderParams
    renderer: str
    inputs: tuple[str, ...] = ()  # directories/files outside `path` the render reads


class Renderer:
    """Renders with a two-level cache (memory LRU, then JSON files under `cache_dir`)."""

    def __init__(self, cache_dir: Path | None, *, memory_entries: int = 512) -> None:
        self.cache_dir = cache_dir
        self.memory_entries = memory_entries
        self.renders = 0
        self._memory: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def render(
        self, source: SourceCache, resolved: Resolved, path: str, params: RenderParams
    ) -> RenderResult:
        with source.snapshot(resolved) as snap:
            job = _plan(snap, _clean(path), params)
            key = _cache_key(job)
            cached = self._load(key)
            if cached is not None:
                return RenderResult(cached, key, True, job.renderer, (job.path, *job.inputs))
            data = _encode(_run(job), job.path)
        self._store(key, data)
        with self._lock:
            self.renders += 1
        return RenderResult(_decode(data), key, False, job.renderer, (job.path, *job.inputs))

    def _load(self, key: str) -> tuple[Manifest, ...] | None:
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
        except orjson.JSONDecodeError:
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


def _plan(snap: Snapshot, path: str, params: RenderParams) -> _Job:
    renderer = _pick(snap, path, params.renderer)
    job = _Job(snap, path, params, renderer)
    if renderer == "kustomize":
        return _with_inputs(job, _reachable(job, _kustomize_refs))
    if renderer == "helm":
        return _with_inputs(job, [*_reachable(job, _chart_deps), *_values_paths(job)])
    return job


def _with_inputs(job: _Job, paths: Iterable[str]) -> _Job:
    outside = sorted({p for p in paths if not _is_within(p, job.path)})
    kept = [p for p in outside if not any(_is_within(p, q) for q in outside if q != p)]
    return dataclasses.replace(job, inputs=tuple(kept))


def _pick(snap: Snapshot, path: str, requested: str) -> str:
    if requested in RENDERERS:
        return requested
    if requested != "auto":
        raise RenderError(f"unknown renderer {requested!r} for {path or '.'}: use {RENDERERS}")
    snap.tree_id(path)  # a missing path is a SourceError, not "plain and empty"
    if _kustomization_name(snap, path):
        return "kustomize"
    if _is_file(snap, _join(path, "Chart.yaml")):
        return "helm"
    return "plain"


def _cache_key(job: _Job) -> str:
    parts: dict[str, Any] = {"format": FORMAT, "renderer": job.renderer}
    parts["tree"] = job.snap.tree_id(job.path)
    if job.renderer != "plain":
        parts["params"] = asdict(job.params)
        parts["tool"] = tool_version(job.renderer)
        parts["inputs"] = [[p, _entry_id(job, p)] for p in job.inputs]
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _entry_id(job: _Job, path: str) -> str:
    entry = job.snap.entry(path)
    return entry.id if entry else ""


def _reachable(job: _Job, neighbours: Callable[[_Job, str], Iterator[str]]) -> list[str]:
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


def _kustomize_refs(job: _Job, folder: str) -> Iterator[str]:
    """Local directories a kustomization may build from: bases, components, generators..."""
    name = _kustomization_name(job.snap, folder)
    doc = _yaml_file(job, _join(folder, name)) if name else {}
    for field in KUSTOMIZE_DIR_FIELDS:
        for ref in doc.get(field) or []:
            if isinstance(ref, str) and _is_local_ref(ref):
                yield posixpath.normpath(_join(folder, ref))


def _chart_deps(job: _Job, chart: str) -> Iterator[str]:
    """The chart directories of `file://` dependencies in `chart`'s Chart.yaml."""
    for dep in _yaml_file(job, _join(chart, "Chart.yaml")).get("dependencies") or []:
        repository = str(dep.get("repository", "")) if isinstance(dep, dict) else ""
        if repository.startswith("file://"):
            yield posixpath.normpath(_join(chart, repository.removeprefix("file://")))


def _values_paths(job: _Job) -> list[str]:
    return [posixpath.normpath(_join(job.path, name)) for name in job.params.values_files]


# -- running renderers ----------------------------------------------------------------------


def _run(job: _Job) -> list[Manifest]:
    if job.renderer == "kustomize":
        return _render_kustomize(job)
    if job.renderer == "helm":
        return _render_helm(job)
    return _render_plain(job)


def _render_plain(job: _Job) -> list[Manifest]:
    """Every .yaml/.yml/.json file below the path in path order; hidden files and folders
    (`.github/`, `.pre-commit-config.yaml`) are tooling, not manifests, and are skipped."""
    files = job.snap.read_tree(job.path)
    objects: list[Manifest] = []
    for name in sorted(files):
        if name.endswith(MANIFEST_SUFFIXES) and not _is_hidden(name):
            objects.extend(parse_manifests(_join(job.path, name), files[name]))
    return objects


def _is_hidden(name: str) -> bool:
    return any(part.startswith(".") for part in name.split("/"))


def _render_kustomize(job: _Job) -> list[Manifest]:
    with tempfile.TemporaryDirectory(prefix="gitfleet-kustomize-") as tmp:
        root = _materialize(job, Path(tmp))
        argv = [str(find_tool("kubectl")), "kustomize", str(root / job.path)]
        output = _run_tool(argv, cwd=root, what=f"kustomize build of {job.path or '.'}")
    return parse_manifests(f"kustomize output of {job.path or '.'}", output)


def _render_helm(job: _Job) -> list[Manifest]:
    with tempfile.TemporaryDirectory(prefix="gitfleet-helm-") as tmp:
        root = _materialize(job, Path(tmp) / "repo")
        chart = root / job.path
        what = f"helm template of {job.path or '.'}"
        env = _helm_env(Path(tmp))
        if _has_file_dependencies(job):
            build = ["dependency", "build", "--skip-refresh", str(chart)]
            _run_tool([str(find_tool("helm")), *build], cwd=root, what=what, env=env)
        argv = [str(find_tool("helm")), "template", _release(job), str(chart), "--include-crds"]
        argv += _helm_values_args(job, Path(tmp))
        output = _run_tool(argv, cwd=root, what=what, env=env)
    return parse_manifests(f"helm output of {job.path or '.'}", output)


def _helm_values_args(job: _Job, tmp: Path) -> list[str]:
    args = ["--namespace", job.params.namespace] if job.params.namespace else []
    for name in job.params.values_files:
        target = posixpath.normpath(_join(job.path, name))
        data = job.snap.read_file(target)
        if data is None:
            raise RenderError(f"values file {name!r} not found in {job.path or '.'} ({target})")
        args += ["-f", str(_write(tmp / "values" / target, data))]
    for index, text in enumerate(job.params.values_yaml):
        args += ["-f", str(_write(tmp / "extra-values" / f"{index}.yaml", text.encode()))]
    for key, value in job.params.values:
        args += ["--set", f"{key}={value}"]
    return args


def _release(job: _Job) -> str:
    return job.params.release_name or posixpath.basename(job.path) or "release"


def _helm_env(tmp: Path) -> dict[str, str]:
    """Private helm homes: no shared repository cache, no user configuration."""
    kinds = ("CACHE", "CONFIG", "DATA")
    return {**os.environ, **{f"HELM_{k}_HOME": str(tmp / "helm" / k.lower()) for k in kinds}}


def _has_file_dependencies(job: _Job) -> bool:
    return any(True for _ in _chart_deps(job, job.path))


def _materialize(job: _Job, root: Path) -> Path:
    """Write the path and the render's other inputs below `root`, at their repository paths."""
    for folder in (job.path, *job.inputs):
        entry = job.snap.entry(folder)
        if entry is None:
            continue
        if not entry.is_dir:
            _write(root / folder, job.snap.read_file(folder) or b"")
            continue
        for name, data in job.snap.read_tree(folder).items():
            if ".." not in name.split("/"):  # git forbids it; a crafted tree must not escape
                _write(root / _join(folder, name), data)
    (root / job.path).mkdir(parents=True, exist_ok=True)
    return root


def _write(target: Path, data: bytes) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return target


def _run_tool(argv: list[str], *, cwd: Path, what: str, env: dict[str, str] | None = None) -> bytes:
    try:
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, timeout=TOOL_TIMEOUT)
    except subprocess.TimeoutExpired as e:
        raise RenderError(f"{what} timed out after {TOOL_TIMEOUT:.0f}s") from e
    if done.returncode != 0:
        stderr = done.stderr.decode(errors="replace").strip().replace(str(cwd) + "/", "")
        raise RenderError(f"{what} failed: {stderr[-4000:] or f'exit code {done.returncode}'}")
    return done.stdout


def tool_version(renderer: str) -> str:
    """The version of the tool behind `renderer` (kustomize or helm)."""
    if renderer == "kustomize":
        return _version_of(str(find_tool("kubectl")), "version", "--client")
    return _version_of(str(find_tool("helm")), "version", "--short")


@functools.cache
def _version_of(*argv: str) -> str:
    """Run once per process and tool path: the version changes only with the binary."""
    done = subprocess.run(argv, capture_output=True, timeout=TOOL_TIMEOUT, check=False)
    return done.stdout.decode(errors="replace").strip()


# -- parsing and validation (pure) ----------------------------------------------------------


def parse_manifests(name: str, data: bytes) -> list[Manifest]:
    """Parse one file (multi-document YAML, or JSON when `name` ends in .json) into objects."""
    is_json = name.endswith(".json")
    documents = _json_documents(name, data) if is_json else _yaml_documents(name, data)
    objects: list[Manifest] = []
    for index, doc in enumerate(documents, start=1):
        if doc is not None:
            objects.extend(_expand(doc, f"{name} document {index}"))
    return objects


def _yaml_documents(name: str, data: bytes) -> list[Any]:
    try:
        return list(yaml.load_all(data, Loader=yaml.CSafeLoader))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        raise RenderError(f"{name}: invalid YAML{where}: {problem}") from e


def _json_documents(name: str, data: bytes) -> list[Any]:
    try:
        return [json.loads(data)]
    except ValueError as e:  # includes JSONDecodeError and UnicodeDecodeError
        line = f" at line {e.lineno}" if isinstance(e, json.JSONDecodeError) else ""
        raise RenderError(f"{name}: invalid JSON{line}: {e}") from e


def _expand(doc: Any, where: str) -> list[Manifest]:
    if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
        return [validate(item, f"{where} item {i}") for i, item in enumerate(doc["items"], 1)]
    return [validate(doc, where)]


def validate(obj: Any, where: str) -> Manifest:
    """Return `obj` if it is a Kubernetes object (apiVersion, kind, metadata.name), else raise."""
    if not isinstance(obj, dict):
        raise RenderError(f"{where}: expected a Kubernetes object (a mapping), got {_type(obj)}")
    metadata = obj.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    for field, value in (("apiVersion", obj.get("apiVersion")), ("kind", obj.get("kind"))):
        if not isinstance(value, str) or not value:
            raise RenderError(f"{where}: object has no {field}; every object needs {_NEEDS}")
    if not isinstance(name, str) or not name:
        kind = obj["kind"]
        raise RenderError(f"{where}: {kind} has no metadata.name; every object needs {_NEEDS}")
    return obj


_NEEDS = "apiVersion, kind and metadata.name"


def _type(value: Any) -> str:
    return "a list" if isinstance(value, list) else f"{type(value).__name__} {str(value)[:40]!r}"


def _encode(objects: list[Manifest], path: str) -> bytes:
    try:
        return orjson.dumps(objects, option=orjson.OPT_NON_STR_KEYS)
    except TypeError as e:
        raise RenderError(f"{path or '.'}: a value cannot be represented in JSON: {e}") from e


def _decode(data: bytes) -> tuple[Manifest, ...]:
    return tuple(orjson.loads(data))


# -- repository paths -----------------------------------------------------------------------


def _clean(path: str) -> str:
    return "/".join(p for p in path.replace("\\", "/").split("/") if p not in ("", "."))


def _join(folder: str, name: str) -> str:
    return posixpath.join(folder, name) if folder else name


def _is_within(path: str, folder: str) -> bool:
    return not folder or path == folder or path.startswith(folder + "/")


def _is_local_ref(ref: str) -> bool:
    """Not a remote base (URL, `github.com/...`, `git@...`); those are not cached by tree."""
    return "://" not in ref and not ref.startswith(("github.com/", "git@"))


def _is_file(snap: Snapshot, path: str) -> bool:
    entry = snap.entry(path)
    return entry is not None and not entry.is_dir


def _kustomization_name(snap: Snapshot, folder: str) -> str:
    return next((n for n in KUSTOMIZATIONS if _is_file(snap, _join(folder, n))), "")


def _yaml_file(job: _Job, path: str) -> dict[str, Any]:
    data = job.snap.read_file(path) or b""
    documents = [d for d in _yaml_documents(path, data) if d is not None]
    return documents[0] if documents and isinstance(documents[0], dict) else {}
