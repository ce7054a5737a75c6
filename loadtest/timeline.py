"""Second by second during a load run: what each process spent and how slow the answers were.

`CpuTimeline` samples, once a second on a thread of its own, the CPU (user + system seconds)
of every process on the machine, grouped by what it is (`group_of`: the coordinator, a worker,
redis, kube-apiserver, etcd, the load generator, anything else). `per_second` then lines the
latencies of the requests planned in each second up with those CPU figures, so a latency spike
can be laid next to the process that was busy, or next to a second when nobody was.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import psutil

from loadtest.context import percentile

GROUPS: tuple[tuple[str, str], ...] = (
    ("cli.main api", "api"),
    ("cli.api_server", "api"),
    ("cli.main worker", "worker"),
    ("redis-server", "redis"),
    ("kube-apiserver", "kube-apiserver"),
    ("etcd", "etcd"),
    ("loadtest.apiload", "loadgen"),
)


def group_of(cmdline: Sequence[str]) -> str:
    """Which group a process belongs to, by its command line."""
    text = " ".join(cmdline)
    for needle, group in GROUPS:
        if needle in text:
            return group
    return "other"


class CpuTimeline:
    """CPU seconds per group per second, from `start()` until `stop()`."""

    def __init__(self, interval: float = 1.0) -> None:
        self.interval = interval
        self.rows: list[dict[str, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-timeline", daemon=True)
        self.began = 0.0

    def start(self) -> None:
        self.began = time.perf_counter()
        self._thread.start()

    def stop(self) -> list[dict[str, float]]:
        self._stop.set()
        self._thread.join(timeout=5)
        return self.rows

    def _run(self) -> None:
        before = _totals()
        while not self._stop.wait(self.interval):
            now = _totals()
            row: dict[str, float] = defaultdict(float)
            for pid, (group, seconds) in now.items():
                previous = before.get(pid)
                row[group] += seconds - (previous[1] if previous else 0.0)
            row = {g: round(v, 3) for g, v in row.items() if v > 0.0005}
            row["at_s"] = round(time.perf_counter() - self.began, 2)
            self.rows.append(row)
            before = now


def _totals() -> dict[int, tuple[str, float]]:
    """{pid: (group, CPU seconds)}; a multiprocessing child (uvicorn's worker processes, which
    `gitfleet api --workers` spawns) is put in its parent's group."""
    found: dict[int, tuple[str, float]] = {}
    parents: dict[int, int] = {}
    for proc in psutil.process_iter(["cmdline", "cpu_times", "ppid"]):
        times = proc.info.get("cpu_times")
        if times is None:
            continue
        cmdline = proc.info.get("cmdline") or ()
        found[proc.pid] = (group_of(cmdline), times.user + times.system)
        if any("multiprocessing" in part for part in cmdline):
            parents[proc.pid] = proc.info.get("ppid") or 0
    for pid, ppid in parents.items():
        if ppid in found:
            found[pid] = (found[ppid][0], found[pid][1])
    return found


def per_second(
    latencies: Iterable[tuple[float, float]], cpu: Sequence[dict[str, float]], offset_s: float
) -> list[dict[str, Any]]:
    """One row per second of the stream: requests planned in it, their p99 and max (ms), and
    the CPU each group spent in that second. `latencies` are (planned instant s, latency ms)
    from the stream's start; `offset_s` is where that start sits on the CPU timeline."""
    buckets: dict[int, list[float]] = defaultdict(list)
    for at, latency in latencies:
        buckets[int(at)].append(latency)
    by_second = {round(row["at_s"] - offset_s - 1): row for row in cpu}  # row covers (t-1, t]
    rows = []
    for second in sorted(buckets):
        values = buckets[second]
        cpu_row = {k: v for k, v in by_second.get(second, {}).items() if k != "at_s"}
        rows.append(
            {
                "second": second,
                "requests": len(values),
                "p99_ms": round(percentile(values, 99), 1),
                "max_ms": round(max(values), 1),
                "cpu": cpu_row,
            }
        )
    return rows
