"""The plain renderer: a directory of YAML and JSON manifests, parsed as they are."""

from __future__ import annotations

from fleet.engine.render.job import RenderJob, join
from fleet.engine.render.manifests import parse_manifests
from fleet.model import Manifest

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


def render(job: RenderJob) -> list[Manifest]:
    """Every .yaml/.yml/.json file below the path in path order; hidden files and folders
    (`.github/`, `.pre-commit-config.yaml`) are tooling, not manifests, and are skipped."""
    files = job.snap.read_tree(job.path)
    objects: list[Manifest] = []
    for name in sorted(files):
        if name.endswith(MANIFEST_SUFFIXES) and not _is_hidden(name):
            objects.extend(parse_manifests(join(job.path, name), files[name]))
    return objects


def _is_hidden(name: str) -> bool:
    return any(part.startswith(".") for part in name.split("/"))
