"""Sync windows: when an application may sync, with Argo CD's rules so existing policies carry over.

A window opens at every fire time of a cron `schedule`, evaluated in its own `timezone`, and stays
open for `duration`. It applies to the applications whose name matches one of its globs.

The rules (Argo CD `SyncWindows.CanSync`):
1. No window applies to the application: every sync is allowed.
2. An applying `deny` window is active: syncs are blocked, also when an allow window is active.
3. Otherwise, if allow windows apply, syncs are allowed only while one of them is active.
4. A blocked application may still be synced by hand only if every window blocking it (the
   active deny windows, or else all of its inactive allow windows) sets `manual_sync`.

Two deliberate differences from Argo CD: a window is open from its start minute inclusive
([start, start + duration)), where Argo misses the exact start instant; and the time zone is
applied with zoneinfo at the evaluated instant, so a window keeps its wall-clock start across
daylight-saving changes (Argo applies the zone's offset of the current time). Durations are
elapsed time, so a 2h window spanning a DST change still lasts two real hours.

Windows validate their fields when built, raising ValueError naming the bad field, so the API can
answer 422 before a bad window is stored. A cron expression can be well formed and still never
fire (`0 0 31 2 *`, the 31st of February): `check_opens` probes the previous and the next start
within `PROBE_YEARS` and the API refuses a window with neither. A window stored before that probe
existed must not break anyone else: `evaluate` turns a window it cannot evaluate into a verdict
that blocks every sync of its own application, naming the window, and never raises for it.
`evaluate` and `check_opens` are pure: the caller passes `now`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from fnmatch import fnmatchcase
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, croniter

KINDS = ("allow", "deny")
DESCRIPTORS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
PROBE_YEARS = 10  # a schedule with no start this close to now, before or after, never opens
_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


def parse_duration(text: str) -> timedelta:
    """Parse "1h", "30m", "1h30m", "90s"; raise ValueError naming `duration` otherwise."""
    match = _DURATION.fullmatch(text.strip())
    if not text.strip() or match is None:
        raise ValueError(f"duration: {text!r} is not a duration like '1h', '30m' or '1h30m'")
    hours, minutes, seconds = (int(part or 0) for part in match.groups())
    try:
        length = timedelta(hours=hours, minutes=minutes, seconds=seconds)
    except OverflowError:
        raise ValueError(f"duration: {text!r} is longer than a duration can be") from None
    if length <= timedelta(0):
        raise ValueError(f"duration: {text!r} must be longer than zero")
    return length


def _check_schedule(schedule: str) -> None:
    fields = schedule.split()
    plain = len(fields) == 5 or (len(fields) == 1 and fields[0] in DESCRIPTORS)
    if not plain or not croniter.is_valid(schedule):
        raise ValueError(
            f"schedule: {schedule!r} is not a cron expression with five fields "
            "(minute hour day-of-month month day-of-week), e.g. '0 22 * * *'"
        )


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as e:  # OSError: a name too long, a folder
        raise ValueError(f"timezone: {name[:100]!r} is not a known IANA time zone") from e


@dataclass(frozen=True)
class SyncWindow:
    """One allow or deny window.

    kind: "allow" or "deny".
    schedule: five-field cron expression giving the window's start times, in `timezone`.
    duration: how long the window stays open after each start: "1h", "30m", "1h30m".
    timezone: IANA time zone name the schedule is read in.
    manual_sync: whether a person may still sync by hand while this window blocks syncs.
    applications: globs (fnmatch: *, ?, [..]) of the application names the window applies to.
    """

    kind: str
    schedule: str
    duration: str
    timezone: str = "UTC"
    manual_sync: bool = False
    applications: tuple[str, ...] = ("*",)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind: {self.kind!r} must be 'allow' or 'deny'")
        _check_schedule(self.schedule)
        parse_duration(self.duration)
        _zone(self.timezone)
        object.__setattr__(self, "applications", tuple(self.applications))
        if not self.applications or not all(isinstance(g, str) and g for g in self.applications):
            raise ValueError("applications: give at least one non-empty glob, e.g. '*'")

    @property
    def length(self) -> timedelta:
        return parse_duration(self.duration)

    def matches(self, app: str) -> bool:
        return any(fnmatchcase(app, glob) for glob in self.applications)

    def last_start(self, now: datetime) -> datetime:
        """The latest start of this window at or before `now`, returned in UTC; ValueError
        when there is none within `PROBE_YEARS`."""
        upper = now.astimezone(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
        return self._start(upper, "previous")

    def next_start(self, now: datetime) -> datetime:
        """The first start of this window after `now`, in UTC; ValueError as `last_start`."""
        return self._start(now.astimezone(UTC), "next")

    def _start(self, instant: datetime, direction: str) -> datetime:
        local = instant.astimezone(_zone(self.timezone))
        found = croniter(self.schedule, local, max_years_between_matches=PROBE_YEARS)
        step = found.get_prev if direction == "previous" else found.get_next
        try:
            start: datetime = step(datetime)
        except CroniterBadDateError:
            raise ValueError(
                f"schedule: {self.schedule!r} has no {direction} start within {PROBE_YEARS} years"
            ) from None
        return start.astimezone(UTC)

    def is_active(self, now: datetime) -> bool:
        return now < self.last_start(now) + self.length

    def describe(self) -> str:
        return f"{self.kind} window '{self.schedule}' for {self.duration} ({self.timezone})"


def check_opens(window: SyncWindow, now: datetime) -> None:
    """Raise ValueError naming the schedule when `window` has no start within `PROBE_YEARS`
    before or after `now`: a schedule that never fires (the API refuses it with a 422)."""
    try:
        window.last_start(now)
        window.next_start(now)
    except ValueError:
        raise ValueError(
            f"schedule: {window.schedule!r} never opens: no start within {PROBE_YEARS} years "
            "before or after now (does that day exist in that month? there is no February 31)"
        ) from None


@dataclass(frozen=True)
class WindowVerdict:
    """Whether automated and manual syncs may run now, and why, in words for the UI and logs.
    `broken`: a window of the app cannot be evaluated (both kinds of sync are blocked)."""

    automated_allowed: bool
    manual_allowed: bool
    reason: str
    broken: bool = False


def evaluate(windows: Iterable[SyncWindow], app: str, now: datetime) -> WindowVerdict:
    """Apply Argo CD's sync-window rules for `app` at the instant `now` (timezone-aware)."""
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("now: must be a timezone-aware datetime")
    applying = [w for w in windows if w.matches(app)]
    if not applying:
        return WindowVerdict(True, True, f"no sync window applies to {app}")
    active = []
    for window in applying:
        try:
            if window.is_active(now):
                active.append(window)
        except ValueError as e:
            return _unusable(window, e)
    denying = [w for w in active if w.kind == "deny"]
    if denying:
        return _blocked(denying, f"{app} is inside")
    allows = [w for w in applying if w.kind == "allow"]
    open_allows = [w for w in allows if w in active]
    if open_allows:
        return WindowVerdict(True, True, f"{app} is inside {_names(open_allows)}")
    if allows:
        return _blocked(allows, f"{app} is outside all of")
    return WindowVerdict(True, True, f"no deny window is active for {app}")


def _blocked(blocking: Sequence[SyncWindow], where: str) -> WindowVerdict:
    manual = all(w.manual_sync for w in blocking)
    override = "manual sync allowed" if manual else "manual sync also blocked"
    reason = f"sync blocked: {where} {_names(blocking)}; {override}"
    return WindowVerdict(False, manual, reason)


def _unusable(window: SyncWindow, error: ValueError) -> WindowVerdict:
    """A stored window that cannot be evaluated blocks its own application, manual syncs too
    (it may be a deny window), and says which window to fix."""
    reason = (
        f"sync blocked: the {window.describe()} cannot be evaluated ({error}); "
        "fix or remove it with PUT"
    )
    return WindowVerdict(False, False, reason, broken=True)


def _names(windows: Sequence[SyncWindow]) -> str:
    return ", ".join(w.describe() for w in windows)
