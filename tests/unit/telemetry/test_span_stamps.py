"""The file exporter's timestamps read as the SDK's `ns_to_iso_str` writes them."""

from __future__ import annotations

import random

from opentelemetry.sdk.util import ns_to_iso_str

from fleet.telemetry.sdk import _Stamps

FLOAT_SLACK_NS = 300  # the SDK goes through ns / 1e9 (int to float, then a float division: up
# to 250 ns off at today's stamps), so within this of a half microsecond it may round either way


def test_stamps_equal_the_sdk_across_seconds_days_and_rounding() -> None:
    stamps, chosen = _Stamps(), random.Random(16)
    base = 1_796_684_729 * 10**9  # 2026-12-07T23:05:29Z
    cases = [base, base + 999_999_499, base + 999_999_501, base - 1, 86_400 * 10**9 - 400]
    cases += [base + chosen.randrange(0, 3 * 86_400 * 10**9) for _ in range(5000)]
    cases = [n for n in cases if abs(n % 1000 - 500) > FLOAT_SLACK_NS]
    for nanoseconds in cases:
        assert stamps.iso_of(nanoseconds) == ns_to_iso_str(nanoseconds), nanoseconds


def test_a_stamp_that_rounds_up_carries_into_the_next_second() -> None:
    stamps = _Stamps()
    second = 1_796_684_729 * 10**9
    assert stamps.iso_of(second + 999_999_700) == "2026-12-07T23:05:30.000000Z"
    assert stamps.iso_of(second + 999_999_300) == "2026-12-07T23:05:29.999999Z"
