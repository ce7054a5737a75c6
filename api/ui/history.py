"""/ui/apps/{name}/history: every recorded sync of an app, and one sync's waterfall.

The history comes from the REST handler (`api.routes.appops.app_history`). A sync record keeps
the seconds of each stage in the order they ran (`SyncRecord.stages`: source, render, order,
diff, apply, prune, record) and each object's wave, so the waterfall draws the stages one
after the other on the sync's own time line, and under `apply` its waves: each where it
started within the apply stage and for how long (`SyncRecord.waves`), with its objects. A
record older than wave timings lists each wave's objects without bars. The page shows the
trace id to look the sync's spans up in an OpenTelemetry backend.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import Response

from api.auth import Principal
from api.deps import StoreDep
from api.routes.appops import app_history
from api.routes.apps import visible_app
from api.ui.web import page
from fleet.control.registry.syncrecords import (
    ResourceRecord,
    SkipRecord,
    SyncRecord,
    WaveRecord,
)

router = APIRouter(prefix="/ui/apps", include_in_schema=False)


@dataclass(frozen=True)
class Bar:
    """One stage on the waterfall: where it starts and how wide it is, in % of the sync."""

    name: str
    seconds: float
    left: float
    width: float


@dataclass(frozen=True)
class Wave:
    number: int
    objects: tuple[ResourceRecord, ...]


@dataclass(frozen=True)
class WaveBar:
    """One timed wave on the waterfall, under the apply stage: `left` and `width` in % of the
    sync; `offset`: seconds after the apply stage started; `objects`: the objects of its
    number when no other phase has a wave of that number (else only their count is known)."""

    phase: str
    number: int
    offset: float
    seconds: float
    count: int
    failed: bool
    left: float
    width: float
    objects: tuple[ResourceRecord, ...]

    @property
    def label(self) -> str:
        return f"wave {self.number}" if self.phase == "Sync" else f"{self.phase} wave {self.number}"


def _total(record: SyncRecord) -> float:
    """The seconds the waterfall spans: the sync's duration, or its stages' sum if longer."""
    return max(record.seconds or 0.0, sum(record.stages.values())) or 1.0


def waterfall(record: SyncRecord | SkipRecord) -> list[Bar]:
    """The stages of `record` laid end to end over its duration (or their sum, if longer)."""
    if isinstance(record, SkipRecord):
        return []
    stages = list(record.stages.items())
    total = _total(record)
    bars, offset = [], 0.0
    for name, seconds in stages:
        bars.append(Bar(name, seconds, 100 * offset / total, max(100 * seconds / total, 0.3)))
        offset += seconds
    return bars


def wave_bars(record: SyncRecord | SkipRecord) -> list[WaveBar]:
    """The timed waves of `record`, each placed on the sync's time line from the start of the
    apply stage as the waterfall lays it out; [] for a skip or a record without timings."""
    if isinstance(record, SkipRecord) or not record.waves:
        return []
    total = _total(record)
    apply_start = 0.0
    for name, seconds in record.stages.items():
        if name == "apply":
            break
        apply_start += seconds
    phases: dict[int, set[str]] = defaultdict(set)
    for timed in record.waves:
        phases[timed.number].add(timed.phase)
    grouped = {w.number: w.objects for w in waves(record)}
    return [_wave_bar(w, total, apply_start, grouped, phases) for w in record.waves]


def _wave_bar(
    timed: WaveRecord,
    total: float,
    apply_start: float,
    grouped: dict[int, tuple[ResourceRecord, ...]],
    phases: dict[int, set[str]],
) -> WaveBar:
    left = min(100 * (apply_start + timed.offset) / total, 99.7)
    width = min(max(100 * timed.seconds / total, 0.3), 100.0 - left)
    alone = len(phases[timed.number]) == 1
    return WaveBar(
        phase=timed.phase,
        number=timed.number,
        offset=timed.offset,
        seconds=timed.seconds,
        count=timed.objects,
        failed=timed.failed,
        left=left,
        width=width,
        objects=grouped.get(timed.number, ()) if alone else (),
    )


def waves(record: SyncRecord | SkipRecord) -> list[Wave]:
    grouped: dict[int, list[ResourceRecord]] = defaultdict(list)
    for resource in record.resources:
        grouped[resource.wave].append(resource)
    return [Wave(n, tuple(grouped[n])) for n in sorted(grouped)]


@router.get("/{name}/history")
def history_page(request: Request, name: str, store: StoreDep, principal: Principal) -> Response:
    record = visible_app(store, principal, name)
    view = app_history(name, store, principal, cluster=None, limit=50)
    return page(request, "history.html", principal, app=record, history=view.clusters)


@router.get("/{name}/history/{cluster}/{index}")
def entry_page(
    request: Request, name: str, cluster: str, index: int, store: StoreDep, principal: Principal
) -> Response:
    record = visible_app(store, principal, name)
    entries = app_history(name, store, principal, cluster=cluster, limit=50).clusters[cluster]
    if not 0 <= index < len(entries):
        raise HTTPException(404, f"app {name} has no history entry {index} on cluster {cluster}")
    entry = entries[index]
    return page(
        request,
        "entry.html",
        principal,
        app=record,
        cluster=cluster,
        index=index,
        entry=entry,
        bars=waterfall(entry),
        waves=waves(entry),
        wave_bars=wave_bars(entry),
    )
