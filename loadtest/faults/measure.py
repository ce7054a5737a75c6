"""One fault, measured: inject, watch for detection, heal, wait for recovery, then check.

Definitions (the same for every fault; faults.json repeats them under `methods`):
- detect_s: from the injection to the fault's `detected` signal (None: not seen within
  `recover_timeout_s` of the heal).
- recover_s: from the heal to the moment every commit pushed before the heal is live in its
  cluster (0 when the fleet had already caught up during the fault; None: not within
  `recover_timeout_s`).
- syncs_lost: then the stream pauses; apps whose object still does not hold their newest
  commit's value once the fleet has had `recover_timeout_s` to catch up.
- syncs_duplicated: pairs of sync records in one instance's history (written only while the
  sync's fencing token was current), from the fault's start to the end of its check, whose
  [started, finished] intervals overlap: two workers syncing it at once. The worker journal's
  overlaps are in the details too; a journal run ends when it is journaled, so a worker paused
  after its last write overlaps the next run there without having written during it.
- objects_wrongly_written: objects the watch saw go back to an older commit's value; and
  objects_wrongly_pruned: objects the watch saw disappear, plus any that git declares and the
  cluster lacks at the end.
- records_lost: registry records (export document) present before the fault and gone after.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from itertools import pairwise
from typing import Any

from redis import RedisError

from deploy.testbed.process import wait_for
from fleet.control.registry.syncrecords import SyncRecord
from fleet.errors import FleetError
from loadtest.board import stamp
from loadtest.faults import records
from loadtest.faults.kinds import Fault
from loadtest.faults.observe import Event, Reading
from loadtest.faults.stage import Stage
from loadtest.fleetrun import PREFIX, BenchError
from worker.journal import Entry, Journal, overlaps

POLL_S = 0.25
HISTORY_LIMIT = 200  # records read per instance: more than a fault's window holds


@dataclass(frozen=True)
class FaultResult:
    fault: str
    what: str
    detected_by: str
    outage_s: float
    detect_s: float | None
    recover_s: float | None
    syncs_lost: int
    syncs_duplicated: int
    objects_wrongly_written: int
    objects_wrongly_pruned: int
    records_lost: int
    commits_during: int
    webhooks_refused: int
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Clock:
    """The moments of one fault (time.time())."""

    injected: float = 0.0
    healed: float = 0.0
    detected: float | None = None
    recovered: float | None = None
    ended: float = 0.0

    def since_injected(self, moment: float | None) -> float | None:
        return None if moment is None else round(moment - self.injected, 2)


def run_fault(stage: Stage, fault: Fault) -> FaultResult:
    _steady(stage)
    before = records.snapshot(stage.api)
    refused = stage.stream.counts.refused
    clock = Clock(injected=time.time())
    fault.inject(stage)
    try:
        _hold(stage, fault, clock)
    finally:
        fault.heal(stage)
    clock.healed = time.time()
    _recover(stage, fault, clock, stage.stream.newest())
    lost, final = _settle(stage)
    clock.ended = time.time()
    after = records.snapshot(stage.api)
    result = _result(stage, fault, clock, lost=lost, final=final)
    stage.stream.resume()
    return replace(
        result,
        records_lost=sum(len(names) for names in after.lost_since(before).values()),
        webhooks_refused=stage.stream.counts.refused - refused,
        details={**result.details, "records_lost": after.lost_since(before)},
    )


def _steady(stage: Stage) -> None:
    """Start from a whole fleet: every worker process live in the membership."""
    names = set(stage.worker_names())
    what = f"workers {sorted(names)} live before the fault"

    def whole() -> bool:
        return _safely(lambda: stage.fleet.live() == names)

    wait_for(whole, what=what, timeout=120, error=BenchError)


def _hold(stage: Stage, fault: Fault, clock: Clock) -> None:
    """Keep the fault on for its hold time from the moment it took effect (stopping a process
    takes a moment), watching for its detection meanwhile."""
    heal_at = time.time() + fault.hold_s(stage.settings)
    while time.time() < heal_at:
        _look(stage, fault, clock)
        time.sleep(POLL_S)


def _look(stage: Stage, fault: Fault, clock: Clock) -> None:
    if clock.detected is None and _safely(lambda: fault.detected(stage)):
        clock.detected = time.time()


def _safely(check: Callable[[], bool]) -> bool:
    """`check()`, False when what it reads is itself away (Redis, a cluster) for a moment."""
    with contextlib.suppress(RedisError, FleetError):
        return check()
    return False


def _recover(stage: Stage, fault: Fault, clock: Clock, target: dict[str, int]) -> None:
    """Wait until every commit pushed before the heal is live, and until the fault was
    detected (a fleet may catch up before it notices, e.g. a dead worker's membership)."""
    deadline = clock.healed + stage.settings.recover_timeout_s
    while time.time() < deadline and (clock.recovered is None or clock.detected is None):
        _look(stage, fault, clock)
        if clock.recovered is None and caught_up(stage.read(), target):
            clock.recovered = time.time()
        time.sleep(POLL_S)


def caught_up(reading: Reading, target: dict[str, int]) -> bool:
    """Every app's object holds at least the value `target` gives it (a cluster that does not
    answer has caught up with nothing)."""
    return all(reading.value(app) >= value for app, value in target.items())


def _settle(stage: Stage) -> tuple[list[str], Reading]:
    """Pause the stream, give the fleet time to apply the newest commits; the apps it did not
    (syncs lost) and the last reading."""
    stage.stream.pause()
    deadline = time.monotonic() + stage.settings.recover_timeout_s
    newest, reading = stage.stream.newest(), stage.read()
    while time.monotonic() < deadline:
        newest, reading = stage.stream.newest(), stage.read()
        if not stage.stream.undelivered() and caught_up(reading, newest):
            break
        time.sleep(POLL_S * 2)
    lost = sorted(app for app, value in newest.items() if reading.value(app) < value)
    return lost, reading


def _missing(stage: Stage, reading: Reading) -> set[tuple[str, int]]:
    """(app, object index) that git declares and the cluster lacks."""
    per_app = stage.settings.objects_per_app
    return {
        (app.name, index)
        for app in stage.apps
        for index in range(per_app)
        if index not in reading.values.get(app.name, {})
    }


def _journal(stage: Stage, clock: Clock) -> list[Entry]:
    entries = Journal(stage.fleet.redis, prefix=PREFIX).entries()
    return [e for e in entries if e.end >= clock.injected and e.start <= clock.ended]


def _result(
    stage: Stage,
    fault: Fault,
    clock: Clock,
    *,
    lost: list[str],
    final: Reading,
) -> FaultResult:
    events = stage.watch.between(clock.injected, clock.ended)
    written = {(e.app, e.index) for e in events if e.kind == "regressed"}
    pruned = {(e.app, e.index) for e in events if e.kind == "vanished"} | _missing(stage, final)
    runs = _journal(stage, clock)
    twice = _history_overlaps(stage, clock)
    recover = None if clock.recovered is None else max(clock.recovered - clock.healed, 0.0)
    return FaultResult(
        fault=fault.name,
        what=fault.what,
        detected_by=fault.detected_by,
        outage_s=round(clock.healed - clock.injected, 2),
        detect_s=clock.since_injected(clock.detected),
        recover_s=None if recover is None else round(recover, 2),
        syncs_lost=len(lost),
        syncs_duplicated=len(twice),
        objects_wrongly_written=len(written),
        objects_wrongly_pruned=len(pruned),
        records_lost=0,
        commits_during=stage.stream.counts.commits_between(clock.injected, clock.ended),
        webhooks_refused=0,
        details=_details(runs, twice, lost=lost, events=events, clock=clock),
    )


def _history_overlaps(stage: Stage, clock: Clock) -> list[tuple[SyncRecord, SyncRecord]]:
    """Pairs of an instance's sync records in the fault's window whose runs overlap."""
    found = []
    for app in stage.apps:
        history = stage.board.log.history(app.name, app.cluster, limit=HISTORY_LIMIT)
        runs = sorted(
            (r for r in history if isinstance(r, SyncRecord) and _within(r, clock)),
            key=lambda r: stamp(r.started),
        )
        found += [(a, b) for a, b in pairwise(runs) if stamp(b.started) < stamp(a.finished)]
    return found


def _within(record: SyncRecord, clock: Clock) -> bool:
    return stamp(record.finished) >= clock.injected and stamp(record.started) <= clock.ended


def _details(
    runs: list[Entry],
    twice: list[tuple[SyncRecord, SyncRecord]],
    *,
    lost: list[str],
    events: list[Event],
    clock: Clock,
) -> dict[str, Any]:
    """What explains the figures: the syncs run by outcome, the first few of each finding."""
    return {
        "syncs_run": len(runs),
        "syncs_by_outcome": dict(Counter(str(run.outcome) for run in runs)),
        "syncs_by_trigger": dict(Counter(str(run.trigger) for run in runs)),
        "apps_not_caught_up": lost[:10],
        "events": [asdict(e) for e in events[:10]],
        "duplicated": [[f"{a.app}@{a.cluster}", a.worker, b.worker] for a, b in twice[:10]],
        "journal_overlaps": [[a.instance, a.worker, b.worker] for a, b in overlaps(runs)][:10],
        "checked_for_s": round(clock.ended - clock.healed, 2),
    }
