"""Sync windows follow Argo CD's rules, at fixed instants (never the real clock)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone

import pytest

from fleet.control.windows import SyncWindow, WindowVerdict, evaluate, parse_duration

NIGHTLY_DENY = SyncWindow("deny", "0 22 * * *", "1h")
NIGHTLY_DENY_MANUAL = SyncWindow("deny", "0 22 * * *", "1h", manual_sync=True)
OFFICE_ALLOW = SyncWindow("allow", "0 9 * * 1-5", "8h")
OFFICE_ALLOW_MANUAL = SyncWindow("allow", "0 9 * * 1-5", "8h", manual_sync=True)
WEEKEND_ALLOW_MANUAL = SyncWindow("allow", "0 10 * * 6", "2h", manual_sync=True)
BERLIN_DENY = SyncWindow("deny", "0 22 * * *", "1h", timezone="Europe/Berlin")
NEW_YORK_ALLOW = SyncWindow("allow", "0 9 * * *", "1h", timezone="America/New_York")
SHOP_DENY = SyncWindow("deny", "* * * * *", "1h", applications=("shop-*",))


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@dataclass(frozen=True)
class Case:
    name: str
    windows: tuple[SyncWindow, ...]
    now: datetime
    automated: bool
    manual: bool
    reason: str
    app: str = "shop-cart"


# 2026-01-05 is a Monday.
CASES = [
    Case("no windows", (), at("2026-01-05 22:30"), True, True, "no sync window applies"),
    Case(
        "windows for other apps only",
        (SyncWindow("deny", "* * * * *", "1h", applications=("billing-*",)),),
        at("2026-01-05 22:30"),
        True,
        True,
        "no sync window applies to shop-cart",
    ),
    Case("glob matches the app", (SHOP_DENY,), at("2026-01-05 12:00"), False, False, "inside deny"),
    Case("deny active", (NIGHTLY_DENY,), at("2026-01-05 22:30"), False, False, "inside deny"),
    Case("deny from its start minute", (NIGHTLY_DENY,), at("2026-01-05 22:00"), False, False, ""),
    Case("deny over at start + duration", (NIGHTLY_DENY,), at("2026-01-05 23:00"), True, True, ""),
    Case("deny not yet active", (NIGHTLY_DENY,), at("2026-01-05 21:59:59"), True, True, "no deny"),
    Case(
        "deny active with manual override",
        (NIGHTLY_DENY_MANUAL,),
        at("2026-01-05 22:30"),
        False,
        True,
        "manual sync allowed",
    ),
    Case(
        "two active denies, one without manual",
        (NIGHTLY_DENY_MANUAL, SyncWindow("deny", "0 21 * * *", "3h")),
        at("2026-01-05 22:30"),
        False,
        False,
        "manual sync also blocked",
    ),
    Case("allow active", (OFFICE_ALLOW,), at("2026-01-05 10:00"), True, True, "inside allow"),
    Case("allow inactive", (OFFICE_ALLOW,), at("2026-01-05 18:00"), False, False, "outside"),
    Case("allow inactive on saturday", (OFFICE_ALLOW,), at("2026-01-10 10:00"), False, False, ""),
    Case(
        "allow inactive with manual override",
        (OFFICE_ALLOW_MANUAL,),
        at("2026-01-05 18:00"),
        False,
        True,
        "manual sync allowed",
    ),
    Case(
        "inactive allows need manual on every one",
        (OFFICE_ALLOW, WEEKEND_ALLOW_MANUAL),
        at("2026-01-05 18:00"),
        False,
        False,
        "outside all of allow window '0 9 * * 1-5'",
    ),
    Case(
        "one active allow is enough",
        (OFFICE_ALLOW, WEEKEND_ALLOW_MANUAL),
        at("2026-01-10 11:00"),
        True,
        True,
        "allow window '0 10 * * 6'",
    ),
    Case(
        "deny wins over an active allow",
        (SyncWindow("allow", "0 20 * * *", "4h"), NIGHTLY_DENY),
        at("2026-01-05 22:30"),
        False,
        False,
        "inside deny",
    ),
    Case(
        "only active denies decide the manual override",
        (NIGHTLY_DENY_MANUAL, OFFICE_ALLOW),
        at("2026-01-05 22:30"),
        False,
        True,
        "",
    ),
    Case(
        "deny window in berlin summer time",
        (BERLIN_DENY,),
        at("2026-07-01 20:30"),
        False,
        False,
        "",
    ),
    Case(
        "utc 22:30 is past midnight in berlin",
        (BERLIN_DENY,),
        at("2026-07-01 22:30"),
        True,
        True,
        "",
    ),
    Case(
        "deny window in berlin winter time",
        (BERLIN_DENY,),
        at("2026-01-05 21:30"),
        False,
        False,
        "",
    ),
    Case("new york 09:30 before dst", (NEW_YORK_ALLOW,), at("2026-03-06 14:30"), True, True, ""),
    Case("new york 09:30 after dst", (NEW_YORK_ALLOW,), at("2026-03-09 13:30"), True, True, ""),
    Case("new york 10:30 after dst", (NEW_YORK_ALLOW,), at("2026-03-09 14:30"), False, False, ""),
    Case(
        "window running past midnight",
        (SyncWindow("deny", "0 23 * * *", "2h"),),
        at("2026-01-06 00:30"),
        False,
        False,
        "",
    ),
    Case(
        "hour and minutes duration, last minute",
        (SyncWindow("deny", "0 22 * * *", "1h30m"),),
        at("2026-01-05 23:29:59"),
        False,
        False,
        "",
    ),
    Case(
        "hour and minutes duration, closed",
        (SyncWindow("deny", "0 22 * * *", "1h30m"),),
        at("2026-01-05 23:30"),
        True,
        True,
        "",
    ),
    Case(
        "window longer than its period is always open",
        (SyncWindow("deny", "0 * * * *", "90m"),),
        at("2026-01-05 07:59"),
        False,
        False,
        "",
    ),
    Case(
        "cron descriptor",
        (SyncWindow("deny", "@daily", "1h"),),
        at("2026-01-05 00:59"),
        False,
        False,
        "",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_verdict_follows_argo_cd_rules(case: Case) -> None:
    verdict = evaluate(case.windows, case.app, case.now)
    assert (verdict.automated_allowed, verdict.manual_allowed) == (case.automated, case.manual)
    assert case.reason in verdict.reason


def test_the_same_instant_in_another_time_zone_gives_the_same_verdict() -> None:
    utc = at("2026-01-05 22:30")
    tokyo = utc.astimezone(timezone(timedelta(hours=9)))
    assert evaluate([NIGHTLY_DENY], "shop", tokyo) == evaluate([NIGHTLY_DENY], "shop", utc)


def test_reason_names_the_blocking_window() -> None:
    verdict = evaluate([NIGHTLY_DENY], "shop-cart", at("2026-01-05 22:30"))
    assert verdict == WindowVerdict(
        automated_allowed=False,
        manual_allowed=False,
        reason="sync blocked: shop-cart is inside deny window '0 22 * * *' for 1h (UTC); "
        "manual sync also blocked",
    )


def test_a_naive_now_is_rejected() -> None:
    with pytest.raises(ValueError, match="now: must be a timezone-aware datetime"):
        evaluate([NIGHTLY_DENY], "shop", datetime(2026, 1, 5, 22, 30))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"kind": "block"}, "kind: 'block' must be 'allow' or 'deny'"),
        ({"schedule": "61 * * * *"}, "schedule: '61 \\* \\* \\* \\*' is not a cron expression"),
        ({"schedule": "0 0 * * * *"}, "schedule: .* five fields"),
        ({"schedule": "at ten"}, "schedule: 'at ten'"),
        ({"schedule": "@reboot"}, "schedule: '@reboot'"),
        ({"duration": "1d"}, "duration: '1d' is not a duration"),
        ({"duration": ""}, "duration: '' is not a duration"),
        ({"duration": "h"}, "duration: 'h' is not a duration"),
        ({"duration": "0m"}, "duration: '0m' must be longer than zero"),
        ({"timezone": "Mars/Olympus"}, "timezone: 'Mars/Olympus' is not a known IANA time zone"),
        ({"timezone": "../etc/passwd"}, "timezone: '../etc/passwd'"),
        ({"applications": ()}, "applications: give at least one non-empty glob"),
        ({"applications": ("",)}, "applications: give at least one non-empty glob"),
    ],
)
def test_invalid_window_is_rejected_naming_the_field(
    fields: dict[str, object], message: str
) -> None:
    base: dict[str, object] = {"kind": "deny", "schedule": "0 22 * * *", "duration": "1h"}
    with pytest.raises(ValueError, match=message):
        SyncWindow(**{**base, **fields})  # type: ignore[arg-type]


def test_applications_given_as_a_list_become_a_tuple() -> None:
    window = SyncWindow("deny", "0 22 * * *", "1h", applications=["shop-*"])  # type: ignore[arg-type]
    assert window.applications == ("shop-*",)
    assert hash(window)


@pytest.mark.parametrize(
    ("text", "length"),
    [
        ("1h", timedelta(hours=1)),
        ("30m", timedelta(minutes=30)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("90s", timedelta(seconds=90)),
        ("10h0m", timedelta(hours=10)),
    ],
)
def test_durations_read_like_argo_cd_ones(text: str, length: timedelta) -> None:
    assert parse_duration(text) == length
