"""The kustomize renderer: `kubectl kustomize` of the app's path.

The render reads the path and every local directory its kustomizations build from, transitively
(resources, bases, components, generators, transformers); those are the job's inputs. Remote
bases (a URL, `github.com/...`, `git@...`) are not followed: they are not cached by tree id.
"""

from __future__ import annotations

import posixpath
import tempfile
from collections.abc import Iterator
from pathlib import Path

from fleet.engine.render.job import RenderJob, is_file, join, materialize, reachable
from fleet.engine.render.manifests import parse_manifests
from fleet.engine.render.tools import find_tool, run_tool, version_of
from fleet.engine.source.cache import Snapshot
from fleet.model import Manifest

KUSTOMIZATIONS = ("kustomization.yaml", "kustomization.yml", "Kustomization")
KUSTOMIZE_DIR_FIELDS = ("resources", "bases", "components", "generators", "transformers")


def is_kustomization(snap: Snapshot, folder: str) -> bool:
    return bool(_kustomization_name(snap, folder))


def inputs(job: RenderJob) -> list[str]:
    """The path and every local directory its kustomizations build from."""
    return reachable(job, _kustomize_refs)


def render(job: RenderJob) -> list[Manifest]:
    with tempfile.TemporaryDirectory(prefix="gitfleet-kustomize-") as tmp:
        root = materialize(job, Path(tmp))
        argv = [str(find_tool("kubectl")), "kustomize", str(root / job.path)]
        output = run_tool(argv, cwd=root, what=f"kustomize build of {job.path or '.'}")
    return parse_manifests(f"kustomize output of {job.path or '.'}", output)


def tool_version() -> str:
    """The version of kubectl, whose built-in kustomize renders."""
    return version_of(str(find_tool("kubectl")), "version", "--client")


def _kustomize_refs(job: RenderJob, folder: str) -> Iterator[str]:
    """Local directories a kustomization may build from: bases, components, generators..."""
    name = _kustomization_name(job.snap, folder)
    doc = job.read_yaml(join(folder, name)) if name else {}
    for field in KUSTOMIZE_DIR_FIELDS:
        for ref in doc.get(field) or []:
            if isinstance(ref, str) and _is_local_ref(ref):
                yield posixpath.normpath(join(folder, ref))


def _is_local_ref(ref: str) -> bool:
    """Not a remote base (URL, `github.com/...`, `git@...`); those are not cached by tree."""
    return "://" not in ref and not ref.startswith(("github.com/", "git@"))


def _kustomization_name(snap: Snapshot, folder: str) -> str:
    return next((n for n in KUSTOMIZATIONS if is_file(snap, join(folder, n))), "")
