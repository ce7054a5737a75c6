"""The helm renderer: `helm template` of the chart at the app's path.

The render reads the chart, the charts of its `file://` dependencies and of theirs, and the
values files the parameters name; those are the job's inputs. A chart with `file://`
dependencies is built with `helm dependency build --skip-refresh` first. Helm runs with private
cache, config and data homes: no shared repository cache, no user configuration.

Values files are paths relative to the app's path, or to the repository root when they start
with `/`; one that leads outside the repository is refused, and each is written below the
render's own folder whatever its name.

`helm dependency build` downloads every dependency that is not `file://`, from whatever
repository or OCI registry the chart names: the worker reaching an address a repository chose.
So unless the project sets `allowRemoteRenders`, a chart that would be built (it has `file://`
dependencies) may not also depend on a chart repository, and helm runs off the network. A
chart whose repository dependencies are vendored under `charts/` (and has no `file://` ones) is
never built, so it renders as before.
"""

from __future__ import annotations

import functools
import posixpath
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fleet.engine.render.job import (
    RenderJob,
    is_file,
    join,
    materialize,
    reachable,
    write_inside,
)
from fleet.engine.render.manifests import check_file, parse_manifests
from fleet.engine.render.substitute import substitute_stream
from fleet.engine.render.tools import child_environment, find_tool, run_tool, version_of
from fleet.engine.source.cache import Snapshot
from fleet.errors import RenderError
from fleet.model import Manifest

OPT_IN = "projects that set allowRemoteRenders (gitfleet sync and diff: --allow-remote-renders)"


def is_chart(snap: Snapshot, path: str) -> bool:
    return is_file(snap, join(path, "Chart.yaml"))


def inputs(job: RenderJob) -> list[str]:
    """The chart, its `file://` dependency charts, and the values files."""
    return [*reachable(job, _chart_deps), *(_values_path(job, n) for n in job.params.values_files)]


def render(job: RenderJob) -> list[Manifest]:
    what = f"helm template of {job.path or '.'}"
    network = job.params.allow_remote
    with tempfile.TemporaryDirectory(prefix="gitfleet-helm-") as tmp:
        root = materialize(job, Path(tmp) / "repo")
        chart = root / job.path
        env = _helm_env(Path(tmp), network=network)
        helm = functools.partial(
            run_tool, cwd=root, what=what, limits=job.limits, env=env, network=network
        )
        if _has_file_dependencies(job):
            _check_remote_dependencies(job)
            helm([str(find_tool("helm")), "dependency", "build", "--skip-refresh", str(chart)])
        argv = [str(find_tool("helm")), "template", _release(job), str(chart), "--include-crds"]
        output = helm(argv + _helm_values_args(job, Path(tmp)))
    where = f"helm output of {job.path or '.'}"
    if job.params.substitute is not None:
        output = substitute_stream(output, dict(job.params.substitute), where)
    objects = parse_manifests(where, output, job.limits)
    return job.check_count(objects)


def tool_version() -> str:
    return version_of(str(find_tool("helm")), "version", "--short")


def _dependencies(job: RenderJob, chart: str) -> Iterator[dict[str, Any]]:
    for dep in job.read_yaml(join(chart, "Chart.yaml")).get("dependencies") or []:
        if isinstance(dep, dict):
            yield dep


def _chart_deps(job: RenderJob, chart: str) -> Iterator[str]:
    """The chart directories of `file://` dependencies in `chart`'s Chart.yaml."""
    for dep in _dependencies(job, chart):
        repository = str(dep.get("repository", ""))
        if repository.startswith("file://"):
            yield posixpath.normpath(join(chart, repository.removeprefix("file://")))


def _check_remote_dependencies(job: RenderJob) -> None:
    """Refuse a dependency `helm dependency build` would download, unless the render may."""
    if job.params.allow_remote:
        return
    for chart in reachable(job, _chart_deps):
        for dep in _dependencies(job, chart):
            repository = str(dep.get("repository") or "")
            if repository and not repository.startswith("file://"):
                where = f"{join(chart, 'Chart.yaml')}: dependency {dep.get('name')}"
                raise RenderError(
                    f"{where} from {repository!r} would be downloaded: vendor it under charts/, "
                    f"or fetch it, which only {OPT_IN} do"
                )


def _values_path(job: RenderJob, name: str) -> str:
    """The repository path of values file `name`: relative to the app's path, or to the
    repository root when it starts with `/`; never outside the repository."""
    target = posixpath.normpath(join(job.path, name)).lstrip("/")
    if target == ".." or target.startswith("../"):
        raise RenderError(
            f"values file {name!r} of {job.path or '.'} is outside the repository: values files "
            "are paths relative to the app's path, or to the repository root when they start "
            "with '/'"
        )
    return target


def _helm_values_args(job: RenderJob, tmp: Path) -> list[str]:
    args = ["--namespace", job.params.namespace] if job.params.namespace else []
    for name in job.params.values_files:
        target = _values_path(job, name)
        data = job.file(target)
        if data is None:
            raise RenderError(f"values file {name!r} not found in {job.path or '.'} ({target})")
        args += ["-f", str(write_inside(tmp / "values", target, job.checked_file(target, data)))]
    for index, text in enumerate(job.params.values_yaml):
        data = text.encode()
        check_file("the app's helm values", data, job.limits)
        args += ["-f", str(write_inside(tmp / "extra-values", f"{index}.yaml", data))]
    for key, value in job.params.values:
        args += ["--set", f"{key}={value}"]
    return args


def _release(job: RenderJob) -> str:
    return job.params.release_name or posixpath.basename(job.path) or "release"


def _helm_env(tmp: Path, *, network: bool) -> dict[str, str]:
    """The child's environment with private helm homes: no shared repository cache, no user
    configuration."""
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    kinds = ("CACHE", "CONFIG", "DATA")
    helm_homes = {f"HELM_{k}_HOME": str(tmp / "helm" / k.lower()) for k in kinds}
    return {**child_environment(home, network=network), **helm_homes}


def _has_file_dependencies(job: RenderJob) -> bool:
    return any(True for _ in _chart_deps(job, job.path))
