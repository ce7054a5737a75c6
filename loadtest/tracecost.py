"""What the span exporter costs a worker, read from the worker's own CPU profile (issue 16).

The tracing phase (`loadtest.scaling.tracing`) compares worker CPU per object between cold
syncs with the exporter on and off. On a shared 2-core machine that comparison is noisy: rounds
with the same setting differ by more than a tenth, more than the exporter can cost. So the
rounds with the exporter on are also profiled (py-spy `--gil`, collapsed stacks: only the thread
holding the GIL is sampled, so the samples are the worker's Python CPU), and the exporter's
share is the share of samples whose stack passes through the export path: the batch span
processor taking a finished span (`on_end`, on the thread that ended it), its export thread,
and the exporters themselves (`EXPORT_FRAMES`). Each round is profiled from its first sync
request until `export_tail_s` after its last sync settled, so the spans still queued when the
round ends are exported inside the profile. Creating and ending spans is left out: a worker
does that with the exporter off too (a provider is always installed, `fleet.telemetry.sdk`), so
it is not what switching the exporter on costs.

Both sides of the share come from the same samples, so a machine that runs slower or faster
for a while changes neither. CPU spent outside Python (TLS, zlib, the kernel) is not sampled;
the export path spends almost none, so the share is, if anything, higher than the exporter's
share of all the worker's CPU.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from loadtest.profiling import stacks

PROFILE_RATE = 100  # py-spy samples per second per worker: two recorders, nothing else profiled
SCHEDULE_DELAY_MS = 5000  # the SDK's default OTEL_BSP_SCHEDULE_DELAY
EXPORT_FRAMES = (  # class-qualified function names as py-spy prints them ("Class.method (file)")
    "BatchSpanProcessor.",
    "BatchProcessor.",  # the SDK's shared batching queue and thread behind BatchSpanProcessor
    "SimpleSpanProcessor.",
    "FileSpanExporter.",  # fleet.telemetry.sdk
    "OTLPSpanExporter.",
)


@dataclass(frozen=True)
class ExportShare:
    """Samples of one or more collapsed-stack profiles, and those in the export path."""

    samples: int
    exporting: int

    @property
    def share(self) -> float:
        return self.exporting / self.samples if self.samples else 0.0

    def __add__(self, other: ExportShare) -> ExportShare:
        return ExportShare(self.samples + other.samples, self.exporting + other.exporting)


def export_tail_s(env: Mapping[str, str] = os.environ) -> float:
    """How long to keep profiling after a round's last sync so the batch processor has exported
    every span of it: it exports a batch when 512 spans wait or its timer fires, every
    OTEL_BSP_SCHEDULE_DELAY ms; a second more for the export itself."""
    try:
        delay_ms = float(env.get("OTEL_BSP_SCHEDULE_DELAY", SCHEDULE_DELAY_MS))
    except ValueError:
        delay_ms = SCHEDULE_DELAY_MS
    return max(delay_ms, 0.0) / 1000 + 1.0


def exports(stack: str) -> bool:
    """Whether a collapsed stack (`frame;frame;...`) passes through the export path."""
    return any(frame.startswith(EXPORT_FRAMES) for frame in stack.split(";"))


def export_share(counted: Iterable[tuple[str, int]]) -> ExportShare:
    """The samples of collapsed stacks (each with its count), and how many export."""
    samples = exporting = 0
    for stack, count in counted:
        samples += count
        exporting += count if exports(stack) else 0
    return ExportShare(samples, exporting)


def file_share(collapsed: Path) -> ExportShare:
    """`export_share` of a py-spy `--format raw` file (empty when there is none)."""
    return export_share(stacks(collapsed))
