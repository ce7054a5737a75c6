"""What the benchmark reads from outside the system under test, without changing it.

- CPU seconds (user + system) and resident memory of processes, read with psutil;
- requests counted by each kube-apiserver (`apiserver_request_total`, by verb and resource),
  which sees every request gitfleet makes whatever client code made it;
- spans the processes wrote to GITFLEET_TRACE_FILE (one JSON object per line), read from a
  remembered offset so each phase counts only its own.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil
from prometheus_client.parser import text_string_to_metric_families

from deploy.testbed.process import wait_for
from fleet.kube.client import KubeClient

RequestKey = tuple[str, str]  # (verb, resource), e.g. ("GET", "configmaps")
METRICS_SCRAPE: RequestKey = ("GET", "non-resource")
# the spans gitfleet itself opens (FastAPI's are skipped), as json.dumps or orjson writes them
OURS = (b'"name": "gitfleet.', b'"name":"gitfleet.')


def cpu_of(pids: Iterable[int]) -> float | None:
    """User + system CPU seconds of `pids` together (their children not included); None when
    there are none, or when one of them is gone or cannot be read."""
    pids = list(pids)
    if not pids:
        return None
    try:
        times = [psutil.Process(pid).cpu_times() for pid in pids]
    except psutil.Error:
        return None
    return sum(t.user + t.system for t in times)


def cpu_seconds(pids: Iterable[int]) -> float:
    """`cpu_of`, 0.0 when there is nothing to read."""
    found = cpu_of(pids)
    return found if found is not None else 0.0


def rss_bytes(pid: int) -> int:
    """Resident set size of `pid`, 0 when the process is gone."""
    try:
        return int(psutil.Process(pid).memory_info().rss)
    except psutil.Error:
        return 0


def apiserver_requests(kube: KubeClient) -> Counter[RequestKey]:
    """Requests the apiserver has served since it started, by (verb, resource)."""
    counts: Counter[RequestKey] = Counter()
    for family in text_string_to_metric_families(kube.metrics_text()):
        for sample in family.samples:
            if sample.name != "apiserver_request_total":
                continue
            verb = sample.labels.get("verb", "")
            if sample.labels.get("dry_run"):
                verb += "(dry-run)"
            resource = sample.labels.get("resource") or "non-resource"
            counts[(verb, resource)] += int(sample.value)
    return counts


def request_total(clients: Mapping[str, KubeClient]) -> Counter[RequestKey]:
    """`apiserver_requests` summed over every cluster."""
    total: Counter[RequestKey] = Counter()
    for kube in clients.values():
        total.update(apiserver_requests(kube))
    return total


def delta(after: Counter[RequestKey], before: Counter[RequestKey]) -> Counter[RequestKey]:
    return Counter({k: after[k] - before.get(k, 0) for k in after if after[k] > before.get(k, 0)})


def requests_since(
    clients: Mapping[str, KubeClient], before: Counter[RequestKey]
) -> Counter[RequestKey]:
    """Requests served since `before` was read with `request_total`, without that read: each
    cluster's GET /metrics is counted once it is served, so it shows in the next reading (it
    is the bench's own request, not gitfleet's; 200 apps on 2 clusters made it 0.01 per app)."""
    found = delta(request_total(clients), before)
    found.subtract({METRICS_SCRAPE: len(clients)})
    return +found


def _ours(line: bytes) -> bool:
    return any(mark in line for mark in OURS)


@dataclass
class TraceFile:
    """gitfleet's spans appended to a JSON-lines file by every process; `mark()` starts a new
    count (only `gitfleet.*` spans are kept, and only the fields the phases read)."""

    path: Path
    offset: int = 0
    spans: list[dict[str, Any]] = field(default_factory=list)

    def mark(self) -> None:
        self.offset = self.path.stat().st_size if self.path.exists() else 0
        self.spans = []

    def read(self) -> list[dict[str, Any]]:
        """Spans written since `mark()` (whole lines only)."""
        if not self.path.exists():
            return self.spans
        with self.path.open("rb") as source:
            source.seek(self.offset)
            data = source.read()
        end = data.rfind(b"\n") + 1
        self.offset += end
        self.spans += [_slim(json.loads(line)) for line in data[:end].splitlines() if _ours(line)]
        return self.spans

    def count(self, name: str, where: Callable[[dict[str, Any]], bool] = lambda s: True) -> int:
        return sum(1 for s in self.read() if s.get("name") == name and where(s))

    def settle(self, *, quiet_for: float = 6.0, timeout: float = 60.0) -> list[dict[str, Any]]:
        """Wait until nothing was appended for `quiet_for` seconds (batch span processors
        export every 5 s), then read."""
        size, changed = -1, time.monotonic()

        def quiet() -> bool:
            nonlocal size, changed
            now_size = self.path.stat().st_size if self.path.exists() else 0
            if now_size != size:
                size, changed = now_size, time.monotonic()
                return False
            return time.monotonic() - changed >= quiet_for

        what = "the trace file to stay unchanged"
        wait_for(quiet, what=what, timeout=timeout, period=0.5, error=None)
        return self.read()


def _slim(span: dict[str, Any]) -> dict[str, Any]:
    """The fields the phases read: the resource, events and links are dropped (memory)."""
    keep = ("name", "context", "parent_id", "start_time", "end_time", "attributes")
    return {k: span.get(k) for k in keep}


def is_uncached_render(span: Mapping[str, Any]) -> bool:
    """A `gitfleet.render` span whose render really ran (not served from the render cache)."""
    return (span.get("attributes") or {}).get("gitfleet.cached") is False


def _stamp(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def span_seconds(span: Mapping[str, Any]) -> float:
    return _stamp(span["end_time"]) - _stamp(span["start_time"])


def stage_breakdown(spans: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """count, mean milliseconds and total seconds of each `gitfleet.*` span name."""
    totals: dict[str, list[float]] = {}
    for span in spans:
        if str(span.get("name", "")).startswith("gitfleet."):
            totals.setdefault(span["name"], []).append(span_seconds(span))
    return {
        name: {
            "count": len(found),
            "mean_ms": round(1000 * sum(found) / len(found), 2),
            "total_s": round(sum(found), 3),
        }
        for name, found in sorted(totals.items())
    }


REQUEST_SPANS = ("gitfleet.api.enqueue", "gitfleet.scheduler.interval")


def queue_waits(spans: Iterable[Mapping[str, Any]]) -> list[float]:
    """Seconds from each sync request's span (the API's enqueue, or the scheduler's) to the
    start of the sync it caused."""
    spans = list(spans)
    enqueued = {
        s["context"]["span_id"]: _stamp(s["end_time"])
        for s in spans
        if s.get("name") in REQUEST_SPANS
    }
    return [
        _stamp(s["start_time"]) - enqueued[s["parent_id"]]
        for s in spans
        if s.get("name") == "gitfleet.sync" and s.get("parent_id") in enqueued
    ]
