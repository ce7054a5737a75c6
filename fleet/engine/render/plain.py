"""The plain renderer: a directory of YAML and JSON manifests, parsed as they are.

Bounded like every render (`fleet.engine.limits`): each manifest file by `max_file_bytes`, all
of them together by `max_render_bytes`, the objects they hold by `max_objects`; the count is
kept while parsing, so a render over it stops at the first file past the limit.
"""

from __future__ import annotations

from fleet.engine.limits import hint, size_text
from fleet.engine.render.job import RenderJob, checked_size, join
from fleet.engine.render.manifests import parse_manifests
from fleet.engine.render.substitute import substitute_stream
from fleet.errors import RenderError
from fleet.model import Manifest

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


def render(job: RenderJob) -> list[Manifest]:
    """Every .yaml/.yml/.json file below the path in path order; hidden files and folders
    (`.github/`, `.pre-commit-config.yaml`) are tooling, not manifests, and are skipped."""
    return render_sourced(job)[0]


def render_sourced(job: RenderJob) -> tuple[list[Manifest], list[str]]:
    """`render`'s objects, and for each the repository path of the file it came from."""
    files = job.snap.read_tree(job.path)
    names = [n for n in sorted(files) if n.endswith(MANIFEST_SUFFIXES) and not _is_hidden(n)]
    if sum(len(files[n]) for n in names) > job.limits.max_render_bytes:
        size = size_text(job.limits.max_render_bytes)
        where = job.path or "."
        raise RenderError(f"{where}: manifests larger than {size} ({hint('max_render_bytes')})")
    objects: list[Manifest] = []
    origins: list[str] = []
    for name in names:
        path = join(job.path, name)
        data = checked_size(path, files[name], job.limits)
        if job.params.substitute is not None:
            data = substitute_stream(data, dict(job.params.substitute), path)
        parsed = parse_manifests(path, data, job.limits)
        objects.extend(parsed)
        origins.extend(path for _ in parsed)
        job.check_count(objects)
    return objects, origins


def _is_hidden(name: str) -> bool:
    return any(part.startswith(".") for part in name.split("/"))
