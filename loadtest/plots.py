"""The report's PNG charts: horizontal bar charts drawn with matplotlib (the `bench` extra).

Each chart reads only the finished report (its figures and details), so charts can be drawn
again from a report.json without rerunning anything: `python -m loadtest.plots DIR`. Figures
are built with matplotlib's object API on an Agg canvas, so no display and no pyplot state are
involved.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

Color = str
BLUE: Color = "#4271c4"
ORANGE: Color = "#ed7d31"
GREEN: Color = "#54a054"
RED: Color = "#c83c3c"
PURPLE: Color = "#825aaa"
GREY: Color = "#969696"
WIDTH_IN, DPI = 10.0, 100
ROW_IN = 0.32  # height of one bar's row, inches
FRAME_IN = 1.4  # title, value axis and margins, inches
LEGEND_IN = 0.35


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    color: Color = BLUE


@dataclass(frozen=True)
class Marker:
    """A vertical dashed line across the bars at `value`, named in the legend under the chart."""

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
    """Write a chart with one horizontal bar per entry, top to bottom in the order given, its
    value at the end of the bar; a negative value is drawn as an empty bar."""
    height = FRAME_IN + ROW_IN * max(len(bars), 1) + (LEGEND_IN if markers else 0.0)
    figure = Figure(figsize=(WIDTH_IN, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    rows = list(range(len(bars)))
    drawn = axes.barh(
        rows, [max(b.value, 0.0) for b in bars], height=0.66, color=[b.color for b in bars]
    )
    axes.bar_label(drawn, labels=[fmt(b.value) for b in bars], padding=4)
    axes.set_yticks(rows, labels=[b.label for b in bars])
    axes.set_ylim(len(bars) - 0.5, -0.5)  # the first bar on top
    for marker in markers:
        label = f"{marker.label} = {fmt(marker.value)}"
        axes.axvline(marker.value, color=marker.color, linestyle="--", label=label)
    axes.set_xlim(0, _axis_end(bars, markers))
    axes.set_title(title, loc="left", fontweight="bold")
    axes.set_xlabel(unit)
    axes.spines[["top", "right"]].set_visible(False)
    if markers:
        figure.legend(loc="outside lower left", ncols=len(markers), frameon=False)
    figure.savefig(path, format="png")
    return path


def _axis_end(bars: Sequence[Bar], markers: Sequence[Marker]) -> float:
    """The value axis reaches past the largest bar or marker, leaving room for the labels."""
    top = max([b.value for b in bars] + [m.value for m in markers] + [1e-9])
    return top * 1.15


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
