"""The helm renderer: `helm template` of the chart at the app's path.

The render reads the chart, the charts of its `file://` dependencies and of theirs, and the
values files the parameters name; those are the job's inputs. A chart with `file://`
dependencies is built with `helm dependency build --skip-refresh` first. Helm runs with private
cache, config and data homes: no shared repository cache, no user configuration.
"""

from __future__ import annotations

import os
import posixpath
import tempfile
from collections.abc import Iterator
from pathlib import Path

from fleet.engine.render.job import RenderJob, is_file, join, materialize, reachable, write
from fleet.engine.render.manifests import parse_manifests
from fleet.engine.render.tools import find_tool, run_tool, version_of
from fleet.engine.source.cache import Snapshot
from fleet.errors import RenderError
from fleet.model import Manifest


def is_chart(snap: Snapshot, path: str) -> bool:
    return is_file(snap, join(path, "Chart.yaml"))


def inputs(job: RenderJob) -> list[str]:
    """The chart, its `file://` dependency charts, and the values files."""
    return [*reachable(job, _chart_deps), *_values_paths(job)]


def render(job: RenderJob) -> list[Manifest]:
    with tempfile.TemporaryDirectory(prefix="gitfleet-helm-") as tmp:
        root = materialize(job, Path(tmp) / "repo")
        chart = root / job.path
        what = f"helm template of {job.path or '.'}"
        env = _helm_env(Path(tmp))
        if _has_file_dependencies(job):
            build = ["dependency", "build", "--skip-refresh", str(chart)]
            run_tool([str(find_tool("helm")), *build], cwd=root, what=what, env=env)
        argv = [str(find_tool("helm")), "template", _release(job), str(chart), "--include-crds"]
        argv += _helm_values_args(job, Path(tmp))
        output = run_tool(argv, cwd=root, what=what, env=env)
    return parse_manifests(f"helm output of {job.path or '.'}", output)


def tool_version() -> str:
    return version_of(str(find_tool("helm")), "version", "--short")


def _chart_deps(job: RenderJob, chart: str) -> Iterator[str]:
    """The chart directories of `file://` dependencies in `chart`'s Chart.yaml."""
    for dep in job.read_yaml(join(chart, "Chart.yaml")).get("dependencies") or []:
        repository = str(dep.get("repository", "")) if isinstance(dep, dict) else ""
        if repository.startswith("file://"):
            yield posixpath.normpath(join(chart, repository.removeprefix("file://")))


def _values_paths(job: RenderJob) -> list[str]:
    return [posixpath.normpath(join(job.path, name)) for name in job.params.values_files]


def _helm_values_args(job: RenderJob, tmp: Path) -> list[str]:
    args = ["--namespace", job.params.namespace] if job.params.namespace else []
    for name in job.params.values_files:
        target = posixpath.normpath(join(job.path, name))
        data = job.snap.read_file(target)
        if data is None:
            raise RenderError(f"values file {name!r} not found in {job.path or '.'} ({target})")
        args += ["-f", str(write(tmp / "values" / target, data))]
    for index, text in enumerate(job.params.values_yaml):
        args += ["-f", str(write(tmp / "extra-values" / f"{index}.yaml", text.encode()))]
    for key, value in job.params.values:
        args += ["--set", f"{key}={value}"]
    return args


def _release(job: RenderJob) -> str:
    return job.params.release_name or posixpath.basename(job.path) or "release"


def _helm_env(tmp: Path) -> dict[str, str]:
    """Private helm homes: no shared repository cache, no user configuration."""
    kinds = ("CACHE", "CONFIG", "DATA")
    return {**os.environ, **{f"HELM_{k}_HOME": str(tmp / "helm" / k.lower()) for k in kinds}}


def _has_file_dependencies(job: RenderJob) -> bool:
    return any(True for _ in _chart_deps(job, job.path))
