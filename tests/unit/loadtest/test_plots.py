"""The report's charts are real PNG images whose bars show the report's figures.

Each chart is read back with matplotlib's own PNG reader; the bars are found by their colours,
and their lengths (pixels of one colour, every bar being as tall as the others) must keep the
ratios of the figures in the report below.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from matplotlib import image

from loadtest.plots import write_all

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHARTS = ["throughput.png", "commit_to_converged.png", "shards.png", "noop_cycle.png"]
GREEN, GREY, BLUE, PURPLE, ORANGE = "#54a054", "#969696", "#4271c4", "#825aaa", "#ed7d31"
RED = "#c83c3c"


def figure(value: float, unit: str = "") -> dict[str, Any]:
    return {"value": value, "unit": unit}


REPORT: dict[str, Any] = {
    "figures": {
        "raw_limit_objects_per_s": figure(1200.0),
        "kubectl_objects_per_s": figure(300.0),
        "cold_sync_objects_per_s": figure(600.0),
        "tracing_on_objects_per_s": figure(400.0),
        "tracing_off_objects_per_s": figure(800.0),
        "commit_to_converged_p50_s": figure(0.9),
        "commit_to_converged_p95_s": figure(1.8),
        "noop_first_cycle_api_requests_per_app": figure(2.0),
        "noop_first_cycle_renders_per_app": figure(0.0),
        "noop_api_requests_per_app": figure(0.01),
        "noop_renders_per_app": figure(0.0),
    },
    "details": {
        "monorepo": {"latencies_s": [0.6, 0.9, 1.2, 2.0]},
        "sharding": {
            "before": {"worker-1": 100, "worker-2": 100},
            "after join": {"worker-1": 70, "worker-2": 65, "worker-3": 65},
            "after leave": {"worker-2": 100, "worker-3": 100},
        },
        "noop_first_cycle": {"requests_per_app_by_verb": {"GET configmaps": 1.5, "LIST pods": 0.5}},
        "noop": {"requests_per_app_by_verb": {"GET configmaps": 0.01}},
    },
}


def mask(png: npt.NDArray[np.float32], color: str) -> npt.NDArray[np.bool_]:
    """Where the image is exactly `color` (the inside of a bar or a line; edges are
    anti-aliased)."""
    rgb = np.rint(png[:, :, :3] * 255).astype(int)
    wanted = [int(color[i : i + 2], 16) for i in (1, 3, 5)]
    return np.all(rgb == wanted, axis=2)


def pixels_of(png: npt.NDArray[np.float32], color: str) -> int:
    return int(mask(png, color).sum())


def read(path: Path) -> npt.NDArray[np.float32]:
    assert path.read_bytes().startswith(PNG_SIGNATURE), path.name
    png: npt.NDArray[np.float32] = image.imread(path)
    return png


def test_every_chart_is_written_as_a_png_under_its_report_name(tmp_path: Path) -> None:
    paths = write_all(REPORT, tmp_path)
    assert [p.name for p in paths] == CHARTS
    assert all(p.parent == tmp_path for p in paths)
    for path in paths:
        png = read(path)
        height, width, channels = png.shape
        assert width == 1000 and 200 < height < 2000 and channels in (3, 4), path.name
        assert len(np.unique(png.reshape(-1, channels), axis=0)) > 10, f"{path.name} is blank"


def test_throughput_bars_are_as_long_as_their_figures(tmp_path: Path) -> None:
    png = read(write_all(REPORT, tmp_path)[0])
    lengths = {c: pixels_of(png, c) for c in (GREEN, GREY, BLUE, PURPLE, ORANGE)}
    per_unit = lengths[GREEN] / 1200  # raw limit, the longest bar
    expected = {GREEN: 1200, GREY: 300, BLUE: 600, PURPLE: 400, ORANGE: 800}
    for color, value in expected.items():
        assert abs(lengths[color] / per_unit - value) < 0.05 * value, (color, lengths)


def test_latency_chart_draws_p50_p95_and_target_lines_on_the_scale_of_the_bars(
    tmp_path: Path,
) -> None:
    png = read(write_all(REPORT, tmp_path)[1])
    blue = mask(png, BLUE)
    columns = np.flatnonzero(blue.any(axis=0))
    x0, longest = columns[0], columns[-1] - columns[0] + 1  # the bars start at 0; 2.0 s is longest
    assert blue.any(axis=1).sum() > 4 * 10  # four bars, each rows high
    for color, seconds in ((ORANGE, 0.9), (RED, 1.8), (GREEN, 1.5)):  # p50, p95, target p50
        tall = np.flatnonzero(mask(png, color).sum(axis=0) >= 40)  # a vertical line, dashed
        assert len(tall) > 0, color
        assert abs(tall.mean() - (x0 + longest * seconds / 2.0)) < 4, (color, tall)


def test_shard_chart_shows_each_stage_in_its_colour(tmp_path: Path) -> None:
    png = read(write_all(REPORT, tmp_path)[2])
    before, join, leave = (pixels_of(png, c) for c in (BLUE, ORANGE, GREEN))
    assert abs(join / before - (70 + 65 + 65) / (100 + 100)) < 0.05
    assert abs(leave / before - (100 + 100) / (100 + 100)) < 0.05
