"""The API load benchmark's pure parts: the request mix and the figures drawn from samples."""

from __future__ import annotations

import random
from collections import Counter

from loadtest.apiload import MIX, Sample, schedule, summarise


def test_the_schedule_follows_the_mix_shares() -> None:
    kinds = Counter(schedule(10_000, random.Random(1)))

    for kind, share, _ in MIX:
        assert kinds[kind] == round(share * 10_000)
    writes = sum(kinds[k] for k in ("sync", "replace", "create", "delete"))
    assert writes == 2_000


def test_summaries_count_5xx_and_transport_failures_as_errors_and_rank_latencies() -> None:
    samples = [Sample("get_app", float(ms), 200, ms / 100) for ms in range(1, 101)]
    samples += [
        Sample("sync", 5.0, 503, 0.1),
        Sample("sync", 7.0, 0, 0.2),
        Sample("sync", 9.0, 409, 0.3),
    ]

    figures = summarise(samples, seconds=10)

    assert figures["kinds"]["sync"]["errors"] == 2
    assert figures["kinds"]["get_app"]["errors"] == 0
    assert figures["kinds"]["get_app"]["max_ms"] == 100.0
    assert 98.0 <= figures["kinds"]["get_app"]["p99_ms"] <= 100.0
    assert figures["overall"]["count"] == 103
    assert figures["overall"]["achieved_rps"] == 10.3
    assert figures["overall"]["statuses"] == [0, 200, 409, 503]
