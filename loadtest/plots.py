"""The report's PNG charts: horizontal bar charts drawn with `loadtest.png`.

Each chart reads only the finished report (its figures and details), so charts can be drawn
again from a report.json without rerunning anything: `python -m loadtest.plots DIR`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadtest.png import GREY, Canvas, Color, text_width

BLUE: Color = (66, 113, 196)
ORANGE: Color = (237, 125, 49)
GREEN: Color = (84, 160, 84)
RED: Color = (200, 60, 60)
PURPLE: Color = (130, 90, 170)
WIDTH, MARGIN, ROW, BAR = 1000, 16, 30, 20
TOP = 64
VALUE_ROOM = 150


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    color: Color = BLUE


@dataclass(frozen=True)
class Marker:
    """A vertical line across the bars at `value`, named under the chart."""

    label: str
    value: float
    color: Color = RED


def fmt(value: float) -> str:
    if value == int(value):
        return f"{int(value):,}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def bar_chart(
    path: Path, *, title: str, unit: str, bars: Sequence[Bar], markers: Sequence[Marker] = ()
) -> Path:
    """Write a chart with one horizontal bar per entry, its value at the end of the bar."""
    label_w = max([text_width(b.label) for b in bars] + [40]) + MARGIN
    height = TOP + ROW * max(len(bars), 1) + MARGIN + 22 * len(markers) + MARGIN
    canvas = Canvas(WIDTH, height)
    canvas.text(MARGIN, MARGIN, title, scale=2)
    canvas.text(MARGIN, MARGIN + 22, unit, color=GREY, scale=2)
    x0, room = MARGIN + label_w, WIDTH - MARGIN - label_w - VALUE_ROOM
    top = max([b.value for b in bars] + [m.value for m in markers] + [1e-9])
    bottom = TOP + ROW * len(bars)
    canvas.rect(x0 - 1, TOP - 4, 1, bottom - TOP + 4, GREY)
    for index, bar in enumerate(bars):
        y = TOP + index * ROW
        canvas.text(MARGIN, y + 3, bar.label, scale=2)
        length = max(int(room * max(bar.value, 0.0) / top), 1)
        canvas.rect(x0, y, length, BAR, bar.color)
        canvas.text(x0 + length + 6, y + 3, fmt(bar.value), scale=2)
    for index, marker in enumerate(markers):
        x = x0 + int(room * marker.value / top)
        for y in range(TOP - 4, bottom, 6):
            canvas.rect(x, y, 2, 3, marker.color)
        label = f"{marker.label} = {fmt(marker.value)}"
        canvas.text(MARGIN, bottom + MARGIN + 22 * index, label, color=marker.color, scale=2)
    canvas.save(path)
    return path


def _value(figures: Mapping[str, Any], name: str) -> float:
    return float(figures.get(name, {}).get("value", 0.0))


def throughput(report: Mapping[str, Any], out: Path) -> Path:
    f = report["figures"]
    bars = [
        Bar("raw SSA limit", _value(f, "raw_limit_objects_per_s"), GREEN),
        Bar("kubectl apply", _value(f, "kubectl_objects_per_s"), GREY),
        Bar("gitfleet cold sync", _value(f, "cold_sync_objects_per_s"), BLUE),
        Bar("cold, tracing on", _value(f, "tracing_on_objects_per_s"), PURPLE),
        Bar("cold, tracing off", _value(f, "tracing_off_objects_per_s"), ORANGE),
    ]
    return bar_chart(
        out / "throughput.png",
        title="Cold sync throughput, side by side",
        unit="objects/s",
        bars=bars,
    )


def latency(report: Mapping[str, Any], out: Path) -> Path:
    f, details = report["figures"], report["details"]["monorepo"]
    bars = [Bar(f"commit {i + 1}", s) for i, s in enumerate(details["latencies_s"])]
    markers = [
        Marker("p50", _value(f, "commit_to_converged_p50_s"), ORANGE),
        Marker("p95", _value(f, "commit_to_converged_p95_s"), RED),
        Marker("target p50", 1.5, GREEN),
    ]
    return bar_chart(
        out / "commit_to_converged.png",
        title="Monorepo commit to converged (webhook)",
        unit="seconds, one commit touching 1 app",
        bars=bars,
        markers=markers,
    )


def shards(report: Mapping[str, Any], out: Path) -> Path:
    details = report["details"]["sharding"]
    colors = {"before": BLUE, "after join": ORANGE, "after leave": GREEN}
    bars = [
        Bar(f"{stage}: {worker}", count, colors[stage])
        for stage in colors
        for worker, count in sorted(details[stage].items())
    ]
    mean = sum(details["before"].values()) / max(len(details["before"]), 1)
    return bar_chart(
        out / "shards.png",
        title="Apps per worker (live shard map)",
        unit="app instances",
        bars=bars,
        markers=[Marker("mean before", mean, GREY)],
    )


def noop(report: Mapping[str, Any], out: Path) -> Path:
    details, figures = report["details"], report["figures"]
    cycles = (("first", "noop_first_cycle", ORANGE), ("steady", "noop", BLUE))
    bars = []
    for label, key, color in cycles:
        per_app = details[key]["requests_per_app_by_verb"]
        ranked = sorted(per_app.items(), key=lambda kv: -kv[1])[:6]
        bars += [Bar(f"{label}: {name}", value, color) for name, value in ranked]
        bars.append(
            Bar(f"{label}: all requests", _value(figures, f"{key}_api_requests_per_app"), color)
        )
        bars.append(Bar(f"{label}: renders", _value(figures, f"{key}_renders_per_app"), color))
    return bar_chart(
        out / "noop_cycle.png",
        title="No-op interval cycles: per app (first after the cold sync, then steady)",
        unit="apiserver requests by verb and resource, minus background; renders",
        bars=bars,
    )


CHARTS = (throughput, latency, shards, noop)


def write_all(report: Mapping[str, Any], out: Path) -> list[Path]:
    return [chart(report, out) for chart in CHARTS]


def main(argv: Sequence[str] | None = None) -> int:
    folder = Path((argv if argv is not None else sys.argv[1:])[0])
    report = json.loads((folder / "report.json").read_text())
    for path in write_all(report, folder):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
