"""The kustomize renderer: `kubectl kustomize` of the app's path.

The render reads the path and every local directory its kustomizations build from, transitively
(resources, bases, components, generators, transformers); those are the job's inputs.

Kustomize fetches what a kustomization names outside the local tree: a `resources` (or
`bases`, `components`) entry that is not a local file or folder is cloned with git or
downloaded (`github.com/org/repo//path?ref=v1`, `https://host/repo.git//base`,
`git@host:repo`, `https://host/x.yaml`), and every file a field names (patches, generators'
files, crds, openapi...) may be an http(s) URL. Each such fetch is the worker reaching an
address a repository chose, internal ones included, so unless the project sets
`allowRemoteRenders` (`RenderParams.allow_remote`) a render refuses:

- an entry of `resources`, `bases`, `components`, `generators`, `transformers` or `validators`
  that is not in the repository, or that kustomize would read as remote even when a folder of
  that name exists (kustomize tries `github.com/org/repo`, `x//y`, `x?ref=` and any URL as
  remote first, so a folder named like one must not pass for it);
- any file field whose value is a URL, and any URL a built-in plugin's configuration names
  (`generators`, `transformers`, `validators`, inline or in a file: a PatchTransformer fetches
  its `path`).

With or without the opt-in, a file field or plugin path that leaves the repository
(`configMapGenerator` `files: [/etc/passwd]`) is refused before kustomize runs, and every
repository file kustomize parses as YAML (a resource, a patch, a CRD) is measured by
`manifests.check_file` whatever its name.

The tool then also runs off the network (`fleet.engine.render.launch`). With the opt-in, remote
content is fetched on every render that is not cached; the cache key is the repository's, so a
change at the remote URL is seen once the repository changes (pin remote bases with `?ref=`).
"""

from __future__ import annotations

import posixpath
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fleet.engine.render.job import RenderJob, is_file, join, materialize, reachable
from fleet.engine.render.manifests import check_file, parse_manifests, yaml_documents
from fleet.engine.render.substitute import substitute_stream
from fleet.engine.render.tools import child_environment, find_tool, run_tool, version_of
from fleet.engine.source.cache import Snapshot
from fleet.errors import RenderError
from fleet.model import Manifest

KUSTOMIZATIONS = ("kustomization.yaml", "kustomization.yml", "Kustomization")
KUSTOMIZE_DIR_FIELDS = ("resources", "bases", "components", "generators", "transformers")
REMOTE_FIELDS = (  # kustomize clones what it reads as a repository, downloads URLs
    "resources",
    "bases",
    "components",
    "generators",
    "transformers",
    "validators",
)
FILE_LISTS = ("crds", "configurations", "patchesStrategicMerge")  # downloads URLs
REMOTE_HOSTS = ("github.com/", "gitlab.com/", "bitbucket.org/")
REMOTE_SIGNS = ("://", "//", "?", ":")  # schemes, repo//path, ?ref=, scp-like git@host:repo
PATH_ITEMS = ("patches", "patchesJson6902", "replacements")  # lists of {path: ...}
GENERATORS = ("configMapGenerator", "secretGenerator")  # lists of {files, envs, env}
PLUGIN_FIELDS = ("generators", "transformers", "validators")  # plugin configurations
PLUGIN_PATH_KEYS = ("path", "paths", "files", "envs", "env", "repo", "chartHome", "valuesFile")
OPT_IN = (
    "remote resources are fetched only for projects that set allowRemoteRenders "
    "(gitfleet sync and diff: --allow-remote-renders)"
)


def is_kustomization(snap: Snapshot, folder: str) -> bool:
    return bool(_kustomization_name(snap, folder))


def inputs(job: RenderJob) -> list[str]:
    """The path and every local directory its kustomizations build from."""
    return reachable(job, _kustomize_refs)


def render(job: RenderJob) -> list[Manifest]:
    what = f"kustomize build of {job.path or '.'}"
    with tempfile.TemporaryDirectory(prefix="gitfleet-kustomize-") as tmp:
        root = materialize(job, Path(tmp) / "repo")
        home = Path(tmp) / "home"
        home.mkdir()
        network = job.params.allow_remote
        argv = [str(find_tool("kubectl")), "kustomize", str(root / job.path)]
        env = child_environment(home, network=network)
        output = run_tool(argv, cwd=root, what=what, limits=job.limits, env=env, network=network)
    where = f"kustomize output of {job.path or '.'}"
    if job.params.substitute is not None:
        output = substitute_stream(output, dict(job.params.substitute), where)
    objects = parse_manifests(where, output, job.limits)
    return job.check_count(objects)


def tool_version() -> str:
    """The version of kubectl, whose built-in kustomize renders."""
    return version_of(str(find_tool("kubectl")), "version", "--client")


def _kustomize_refs(job: RenderJob, folder: str) -> Iterator[str]:
    """Local paths a kustomization may build from: bases, components, generators...; refuses
    a remote one unless the render may fetch (see the module docstring)."""
    name = _kustomization_name(job.snap, folder)
    if not name:
        return
    where = join(folder, name)
    doc = job.read_yaml(where)
    for field, ref in _path_fields(doc):
        target = posixpath.normpath(join(folder, ref))
        escapes = target.startswith(("/", "../")) or target == ".."
        if _is_remote(field, ref) or not (escapes or job.snap.entry(target) is not None):
            if not job.params.allow_remote:
                _refuse_remote(where, field, ref)
        elif field in KUSTOMIZE_DIR_FIELDS:
            _check_yaml(job, field, target, escapes)
            yield target  # `reachable` refuses one outside the repository
        elif escapes:  # a file of the worker read into a ConfigMap, a patch, a CRD...
            _refuse_outside(where, field, ref)
        else:
            _check_yaml(job, field, target, escapes)
    for field, config in _plugin_configs(job, folder, doc):
        for key, ref in _plugin_paths(config):
            if "://" in ref and not job.params.allow_remote:
                raise RenderError(f"{where}: {field} entry: {key} {ref!r} is a URL; {OPT_IN}")
            target = posixpath.normpath(join(folder, ref.partition("=")[2] or ref))
            if target.startswith(("/", "../")) or target == "..":
                _refuse_outside(where, field, ref, key=key)


def _is_remote(field: str, ref: str) -> bool:
    """Whether kustomize reads `ref` in `field` as remote, whatever the repository holds."""
    if field not in REMOTE_FIELDS:
        return "://" in ref
    return ref.startswith(("git@", *REMOTE_HOSTS)) or any(s in ref for s in REMOTE_SIGNS)


def _check_yaml(job: RenderJob, field: str, target: str, escapes: bool) -> None:
    """Measure a repository file kustomize parses as YAML whatever its name (a resource, a
    patch, a CRD...), so an alias bomb in `bomb.txt` is refused before kustomize expands it."""
    if not escapes and field not in GENERATORS and is_file(job.snap, target):
        check_file(target, job.file(target) or b"", job.limits)


def _refuse_outside(where: str, field: str, ref: str, *, key: str = "") -> None:
    entry = f"{field} entry: {key} {ref!r}" if key else f"{field} entry {ref!r}"
    raise RenderError(
        f"{where}: {entry} is outside the repository: kustomize reads files only from the "
        "repository, below the kustomization's folder"
    )


def _plugin_configs(job: RenderJob, folder: str, doc: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(field, document) for every plugin configuration of `generators`, `transformers` and
    `validators`: inline (a string holding YAML) or in a repository file. Kustomize runs the
    built-in ones (PatchTransformer, ConfigMapGenerator...), which read files and URLs."""
    for field in PLUGIN_FIELDS:
        for value in _strings(doc.get(field)):
            if "\n" in value:
                yield from ((field, d) for d in yaml_documents(field, value.encode(), job.limits))
                continue
            target = posixpath.normpath(join(folder, value))
            data = None if target.startswith(("/", "../")) else job.file(target)
            if data is not None:  # whatever its name, kustomize reads it as YAML
                yield from ((field, d) for d in yaml_documents(target, data, job.limits))


def _plugin_paths(value: Any) -> Iterator[tuple[str, str]]:
    """(key, path) for every string a plugin configuration names a file or URL with."""
    if isinstance(value, list):
        for item in value:
            yield from _plugin_paths(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key in PLUGIN_PATH_KEYS:
                yield from ((str(key), v) for v in _strings(item))
            yield from _plugin_paths(item)


def _refuse_remote(where: str, field: str, ref: str) -> None:
    if field in REMOTE_FIELDS:
        problem = "is not in the repository or names a remote resource"
        raise RenderError(f"{where}: {field} entry {ref!r} {problem}; {OPT_IN}")
    if "://" in ref:
        raise RenderError(f"{where}: {field} entry {ref!r} is a URL; {OPT_IN}")


def _path_fields(doc: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(field, value) for every string of a kustomization that kustomize reads as a path."""
    for field in (*REMOTE_FIELDS, *FILE_LISTS):
        yield from ((field, v) for v in _strings(doc.get(field)) if "\n" not in v)
    for field in PATH_ITEMS:
        for item in _dicts(doc.get(field)):
            yield from ((field, v) for v in _strings(item.get("path")))
    for field in GENERATORS:
        for item in _dicts(doc.get(field)):
            files = [v.partition("=")[2] or v for v in _strings(item.get("files"))]
            envs = [*_strings(item.get("envs")), *_strings(item.get("env"))]
            yield from ((field, v) for v in (*files, *envs))
    openapi = doc.get("openapi")
    if isinstance(openapi, dict):
        yield from (("openapi", v) for v in _strings(openapi.get("path")))


def _strings(value: Any) -> list[str]:
    values = value if isinstance(value, list) else [value]
    return [v for v in values if isinstance(v, str) and v]


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _kustomization_name(snap: Snapshot, folder: str) -> str:
    return next((n for n in KUSTOMIZATIONS if is_file(snap, join(folder, n))), "")
