"""Output for people and scripts: aligned tables, JSON, a sync's result and a live progress line.

Every table the commands print is laid out by `table`: a header row, columns padded to their
widest cell, no trailing spaces.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TextIO

from fleet.engine.contract import SyncResult

COLUMNS = ("WAVE", "KIND", "NAMESPACE", "NAME", "ACTION", "HEALTH", "MESSAGE")


def table(rows: Sequence[Sequence[str]], columns: Sequence[str], *, gap: str = "  ") -> str:
    """`columns` over `rows`, each column as wide as its widest cell, separated by `gap`."""
    widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(columns)]
    return "\n".join(
        gap.join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip()
        for line in [columns, *rows]
    )


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=False))


def result_table(result: SyncResult) -> str:
    rows = [
        (
            str(r.wave),
            r.ref.kind,
            r.ref.namespace,
            r.ref.name,
            str(r.action),
            str(r.health),
            r.message.replace("\n", " ")[:120],
        )
        for r in result.resources
    ]
    lines = [table(rows, COLUMNS)]
    seconds = (result.finished - result.started).total_seconds()
    lines.append("")
    lines.append(
        f"app {result.app}  revision {result.revision[:12] or '-'}  {result.sync_status}  "
        f"{result.health}  {len(result.resources)} objects  {result.writes} writes  "
        f"{'rendered' if result.rendered else 'render cached'}  {seconds:.1f}s  "
        f"trace {result.trace_id or '-'}"
    )
    if result.error:
        lines.append(f"error ({result.error_stage}): {result.error}")
    if result.message:  # objects not applied, prune not run, a wait cancelled for a revision
        lines.append(f"note: {result.message}")
    return "\n".join(lines)


class ProgressLine:
    """One line rewritten in place on a terminal; plain lines (deduplicated) otherwise."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.last = ""

    def __call__(self, message: str) -> None:
        if message == self.last:
            return
        self.last = message
        if self.tty:
            self.stream.write("\r\033[K" + message[:150])
        else:
            self.stream.write(message + "\n")
        self.stream.flush()

    def clear(self) -> None:
        if self.tty and self.last:
            self.stream.write("\r\033[K")
            self.stream.flush()
