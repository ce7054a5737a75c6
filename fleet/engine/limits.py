"""What one sync may cost the worker: the bounds on fetching and rendering repository content.

Repository content is untrusted: whoever may commit to a repository a project allows decides
how large its files are, how many objects it renders, how deeply its documents nest, how far
its YAML aliases expand and how long its tools run. Every such cost is bounded here, and a
project may change each bound (`ProjectRecord.limits`, `limits` in the API), so the defaults
only need to suit almost everyone:

- `max_file_bytes` 8 MiB: one file read from the repository (a manifest, a values file, a
  kustomization). etcd stores objects up to 1.5 MiB, so a file this size holds several
  objects at their largest, or a vendored CRD bundle; parsing it costs ~20x in memory.
- `max_render_bytes` 50 MiB: everything one render reads (plain) or a tool writes (kustomize,
  helm); ~10,000 objects of 5 KB.
- `max_objects` 10,000: objects in one render. Each costs API requests on every sync; apps in
  the thousands are rare, ten thousand is a mistake (a loop in a template) more often than not.
- `max_depth` 100: nesting of maps and lists in one document. The deepest CRD schemas nest about
  40; Python's recursion limit (1,000) sits far above, so no later stage can hit it.
- `max_alias_nodes` 10,000: nodes YAML aliases may add to a document by expansion. Manifests
  rarely use aliases at all; a 342-byte "billion laughs" document adds 387 million.
- `render_timeout_s` 60: wall clock for one tool run (the limit renders always had); kustomize
  of an overlay takes ~50 ms, helm of a large chart a few seconds.
- `render_memory_bytes` 1 GiB: data memory of one tool run (RLIMIT_DATA, see
  `fleet.engine.render.tools`); kustomize and helm use tens of MB on large inputs.
- `max_fetch_bytes` 2 GiB: pack data one fetch may receive. GitHub asks repositories to stay
  under 1 GB; the first fetch of a repository receives its whole history.
- `fetch_timeout_s` 300: wall clock for one fetch, which also bounds each network read; 2 GiB
  at 10 MB/s takes ~200 s.

Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB


@dataclass(frozen=True)
class Limits:
    """Bounds on one sync's fetch and render; see the module docstring for each default."""

    max_file_bytes: int = 8 * MIB
    max_render_bytes: int = 50 * MIB
    max_objects: int = 10_000
    max_depth: int = 100
    max_alias_nodes: int = 10_000
    render_timeout_s: float = 60.0
    render_memory_bytes: int = 1 * GIB
    max_fetch_bytes: int = 2 * GIB
    fetch_timeout_s: float = 300.0


SETTING = {
    "max_file_bytes": "maxFileBytes",
    "max_render_bytes": "maxRenderBytes",
    "max_objects": "maxObjects",
    "max_depth": "maxDepth",
    "max_alias_nodes": "maxAliasNodes",
    "render_timeout_s": "renderTimeoutS",
    "render_memory_bytes": "renderMemoryBytes",
    "max_fetch_bytes": "maxFetchBytes",
    "fetch_timeout_s": "fetchTimeoutS",
}
"""Each limit's name in a project's `limits` (the API spelling), which error messages name."""


def hint(field: str) -> str:
    """How a person raises the limit `field`, for the end of an error message."""
    return f"a project raises it with limits.{SETTING[field]}"


def size_text(count: int) -> str:
    """`count` bytes as a person reads them: 512 bytes, 64 KiB, 8 MiB, 1.5 GiB."""
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if count >= size:
            value = count / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{count} bytes"
